/*
 * batch.c: whether a run of a large batch may go as chunks of a few images,
 * and how large the chunks are (run.c runs them).
 *
 * A classifier given 32 images computes each layer for all 32 before the
 * next layer reads any of it: SqueezeNet's activations at batch 32 are
 * 190 MB, so every layer writes and reads them through memory, and ortmk's
 * time per image was 1.5x its time at batch 1 (ONNX Runtime's 1.2x). When
 * every node treats the images of the batch independently, the same
 * outputs come from running the batch in chunks whose activations stay in
 * the caches (docs/ARCHITECTURE.md, "Batch chunks").
 *
 * Independence is proved node by node, in topological order, by giving each
 * value a class:
 *   CONST  - the same whatever the inputs (weights, what only they make);
 *   SIZE   - depends on the batch size but not on the images (Shape of a
 *            batched value, the shape arithmetic PyTorch exports from it);
 *   BATCH  - dim 0 is the batch: image i's slice depends on image i only.
 * A node with a batched data input must be an op listed below, under its
 * condition (a Softmax not over axis 0, a MatMul whose constant operand
 * does not broadcast over the batch, ...); a SIZE value may only steer
 * shapes (Reshape's shape, Expand's, Slice's bounds), never mix into data.
 * Every batched value's dim 0 must be the batch in the plan of the whole
 * batch and in the chunk's plan, and every other dim the same in both: a
 * shape the export fixed to the batch size shows up there.  Every graph
 * input and output must be batched.  Anything else - an op not listed,
 * a domain other than ONNX's, control flow over batched values - keeps the
 * batch whole.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "log.h"
#include "node_attr.h"

enum { BV_CONST, BV_SIZE, BV_BATCH };

/* How an op with a batched data input keeps the images apart. */
enum rule {
	R_NONE,        /* not listed: the batch stays whole */
	R_ELEM,        /* elementwise, broadcasting: constants may not span dim 0 */
	R_WINDOW,      /* input 0 batched, the rest constant (weights, scales) */
	R_AXIS,        /* along attribute "axis", which must not be 0 */
	R_REDUCE,      /* over "axes", which must not include 0 */
	R_VIEW,        /* the same bytes in order, or a broadcast: dims decide */
	R_TRANSPOSE,   /* perm[0] == 0 */
	R_MATMUL,
	R_GEMM,
	R_SLICE,
	R_GATHER,
	R_SIZE,        /* Shape, Size: the batch size, as data */
};

typedef struct op_rule {
	const char *op;
	enum rule rule;
	unsigned shape_in;   /* inputs that give shapes, axes or bounds (bits) */
	int axis_dflt;       /* R_AXIS: the default axis; AXIS_SOFTMAX: -1 from
			      * opset 13, 1 before (the 2-D view at axis 1) */
	unsigned const_in;   /* R_AXIS: inputs that must be constant (weights) */
} op_rule;

#define AXIS_SOFTMAX 99

#define IN(k) (1u << (k))

