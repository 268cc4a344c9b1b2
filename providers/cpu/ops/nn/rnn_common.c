/*
 * rnn_common: the driver the recurrent ops (rnn_cells.c) share —
 * attribute parsing (direction, layout, clip, activations with their
 * alpha/beta), activation functions, input validation, the layout=1
 * (batch-first) transposes and the per-direction bookkeeping.  float32.
 *
 * activation_alpha and activation_beta are consumed in the order of the
 * activations, one value per activation that takes one (as onnxruntime
 * does); an activation whose value is not in the list gets the default of
 * the ONNX op of the same name.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "rnn.h"
#include "threadpool.h"
#include "vmath.h"

static const struct {
	const char *name;
	int kind, uses_alpha, uses_beta;
	float alpha, beta;
} act_table[] = {
	{"Relu", RNN_ACT_RELU, 0, 0, 0.0f, 0.0f},
	{"Tanh", RNN_ACT_TANH, 0, 0, 0.0f, 0.0f},
	{"Sigmoid", RNN_ACT_SIGMOID, 0, 0, 0.0f, 0.0f},
	{"Affine", RNN_ACT_AFFINE, 1, 1, 1.0f, 0.0f},
	{"LeakyRelu", RNN_ACT_LEAKYRELU, 1, 0, 0.01f, 0.0f},
	{"ThresholdedRelu", RNN_ACT_THRESHOLDEDRELU, 1, 0, 1.0f, 0.0f},
	{"ScaledTanh", RNN_ACT_SCALEDTANH, 1, 1, 1.0f, 1.0f},
	{"HardSigmoid", RNN_ACT_HARDSIGMOID, 1, 1, 0.2f, 0.5f},
	{"Elu", RNN_ACT_ELU, 1, 0, 1.0f, 0.0f},
	{"Softsign", RNN_ACT_SOFTSIGN, 0, 0, 0.0f, 0.0f},
	{"Softplus", RNN_ACT_SOFTPLUS, 0, 0, 0.0f, 0.0f},
};

static const int default_acts[3][RNN_MAX_ACTS] = {
	[RNN_SIMPLE] = {RNN_ACT_TANH},
	[RNN_GRU] = {RNN_ACT_SIGMOID, RNN_ACT_TANH},
	[RNN_LSTM] = {RNN_ACT_SIGMOID, RNN_ACT_TANH, RNN_ACT_TANH},
};

static int act_lookup(const ProtobufCBinaryData *s)
{
	for (size_t i = 0; i < sizeof(act_table) / sizeof(act_table[0]); i++)
		if (strlen(act_table[i].name) == s->len &&
		    !strncasecmp(act_table[i].name, (const char *)s->data, s->len))
			return (int)i;
	return -1;
}

/* Fills a->act from `activations` (or the defaults) and the alpha/beta lists. */
static int parse_acts(const Onnx__NodeProto *p, rnn_attrs *a, char *err, size_t n)
{
	const Onnx__AttributeProto *at = cpu_attr(p, "activations");
	const float *al, *be;
	size_t n_al = cpu_attr_floats(p, "activation_alpha", &al);
	size_t n_be = cpu_attr_floats(p, "activation_beta", &be), ia = 0, ib = 0;
	size_t cnt = at ? at->n_strings : 0;
	int total = a->n_acts * a->n_dir;

	if (cnt && cnt != (size_t)total && !(a->n_dir == 2 && cnt == (size_t)a->n_acts)) {
		snprintf(err, n, "activations has %zu entries, expected %d", cnt, total);
		return CPU_E_INVALID;
	}
	for (int k = 0; k < total; k++) {
		int d = k / a->n_acts, j = k % a->n_acts, idx = -1;
		if (cnt) {
			const ProtobufCBinaryData *s = &at->strings[(size_t)k % cnt];
			if ((idx = act_lookup(s)) < 0) {
				snprintf(err, n, "unsupported activation '%.*s'", (int)s->len,
					 (const char *)s->data);
				return CPU_E_UNSUPPORTED;
			}
		} else {
			for (size_t i = 0; i < sizeof(act_table) / sizeof(act_table[0]); i++)
				if (act_table[i].kind == default_acts[a->kind][j])
					idx = (int)i;
		}
		a->act[d][j].kind = act_table[idx].kind;
		a->act[d][j].alpha = act_table[idx].alpha;
		a->act[d][j].beta = act_table[idx].beta;
		if (act_table[idx].uses_alpha && ia < n_al)
			a->act[d][j].alpha = al[ia++];
		if (act_table[idx].uses_beta && ib < n_be)
			a->act[d][j].beta = be[ib++];
	}
	return 0;
}

