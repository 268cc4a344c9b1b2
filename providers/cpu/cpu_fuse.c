/*
 * cpu_fuse: the load-time fusion planner of the CPU provider (see
 * cpu_fuse.h for what it fuses and the rules).
 *
 * The chain after a head is followed one reader at a time: each value must
 * have exactly one reader, which must be the next node in execution order,
 * and must not leave the step.  Consecutive nodes keep the core's memory
 * plan valid: the fused node writes the chain's last output at the head's
 * position, and the only values that die inside the chain are read by the
 * chain itself (the head's inputs and the addend, whose overlap with the
 * output the kernel checks: fuse_tail.c).  The core's plan keeps the
 * head's inputs to the end of such chains (core/plan.c, chain_ends), so
 * that check finds an overlap only in a plan that does not (an older core,
 * a chain shape it does not know), and then computes into scratch.
 */
#include "cpu_fuse.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct planner {
	const cpu_fuse_graph *fg;
	int *reads;             /* readers per value (inside and outside the step) */
	int *reader;            /* the last node reading each value */
	int *producer;          /* node writing each value, -1 for none */
	cpu_fuse_node *f;
} planner;

static int is_op(const Onnx__NodeProto *p, const char *op)
{
	return p && p->op_type && strcmp(p->op_type, op) == 0 &&
	       (!p->domain || !p->domain[0] || strcmp(p->domain, "ai.onnx") == 0);
}

static const Onnx__NodeProto *node(const planner *pl, int k)
{
	return k >= 0 && (size_t)k < pl->fg->g->n_node ? pl->fg->g->node[k] : NULL;
}

/* The node after k in execution order: nodes folded into constants at
 * load (fg->gone) do not run, so they do not separate two nodes.  Returns
 * n_node past the end. */
static int next_node(const planner *pl, int k)
{
	int n = (int)pl->fg->g->n_node;

	for (k++; k < n && pl->fg->gone && pl->fg->gone[k]; k++)
		;
	return k;
}

/* The only reader of v if it is the node after k and v stays in the step. */
static int next_reader(const planner *pl, int v, int k)
{
	int r = next_node(pl, k);

	if (v < 0 || pl->reads[v] != 1 || pl->reader[v] != r ||
	    (size_t)r >= pl->fg->g->n_node || pl->f[r].skip || pl->f[r].head)
		return -1;
	return r;
}

static const cpu_tensor *const_of(const planner *pl, int v)
{
	const cpu_tensor *t = v >= 0 ? &pl->fg->consts[v] : NULL;

	return t && t->data && t->dtype == CPU_FLOAT ? t : NULL;
}

/* A constant float with one element, or NAN. */
static float scalar_of(const planner *pl, int v)
{
	const cpu_tensor *t = const_of(pl, v);

	return t && cpu_numel(t) == 1 ? *(const float *)t->data : NAN;
}

/* The factor a Div (invert) or Mul by constant scalar v applies; NAN
 * when v is not one or the factor is 0 or not finite. */
static float scale_of(const planner *pl, int v, int invert)
{
	float c = scalar_of(pl, v);

	if (!isfinite(c) || c == 0.0f)
		return NAN;
	c = invert ? 1.0f / c : c;
	return isfinite(c) && c != 0.0f ? c : NAN;
}

/* Node k's only output (other outputs omitted), or -1. */
static int single_out(const planner *pl, int k)
{
	const Onnx__NodeProto *p = node(pl, k);

	for (size_t i = 1; p && i < p->n_output; i++)
		if (pl->fg->node_out[k][i] >= 0)
			return -1;
	return p && p->n_output >= 1 ? pl->fg->node_out[k][0] : -1;
}

/* The input of binary node k that is not v (v must be exactly one of them). */
static int other_input(const planner *pl, int k, int v)
{
	const int *in = pl->fg->node_in[k];

	if (node(pl, k)->n_input != 2 || in[0] == in[1])
		return -1;
	return in[0] == v ? in[1] : in[1] == v ? in[0] : -1;
}

static int add_input(cpu_fuse_node *fn, int v)
{
	if (fn->n_in >= CPU_FUSE_MAX_IN)
		return -1;
	fn->in[fn->n_in] = v;
	return fn->n_in++;
}