static const op_rule rules[] = {
	{"Add", R_ELEM, 0, 0, 0}, {"Sub", R_ELEM, 0, 0, 0}, {"Mul", R_ELEM, 0, 0, 0},
	{"Div", R_ELEM, 0, 0, 0}, {"Pow", R_ELEM, 0, 0, 0}, {"Mod", R_ELEM, 0, 0, 0},
	{"Max", R_ELEM, 0, 0, 0}, {"Min", R_ELEM, 0, 0, 0}, {"Sum", R_ELEM, 0, 0, 0},
	{"Mean", R_ELEM, 0, 0, 0}, {"And", R_ELEM, 0, 0, 0}, {"Or", R_ELEM, 0, 0, 0},
	{"Xor", R_ELEM, 0, 0, 0}, {"Not", R_ELEM, 0, 0, 0}, {"Equal", R_ELEM, 0, 0, 0},
	{"Less", R_ELEM, 0, 0, 0}, {"LessOrEqual", R_ELEM, 0, 0, 0}, {"Greater", R_ELEM, 0, 0, 0},
	{"GreaterOrEqual", R_ELEM, 0, 0, 0}, {"Where", R_ELEM, 0, 0, 0}, {"PRelu", R_ELEM, 0, 0, 0},
	{"Identity", R_ELEM, 0, 0, 0}, {"Neg", R_ELEM, 0, 0, 0}, {"Abs", R_ELEM, 0, 0, 0},
	{"Floor", R_ELEM, 0, 0, 0}, {"Ceil", R_ELEM, 0, 0, 0}, {"Round", R_ELEM, 0, 0, 0},
	{"Relu", R_ELEM, 0, 0, 0}, {"Sigmoid", R_ELEM, 0, 0, 0}, {"Tanh", R_ELEM, 0, 0, 0},
	{"Erf", R_ELEM, 0, 0, 0}, {"Sqrt", R_ELEM, 0, 0, 0}, {"Exp", R_ELEM, 0, 0, 0},
	{"Log", R_ELEM, 0, 0, 0}, {"Reciprocal", R_ELEM, 0, 0, 0}, {"Sign", R_ELEM, 0, 0, 0},
	{"Gelu", R_ELEM, 0, 0, 0}, {"LeakyRelu", R_ELEM, 0, 0, 0}, {"Elu", R_ELEM, 0, 0, 0},
	{"Selu", R_ELEM, 0, 0, 0}, {"Celu", R_ELEM, 0, 0, 0}, {"Clip", R_ELEM, 0, 0, 0},
	{"HardSigmoid", R_ELEM, 0, 0, 0}, {"HardSwish", R_ELEM, 0, 0, 0},
	{"Softplus", R_ELEM, 0, 0, 0}, {"Softsign", R_ELEM, 0, 0, 0}, {"Mish", R_ELEM, 0, 0, 0},
	{"ThresholdedRelu", R_ELEM, 0, 0, 0}, {"Sin", R_ELEM, 0, 0, 0}, {"Cos", R_ELEM, 0, 0, 0},
	{"Tan", R_ELEM, 0, 0, 0}, {"Asin", R_ELEM, 0, 0, 0}, {"Acos", R_ELEM, 0, 0, 0},
	{"Atan", R_ELEM, 0, 0, 0}, {"Sinh", R_ELEM, 0, 0, 0}, {"Cosh", R_ELEM, 0, 0, 0},
	{"Asinh", R_ELEM, 0, 0, 0}, {"Acosh", R_ELEM, 0, 0, 0}, {"Atanh", R_ELEM, 0, 0, 0},
	{"Shrink", R_ELEM, 0, 0, 0}, {"BitShift", R_ELEM, 0, 0, 0},
	{"BitwiseAnd", R_ELEM, 0, 0, 0}, {"BitwiseOr", R_ELEM, 0, 0, 0},
	{"BitwiseXor", R_ELEM, 0, 0, 0}, {"BitwiseNot", R_ELEM, 0, 0, 0},
	{"IsNaN", R_ELEM, 0, 0, 0}, {"IsInf", R_ELEM, 0, 0, 0}, {"Cast", R_ELEM, 0, 0, 0},
	{"CastLike", R_ELEM, 0, 0, 0}, {"Dropout", R_ELEM, IN(1) | IN(2), 0, 0},
	{"Conv", R_WINDOW, 0, 0, 0}, {"ConvTranspose", R_WINDOW, 0, 0, 0},
	{"ConvInteger", R_WINDOW, 0, 0, 0}, {"QLinearConv", R_WINDOW, 0, 0, 0},
	{"MaxPool", R_WINDOW, 0, 0, 0}, {"AveragePool", R_WINDOW, 0, 0, 0},
	{"LpPool", R_WINDOW, 0, 0, 0}, {"GlobalAveragePool", R_WINDOW, 0, 0, 0},
	{"GlobalMaxPool", R_WINDOW, 0, 0, 0}, {"GlobalLpPool", R_WINDOW, 0, 0, 0},
	{"BatchNormalization", R_WINDOW, 0, 0, 0}, {"InstanceNormalization", R_WINDOW, 0, 0, 0},
	{"GroupNormalization", R_WINDOW, 0, 0, 0}, {"LRN", R_WINDOW, 0, 0, 0},
	{"DepthToSpace", R_WINDOW, 0, 0, 0}, {"SpaceToDepth", R_WINDOW, 0, 0, 0},
	{"Resize", R_WINDOW, IN(1) | IN(2) | IN(3), 0, 0}, {"Upsample", R_WINDOW, IN(1), 0, 0},
	{"Pad", R_WINDOW, IN(1) | IN(3), 0, 0},
	{"Softmax", R_AXIS, 0, AXIS_SOFTMAX, 0}, {"LogSoftmax", R_AXIS, 0, AXIS_SOFTMAX, 0},
	{"Hardmax", R_AXIS, 0, AXIS_SOFTMAX, 0}, {"LpNormalization", R_AXIS, 0, -1, 0},
	{"LayerNormalization", R_AXIS, 0, -1, IN(1) | IN(2)},
	{"Concat", R_AXIS, 0, 0, 0}, {"Split", R_AXIS, IN(1), 0, 0}, {"ArgMax", R_AXIS, 0, 0, 0},
	{"ArgMin", R_AXIS, 0, 0, 0}, {"TopK", R_AXIS, IN(1), -1, 0},
	{"ReduceSum", R_REDUCE, IN(1), 0, 0}, {"ReduceMean", R_REDUCE, IN(1), 0, 0},
	{"ReduceMax", R_REDUCE, IN(1), 0, 0}, {"ReduceMin", R_REDUCE, IN(1), 0, 0},
	{"ReduceProd", R_REDUCE, IN(1), 0, 0}, {"ReduceL1", R_REDUCE, IN(1), 0, 0},
	{"ReduceL2", R_REDUCE, IN(1), 0, 0}, {"ReduceLogSum", R_REDUCE, IN(1), 0, 0},
	{"ReduceLogSumExp", R_REDUCE, IN(1), 0, 0}, {"ReduceSumSquare", R_REDUCE, IN(1), 0, 0},
	{"Reshape", R_VIEW, IN(1), 0, 0}, {"Flatten", R_VIEW, 0, 0, 0},
	{"Squeeze", R_VIEW, IN(1), 0, 0}, {"Unsqueeze", R_VIEW, IN(1), 0, 0},
	{"Expand", R_VIEW, IN(1), 0, 0}, {"Tile", R_VIEW, IN(1), 0, 0},
	{"ConstantOfShape", R_VIEW, IN(0), 0, 0},
	{"Transpose", R_TRANSPOSE, 0, 0, 0},
	{"MatMul", R_MATMUL, 0, 0, 0}, {"MatMulInteger", R_MATMUL, 0, 0, 0},
	{"Gemm", R_GEMM, 0, 0, 0},
	{"Slice", R_SLICE, IN(1) | IN(2) | IN(3) | IN(4), 0, 0},
	{"Gather", R_GATHER, 0, 0, 0},
	{"Shape", R_SIZE, 0, 0, 0}, {"Size", R_SIZE, 0, 0, 0},
};