int rnn_parse(const Onnx__NodeProto *p, int kind, rnn_attrs *a, char *err, size_t n)
{
	char dir[32];
	const Onnx__AttributeProto *clip = cpu_attr(p, "clip");

	memset(a, 0, sizeof(*a));
	a->kind = kind;
	a->n_gates = kind == RNN_SIMPLE ? 1 : kind == RNN_GRU ? 3 : 4;
	a->n_acts = kind == RNN_SIMPLE ? 1 : kind == RNN_GRU ? 2 : 3;
	a->hidden = cpu_attr_int(p, "hidden_size", 0);
	a->layout = (int)cpu_attr_int(p, "layout", 0);
	a->linear_before_reset = cpu_attr_int(p, "linear_before_reset", 0) != 0;
	a->input_forget = cpu_attr_int(p, "input_forget", 0) != 0;
	if (!cpu_attr_str(p, "direction", dir, sizeof(dir)))
		strcpy(dir, "forward");
	if (!strcmp(dir, "forward") || !strcmp(dir, "reverse")) {
		a->n_dir = 1;
		a->reverse_only = dir[0] == 'r';
	} else if (!strcmp(dir, "bidirectional")) {
		a->n_dir = 2;
	} else {
		snprintf(err, n, "unknown direction '%s'", dir);
		return CPU_E_INVALID;
	}
	if (a->hidden < 0 || a->hidden > INT32_MAX) {
		snprintf(err, n, "hidden_size %lld is invalid", (long long)a->hidden);
		return CPU_E_INVALID;
	}
	if (a->layout != 0 && a->layout != 1) {
		snprintf(err, n, "layout must be 0 or 1 (got %d)", a->layout);
		return CPU_E_INVALID;
	}
	if (clip) {
		a->has_clip = 1;
		a->clip = cpu_attr_float(p, "clip", 0.0f);
		if (!(a->clip >= 0.0f)) {
			snprintf(err, n, "clip must be >= 0");
			return CPU_E_INVALID;
		}
	}
	return parse_acts(p, a, err, n);
}

static float act_one(const rnn_act *f, float x)
{
	switch (f->kind) {
	case RNN_ACT_RELU: return x > 0.0f ? x : 0.0f;
	case RNN_ACT_TANH: return tanhf(x);
	case RNN_ACT_SIGMOID: return 1.0f / (1.0f + expf(-x));
	case RNN_ACT_AFFINE: return f->alpha * x + f->beta;
	case RNN_ACT_LEAKYRELU: return x >= 0.0f ? x : f->alpha * x;
	case RNN_ACT_THRESHOLDEDRELU: return x > f->alpha ? x : 0.0f;
	case RNN_ACT_SCALEDTANH: return f->alpha * tanhf(f->beta * x);
	case RNN_ACT_HARDSIGMOID: return fminf(fmaxf(f->alpha * x + f->beta, 0.0f), 1.0f);
	case RNN_ACT_ELU: return x >= 0.0f ? x : f->alpha * (expf(x) - 1.0f);
	case RNN_ACT_SOFTSIGN: return x / (1.0f + fabsf(x));
	case RNN_ACT_SOFTPLUS: return x > 20.0f ? x : log1pf(expf(x));
	default: return x;
	}
}

/* The gates' usual activations in loops that vectorize (vmath.h: within
 * 4e-7 of libm), one per kind; the others per element. */
