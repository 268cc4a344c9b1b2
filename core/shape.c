/*
 * shape.c: static type and shape inference over a loaded graph.
 *
 * The session calls shape_infer() once with the model's declared input
 * shapes (symbolic dims) and again for each concrete input-shape signature;
 * the planner sizes buffers from the result.  The walk is a single pass over
 * the nodes in topological order: each node's op function (shape_ops.c)
 * derives its outputs from its inputs' facts.  What cannot be derived is not
 * an error: it becomes a fresh symbol or an unknown rank and the provider
 * sizes that tensor at run time.  Only contradictions the model cannot run
 * with (dims that cannot broadcast, dtype clashes, bad axes) fail.
 *
 * This file holds the driver and the helpers the op functions share.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph.h"
#include "shape_ops.h"

#define DT(x) ONNX__TENSOR_PROTO__DATA_TYPE__##x
#define AT(x) ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__##x
#define UNBOUND INT64_MIN

static const graph_tinfo absent_tinfo = { .rank = -1 };

int graph_tinfo_static(const graph_tinfo *t)
{
	if (t->rank < 0)
		return 0;
	for (int i = 0; i < t->rank; i++)
		if (t->dims[i] < 0)
			return 0;
	return 1;
}

int64_t graph_tinfo_numel(const graph_tinfo *t)
{
	int64_t n = 1;

	if (!graph_tinfo_static(t))
		return -1;
	for (int i = 0; i < t->rank; i++)
		if (__builtin_mul_overflow(n, t->dims[i], &n))
			return -1;
	return n;
}

/* ---------------------------------------------------------------- access */

int shape_has_in(const shape_ctx *c, int i)
{
	return i >= 0 && i < c->n->n_in && c->n->in[i] >= 0;
}

const graph_tinfo *shape_in(const shape_ctx *c, int i)
{
	return shape_has_in(c, i) ? &c->t[c->n->in[i]] : &absent_tinfo;
}

graph_tinfo *shape_out(shape_ctx *c, int i)
{
	if (i >= 0 && i < c->n->n_out && c->n->out[i] >= 0)
		return &c->t[c->n->out[i]];
	c->scratch = absent_tinfo;
	return &c->scratch;
}

int shape_fail(shape_ctx *c, const char *fmt, ...)
{
	const char *name = c->n->proto ? c->n->proto->name : NULL;
	const char *op = c->n->op_type ? c->n->op_type : "?";
	va_list ap;
	int k;

	if (!c->err || !c->errlen)
		return -EINVAL;
	if (name && *name)
		k = snprintf(c->err, c->errlen, "node '%s' (%s): ", name, op);
	else
		k = snprintf(c->err, c->errlen, "node #%d (%s): ", c->idx, op);
	if (k >= 0 && (size_t)k < c->errlen) {
		va_start(ap, fmt);
		vsnprintf(c->err + k, c->errlen - (size_t)k, fmt, ap);
		va_end(ap);
	}
	return -EINVAL;
}

int shape_rule(shape_ctx *c, int rc, const char *why)
{
	return rc < 0 ? shape_fail(c, "%s", why) : rc;
}

/* Writes "[2,batch,?]" into buf (SHAPE_FMT_LEN bytes): symbols by name when
 * the model named them, so messages read like the model's own declaration. */
const char *shape_fmt(const shape_ctx *c, const graph_tinfo *t, char *buf)
{
	size_t k = 1;

	if (t->rank < 0) {
		snprintf(buf, SHAPE_FMT_LEN, "[unknown rank]");
		return buf;
	}
	buf[0] = '[';
	buf[1] = '\0';
	for (int i = 0; i < t->rank && k < SHAPE_FMT_LEN; i++) {
		const char *sep = i ? "," : "";
		int64_t d = t->dims[i];
		int w;

		if (d >= 0)
			w = snprintf(buf + k, SHAPE_FMT_LEN - k, "%s%lld", sep, (long long)d);
		else if (d >= -(int64_t)c->g->n_symbols && c->g->symbols &&
			 c->g->symbols[-d - 1])
			w = snprintf(buf + k, SHAPE_FMT_LEN - k, "%s%s", sep,
				     c->g->symbols[-d - 1]);
		else
			w = snprintf(buf + k, SHAPE_FMT_LEN - k, "%s?", sep);
		k += w > 0 ? (size_t)w : 0;
	}
	if (k < SHAPE_FMT_LEN - 1)
		strcat(buf, "]");
	return buf;
}

/* Kept here rather than calling graph_dtype_name() so shape inference and
 * its tests do not depend on the loader's file. */
