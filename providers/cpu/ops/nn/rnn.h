/*
 * rnn: what the recurrent ops (RNN, GRU, LSTM in rnn_cells.c) share with
 * their driver (rnn_common.c): parsed attributes, activation functions, and
 * the per-run buffers.  The driver validates the inputs, brings layout=1
 * (batch-first) tensors into the seq-major layout the cells work in, runs
 * one cell loop per direction and writes Y, Y_h and Y_c back in the node's
 * layout.
 */
#ifndef ORTMK_CPU_NN_RNN_H
#define ORTMK_CPU_NN_RNN_H

#include "cpu_ops.h"

enum rnn_kind { RNN_SIMPLE, RNN_GRU, RNN_LSTM };

enum rnn_act_kind {
	RNN_ACT_RELU, RNN_ACT_TANH, RNN_ACT_SIGMOID, RNN_ACT_AFFINE, RNN_ACT_LEAKYRELU,
	RNN_ACT_THRESHOLDEDRELU, RNN_ACT_SCALEDTANH, RNN_ACT_HARDSIGMOID, RNN_ACT_ELU,
	RNN_ACT_SOFTSIGN, RNN_ACT_SOFTPLUS,
};

typedef struct rnn_act {
	int kind;
	float alpha, beta;
} rnn_act;

#define RNN_MAX_ACTS 3   /* per direction: f (RNN); f, g (GRU); f, g, h (LSTM) */

typedef struct rnn_attrs {
	int kind;
	int n_gates;                 /* 1, 3, 4 */
	int n_acts;                  /* activations per direction */
	int64_t hidden;
	int n_dir;
	int reverse_only;            /* direction "reverse" */
	int layout;
	int has_clip;
	float clip;
	int linear_before_reset;     /* GRU */
	int input_forget;            /* LSTM */
	rnn_act act[2][RNN_MAX_ACTS];
} rnn_attrs;

/* One run, seq-major: X is [S, B, I], Y [S, D, B, H], states [D, B, H]. */
typedef struct rnn_run {
	const rnn_attrs *a;
	int64_t S, B, I, H;
	const float *x, *w, *r, *bias, *p, *h0, *c0;   /* bias, p, h0, c0 may be NULL */
	const int64_t *lens;                            /* [B], each in [0, S] */
	float *y, *yh, *yc;                             /* yc only for LSTM */
	float *xw;                                      /* [S * B, G * H] */
	float *hr;                                      /* [B, G * H] */
	float *h, *c, *tmp;                             /* [B, H] each */
	struct cpu_pool *pool;                          /* the node's, or NULL */
} rnn_run;

/* Parses the attributes shared by the three ops for the given kind. */
int rnn_parse(const Onnx__NodeProto *p, int kind, rnn_attrs *a, char *err, size_t n);
/* x = act(clip(x)) over n values. */
void rnn_apply(const rnn_act *act, const rnn_attrs *a, float *x, int64_t n);
/* xw = X * W_d^T + Wb_d (+ Rb_d for the first n_rb gates). */
void rnn_input_proj(rnn_run *r, int d, int n_rb);
/* out[B, N] (row stride ldo) = a[B, H] x R[N, H]^T: a step's recurrence,
 * its columns split over the pool when the step is worth a hand-off. */
void rnn_recur(const rnn_run *r, const float *a, const float *R, int64_t N, float *out,
	       int64_t ldo);
/* Copies initial_h (and initial_c) of direction d into r->h (r->c). */
void rnn_init_state(rnn_run *r, int d);
/* Time index of batch row b at step s of direction d, or -1 when the
 * row's sequence has ended. */
int64_t rnn_time(const rnn_run *r, int d, int64_t s, int64_t b);
/* Stores row b of the new hidden state at time t of direction d. */
void rnn_store(rnn_run *r, int d, int64_t t, int64_t b, const float *h);

/* The op's compute: runs cell(r, d) for every direction d. */
typedef void (*rnn_cell_fn)(rnn_run *r, int d);
int rnn_compute(cpu_ctx *ctx, const rnn_attrs *a, rnn_cell_fn cell);
int rnn_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt, int n_in,
		 char *why, size_t n);

#endif