CPU_MULTIVERSION
void rnn_apply(const rnn_act *act, const rnn_attrs *a, float *x, int64_t n)
{
	if (a && a->has_clip)
		for (int64_t i = 0; i < n; i++)
			x[i] = fminf(fmaxf(x[i], -a->clip), a->clip);
	/* 8-lane vectors where gcc's clone would run the scalar one float at a
	 * time (AVX2); AVX-512 keeps the loop its clone vectorizes */
	int64_t i = 0, vec = cpu_has_avx512() ? 0 : n / 8 * 8;

	switch (act->kind) {
	case RNN_ACT_SIGMOID:
		for (; i < vec; i += 8)
			vf_store(x + i, vf_sigmoid(vf_load(x + i)));
		for (; i < n; i++)
			x[i] = vm_sigmoid(x[i]);
		return;
	case RNN_ACT_TANH:
		for (; i < vec; i += 8)
			vf_store(x + i, vf_tanh(vf_load(x + i)));
		for (; i < n; i++)
			x[i] = vm_tanh(x[i]);
		return;
	case RNN_ACT_RELU:
		for (int64_t i = 0; i < n; i++)
			x[i] = x[i] > 0.0f ? x[i] : 0.0f;
		return;
	default:
		for (int64_t i = 0; i < n; i++)
			x[i] = act_one(act, x[i]);
	}
}

/* A step's recurrence is a few microseconds (LSTM, hidden 256: 1 x 1024 x
 * 256), far below the pool's usual threshold, but the steps follow each
 * other closely enough that the workers are still spinning: a hand-off
 * then costs about a microsecond, and each member keeps its share of R in
 * its own L2 (an LSTM of hidden 256 over 100 steps, Xeon: 1.27 ms at one
 * thread, 0.82 split at two).  The first hand-off wakes sleeping workers
 * (tens of microseconds on this VM), so a sequence of fewer than
 * RECUR_MIN_STEPS steps (a streaming model's one step: 0.07 -> 0.18 ms
 * split) stays on the caller, as does a step below RECUR_MIN_FLOPS: at
 * hidden 128 split steps were no faster (lstm_seq100 at 2 threads: 0.73
 * ms either way, 0.70 at one) or slower (gru_seq100: 0.63 split, 0.52
 * not). */
enum { RECUR_MIN_FLOPS = 1 << 18, RECUR_MIN_STEPS = 8, RECUR_ALIGN = 16 };

typedef struct recur_job {
	const rnn_run *r;
	const float *a, *R;
	float *out;
	int64_t N, ldo, chunk;
} recur_job;

static void recur_task(void *arg, int64_t task, int member)
{
	const recur_job *j = arg;
	int64_t c0 = task * j->chunk, c1 = c0 + j->chunk < j->N ? c0 + j->chunk : j->N;

	(void)member;
	if (c1 > c0)
		cpu_sgemm(0, 1, j->r->B, c1 - c0, j->r->H, 1.0f, j->a, j->r->H, j->R + c0 * j->r->H,
			  j->r->H, 0.0f, j->out + c0, j->ldo);
}

void rnn_recur(const rnn_run *r, const float *a, const float *R, int64_t N, float *out,
	       int64_t ldo)
{
	int members = r->pool ? cpu_pool_threads(r->pool) : 1;
	recur_job j = {r, a, R, out, N, ldo, 0};

	if (members < 2 || r->S < RECUR_MIN_STEPS ||
	    2.0 * (double)(r->B * N * r->H) < RECUR_MIN_FLOPS || N < 2 * RECUR_ALIGN ||
	    !cpu_pool_try_begin(r->pool)) {
		cpu_sgemm(0, 1, r->B, N, r->H, 1.0f, a, r->H, R, r->H, 0.0f, out, ldo);
		return;
	}
	j.chunk = (N + members - 1) / members;
	j.chunk = (j.chunk + RECUR_ALIGN - 1) / RECUR_ALIGN * RECUR_ALIGN;
	cpu_pool_for(r->pool, 0, (N + j.chunk - 1) / j.chunk, recur_task, &j);
	cpu_pool_end(r->pool);
}