static const op_rule *rule_of(const graph_node *n)
{
	if (n->domain[0])
		return NULL;
	for (size_t i = 0; i < sizeof(rules) / sizeof(rules[0]); i++)
		if (strcmp(rules[i].op, n->op_type) == 0)
			return &rules[i];
	return NULL;
}

/* What the check looks at: the two plans, the batch in each, the classes. */
typedef struct bctx {
	const graph *g;
	const core_plan *pn, *pb;
	int64_t n, b;
	unsigned char *cls;
} bctx;

/* Value v is batched alike in both plans: dim 0 the batch, the rest equal. */
static int batched_dims(const bctx *c, int v)
{
	const graph_tinfo *a = &c->pn->tinfo[v], *b = &c->pb->tinfo[v];

	if (a->rank < 1 || a->rank != b->rank || a->dims[0] != c->n || b->dims[0] != c->b)
		return 0;
	for (int d = 1; d < a->rank; d++)
		if (a->dims[d] < 0 || a->dims[d] != b->dims[d])
			return 0;
	return 1;
}

/* A constant that broadcasts against a batched value of rank `rank`
 * without spanning its dim 0. */
static int const_beside(const bctx *c, int v, int rank)
{
	const graph_tinfo *t = &c->pn->tinfo[v];

	return t->rank >= 0 && (t->rank < rank || (t->rank == rank && t->dims[0] == 1));
}

/* The node's attribute `name` (default dflt) as an axis of a rank-r value. */
static int64_t axis_of(const graph_node *n, const char *name, int64_t dflt, int r)
{
	int64_t a = proto_attr_int(n->proto, name, dflt);

	return a < 0 ? a + r : a;
}

/* Whether the int list (attribute `name`, or input `idx` when the node
 * has it) is known and misses axis 0 of a rank-r value.  absent_ok: no
 * list at all is fine (the op then leaves axis 0 alone). */