const char *shape_dtype_name(int32_t et)
{
	static const char *const names[] = {
		"undefined", "float", "uint8", "int8", "uint16", "int16", "int32",
		"int64", "string", "bool", "float16", "double", "uint32", "uint64",
		"complex64", "complex128", "bfloat16",
	};

	if (et >= 0 && et < (int32_t)(sizeof(names) / sizeof(names[0])))
		return names[et];
	return "unknown";
}

/* ----------------------------------------------------------------- facts */

void shape_copy(graph_tinfo *dst, const graph_tinfo *src, int with_data)
{
	if (dst == src)
		return;
	dst->elem_type = src->elem_type;
	dst->rank = src->rank;
	if (src->rank > 0)
		memcpy(dst->dims, src->dims, (size_t)src->rank * sizeof(dst->dims[0]));
	dst->has_data = with_data && src->has_data;
	dst->ndata = dst->has_data ? src->ndata : 0;
	if (dst->has_data)
		memcpy(dst->data, src->data, (size_t)src->ndata * sizeof(dst->data[0]));
}

/* Sets type and rank with every dim unknown.  The rank check matters: ops
 * such as Unsqueeze or Gather grow the rank from model-controlled numbers. */
int shape_set_rank(shape_ctx *c, graph_tinfo *t, int32_t et, int64_t rank)
{
	if (rank > GRAPH_MAX_RANK)
		return shape_fail(c, "output rank %lld exceeds %d", (long long)rank,
				  GRAPH_MAX_RANK);
	t->elem_type = et;
	t->rank = rank < 0 ? -1 : (int)rank;
	t->has_data = 0;
	t->ndata = 0;
	for (int i = 0; i < t->rank; i++)
		t->dims[i] = SHAPE_NEW;
	return 0;
}

int shape_same_type(shape_ctx *c, int32_t a, int32_t b)
{
	if (a && b && a != b)
		return shape_fail(c, "input types %s and %s differ",
				  shape_dtype_name(a), shape_dtype_name(b));
	return 0;
}

int shape_axis(shape_ctx *c, int64_t axis, int rank, int *out)
{
	if (axis < -rank || axis >= rank || rank == 0)
		return shape_fail(c, "axis %lld out of range for rank %d",
				  (long long)axis, rank);
	*out = (int)(axis < 0 ? axis + rank : axis);
	return 0;
}

/* Two dims that must be equal: fails only when both are known. */
int shape_merge(int64_t a, int64_t b, int64_t *out)
{
	if (a >= 0 && b >= 0 && a != b)
		return -1;
	*out = a >= 0 ? a : b;
	return 0;
}

int shape_bcast(shape_ctx *c, const graph_tinfo *a, const graph_tinfo *b,
		graph_tinfo *o)
{
	char s1[SHAPE_FMT_LEN], s2[SHAPE_FMT_LEN];
	int64_t dims[GRAPH_MAX_RANK];
	int r;

	if (a->rank < 0 || b->rank < 0) {
		o->rank = -1;
		return 0;
	}
	r = onnx_broadcast(a->rank, a->dims, b->rank, b->dims, dims);
	if (r < 0)
		return shape_fail(c, "cannot broadcast %s with %s",
				  shape_fmt(c, a, s1), shape_fmt(c, b, s2));
	o->rank = r;
	memcpy(o->dims, dims, sizeof(dims));
	return 0;
}

/* Flat index into `in` of the element broadcast to output position `flat`.
 * Both tinfos are static when this is called. */
int64_t shape_bcast_src(const graph_tinfo *o, const graph_tinfo *in, int64_t flat)
{
	int64_t src = 0, stride = 1;

	for (int d = o->rank - 1; d >= 0; d--) {
		int di = d - (o->rank - in->rank);
		int64_t k = flat % o->dims[d];

		flat /= o->dims[d];
		if (di < 0)
			continue;
		if (in->dims[di] != 1)
			src += k * stride;
		stride *= in->dims[di];
	}
	return src;
}

/* ------------------------------------------------------------ known data */

int shape_is_int(int32_t et)
{
	return (et >= DT(UINT8) && et <= DT(INT64)) || et == DT(UINT32) ||
	       et == DT(UINT64);
}

/* Whether v is exactly representable in et.  Float data is kept only while
 * it is integral, which is all shape arithmetic ever needs. */