void rnn_input_proj(rnn_run *r, int d, int n_rb)
{
	int64_t GH = r->a->n_gates * r->H, rows = r->S * r->B;
	const float *w = r->w + (int64_t)d * GH * r->I;

	cpu_sgemm_pool(r->pool, 0, 1, rows, GH, r->I, 1.0f, r->x, r->I, w, r->I, 0.0f, r->xw, GH);
	if (!r->bias)
		return;
	const float *wb = r->bias + (int64_t)d * 2 * GH, *rb = wb + GH;
	for (int64_t i = 0; i < rows; i++) {
		float *row = r->xw + i * GH;
		for (int64_t j = 0; j < GH; j++)
			row[j] += wb[j];
		for (int64_t j = 0; j < n_rb * r->H; j++)
			row[j] += rb[j];
	}
}

void rnn_init_state(rnn_run *r, int d)
{
	size_t bytes = (size_t)(r->B * r->H) * sizeof(float);

	if (r->h0)
		memcpy(r->h, r->h0 + (int64_t)d * r->B * r->H, bytes);
	else
		memset(r->h, 0, bytes);
	if (r->a->kind != RNN_LSTM)
		return;
	if (r->c0)
		memcpy(r->c, r->c0 + (int64_t)d * r->B * r->H, bytes);
	else
		memset(r->c, 0, bytes);
}

int64_t rnn_time(const rnn_run *r, int d, int64_t s, int64_t b)
{
	int64_t len = r->lens[b];

	if (s >= len)
		return -1;
	return r->a->reverse_only || d == 1 ? len - 1 - s : s;
}

void rnn_store(rnn_run *r, int d, int64_t t, int64_t b, const float *h)
{
	float *dst = r->y + ((t * r->a->n_dir + d) * r->B + b) * r->H;

	memcpy(dst, h, (size_t)r->H * sizeof(float));
}

/* ---- the driver ---- */

#define RNN_MAX_ELEMS ((int64_t)1 << 40)

/* Fails unless t is float32 of exactly these dims. */
static int check_f32(cpu_ctx *ctx, const cpu_tensor *t, int i, const char *name, int rank,
		     const int64_t *dims)
{
	char got[96], want[96];
	int rc = cpu_check_dtype(ctx, t, i, CPU_TYPES_F32);

	if (rc)
		return rc;
	if (t->rank == rank && !memcmp(t->dims, dims, sizeof(int64_t) * (size_t)rank))
		return 0;
	return cpu_fail(ctx, CPU_E_INVALID, "input %d (%s) must be %s, got %s", i, name,
			cpu_shape_str(rank, dims, want, sizeof(want)),
			cpu_shape_str(t->rank, t->dims, got, sizeof(got)));
}

/* src [n0, n1, inner] into dst [n1, n0, inner]. */
static void swap01(float *dst, const float *src, int64_t n0, int64_t n1, int64_t inner)
{
	for (int64_t i = 0; i < n0; i++)
		for (int64_t j = 0; j < n1; j++)
			memcpy(dst + (j * n0 + i) * inner, src + (i * n1 + j) * inner,
			       (size_t)inner * sizeof(float));
}

static float *scratch_f32(cpu_ctx *ctx, int64_t count)
{
	if (count < 0 || count > RNN_MAX_ELEMS) {
		cpu_fail(ctx, CPU_E_NOMEM, "recurrent buffers too large");
		return NULL;
	}
	return cpu_scratch(ctx, (size_t)(count ? count : 1) * sizeof(float));
}

/* A state input (initial_h / initial_c) in seq-major layout, or NULL. */
static int load_state(cpu_ctx *ctx, rnn_run *r, int i, const char *name, const float **out)
{
	const cpu_tensor *t = cpu_input(ctx, i);
	int64_t D = r->a->n_dir, dl0[3] = {D, r->B, r->H}, dl1[3] = {r->B, D, r->H};
	float *buf;
	int rc;

	*out = NULL;
	if (!t)
		return 0;
	if ((rc = check_f32(ctx, t, i, name, 3, r->a->layout ? dl1 : dl0)))
		return rc;
	if (!r->a->layout) {
		*out = t->data;
		return 0;
	}
	if (!(buf = scratch_f32(ctx, D * r->B * r->H)))
		return CPU_E_NOMEM;
	swap01(buf, t->data, r->B, D, r->H);
	*out = buf;
	return 0;
}