/* ---- Conv + BatchNormalization ---- */

static cpu_tensor *new_const(const cpu_tensor *like, int rank, const int64_t *dims)
{
	int64_t n = cpu_shape_numel(rank, dims);
	size_t hdr = (sizeof(cpu_tensor) + 63) & ~(size_t)63;
	cpu_tensor *t = n < 0 ? NULL : aligned_alloc(64, hdr + ((size_t)n * 4 + 63) / 64 * 64 + 64);

	if (!t)
		return NULL;
	memset(t, 0, sizeof(*t));
	t->dtype = like->dtype;
	t->rank = rank;
	memcpy(t->dims, dims, sizeof(int64_t) * (size_t)rank);
	t->data = (char *)t + hdr;
	t->nbytes = (size_t)n * sizeof(float);
	return t;
}

/* W' = W * s, b' = (b - mean) * s + beta with s = scale / sqrt(var + eps),
 * per output channel, in double. */
static int fold_bn(planner *pl, int k, int bn, cpu_fuse_node *fn)
{
	const Onnx__NodeProto *p = node(pl, bn);
	const int *in = pl->fg->node_in[bn];
	const cpu_tensor *W = const_of(pl, fn->in[1]), *B = fn->n_in > 2 ? const_of(pl, fn->in[2]) : NULL;
	const cpu_tensor *t[4];
	double eps = cpu_attr_float(p, "epsilon", 1e-5f);
	int64_t M, per;
	cpu_tensor *w2, *b2;

	if (p->n_input != 5 || cpu_attr_int(p, "training_mode", 0) || cpu_attr_int(p, "spatial", 1) != 1 ||
	    !W || W->rank < 3 || in[0] != single_out(pl, k) || (fn->n_in > 2 && fn->in[2] >= 0 && !B))
		return 0;
	M = W->dims[0];
	per = M ? cpu_numel(W) / M : 0;
	for (int i = 0; i < 4; i++)
		if (!(t[i] = const_of(pl, in[i + 1])) || cpu_numel(t[i]) != M)
			return 0;
	w2 = new_const(W, W->rank, W->dims);
	b2 = new_const(W, 1, &M);
	if (!w2 || !b2) {
		free(w2);
		free(b2);
		return 0;
	}
	for (int64_t m = 0; m < M; m++) {
		const float *sc = t[0]->data, *bb = t[1]->data, *mean = t[2]->data, *var = t[3]->data;
		double s = sc[m] / sqrt((double)var[m] + eps), b0 = B ? ((const float *)B->data)[m] : 0.0;

		for (int64_t i = 0; i < per; i++)
			((float *)w2->data)[m * per + i] = (float)(((const float *)W->data)[m * per + i] * s);
		((float *)b2->data)[m] = (float)((b0 - mean[m]) * s + bb[m]);
	}
	while (fn->n_in < 3)
		fn->in[fn->n_in++] = -1;
	free(fn->folded[1]);
	free(fn->folded[2]);
	fn->folded[1] = w2;
	fn->folded[2] = b2;
	return 1;
}

/* ---- the Gelu of BERT exports: x * 0.5 * (1 + erf(x / sqrt 2)) ---- */

/* Nodes k+1..k+5 are Div(x, sqrt2), Erf, Add(., 1), Mul(x, .), Mul(., 0.5)
 * on x = output of k; returns the last one or -1. */
static int gelu_chain(const planner *pl, int k, int x)
{
	int *const *in = pl->fg->node_in;
	int d = next_node(pl, k), e = next_node(pl, d), a = next_node(pl, e);
	int m1 = next_node(pl, a), m2 = next_node(pl, m1), t;

	if ((size_t)m2 >= pl->fg->g->n_node || pl->reads[x] != 2 || pl->reader[x] != m1)
		return -1;
	for (int i = d; i <= m2; i = next_node(pl, i))
		if (pl->f[i].skip || pl->f[i].head || single_out(pl, i) < 0)
			return -1;
	if (!is_op(node(pl, d), "Div") || in[d][0] != x ||
	    fabsf(scalar_of(pl, in[d][1]) - 1.41421356f) > 1e-5f)
		return -1;
	if (!is_op(node(pl, e), "Erf") || next_reader(pl, single_out(pl, d), d) != e)
		return -1;
	if (!is_op(node(pl, a), "Add") || next_reader(pl, single_out(pl, e), e) != a ||
	    scalar_of(pl, other_input(pl, a, single_out(pl, e))) != 1.0f)
		return -1;
	if (!is_op(node(pl, m1), "Mul") || next_reader(pl, single_out(pl, a), a) != m1 ||
	    other_input(pl, m1, single_out(pl, a)) != x)
		return -1;
	t = single_out(pl, m1);
	if (!is_op(node(pl, m2), "Mul") || next_reader(pl, t, m1) != m2 ||
	    scalar_of(pl, other_input(pl, m2, t)) != 0.5f)
		return -1;
	return m2;
}

