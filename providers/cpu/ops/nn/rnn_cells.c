/*
 * rnn_cells: ONNX RNN, GRU and LSTM (every opset; layout from 14),
 * float32.  Each cell loop runs one direction: the input projection of the
 * whole sequence is one GEMM up front (rnn_input_proj), then every step is
 * one GEMM of the hidden state against R plus the gate arithmetic per batch
 * row.  Rows whose sequence has ended (sequence_lens) keep their state and
 * leave Y at zero.  The driver (rnn_common.c) does validation and layouts.
 */
#include <stdlib.h>
#include <string.h>

#include "nn_ops.h"
#include "rnn.h"

/* Ht = f(Xt*Wi^T + Ht-1*Ri^T + Wbi + Rbi) */
static void rnn_cell(rnn_run *r, int d)
{
	int64_t B = r->B, H = r->H;
	const float *R = r->r + (int64_t)d * H * H;
	const rnn_act *f = &r->a->act[d][0];

	rnn_input_proj(r, d, 1);
	rnn_init_state(r, d);
	for (int64_t s = 0; s < r->S; s++) {
		rnn_recur(r, r->h, R, H, r->hr, H);
		for (int64_t b = 0; b < B; b++) {
			int64_t t = rnn_time(r, d, s, b);
			float *g = r->hr + b * H;
			const float *xw;
			if (t < 0)
				continue;
			xw = r->xw + (t * B + b) * H;
			for (int64_t j = 0; j < H; j++)
				g[j] += xw[j];
			rnn_apply(f, r->a, g, H);
			memcpy(r->h + b * H, g, (size_t)H * sizeof(float));
			rnn_store(r, d, t, b, g);
		}
	}
}

/* GRU's candidate gate for row b: g holds [z r h] pre-activations from the
 * recurrence (h's without its bias), xwh the input part of h. */
static void gru_finish(rnn_run *r, int d, int64_t t, int64_t b, float *g, const float *xwh,
		       const float *rbh)
{
	int64_t H = r->H;
	float *z = g, *rr = g + H, *hh = g + 2 * H, *h = r->h + b * H;

	for (int64_t j = 0; j < H; j++) {
		float lin = hh[j] + (rbh ? rbh[j] : 0.0f);
		hh[j] = xwh[j] + (r->a->linear_before_reset ? rr[j] * lin : lin);
	}
	rnn_apply(&r->a->act[d][1], r->a, hh, H);
	for (int64_t j = 0; j < H; j++)
		h[j] = (1.0f - z[j]) * hh[j] + z[j] * h[j];
	rnn_store(r, d, t, b, h);
}

/* zt = f(Xt*Wz^T + Ht-1*Rz^T + Wbz + Rbz), rt likewise,
 * ht = g(Xt*Wh^T + (rt (.) Ht-1)*Rh^T + Rbh + Wbh)        (default)
 * ht = g(Xt*Wh^T + rt (.) (Ht-1*Rh^T + Rbh) + Wbh)        (linear_before_reset)
 * Ht = (1 - zt) (.) ht + zt (.) Ht-1 */
static void gru_cell(rnn_run *r, int d)
{
	int64_t B = r->B, H = r->H, GH = 3 * H;
	const float *R = r->r + (int64_t)d * GH * H;
	const float *rbh = r->bias ? r->bias + (int64_t)d * 2 * GH + GH + 2 * H : NULL;
	int lbr = r->a->linear_before_reset;

	rnn_input_proj(r, d, 2);
	rnn_init_state(r, d);
	for (int64_t s = 0; s < r->S; s++) {
		rnn_recur(r, r->h, R, lbr ? GH : 2 * H, r->hr, GH);
		for (int64_t b = 0; b < B; b++) {
			int64_t t = rnn_time(r, d, s, b);
			float *g = r->hr + b * GH, *rh = r->tmp + b * H;
			const float *xw;
			if (t < 0) {
				memset(rh, 0, (size_t)H * sizeof(float));
				continue;
			}
			xw = r->xw + (t * B + b) * GH;
			for (int64_t j = 0; j < 2 * H; j++)
				g[j] += xw[j];
			rnn_apply(&r->a->act[d][0], r->a, g, 2 * H);
			for (int64_t j = 0; j < H; j++)
				rh[j] = g[H + j] * r->h[b * H + j];
		}
		if (!lbr)
			rnn_recur(r, r->tmp, R + 2 * H * H, H, r->hr + 2 * H, GH);
		for (int64_t b = 0; b < B; b++) {
			int64_t t = rnn_time(r, d, s, b);
			if (t >= 0)
				gru_finish(r, d, t, b, r->hr + b * GH, r->xw + (t * B + b) * GH + 2 * H,
					   rbh);
		}
	}
}