static int load_lens(cpu_ctx *ctx, rnn_run *r)
{
	const cpu_tensor *t = cpu_input(ctx, 4);
	int64_t *lens = cpu_scratch(ctx, (size_t)(r->B ? r->B : 1) * sizeof(int64_t));

	if (!lens)
		return CPU_E_NOMEM;
	for (int64_t b = 0; b < r->B; b++)
		lens[b] = r->S;
	r->lens = lens;
	if (!t)
		return 0;
	if (t->dtype != CPU_INT32 && t->dtype != CPU_INT64)
		return cpu_check_dtype(ctx, t, 4, CPU_TYPES_INDEX);
	if (t->rank != 1 || t->dims[0] != r->B)
		return cpu_fail(ctx, CPU_E_INVALID, "sequence_lens must be [%lld]", (long long)r->B);
	for (int64_t b = 0; b < r->B; b++) {
		lens[b] = cpu_get_i64(t->dtype, t->data, b);
		if (lens[b] < 0 || lens[b] > r->S)
			return cpu_fail(ctx, CPU_E_INVALID, "sequence_lens[%lld] = %lld is outside "
					"[0, %lld]", (long long)b, (long long)lens[b], (long long)r->S);
	}
	return 0;
}

/* Checks W, R, B, P against X and hidden_size; fills r's sizes and pointers. */
static int load_weights(cpu_ctx *ctx, rnn_run *r, const cpu_tensor *X, const cpu_tensor *W,
			const cpu_tensor *R)
{
	const rnn_attrs *a = r->a;
	const cpu_tensor *B = cpu_input(ctx, 3), *P = a->kind == RNN_LSTM ? cpu_input(ctx, 7) : NULL;
	int64_t D = a->n_dir, G = a->n_gates, dims[3];
	int rc;

	if ((rc = cpu_check_dtype(ctx, X, 0, CPU_TYPES_F32)))
		return rc;
	if (X->rank != 3)
		return cpu_fail(ctx, CPU_E_INVALID, "X must have rank 3 (got %d)", X->rank);
	r->S = X->dims[a->layout ? 1 : 0];
	r->B = X->dims[a->layout ? 0 : 1];
	r->I = X->dims[2];
	r->H = a->hidden ? a->hidden : R->rank == 3 ? R->dims[2] : 0;
	if (r->S > INT32_MAX || r->B > INT32_MAX || r->I > INT32_MAX)
		return cpu_fail(ctx, CPU_E_INVALID, "X dims are too large");
	if (r->H <= 0 || r->H > INT32_MAX)
		return cpu_fail(ctx, CPU_E_INVALID, "hidden_size is missing or invalid");
	dims[0] = D, dims[1] = G * r->H, dims[2] = r->I;
	if ((rc = check_f32(ctx, W, 1, "W", 3, dims)))
		return rc;
	dims[2] = r->H;
	if ((rc = check_f32(ctx, R, 2, "R", 3, dims)))
		return rc;
	dims[1] = 2 * G * r->H;
	if (B && (rc = check_f32(ctx, B, 3, "B", 2, dims)))
		return rc;
	dims[1] = 3 * r->H;
	if (P && (rc = check_f32(ctx, P, 7, "P", 2, dims)))
		return rc;
	r->w = W->data;
	r->r = R->data;
	r->bias = B ? B->data : NULL;
	r->p = P ? P->data : NULL;
	return 0;
}

/* Seq-major X, the states, and every scratch buffer. */
static int setup_run(cpu_ctx *ctx, rnn_run *r, const cpu_tensor *X)
{
	int64_t D = r->a->n_dir, GH = r->a->n_gates * r->H, SB;
	int64_t sizes[3] = {r->S + 1, r->B, GH + D * r->H + r->I};
	float *x;
	int rc;

	if (cpu_shape_numel(3, sizes) < 0 || cpu_shape_numel(3, sizes) > RNN_MAX_ELEMS)
		return cpu_fail(ctx, CPU_E_NOMEM, "recurrent buffers too large");
	SB = r->S * r->B;
	if ((rc = load_lens(ctx, r)) || (rc = load_state(ctx, r, 5, "initial_h", &r->h0)))
		return rc;
	if (r->a->kind == RNN_LSTM && (rc = load_state(ctx, r, 6, "initial_c", &r->c0)))
		return rc;
	r->x = X->data;
	if (r->a->layout) {
		if (!(x = scratch_f32(ctx, SB * r->I)))
			return CPU_E_NOMEM;
		swap01(x, X->data, r->B, r->S, r->I);
		r->x = x;
	}
	if (!(r->y = scratch_f32(ctx, SB * D * r->H)) ||
	    !(r->yh = scratch_f32(ctx, D * r->B * r->H)) ||
	    !(r->yc = scratch_f32(ctx, D * r->B * r->H)) || !(r->xw = scratch_f32(ctx, SB * GH)) ||
	    !(r->hr = scratch_f32(ctx, r->B * GH)) || !(r->h = scratch_f32(ctx, r->B * r->H)) ||
	    !(r->c = scratch_f32(ctx, r->B * r->H)) || !(r->tmp = scratch_f32(ctx, r->B * r->H)))
		return CPU_E_NOMEM;
	memset(r->y, 0, (size_t)(SB * D * r->H) * sizeof(float));
	return 0;
}