/* ---- chains ---- */

/* Marks node r (reading cur) as part of k's chain; returns its output. */
static int take(planner *pl, int k, int r)
{
	pl->f[r].skip = 1;
	pl->f[k].n_fused++;
	return single_out(pl, r);
}

/* A constant float or float16 with one element, or NAN: a float16
 * model's Clip bounds (0 and 6 in float16 are exact, and rounding to
 * float16 commutes with a clamp to exact bounds, so the float32 tail
 * gives what the Clip on the rounded value gives). */
static float bound_of(const planner *pl, int v)
{
	const cpu_tensor *t = v >= 0 ? &pl->fg->consts[v] : NULL;

	if (t && t->data && t->dtype == CPU_FLOAT16 && cpu_numel(t) == 1)
		return cpu_f16_to_f32(*(const uint16_t *)t->data);
	return scalar_of(pl, v);
}

/* Clip's bounds: attributes before opset 11, constant scalar inputs (or
 * omitted) after; 0 when they are not known at load. */
static int clip_bounds(const planner *pl, int r, float *lo, float *hi)
{
	const Onnx__NodeProto *p = node(pl, r);

	*lo = -INFINITY;
	*hi = INFINITY;
	if (pl->fg->opset < 11) {
		*lo = cpu_attr_float(p, "min", -3.402823466e38f);
		*hi = cpu_attr_float(p, "max", 3.402823466e38f);
		return 1;
	}
	if (p->n_input > 1 && pl->fg->node_in[r][1] >= 0 && isnan(*lo = bound_of(pl, pl->fg->node_in[r][1])))
		return 0;
	if (p->n_input > 2 && pl->fg->node_in[r][2] >= 0 && isnan(*hi = bound_of(pl, pl->fg->node_in[r][2])))
		return 0;
	return 1;
}

/* Node r as an activation the tail applies (with its parameters), or
 * CPU_FUSE_ACT_NONE. */
static cpu_fuse_act act_of(const planner *pl, int r, float *a, float *b)
{
	const Onnx__NodeProto *p = node(pl, r);

	*a = *b = 0.0f;
	if (r < 0 || single_out(pl, r) < 0)
		return CPU_FUSE_ACT_NONE;
	if (is_op(p, "Relu"))
		return CPU_FUSE_ACT_RELU;
	if (is_op(p, "Clip"))
		return clip_bounds(pl, r, a, b) ? CPU_FUSE_ACT_CLIP : CPU_FUSE_ACT_NONE;
	if (is_op(p, "LeakyRelu")) {
		*a = cpu_attr_float(p, "alpha", 0.01f);
		return CPU_FUSE_ACT_LEAKY;
	}
	if (is_op(p, "HardSigmoid")) {
		*a = cpu_attr_float(p, "alpha", 0.2f);
		*b = cpu_attr_float(p, "beta", 0.5f);
		return CPU_FUSE_ACT_HSIGMOID;
	}
	if (is_op(p, "HardSwish"))
		return CPU_FUSE_ACT_HSWISH;
	if (is_op(p, "Sigmoid"))
		return CPU_FUSE_ACT_SIGMOID;
	if (is_op(p, "Tanh"))
		return CPU_FUSE_ACT_TANH;
	return CPU_FUSE_ACT_NONE;
}

/* torch's SiLU: Sigmoid(x) then Mul(x, that) as nodes last+1 and last+2,
 * x = cur (read by both, nothing else); returns the Mul or -1. */