static int shape_fits(int32_t et, int64_t v)
{
	switch (et) {
	case DT(BOOL): return v == 0 || v == 1;
	case DT(INT8): return v >= INT8_MIN && v <= INT8_MAX;
	case DT(UINT8): return v >= 0 && v <= UINT8_MAX;
	case DT(INT16): return v >= INT16_MIN && v <= INT16_MAX;
	case DT(UINT16): return v >= 0 && v <= UINT16_MAX;
	case DT(INT32): return v >= INT32_MIN && v <= INT32_MAX;
	case DT(UINT32): return v >= 0 && v <= (int64_t)UINT32_MAX;
	case DT(INT64): return 1;
	case DT(UINT64): return v >= 0;
	case DT(FLOAT): return v >= -(1LL << 24) && v <= (1LL << 24);
	case DT(DOUBLE): return v >= -(1LL << 53) && v <= (1LL << 53);
	case DT(FLOAT16): return v >= -2048 && v <= 2048;
	case DT(BFLOAT16): return v >= -256 && v <= 256;
	default: return 0;
	}
}

void shape_set_data(graph_tinfo *t, const int64_t *v, int64_t n)
{
	t->has_data = 0;
	t->ndata = 0;
	if (n < 0 || n > GRAPH_TINFO_MAX_DATA || graph_tinfo_numel(t) != n)
		return;
	for (int64_t i = 0; i < n; i++)
		if (!shape_fits(t->elem_type, v[i]))
			return;
	memcpy(t->data, v, (size_t)n * sizeof(v[0]));
	t->ndata = n;
	t->has_data = 1;
}

/* Known data of a scalar or 1-D input: count, or -1. */
int shape_in_ints(const shape_ctx *c, int i, const int64_t **v)
{
	const graph_tinfo *t = shape_in(c, i);

	if (!t->has_data || t->rank > 1)
		return -1;
	*v = t->data;
	return (int)t->ndata;
}

int shape_float_int(double d, int64_t *v)
{
	if (!(d >= -9007199254740992.0 && d <= 9007199254740992.0) || d != floor(d))
		return -1;
	*v = (int64_t)d;
	return 0;
}

static uint64_t le_bits(const uint8_t *p, size_t n)
{
	uint64_t u = 0;

	for (size_t i = 0; i < n; i++)
		u |= (uint64_t)p[i] << (8 * i);
	return u;
}

/* One little-endian element of raw tensor bytes as int64; -1 for types
 * (or non-integral floats) that shape arithmetic does not track. */
static int decode_le(const uint8_t *p, int32_t et, int64_t *v)
{
	uint64_t u;
	float f;
	double d;

	switch (et) {
	case DT(INT8): *v = (int8_t)p[0]; return 0;
	case DT(UINT8): case DT(BOOL): *v = p[0]; return 0;
	case DT(INT16): *v = (int16_t)le_bits(p, 2); return 0;
	case DT(UINT16): *v = (int64_t)le_bits(p, 2); return 0;
	case DT(INT32): *v = (int32_t)le_bits(p, 4); return 0;
	case DT(UINT32): *v = (int64_t)le_bits(p, 4); return 0;
	case DT(INT64): *v = (int64_t)le_bits(p, 8); return 0;
	case DT(UINT64):
		u = le_bits(p, 8);
		*v = (int64_t)u;
		return u > INT64_MAX ? -1 : 0;
	case DT(FLOAT):
		u = le_bits(p, 4);
		memcpy(&f, &(uint32_t){ (uint32_t)u }, sizeof(f));
		return shape_float_int(f, v);
	case DT(DOUBLE):
		u = le_bits(p, 8);
		memcpy(&d, &u, sizeof(d));
		return shape_float_int(d, v);
	default:
		return -1;
	}
}

static size_t raw_size(int32_t et)
{
	switch (et) {
	case DT(INT8): case DT(UINT8): case DT(BOOL): return 1;
	case DT(INT16): case DT(UINT16): return 2;
	case DT(INT32): case DT(UINT32): case DT(FLOAT): return 4;
	case DT(INT64): case DT(UINT64): case DT(DOUBLE): return 8;
	default: return 0;
	}
}

static int raw_ints(const uint8_t *p, size_t nbytes, int32_t et, int64_t *out, int64_t n)
{
	size_t esz = raw_size(et);

	if (!esz || !p || nbytes != (size_t)n * esz)
		return -1;
	for (int64_t i = 0; i < n; i++)
		if (decode_le(p + (size_t)i * esz, et, &out[i]) < 0)
			return -1;
	return (int)n;
}

/* Elements of a TensorProto (Constant's value, ConstantOfShape's value) as
 * int64: count, or -1 when too large, external, or not integral. */