/* One LSTM step for row b: g holds the [i o f c] pre-activations. */
static void lstm_row(rnn_run *r, int d, int64_t t, int64_t b, float *g)
{
	int64_t H = r->H;
	const rnn_act *act = r->a->act[d];
	const float *P = r->p ? r->p + (int64_t)d * 3 * H : NULL;
	float *gi = g, *go = g + H, *gf = g + 2 * H, *gc = g + 3 * H;
	float *c = r->c + b * H, *h = r->h + b * H, *hc = r->tmp + b * H;

	for (int64_t j = 0; P && j < H; j++) {
		gi[j] += P[j] * c[j];
		gf[j] += P[2 * H + j] * c[j];
	}
	rnn_apply(&act[0], r->a, gi, H);
	if (r->a->input_forget)
		for (int64_t j = 0; j < H; j++)
			gf[j] = 1.0f - gi[j];
	else
		rnn_apply(&act[0], r->a, gf, H);
	rnn_apply(&act[1], r->a, gc, H);
	for (int64_t j = 0; j < H; j++) {
		c[j] = gf[j] * c[j] + gi[j] * gc[j];
		if (P)
			go[j] += P[H + j] * c[j];
		hc[j] = c[j];
	}
	rnn_apply(&act[0], r->a, go, H);
	rnn_apply(&act[2], NULL, hc, H);
	for (int64_t j = 0; j < H; j++)
		h[j] = go[j] * hc[j];
	rnn_store(r, d, t, b, h);
}

/* it = f(Xt*Wi^T + Ht-1*Ri^T + Pi (.) Ct-1 + Wbi + Rbi), ft likewise with Pf,
 * ct = g(Xt*Wc^T + Ht-1*Rc^T + Wbc + Rbc), Ct = ft (.) Ct-1 + it (.) ct,
 * ot = f(Xt*Wo^T + Ht-1*Ro^T + Po (.) Ct + Wbo + Rbo), Ht = ot (.) h(Ct) */
static void lstm_cell(rnn_run *r, int d)
{
	int64_t B = r->B, H = r->H, GH = 4 * H;
	const float *R = r->r + (int64_t)d * GH * H;

	rnn_input_proj(r, d, 4);
	rnn_init_state(r, d);
	for (int64_t s = 0; s < r->S; s++) {
		rnn_recur(r, r->h, R, GH, r->hr, GH);
		for (int64_t b = 0; b < B; b++) {
			int64_t t = rnn_time(r, d, s, b);
			float *g = r->hr + b * GH;
			const float *xw;
			if (t < 0)
				continue;
			xw = r->xw + (t * B + b) * GH;
			for (int64_t j = 0; j < GH; j++)
				g[j] += xw[j];
			lstm_row(r, d, t, b, g);
		}
	}
}

/* ---- op entries ---- */

static int prepare_kind(cpu_node *node, int kind, char *err, size_t n)
{
	rnn_attrs *a = calloc(1, sizeof(*a));
	int rc;

	if (!a)
		return CPU_E_NOMEM;
	if ((rc = rnn_parse(node->proto, kind, a, err, n))) {
		free(a);
		return rc;
	}
	node->state = a;
	return 0;
}

static int rnn_prepare(cpu_node *node, char *err, size_t n)
{
	return prepare_kind(node, RNN_SIMPLE, err, n);
}

static int gru_prepare(cpu_node *node, char *err, size_t n)
{
	return prepare_kind(node, RNN_GRU, err, n);
}

static int lstm_prepare(cpu_node *node, char *err, size_t n)
{
	return prepare_kind(node, RNN_LSTM, err, n);
}

static void rnn_release(cpu_node *node)
{
	free(node->state);
	node->state = NULL;
}

static int rnn_op_compute(cpu_ctx *ctx)
{
	return rnn_compute(ctx, ctx->node->state, rnn_cell);
}

static int gru_compute(cpu_ctx *ctx)
{
	return rnn_compute(ctx, ctx->node->state, gru_cell);
}

static int lstm_compute(cpu_ctx *ctx)
{
	return rnn_compute(ctx, ctx->node->state, lstm_cell);
}

const cpu_op cpu_op_rnn = {
	"RNN", "", 1, CPU_OPSET_MAX, rnn_supports, rnn_prepare, rnn_op_compute, rnn_release,
};
const cpu_op cpu_op_gru = {
	"GRU", "", 1, CPU_OPSET_MAX, rnn_supports, gru_prepare, gru_compute, rnn_release,
};
const cpu_op cpu_op_lstm = {
	"LSTM", "", 1, CPU_OPSET_MAX, rnn_supports, lstm_prepare, lstm_compute, rnn_release,
};