static int silu_chain(const planner *pl, int last, int cur)
{
	int s = next_node(pl, last), m = next_node(pl, s), so;

	if ((size_t)m >= pl->fg->g->n_node || pl->f[s].skip || pl->f[s].head || pl->f[m].skip ||
	    pl->f[m].head || !is_op(node(pl, s), "Sigmoid") || !is_op(node(pl, m), "Mul") ||
	    pl->fg->node_in[s][0] != cur || (so = single_out(pl, s)) < 0 || single_out(pl, m) < 0)
		return -1;
	if (pl->reads[cur] != 2 || pl->reader[cur] != m || pl->reads[so] != 1 ||
	    pl->reader[so] != m || other_input(pl, m, cur) != so)
		return -1;
	return m;
}

/* An activation after cur (written by node last): Relu, Clip, LeakyRelu,
 * HardSigmoid, HardSwish, Sigmoid, Tanh, SiLU's pair, and with allow_gelu
 * Gelu (the op or the Erf form). */
static void chain_act(planner *pl, int k, int last, int cur, int allow_gelu)
{
	cpu_fuse_node *fn = &pl->f[k];
	int r = next_reader(pl, cur, last), g;
	cpu_fuse_act act = act_of(pl, r, &fn->fuse.act_a, &fn->fuse.act_b);

	if (act != CPU_FUSE_ACT_NONE) {
		fn->fuse.act = act;
		fn->out0 = take(pl, k, r);
		return;
	}
	if ((g = silu_chain(pl, last, cur)) >= 0) {
		take(pl, k, next_node(pl, last));
		fn->fuse.act = CPU_FUSE_ACT_SILU;
		fn->out0 = take(pl, k, g);
		return;
	}
	if (!allow_gelu)
		return;
	if (r >= 0 && is_op(node(pl, r), "Gelu") && single_out(pl, r) >= 0 &&
	    strcmp(cpu_attr_string(node(pl, r), "approximate", "none"), "none") == 0) {
		fn->fuse.act = CPU_FUSE_ACT_GELU;
		fn->out0 = take(pl, k, r);
		return;
	}
	if ((g = gelu_chain(pl, last, cur)) >= 0) {
		for (int i = next_node(pl, last); i <= g; i = next_node(pl, i))
			take(pl, k, i);
		fn->fuse.act = CPU_FUSE_ACT_GELU;
		fn->out0 = single_out(pl, g);
	}
}

/* An Add after cur whose other operand exists before the head runs. */
static int chain_add(planner *pl, int k, int *last, int *cur)
{
	int r = next_reader(pl, *cur, *last), o;

	if (r < 0 || !is_op(node(pl, r), "Add") || single_out(pl, r) < 0)
		return 0;
	o = other_input(pl, r, *cur);
	if (o < 0 || pl->producer[o] >= k)
		return 0;
	if ((pl->f[k].fuse.add_input = add_input(&pl->f[k], o)) < 0)
		return 0;
	*cur = take(pl, k, r);
	*last = r;
	return 1;
}

static void chain_conv(planner *pl, int k)
{
	int cur = pl->f[k].out0, last = k, r = next_reader(pl, cur, k);

	while (pl->f[k].n_in < 3)
		pl->f[k].in[pl->f[k].n_in++] = -1;
	if (r >= 0 && is_op(node(pl, r), "BatchNormalization") && single_out(pl, r) >= 0 &&
	    fold_bn(pl, k, r, &pl->f[k])) {
		cur = take(pl, k, r);
		last = r;
	}
	pl->f[k].out0 = cur;
	chain_add(pl, k, &last, &cur);
	pl->f[k].out0 = cur;
	chain_act(pl, k, last, cur, 0);
}

/* N of a MatMul/Gemm with a constant 2-D B, or -1. */
static int64_t const_n(const planner *pl, int k, int transB)
{
	const cpu_tensor *B = const_of(pl, pl->fg->node_in[k][1]);

	return B && B->rank == 2 ? B->dims[transB ? 0 : 1] : -1;
}

/* Softmax over the last axis after cur, then a MatMul reading its result
 * as A and, as B, a value that exists before the head runs (V): the
 * attention pattern.  The fused MatMul writes the second product. */