int shape_tensor_ints(const Onnx__TensorProto *tp, int64_t *out, size_t max)
{
	int64_t n = 1;
	int32_t et = tp->data_type;

	for (size_t i = 0; i < tp->n_dims; i++)
		if (tp->dims[i] < 0 || __builtin_mul_overflow(n, tp->dims[i], &n))
			return -1;
	if (n > (int64_t)max || tp->n_external_data)
		return -1;
	if (tp->has_raw_data)
		return raw_ints(tp->raw_data.data, tp->raw_data.len, et, out, n);
	for (int64_t i = 0; i < n; i++) {
		if (et == DT(INT64) && tp->n_int64_data == (size_t)n)
			out[i] = tp->int64_data[i];
		else if (tp->n_int32_data == (size_t)n && shape_is_int(et) &&
			 et != DT(UINT32) && et != DT(UINT64))
			out[i] = tp->int32_data[i];
		else if (tp->n_int32_data == (size_t)n && et == DT(BOOL))
			out[i] = tp->int32_data[i] != 0;
		else if (et == DT(FLOAT) && tp->n_float_data == (size_t)n) {
			if (shape_float_int(tp->float_data[i], &out[i]) < 0)
				return -1;
		} else if (et == DT(DOUBLE) && tp->n_double_data == (size_t)n) {
			if (shape_float_int(tp->double_data[i], &out[i]) < 0)
				return -1;
		} else
			return -1;
	}
	return (int)n;
}

/* ------------------------------------------------------------ attributes */

const Onnx__AttributeProto *shape_attr(const shape_ctx *c, const char *name)
{
	const Onnx__NodeProto *p = c->n->proto;

	for (size_t i = 0; p && i < p->n_attribute; i++)
		if (p->attribute[i]->name && strcmp(p->attribute[i]->name, name) == 0)
			return p->attribute[i];
	return NULL;
}

int64_t shape_attr_int(const shape_ctx *c, const char *name, int64_t dflt)
{
	const Onnx__AttributeProto *a = shape_attr(c, name);

	return a && (a->type == AT(INT) || a->has_i) ? a->i : dflt;
}

/* Count of ints (-1 when absent, so "present but empty" stays visible). */
int shape_attr_ints(const shape_ctx *c, const char *name, const int64_t **v)
{
	const Onnx__AttributeProto *a = shape_attr(c, name);

	if (!a || (a->type != AT(INTS) && !a->n_ints))
		return -1;
	*v = a->ints;
	return (int)a->n_ints;
}

int shape_attr_is(const shape_ctx *c, const char *name, const char *s)
{
	const Onnx__AttributeProto *a = shape_attr(c, name);
	size_t n = strlen(s);

	return a && a->s.len == n && memcmp(a->s.data, s, n) == 0;
}

/* --------------------------------------------------------------- driver */

static void seed_value(const graph_value *v, graph_tinfo *t)
{
	memset(t, 0, sizeof(*t));
	t->elem_type = v->elem_type;
	t->rank = v->is_tensor && v->rank <= GRAPH_MAX_RANK ? v->rank : -1;
	if (t->rank > 0)
		memcpy(t->dims, v->dims, (size_t)t->rank * sizeof(t->dims[0]));
	/* Float initializers too, while integral: Resize's scales (a
	 * Constant [1, 1, 2, 2] the loader folded into an initializer). */
	if (v->kind != GRAPH_VALUE_INITIALIZER || v->init.external ||
	    (v->elem_type != DT(INT64) && v->elem_type != DT(INT32) &&
	     v->elem_type != DT(FLOAT) && v->elem_type != DT(DOUBLE)))
		return;
	t->ndata = graph_tinfo_numel(t);
	if (t->ndata >= 0 && t->ndata <= GRAPH_TINFO_MAX_DATA &&
	    raw_ints(v->init.data, v->init.nbytes, v->elem_type, t->data, t->ndata) >= 0)
		t->has_data = 1;
	else
		t->ndata = 0;
}

/* Activations start unknown too, so a table is never read uninitialised. */
static void seed(const graph *g, graph_tinfo *tinfo, int inputs_set)
{
	for (size_t i = 0; i < g->n_values; i++) {
		if (inputs_set && g->values[i].kind == GRAPH_VALUE_INPUT)
			continue;
		if (g->values[i].kind == GRAPH_VALUE_ACTIVATION) {
			memset(&tinfo[i], 0, sizeof(tinfo[i]));
			tinfo[i].rank = -1;
		} else {
			seed_value(&g->values[i], &tinfo[i]);
		}
	}
}