static int list_skips_axis0(const bctx *c, const graph_node *n, const char *name, int idx,
			    int r, int absent_ok)
{
	const int64_t *v = NULL;
	int64_t cnt = -1;

	if (idx < n->n_in && n->in[idx] >= 0) {
		const graph_tinfo *t = &c->pn->tinfo[n->in[idx]];

		if (!t->has_data)
			return 0;
		v = t->data;
		cnt = t->ndata;
	} else {
		cnt = proto_attr_ints(n->proto, name, &v);
	}
	if (cnt < 0)
		return absent_ok;
	for (int64_t i = 0; i < cnt; i++)
		if (v[i] == 0 || v[i] + r == 0)
			return 0;
	return cnt > 0 || absent_ok;
}

/* Pad leaves axis 0 alone: its pads there are known zeros (or, from
 * opset 18, the axes it pads miss 0). */
static int pad_skips_axis0(const bctx *c, const graph_node *n, int r)
{
	const int64_t *v = NULL;
	int64_t cnt;

	if (n->n_in > 3 && n->in[3] >= 0)
		return list_skips_axis0(c, n, "axes", 3, r, 0);
	if (n->opset >= 11) {
		const graph_tinfo *t = n->n_in > 1 && n->in[1] >= 0 ? &c->pn->tinfo[n->in[1]] : NULL;

		if (!t || !t->has_data)
			return 0;
		v = t->data;
		cnt = t->ndata;
	} else {
		cnt = proto_attr_ints(n->proto, "pads", &v);
		if (cnt < 0)
			cnt = proto_attr_ints(n->proto, "paddings", &v);
	}
	return cnt == 2 * r && v[0] == 0 && v[r] == 0;
}

static int in_cls(const bctx *c, const graph_node *n, int i)
{
	return i < n->n_in && n->in[i] >= 0 ? c->cls[n->in[i]] : BV_CONST;
}

/* R_ELEM: batched inputs span the output's rank; constants broadcast
 * beside dim 0. */
static int elem_ok(const bctx *c, const graph_node *n, unsigned shape_in)
{
	int r = n->n_out && n->out[0] >= 0 ? c->pn->tinfo[n->out[0]].rank : -1;

	if (r < 1)
		return 0;
	for (int i = 0; i < n->n_in; i++) {
		int v = n->in[i];

		if (v < 0 || (shape_in & IN(i)))
			continue;
		if (c->cls[v] == BV_BATCH ? c->pn->tinfo[v].rank != r : !const_beside(c, v, r))
			return 0;
	}
	return 1;
}

/* R_MATMUL: a constant operand may not broadcast over dim 0, a batched
 * right operand needs its own matrix per image (rank >= 3). */
static int matmul_ok(const bctx *c, const graph_node *n)
{
	int a = n->in[0], b = n->in[1];
	int ra = c->pn->tinfo[a].rank, rb = c->pn->tinfo[b].rank;

	for (int i = 2; i < n->n_in; i++)
		if (in_cls(c, n, i) != BV_CONST)
			return 0;
	if (c->cls[a] == BV_BATCH && c->cls[b] == BV_BATCH)
		return ra >= 3 && ra == rb;
	if (c->cls[a] == BV_BATCH)
		return ra >= 2 && const_beside(c, b, ra);
	return rb >= 3 && const_beside(c, a, rb);
}

/* R_GATHER: batched data gathered along another axis by constant
 * indices, or a constant table looked up by batched indices (axis 0). */
static int gather_ok(const bctx *c, const graph_node *n)
{
	int r = c->pn->tinfo[n->in[0]].rank;
	int64_t axis = axis_of(n, "axis", 0, r);

	if (in_cls(c, n, 0) == BV_BATCH)
		return axis != 0 && in_cls(c, n, 1) == BV_CONST;
	return axis == 0;
}