static int chain_attention(planner *pl, int k, int *last, int *cur)
{
	int r = next_reader(pl, *cur, *last), m, v, out, n_add = 0, adds[2], after = *cur;
	const Onnx__NodeProto *sm;
	int64_t axis;

	/* up to two Adds of a mask or bias that exists before the head */
	while (n_add < 2 && r >= 0 && is_op(node(pl, r), "Add") && single_out(pl, r) >= 0) {
		int o = other_input(pl, r, after);

		if (o < 0 || pl->producer[o] >= k)
			return 0;
		adds[n_add++] = r;
		after = single_out(pl, r);
		r = next_reader(pl, after, r);
	}
	sm = node(pl, r);
	if (r < 0 || !is_op(sm, "Softmax") || single_out(pl, r) < 0)
		return 0;
	/* the last axis: -1 explicitly, or by default from opset 13 */
	axis = cpu_attr_int(sm, "axis", pl->fg->opset >= 13 ? -1 : 1);
	if (axis != -1)
		return 0;
	m = next_reader(pl, single_out(pl, r), r);
	if (m < 0 || !is_op(node(pl, m), "MatMul") || (out = single_out(pl, m)) < 0 ||
	    pl->fg->node_in[m][0] != single_out(pl, r) || (v = pl->fg->node_in[m][1]) < 0 ||
	    v == single_out(pl, r) || pl->producer[v] >= k)
		return 0;
	for (int i = 0; i < n_add; i++) {
		int o = other_input(pl, adds[i], i ? single_out(pl, adds[i - 1]) : *cur);
		int at = add_input(&pl->f[k], o);

		if (at < 0)
			return 0;
		pl->f[k].fuse.score_add[pl->f[k].fuse.n_score_add++] = at;
	}
	if ((pl->f[k].fuse.v_input = add_input(&pl->f[k], v)) < 0)
		return 0;
	pl->f[k].fuse.attention = 1;
	for (int i = 0; i < n_add; i++)
		take(pl, k, adds[i]);
	take(pl, k, r);
	*cur = take(pl, k, m);
	*last = m;
	pl->f[k].out0 = out;
	return 1;
}

static void chain_gemm(planner *pl, int k, int gemm)
{
	const Onnx__NodeProto *p = node(pl, k);
	cpu_fuse_node *fn = &pl->f[k];
	int cur = fn->out0, last = k, tb = gemm && cpu_attr_int(p, "transB", 0), r, o;
	int64_t N = const_n(pl, k, tb);
	const cpu_tensor *b;

	if (gemm && p->n_input > 2 && pl->fg->node_in[k][2] >= 0) {
		const cpu_tensor *C = const_of(pl, pl->fg->node_in[k][2]);
		if (!C || cpu_numel(C) != N || C->dims[C->rank - 1] != N)
			return;   /* a C the GEMM must add itself: no tail */
	}
	while (fn->n_in < (gemm ? 3 : 2))
		fn->in[fn->n_in++] = -1;
	r = next_reader(pl, cur, last);
	/* MatMul -> Div or Mul by a constant scalar (attention's 1/sqrt(d)). */
	if (!gemm && r >= 0 && single_out(pl, r) >= 0 &&
	    ((is_op(node(pl, r), "Div") && pl->fg->node_in[r][0] == cur &&
	      isfinite(scale_of(pl, pl->fg->node_in[r][1], 1))) ||
	     (is_op(node(pl, r), "Mul") && isfinite(scale_of(pl, other_input(pl, r, cur), 0))))) {
		fn->fuse.scale = is_op(node(pl, r), "Div") ?
			scale_of(pl, pl->fg->node_in[r][1], 1) :
			scale_of(pl, other_input(pl, r, cur), 0);
		cur = take(pl, k, r);
		last = r;
		r = next_reader(pl, cur, last);
	}
	if (!gemm && chain_attention(pl, k, &last, &cur))
		return;
	if (N > 0 && r >= 0 && is_op(node(pl, r), "Add") && single_out(pl, r) >= 0 &&
	    (o = other_input(pl, r, cur)) >= 0 && (b = const_of(pl, o)) && b->rank >= 1 &&
	    cpu_numel(b) == N && b->dims[b->rank - 1] == N) {
		fn->fuse.bias_input = add_input(fn, o);
		cur = take(pl, k, r);
		last = r;
	}
	fn->out0 = cur;
	chain_add(pl, k, &last, &cur);
	fn->out0 = cur;
	chain_act(pl, k, last, cur, 1);
}