void shape_seed(const graph *g, graph_tinfo *tinfo)
{
	seed(g, tinfo, 0);
}

/* A declared dim with the symbols bound by the concrete inputs substituted. */
static int64_t declared_dim(const graph *g, const int64_t *bind, int64_t d)
{
	if (bind && d < 0 && d >= -(int64_t)g->n_symbols && bind[-d - 1] != UNBOUND)
		return bind[-d - 1];
	return d;
}

/* Fills what inference left open from the model's value_info: the type when
 * unknown, the whole shape when the rank is, and dims that are only fresh
 * symbols.  Inferred facts win over declared ones. */
static void apply_declared(const graph *g, const int64_t *bind, int vi,
			   graph_tinfo *t)
{
	const graph_value *v = &g->values[vi];

	if (!t->elem_type)
		t->elem_type = v->elem_type;
	if (!v->is_tensor || v->rank < 0 || v->rank > GRAPH_MAX_RANK)
		return;
	if (t->rank < 0) {
		t->rank = v->rank;
		for (int i = 0; i < t->rank; i++)
			t->dims[i] = SHAPE_NEW;
	}
	if (t->rank != v->rank)
		return;
	for (int i = 0; i < t->rank; i++) {
		int64_t d = declared_dim(g, bind, v->dims[i]);

		if (t->dims[i] == SHAPE_NEW || (t->dims[i] < -g->n_symbols && d >= 0))
			t->dims[i] = d;
	}
}

static void finish_output(shape_ctx *c, const int64_t *bind, int *next_sym,
			  int vi)
{
	graph_tinfo *t = &c->t[vi];

	apply_declared(c->g, bind, vi, t);
	for (int i = 0; i < t->rank; i++)
		if (t->dims[i] == SHAPE_NEW)
			t->dims[i] = (*next_sym)--;
	if (t->has_data && graph_tinfo_numel(t) != t->ndata)
		t->has_data = 0;
	if (!t->has_data)
		t->ndata = 0;
}

static int infer_node(shape_ctx *c, const int64_t *bind, int *next_sym)
{
	const graph_node *n = c->n;
	shape_fn fn = shape_op_find(n->domain, n->op_type, &c->arg);
	int rc;

	for (int i = 0; i < n->n_out; i++) {
		if (n->out[i] >= 0) {
			memset(&c->t[n->out[i]], 0, sizeof(graph_tinfo));
			c->t[n->out[i]].rank = -1;
		}
	}
	rc = fn ? fn(c) : SHAPE_DECLARED;
	if (rc < 0)
		return rc;
	for (int i = 0; i < n->n_out; i++)
		if (n->out[i] >= 0)
			finish_output(c, bind, next_sym, n->out[i]);
	return 0;
}

/* Symbols that the caller's concrete inputs pin down, so a declared
 * "batch" on an output of an op we cannot infer reads as the real size. */
static int64_t *bind_symbols(const graph *g, const graph_tinfo *tinfo)
{
	int64_t *bind;

	if (g->n_symbols <= 0)
		return NULL;
	bind = malloc((size_t)g->n_symbols * sizeof(*bind));
	if (!bind)
		return NULL;
	for (int s = 0; s < g->n_symbols; s++)
		bind[s] = UNBOUND;
	for (size_t i = 0; i < g->n_values; i++) {
		const graph_value *v = &g->values[i];

		if (v->kind != GRAPH_VALUE_INPUT || v->rank != tinfo[i].rank)
			continue;
		for (int d = 0; d < v->rank; d++)
			if (v->dims[d] < 0 && v->dims[d] >= -(int64_t)g->n_symbols &&
			    tinfo[i].dims[d] >= 0)
				bind[-v->dims[d] - 1] = tinfo[i].dims[d];
	}
	return bind;
}

int shape_infer(const graph *g, graph_tinfo *tinfo, int inputs_set,
		int *next_sym, char *err, size_t errlen)
{
	shape_ctx c = { .g = g, .t = tinfo, .err = err, .errlen = errlen };
	int64_t *bind = NULL;
	int rc = 0;

	/* *next_sym is the next id to hand out; never one the model uses. */
	if (*next_sym > -g->n_symbols - 1)
		*next_sym = -g->n_symbols - 1;
	seed(g, tinfo, inputs_set);
	if (inputs_set)
		bind = bind_symbols(g, tinfo);
	for (size_t i = 0; i < g->n_nodes && rc == 0; i++) {
		c.n = &g->nodes[i];
		c.idx = (int)i;
		rc = infer_node(&c, bind, next_sym);
	}
	free(bind);
	return rc;
}