/* Whether node n, with a batched data input, keeps the images apart. */
static int rule_ok(const bctx *c, const graph_node *n, const op_rule *r)
{
	int x = n->in[0] >= 0 ? n->in[0] : 0;
	int rank = c->pn->tinfo[x].rank;

	switch (r->rule) {
	case R_ELEM:
		return elem_ok(c, n, r->shape_in);
	case R_WINDOW:
		/* MaxPool's indices count across the batch; BatchNormalization
		 * in training normalises with the whole batch's statistics. */
		if (in_cls(c, n, 0) != BV_BATCH || (n->n_out > 1 && n->out[1] >= 0) ||
		    (!strcmp(n->op_type, "BatchNormalization") &&
		     (proto_attr_int(n->proto, "training_mode", 0) ||
		      (n->opset < 7 && !proto_attr_int(n->proto, "is_test", 0)))))
			return 0;
		for (int i = 1; i < n->n_in; i++)
			if (!(r->shape_in & IN(i)) && in_cls(c, n, i) != BV_CONST)
				return 0;
		return strcmp(n->op_type, "Pad") || pad_skips_axis0(c, n, rank);
	case R_AXIS: {
		int dflt = r->axis_dflt != AXIS_SOFTMAX ? r->axis_dflt : n->opset < 13 ? 1 : -1;

		for (int i = 0; i < n->n_in; i++)
			if (!(r->shape_in & IN(i)) &&
			    in_cls(c, n, i) != (r->const_in & IN(i) ? BV_CONST : BV_BATCH))
				return 0;
		return axis_of(n, "axis", dflt, rank) != 0;
	}
	case R_REDUCE: {
		/* axes: an input from opset 13 (ReduceSum) or 18, before an attribute */
		int since = strcmp(n->op_type, "ReduceSum") ? 18 : 13;

		return list_skips_axis0(c, n, "axes", n->opset >= since ? 1 : INT32_MAX, rank,
					(int)proto_attr_int(n->proto, "noop_with_empty_axes", 0));
	}
	case R_VIEW:
		return 1;
	case R_TRANSPOSE: {
		const int64_t *perm;

		return proto_attr_ints(n->proto, "perm", &perm) >= 1 ? perm[0] == 0 : rank == 1;
	}
	case R_MATMUL:
		return n->n_in >= 2 && n->in[1] >= 0 && matmul_ok(c, n);
	case R_GEMM:
		return in_cls(c, n, 0) == BV_BATCH && in_cls(c, n, 1) == BV_CONST &&
		       in_cls(c, n, 2) == BV_CONST && !proto_attr_int(n->proto, "transA", 0) &&
		       (n->n_in < 3 || n->in[2] < 0 || const_beside(c, n->in[2], 2));
	case R_SLICE:
		return in_cls(c, n, 0) == BV_BATCH &&
		       list_skips_axis0(c, n, "axes", n->opset >= 10 ? 3 : INT32_MAX, rank, 0);
	case R_GATHER:
		return gather_ok(c, n);
	default:
		return 0;
	}
}

/* The class of node k's outputs, or -1 (with *why) when it mixes images. */
static int node_class(const bctx *c, size_t k, const char **why)
{
	const graph_node *n = &c->g->nodes[k];
	const op_rule *r = rule_of(n);
	unsigned shape_in = r ? r->shape_in : 0;
	int data = BV_CONST, size = BV_CONST, size_data = 0;

	for (int i = 0; i < n->n_in + n->n_implicit; i++) {
		int v = i < n->n_in ? n->in[i] : n->implicit[i - n->n_in];
		int cl = v >= 0 ? c->cls[v] : BV_CONST;

		if (i < n->n_in && (shape_in & IN(i))) {
			if (cl == BV_BATCH)
				return *why = "it takes a batched value as a shape", -1;
			size = cl > size ? cl : size;
		} else {
			data = cl > data ? cl : data;
			size_data |= cl == BV_SIZE;
		}
	}
	if (!strncmp(n->op_type, "Random", 6) || !strcmp(n->op_type, "Multinomial"))
		return *why = "it draws random numbers", -1;
	if (data == BV_CONST && size == BV_CONST)
		return BV_CONST;
	if (data == BV_CONST && r && r->rule == R_VIEW) {
		/* a constant made the batch's shape: ConstantOfShape, Expand, Tile */
		for (int i = 0; i < n->n_out; i++)
			if (n->out[i] < 0 || !batched_dims(c, n->out[i]))
				return BV_SIZE;
		return BV_BATCH;
	}
	if (data != BV_BATCH)
		return BV_SIZE;
	if (size_data)
		return *why = "it mixes the batch size into the data", -1;
	if (!r)
		return *why = "its op is not known to keep the images apart", -1;
	if (r->rule == R_SIZE)
		return BV_SIZE;
	if (!rule_ok(c, n, r))
		return *why = "it combines values across the batch (its axis, operands or outputs)", -1;
	for (int i = 0; i < n->n_out; i++)
		if (n->out[i] >= 0 && !batched_dims(c, n->out[i]))
			return *why = "its output does not keep the batch as dim 0", -1;
	return BV_BATCH;
}