/* ---- dynamic quantization: ConvInteger|MatMulInteger -> Cast -> Mul ---- */

/* v is a float32 scalar when node k runs: a one-element float constant
 * or the scale output of a DynamicQuantizeLinear that runs before k. */
static int quant_scale_ok(const planner *pl, int v, int k)
{
	const cpu_tensor *t = const_of(pl, v);
	int q = v >= 0 ? pl->producer[v] : -1;

	if (t)
		return cpu_numel(t) == 1;
	return q >= 0 && q < k && is_op(node(pl, q), "DynamicQuantizeLinear") &&
	       node(pl, q)->n_output > 1 && pl->fg->node_out[q][1] == v;
}

/* A constant bias the int8 GEMM adds: one value per output channel of a
 * ConvInteger ([M] aligned to axis 1 of its output: [1, M, 1, 1] or
 * [M, 1, 1]) or per column of a MatMulInteger with a constant 2-D B. */
static int quant_bias_ok(const planner *pl, int k, int conv, const cpu_tensor *b)
{
	const cpu_tensor *w = &pl->fg->consts[pl->fg->node_in[k][1]];
	int64_t n;

	if (pl->fg->node_in[k][1] < 0 || !w->data || w->rank < (conv ? 3 : 2))
		return 0;
	if (!conv) {
		n = w->dims[1];
		return w->rank == 2 && cpu_numel(b) == n && b->rank >= 1 && b->dims[b->rank - 1] == n;
	}
	n = w->dims[0];
	if (cpu_numel(b) != n || b->rank > w->rank || b->rank < w->rank - 1)
		return 0;
	/* axis 1 of the output is axis (1 - (rank - b->rank)) of the bias */
	return b->dims[1 - (w->rank - b->rank)] == n;
}

/* Cast(to float) after the head, then Mul by a scalar scale that exists
 * before the head runs, or Mul(x_scale, w_scale) and the Mul by its
 * product (ONNX Runtime's quantizer's order), then an optional constant
 * bias, a residual Add and an activation. */
static void chain_quant(planner *pl, int k, int conv)
{
	cpu_fuse_node *fn = &pl->f[k];
	int n = (int)pl->fg->g->n_node, c = next_reader(pl, fn->out0, k), v1, n1, m, sm = -1;
	int s0, s1 = -1, cur, last, r, o;
	const cpu_tensor *b;

	if (c < 0 || !is_op(node(pl, c), "Cast") || cpu_attr_int(node(pl, c), "to", 0) != CPU_FLOAT ||
	    (v1 = single_out(pl, c)) < 0 || pl->reads[v1] != 1)
		return;
	n1 = next_node(pl, c);
	if (n1 >= n || pl->f[n1].skip || pl->f[n1].head || !is_op(node(pl, n1), "Mul") ||
	    single_out(pl, n1) < 0 || node(pl, n1)->n_input != 2)
		return;
	if (pl->reader[v1] == n1) {
		m = n1;
		if ((s0 = other_input(pl, m, v1)) < 0 || !quant_scale_ok(pl, s0, k))
			return;
	} else {
		int vs = single_out(pl, n1);
		sm = n1;
		m = next_node(pl, sm);
		s0 = pl->fg->node_in[sm][0];
		s1 = pl->fg->node_in[sm][1];
		if (m >= n || pl->f[m].skip || pl->f[m].head || !is_op(node(pl, m), "Mul") ||
		    single_out(pl, m) < 0 || pl->reader[v1] != m || pl->reads[vs] != 1 ||
		    pl->reader[vs] != m || other_input(pl, m, v1) != vs ||
		    !quant_scale_ok(pl, s0, k) || !quant_scale_ok(pl, s1, k))
			return;
	}
	if ((fn->fuse.quant_s0 = add_input(fn, s0)) < 0 ||
	    (s1 >= 0 && (fn->fuse.quant_s1 = add_input(fn, s1)) < 0))
		return;
	fn->fuse.quant = 1;
	take(pl, k, c);
	if (sm >= 0)
		take(pl, k, sm);
	cur = take(pl, k, m);
	last = m;
	r = next_reader(pl, cur, last);
	if (r >= 0 && is_op(node(pl, r), "Add") && single_out(pl, r) >= 0 &&
	    (o = other_input(pl, r, cur)) >= 0 && (b = const_of(pl, o)) &&
	    quant_bias_ok(pl, k, conv, b) && (fn->fuse.bias_input = add_input(fn, o)) >= 0) {
		cur = take(pl, k, r);
		last = r;
	}
	fn->out0 = cur;
	chain_add(pl, k, &last, &cur);
	fn->out0 = cur;
	chain_act(pl, k, last, cur, !conv);
}