static int out_wanted(const cpu_ctx *ctx, int i)
{
	const Onnx__NodeProto *p = ctx->node->proto;

	if (i >= ctx->n_out)
		return 0;
	return !(p && (size_t)i < p->n_output && p->output[i] && !p->output[i][0]);
}

/* Y (output 0), Y_h (1) and Y_c (2) in the node's layout. */
static int write_outputs(cpu_ctx *ctx, const rnn_run *r)
{
	int64_t S = r->S, D = r->a->n_dir, B = r->B, H = r->H;
	int64_t y0[4] = {S, D, B, H}, y1[4] = {B, S, D, H}, s0[3] = {D, B, H}, s1[3] = {B, D, H};
	int lay = r->a->layout, n_states = r->a->kind == RNN_LSTM ? 2 : 1;
	cpu_tensor *t;

	if (out_wanted(ctx, 0)) {
		if (!(t = cpu_output(ctx, 0, CPU_FLOAT, 4, lay ? y1 : y0)))
			return CPU_E_NOMEM;
		if (lay)
			swap01(t->data, r->y, S * D, B, H);
		else
			memcpy(t->data, r->y, (size_t)(S * D * B * H) * sizeof(float));
	}
	for (int k = 0; k < n_states; k++) {
		const float *src = k ? r->yc : r->yh;
		if (!out_wanted(ctx, 1 + k))
			continue;
		if (!(t = cpu_output(ctx, 1 + k, CPU_FLOAT, 3, lay ? s1 : s0)))
			return CPU_E_NOMEM;
		if (lay)
			swap01(t->data, src, D, B, H);
		else
			memcpy(t->data, src, (size_t)(D * B * H) * sizeof(float));
	}
	return 0;
}

int rnn_compute(cpu_ctx *ctx, const rnn_attrs *a, rnn_cell_fn cell)
{
	const cpu_tensor *X, *W, *R;
	rnn_run r;
	size_t state_bytes;
	int rc = 0;

	memset(&r, 0, sizeof(r));
	r.a = a;
	r.pool = ctx->pool;
	if (!(X = cpu_require(ctx, 0, &rc)) || !(W = cpu_require(ctx, 1, &rc)) ||
	    !(R = cpu_require(ctx, 2, &rc)))
		return rc;
	if ((rc = load_weights(ctx, &r, X, W, R)) || (rc = setup_run(ctx, &r, X)))
		return rc;
	state_bytes = (size_t)(r.B * r.H) * sizeof(float);
	for (int d = 0; d < a->n_dir; d++) {
		cell(&r, d);
		memcpy(r.yh + d * r.B * r.H, r.h, state_bytes);
		if (a->kind == RNN_LSTM)
			memcpy(r.yc + d * r.B * r.H, r.c, state_bytes);
	}
	return write_outputs(ctx, &r);
}

int rnn_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt, int n_in,
		 char *why, size_t n)
{
	(void)p;
	(void)opset;
	for (int i = 0; i < n_in && i < 8; i++)
		if (i != 4 && !cpu_supports_dtype(dt, n_in, i, CPU_TYPES_F32, why, n))
			return 0;
	return cpu_supports_dtype(dt, n_in, 4, CPU_TYPES_INDEX, why, n);
}