/* Shape arithmetic that folds to the same data in both plans (a Shape's
 * dims after the batch, say): the chunk sees the values the whole batch
 * does, so it is a constant to them. */
static int same_data(const core_plan *pn, const core_plan *pb, int v)
{
	const graph_tinfo *a = &pn->tinfo[v], *b = &pb->tinfo[v];

	return a->has_data && b->has_data && a->ndata == b->ndata &&
	       !memcmp(a->data, b->data, (size_t)a->ndata * sizeof(a->data[0]));
}

int core_batch_separable(const graph *g, const core_plan *pn, const core_plan *pb,
			 int64_t n, int64_t b)
{
	bctx c = {.g = g, .pn = pn, .pb = pb, .n = n, .b = b};
	const char *why = NULL;
	int ok = 1;

	c.cls = calloc(g->n_values + 1, 1);
	if (!c.cls)
		return 0;
	for (size_t i = 0; i < g->n_inputs && ok; i++) {
		c.cls[g->inputs[i]] = BV_BATCH;
		ok = g->values[g->inputs[i]].is_tensor && batched_dims(&c, g->inputs[i]);
		if (!ok)
			ipc_log(IPC_LOG_DEBUG, "batch kept whole: input '%s' has no batch dim 0",
				g->values[g->inputs[i]].name);
	}
	for (size_t k = 0; k < g->n_nodes && ok; k++) {
		const graph_node *nd = &g->nodes[k];
		int cl = node_class(&c, k, &why);

		for (int i = 0; i < nd->n_out && cl >= 0; i++)
			if (nd->out[i] >= 0)
				c.cls[nd->out[i]] = (unsigned char)(cl == BV_SIZE &&
					same_data(pn, pb, nd->out[i]) ? BV_CONST : cl);
		ok = cl >= 0;
		if (!ok)
			ipc_log(IPC_LOG_DEBUG, "batch kept whole: node '%s' (%s): %s",
				nd->proto->name ? nd->proto->name : "", nd->op_type, why);
	}
	for (size_t i = 0; i < g->n_outputs && ok; i++) {
		int v = g->outputs[i];

		ok = c.cls[v] == BV_BATCH && g->values[v].kind == GRAPH_VALUE_ACTIVATION &&
		     pb->offset[v] != PLAN_NONE;
		if (!ok)
			ipc_log(IPC_LOG_DEBUG, "batch kept whole: output '%s' is not a planned "
				"batched value", g->values[v].name);
	}
	free(c.cls);
	return ok;
}

/* Bytes of the model's weights. */
static uint64_t weight_bytes(const graph *g)
{
	uint64_t w = 0;

	for (size_t v = 0; v < g->n_values; v++)
		if (g->values[v].kind == GRAPH_VALUE_INITIALIZER && g->values[v].init.alias < 0)
			w += g->values[v].init.nbytes;
	return w;
}

/* x rounded to the nearest power of two (geometrically), at least 1. */
static int64_t pow2_near(double x)
{
	int64_t b = 1;

	while ((double)b * M_SQRT2 <= x)
		b *= 2;
	return b;
}

int64_t core_batch_chunk_size(const ortmk_session *s, const core_plan *pn, int64_t n)
{
	const char *env = getenv("ORTMK_BATCH_CHUNK");
	double per;
	int64_t b, by_weights, by_work;

	if (env && *env)
		return atoll(env) > 0 && atoll(env) < n ? atoll(env) : 0;
	if (n < 2 || pn->arena_size < CORE_CHUNK_MIN_ARENA)
		return 0;
	/* Each chunk streams the weights once: b about the weights over four
	 * images' activations keeps that traffic below the activations'.
	 * Each chunk is a round trip and each node a pool job: a chunk holds
	 * about CORE_CHUNK_BYTES of activations per thread (small mobile
	 * models: 4-8 images), and at least one image per thread. */
	per = (double)pn->arena_size / (double)n;
	by_weights = pow2_near((double)weight_bytes(s->g) / (4.0 * per));
	by_work = pow2_near((double)CORE_CHUNK_BYTES * s->threads / per);
	b = by_weights > by_work ? by_weights : by_work;
	if (b < s->threads)
		b = s->threads;
	return b < n ? b : 0;
}