static void plan_node(planner *pl, int k)
{
	const Onnx__NodeProto *p = node(pl, k);
	cpu_fuse_node *fn = &pl->f[k];
	int conv = is_op(p, "Conv"), mm = is_op(p, "MatMul"), gemm = is_op(p, "Gemm");
	int qconv = is_op(p, "ConvInteger"), qmm = is_op(p, "MatMulInteger");
	int bn = is_op(p, "BatchNormalization");

	/* room for the inputs a tail adds (an addend, a bias); an activation,
	 * all BatchNormalization takes, adds none */
	if ((!conv && !mm && !gemm && !qconv && !qmm && !bn) || single_out(pl, k) < 0 ||
	    p->n_input > CPU_FUSE_MAX_IN - (bn ? 0 : 4))
		return;
	fn->n_in = (int)p->n_input;
	memcpy(fn->in, pl->fg->node_in[k], sizeof(int) * p->n_input);
	fn->fuse.add_input = fn->fuse.bias_input = fn->fuse.v_input = -1;
	fn->fuse.quant_s0 = fn->fuse.quant_s1 = -1;
	fn->out0 = single_out(pl, k);
	fn->n_fused = 1;
	if (qconv || qmm)
		chain_quant(pl, k, qconv);
	else if (bn)
		/* BatchNormalization that no Conv before it took (DenseNet's
		 * on each concatenation): its Relu in the same pass */
		chain_act(pl, k, k, fn->out0, 0);
	else if (conv)
		chain_conv(pl, k);
	else
		chain_gemm(pl, k, gemm);
	fn->head = fn->n_fused > 1;
	if (!fn->head) {
		free(fn->folded[1]);
		free(fn->folded[2]);
		memset(fn, 0, sizeof(*fn));
	}
}

cpu_fuse_node *cpu_fuse_plan(const cpu_fuse_graph *fg)
{
	size_t nv = fg->n_values, nn = fg->g->n_node;
	planner pl = {fg, calloc(nv + 1, sizeof(int)), malloc((nv + 1) * sizeof(int)),
		      malloc((nv + 1) * sizeof(int)), calloc(nn + 1, sizeof(cpu_fuse_node))};

	if (!pl.reads || !pl.reader || !pl.producer || !pl.f || !fg->exported) {
		free(pl.f);
		pl.f = NULL;
		goto out;
	}
	for (size_t v = 0; v < nv; v++) {
		pl.reader[v] = pl.producer[v] = -1;
		/* A value the core reads, or a nested graph reads, is never
		 * an intermediate. */
		pl.reads[v] = (fg->exported[v] ? 2 : 0) + (fg->extra_reads ? 2 * fg->extra_reads[v] : 0);
	}
	for (size_t k = 0; k < nn; k++) {
		for (size_t i = 0; i < fg->g->node[k]->n_input; i++) {
			int v = fg->node_in[k][i];
			if (v >= 0) {
				pl.reads[v]++;
				pl.reader[v] = (int)k;
			}
		}
		for (size_t i = 0; i < fg->g->node[k]->n_output; i++)
			if (fg->node_out[k][i] >= 0)
				pl.producer[fg->node_out[k][i]] = (int)k;
	}
	for (size_t k = 0; k < nn; k++)
		if (!pl.f[k].skip)
			plan_node(&pl, (int)k);
out:
	free(pl.reads);
	free(pl.reader);
	free(pl.producer);
	return pl.f;
}

void cpu_fuse_free(cpu_fuse_node *f, size_t n_nodes)
{
	for (size_t k = 0; f && k < n_nodes; k++)
		for (int i = 0; i < CPU_FUSE_MAX_IN; i++)
			free(f[k].folded[i]);
	free(f);
}
