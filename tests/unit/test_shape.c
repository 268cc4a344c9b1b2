/*
 * test_shape.c: unit tests for shape inference (core/shape.c,
 * core/shape_ops.c).  Graphs are built by hand with a small builder so the
 * tests do not depend on the loader: values, nodes with NodeProtos and their
 * attributes, then shape_infer() and checks on the resulting tinfo table.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "graph.h"

#define F ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT
#define I64 ONNX__TENSOR_PROTO__DATA_TYPE__INT64
#define I32 ONNX__TENSOR_PROTO__DATA_TYPE__INT32
#define BOOL ONNX__TENSOR_PROTO__DATA_TYPE__BOOL
#define U8 ONNX__TENSOR_PROTO__DATA_TYPE__UINT8
#define I8 ONNX__TENSOR_PROTO__DATA_TYPE__INT8
#define AT(x) ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__##x

#define MAXV 256
#define MAXN 64
#define MAXA 8
#define FRESH INT64_MIN   /* expected dim: a symbol made during inference */

#define D(...) ((const int64_t[]){ __VA_ARGS__ })
#define NARGS(...) ((int)(sizeof((int[]){ __VA_ARGS__ }) / sizeof(int)))
#define NODE(b, op, opset, nout, ...) \
	node(b, op, opset, NARGS(__VA_ARGS__), (int[]){ __VA_ARGS__ }, nout)
#define CHECK(b, v, et, rank, ...) check(b, v, et, rank, D(__VA_ARGS__))

typedef struct tb {
	graph g;
	graph_value v[MAXV];
	char vname[MAXV][16];
	uint8_t bytes[MAXV][512];
	graph_node n[MAXN];
	Onnx__NodeProto p[MAXN];
	Onnx__AttributeProto a[MAXN][MAXA];
	Onnx__AttributeProto *ap[MAXN][MAXA];
	Onnx__TensorProto tp[MAXN];
	int io[MAXN][16];
	char *symbols[8];
	graph_tinfo t[MAXV];
	char err[256];
	int next_sym;
} tb;

/* ------------------------------------------------------------ builder */

static int value(tb *b, enum graph_value_kind kind, int32_t et, int rank,
		 const int64_t *dims)
{
	int i = (int)b->g.n_values++;
	graph_value *v = &b->v[i];

	assert_true(i < MAXV);
	snprintf(b->vname[i], sizeof(b->vname[i]), "v%d", i);
	v->name = b->vname[i];
	v->kind = kind;
	v->elem_type = et;
	v->is_tensor = 1;
	v->rank = rank;
	v->producer = -1;
	for (int d = 0; d < rank; d++)
		v->dims[d] = dims[d];
	return i;
}

static int input(tb *b, int32_t et, int rank, const int64_t *dims)
{
	return value(b, GRAPH_VALUE_INPUT, et, rank, dims);
}

/* An initializer with inline little-endian bytes of an int type. */
static int init_ints(tb *b, int32_t et, int rank, const int64_t *dims,
		     const int64_t *data, int n)
{
	int i = value(b, GRAPH_VALUE_INITIALIZER, et, rank, dims);
	size_t esz = et == I64 ? 8 : 4;

	for (int k = 0; k < n; k++)
		for (size_t j = 0; j < esz; j++)
			b->bytes[i][k * esz + j] = (uint8_t)((uint64_t)data[k] >> (8 * j));
	b->v[i].init.data = b->bytes[i];
	b->v[i].init.nbytes = (uint64_t)n * esz;
	return i;
}

/* A 1-D float initializer (Resize's scales as the loader keeps them). */
static int const_f32(tb *b, int n, const float *data)
{
	int i = value(b, GRAPH_VALUE_INITIALIZER, F, 1, D(n));

	memcpy(b->bytes[i], data, (size_t)n * sizeof(float));
	b->v[i].init.data = b->bytes[i];
	b->v[i].init.nbytes = (uint64_t)n * sizeof(float);
	return i;
}

static int const_i64(tb *b, int n, const int64_t *data)
{
	return init_ints(b, I64, 1, D(n), data, n);
}

static int node(tb *b, const char *op, int64_t opset, int nin, const int *in, int nout)
{
	int k = (int)b->g.n_nodes++;
	graph_node *n = &b->n[k];
	Onnx__NodeProto *p = &b->p[k];

	assert_true(k < MAXN && nin + nout <= 16);
	*p = (Onnx__NodeProto)ONNX__NODE_PROTO__INIT;
	p->name = (char *)"";
	p->op_type = (char *)op;
	p->domain = (char *)"";
	p->attribute = b->ap[k];
	n->proto = p;
	n->op_type = op;
	n->domain = "";
	n->opset = opset;
	n->n_in = nin;
	n->in = b->io[k];
	n->n_out = nout;
	n->out = b->io[k] + nin;
	memcpy(n->in, in, (size_t)nin * sizeof(int));
	for (int i = 0; i < nout; i++) {
		n->out[i] = value(b, GRAPH_VALUE_ACTIVATION, 0, -1, NULL);
		b->v[n->out[i]].producer = k;
	}
	return k;
}

static int out(const tb *b, int k, int i)
{
	return b->n[k].out[i];
}

static void set_name(tb *b, int k, const char *name)
{
	b->p[k].name = (char *)name;
}

static Onnx__AttributeProto *attr(tb *b, int k, const char *name, int type)
{
	Onnx__NodeProto *p = &b->p[k];
	Onnx__AttributeProto *a = &b->a[k][p->n_attribute];

	assert_true(p->n_attribute < MAXA);
	*a = (Onnx__AttributeProto)ONNX__ATTRIBUTE_PROTO__INIT;
	a->name = (char *)name;
	a->has_type = 1;
	a->type = type;
	b->ap[k][p->n_attribute++] = a;
	return a;
}

static void attr_i(tb *b, int k, const char *name, int64_t v)
{
	Onnx__AttributeProto *a = attr(b, k, name, AT(INT));

	a->has_i = 1;
	a->i = v;
}

static void attr_f(tb *b, int k, const char *name, float v)
{
	Onnx__AttributeProto *a = attr(b, k, name, AT(FLOAT));

	a->has_f = 1;
	a->f = v;
}

/* `v` must outlive the test (compound literals in the test body do). */
static void attr_is(tb *b, int k, const char *name, int n, const int64_t *v)
{
	Onnx__AttributeProto *a = attr(b, k, name, AT(INTS));

	a->n_ints = (size_t)n;
	a->ints = (int64_t *)v;
}

static void attr_s(tb *b, int k, const char *name, const char *s)
{
	Onnx__AttributeProto *a = attr(b, k, name, AT(STRING));

	a->has_s = 1;
	a->s.data = (uint8_t *)s;
	a->s.len = strlen(s);
}

/* A tensor attribute holding int64 values. */
static void attr_t(tb *b, int k, const char *name, int32_t et, int rank,
		   const int64_t *dims, int n, const int64_t *vals)
{
	Onnx__AttributeProto *a = attr(b, k, name, AT(TENSOR));
	Onnx__TensorProto *t = &b->tp[k];

	*t = (Onnx__TensorProto)ONNX__TENSOR_PROTO__INIT;
	t->has_data_type = 1;
	t->data_type = et;
	t->n_dims = (size_t)rank;
	t->dims = (int64_t *)dims;
	t->n_int64_data = (size_t)n;
	t->int64_data = (int64_t *)vals;
	a->t = t;
}

static int64_t sym(tb *b, const char *name)
{
	b->symbols[b->g.n_symbols] = (char *)name;
	return -(++b->g.n_symbols);
}

static int run(tb *b)
{
	b->g.values = b->v;
	b->g.nodes = b->n;
	b->g.symbols = b->symbols;
	b->err[0] = '\0';
	b->next_sym = 0;
	return shape_infer(&b->g, b->t, 0, &b->next_sym, b->err, sizeof(b->err));
}

/* Seeds, overrides the given input with a concrete shape, then infers. */
static int run_concrete(tb *b, int vi, int rank, const int64_t *dims)
{
	b->g.values = b->v;
	b->g.nodes = b->n;
	b->g.symbols = b->symbols;
	shape_seed(&b->g, b->t);
	b->t[vi].rank = rank;
	memcpy(b->t[vi].dims, dims, (size_t)rank * sizeof(int64_t));
	b->next_sym = 0;
	return shape_infer(&b->g, b->t, 1, &b->next_sym, b->err, sizeof(b->err));
}

/* Infers and expects success, showing the message otherwise. */
static void run_ok(tb *b)
{
	if (run(b) != 0) {
		print_error("shape_infer: %s\n", b->err);
		fail();
	}
}

static void check(const tb *b, int vi, int32_t et, int rank, const int64_t *dims)
{
	const graph_tinfo *t = &b->t[vi];
	int ok = t->elem_type == et && t->rank == rank;

	for (int i = 0; ok && i < rank; i++) {
		if (dims[i] == FRESH)
			ok = t->dims[i] < -b->g.n_symbols && t->dims[i] > b->next_sym;
		else
			ok = t->dims[i] == dims[i];
	}
	if (!ok) {
		print_error("value %d: got type %d rank %d [", vi, t->elem_type, t->rank);
		for (int i = 0; i < t->rank; i++)
			print_error("%lld ", (long long)t->dims[i]);
		print_error("], expected type %d rank %d\n", et, rank);
		fail();
	}
}

static void check_data(const tb *b, int vi, int n, const int64_t *data)
{
	const graph_tinfo *t = &b->t[vi];

	assert_true(t->has_data);
	assert_int_equal(t->ndata, n);
	for (int i = 0; i < n; i++)
		assert_int_equal(t->data[i], data[i]);
}

static void expect_error(tb *b, int k, const char *name, const char *what)
{
	int rc;

	set_name(b, k, name);
	rc = run(b);
	if (rc != -EINVAL || !strstr(b->err, name) || !strstr(b->err, what)) {
		print_error("%s: rc %d, expected \"%s\"\n", name, rc, what);
		print_error("message: %s\n", b->err);
		fail();
	}
}

static int setup(void **state)
{
	*state = calloc(1, sizeof(tb));
	return *state ? 0 : -1;
}

static int teardown(void **state)
{
	free(*state);
	return 0;
}

/* --------------------------------------------------------- elementwise */

static void test_broadcast(void **state)
{
	tb *b = *state;
	int64_t B = sym(b, "B"), S = sym(b, "S");
	int x = input(b, F, 2, D(2, 3)), y = input(b, F, 1, D(3));
	int bs = input(b, F, 2, D(B, 1)), s1 = input(b, F, 2, D(1, S));
	int c1 = input(b, F, 1, D(B)), c2 = input(b, F, 1, D(S));
	int add = NODE(b, "Add", 17, 1, x, y);
	int mul = NODE(b, "Mul", 17, 1, bs, s1);
	int sub = NODE(b, "Sub", 17, 1, c1, c2);
	int eq = NODE(b, "Equal", 17, 1, bs, s1);
	int pw = NODE(b, "Pow", 17, 1, x, init_ints(b, I64, 0, NULL, D(2), 1));
	int wh = NODE(b, "Where", 17, 1, out(b, eq, 0), bs, s1);
	int sm = NODE(b, "Sum", 17, 1, x, y, x);

	run_ok(b);
	CHECK(b, out(b, add, 0), F, 2, 2, 3);
	CHECK(b, out(b, mul, 0), F, 2, B, S);
	CHECK(b, out(b, sub, 0), F, 1, FRESH);
	CHECK(b, out(b, eq, 0), BOOL, 2, B, S);
	CHECK(b, out(b, pw, 0), F, 2, 2, 3);
	CHECK(b, out(b, wh, 0), F, 2, B, S);
	CHECK(b, out(b, sm, 0), F, 2, 2, 3);
}

static void test_broadcast_errors(void **state)
{
	tb *b = *state;
	int x = input(b, F, 2, D(2, 3)), y = input(b, F, 1, D(4));
	int k = NODE(b, "Add", 17, 1, x, y);

	expect_error(b, k, "Add_3", "cannot broadcast [2,3] with [4]");
	assert_string_equal(b->err, "node 'Add_3' (Add): cannot broadcast [2,3] with [4]");
	b->v[y].elem_type = I64;
	b->v[y].dims[0] = 3;
	expect_error(b, k, "Add_3", "float and int64");
	set_name(b, k, "");
	assert_int_equal(run(b), -EINVAL);
	assert_non_null(strstr(b->err, "node #0 (Add)"));
}

static void test_unary_family(void **state)
{
	tb *b = *state;
	int64_t B = sym(b, "B");
	int x = input(b, F, 3, D(B, 4, 8));
	static const char *const ops[] = { "Relu", "Sigmoid", "Tanh", "Erf", "Sqrt",
		"Exp", "Log", "Neg", "Abs", "Reciprocal", "Floor", "Ceil", "Gelu",
		"LeakyRelu", "Elu", "Clip", "HardSigmoid", "Softplus", "Identity",
		"InstanceNormalization", "BatchNormalization", "LogSoftmax" };
	int k[sizeof(ops) / sizeof(ops[0])];
	int sm = NODE(b, "Softmax", 11, 1, x), dr = NODE(b, "Dropout", 13, 2, x);
	int nan = NODE(b, "IsNaN", 13, 1, x);

	for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++)
		k[i] = NODE(b, ops[i], 17, 1, x);
	run_ok(b);
	for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++)
		CHECK(b, out(b, k[i], 0), F, 3, B, 4, 8);
	CHECK(b, out(b, sm, 0), F, 3, B, 4, 8);
	CHECK(b, out(b, dr, 0), F, 3, B, 4, 8);
	CHECK(b, out(b, dr, 1), BOOL, 3, B, 4, 8);
	CHECK(b, out(b, nan, 0), BOOL, 3, B, 4, 8);
	attr_i(b, sm, "axis", 3);
	expect_error(b, sm, "softmax_0", "axis 3 out of range for rank 3");
}

static void test_layernorm(void **state)
{
	tb *b = *state;
	int64_t B = sym(b, "B");
	int x = input(b, F, 3, D(B, 7, 768)), s = input(b, F, 1, D(768));
	int k = NODE(b, "LayerNormalization", 17, 3, x, s, s);
	int k2 = NODE(b, "LayerNormalization", 17, 3, x, s, s);

	attr_i(b, k2, "axis", 1);
	run_ok(b);
	CHECK(b, out(b, k, 0), F, 3, B, 7, 768);
	CHECK(b, out(b, k, 1), F, 3, B, 7, 1);
	CHECK(b, out(b, k, 2), F, 3, B, 7, 1);
	CHECK(b, out(b, k2, 1), F, 3, B, 1, 1);
	attr_i(b, k, "axis", -4);
	expect_error(b, k, "ln", "axis -4 out of range");
}

/* -------------------------------------------------------------- matmul */

static void test_matmul(void **state)
{
	tb *b = *state;
	int64_t B = sym(b, "B"), S = sym(b, "S");
	int a = input(b, F, 3, D(2, 3, 4)), w = input(b, F, 2, D(4, 5));
	int v = input(b, F, 1, D(4)), m = input(b, F, 2, D(3, 4));
	int h = input(b, F, 3, D(B, S, 768)), w2 = input(b, F, 2, D(768, 3072));
	int bb = input(b, F, 4, D(B, 1, 4, 5)), cc = input(b, F, 3, D(6, 5, 2));
	int k0 = NODE(b, "MatMul", 13, 1, a, w), k1 = NODE(b, "MatMul", 13, 1, v, w);
	int k2 = NODE(b, "MatMul", 13, 1, m, v), k3 = NODE(b, "MatMul", 13, 1, v, v);
	int k4 = NODE(b, "MatMul", 13, 1, h, w2), k5 = NODE(b, "MatMul", 13, 1, bb, cc);

	run_ok(b);
	CHECK(b, out(b, k0, 0), F, 3, 2, 3, 5);
	CHECK(b, out(b, k1, 0), F, 1, 5);
	CHECK(b, out(b, k2, 0), F, 1, 3);
	CHECK(b, out(b, k3, 0), F, 0, 0);
	CHECK(b, out(b, k4, 0), F, 3, B, S, 3072);
	CHECK(b, out(b, k5, 0), F, 4, B, 6, 4, 2);
	b->v[w].dims[0] = 3;
	expect_error(b, k0, "MatMul_7", "inner dimensions differ: [2,3,4] x [3,5]");
}

static void test_gemm(void **state)
{
	tb *b = *state;
	int64_t N = sym(b, "N");
	int a = input(b, F, 2, D(N, 128)), w = input(b, F, 2, D(10, 128));
	int bias = input(b, F, 1, D(10));
	int k = NODE(b, "Gemm", 13, 1, a, w, bias);

	attr_i(b, k, "transB", 1);
	run_ok(b);
	CHECK(b, out(b, k, 0), F, 2, N, 10);
	b->v[bias].dims[0] = 3;
	expect_error(b, k, "fc", "does not broadcast");
	b->v[bias].dims[0] = 10;
	b->p[k].n_attribute = 0;
	expect_error(b, k, "fc", "inner dimensions differ");
}

/* ---------------------------------------------------- conv and pooling */

static void test_conv(void **state)
{
	tb *b = *state;
	int64_t N = sym(b, "N"), H = sym(b, "H");
	int x = input(b, F, 4, D(N, 3, 224, 224)), w = input(b, F, 4, D(64, 3, 7, 7));
	int xs = input(b, F, 4, D(1, 3, H, 32)), w3 = input(b, F, 4, D(8, 3, 3, 3));
	int x1 = input(b, F, 3, D(1, 4, 100)), w1 = input(b, F, 3, D(8, 2, 5));
	int k0 = NODE(b, "Conv", 11, 1, x, w), k1 = NODE(b, "Conv", 11, 1, x, w);
	int k2 = NODE(b, "Conv", 11, 1, xs, w3), k3 = NODE(b, "Conv", 11, 1, x1, w1);
	int k4 = NODE(b, "Conv", 11, 1, x, w);

	attr_is(b, k0, "strides", 2, D(2, 2));
	attr_is(b, k0, "pads", 4, D(3, 3, 3, 3));
	attr_is(b, k1, "strides", 2, D(2, 2));
	attr_s(b, k1, "auto_pad", "SAME_UPPER");
	attr_is(b, k2, "dilations", 2, D(2, 2));
	attr_i(b, k3, "group", 2);
	attr_s(b, k4, "auto_pad", "VALID");
	run_ok(b);
	CHECK(b, out(b, k0, 0), F, 4, N, 64, 112, 112);
	CHECK(b, out(b, k1, 0), F, 4, N, 64, 112, 112);
	CHECK(b, out(b, k2, 0), F, 4, 1, 8, FRESH, 28);
	CHECK(b, out(b, k3, 0), F, 3, 1, 8, 96);
	CHECK(b, out(b, k4, 0), F, 4, N, 64, 218, 218);
	b->v[w3].dims[1] = 4;
	expect_error(b, k2, "conv2", "input has 3 channels, weight expects 4");
	b->v[w3].dims[1] = 3;
	b->v[x1].dims[2] = 3;
	expect_error(b, k3, "conv3", "exceeds input");
}

static void test_conv_transpose(void **state)
{
	tb *b = *state;
	int x = input(b, F, 4, D(1, 16, 14, 14)), w = input(b, F, 4, D(16, 8, 4, 4));
	int k0 = NODE(b, "ConvTranspose", 11, 1, x, w);
	int k1 = NODE(b, "ConvTranspose", 11, 1, x, w);

	attr_is(b, k0, "strides", 2, D(2, 2));
	attr_is(b, k0, "pads", 4, D(1, 1, 1, 1));
	attr_is(b, k1, "output_shape", 2, D(30, 31));
	attr_i(b, k1, "group", 2);
	run_ok(b);
	CHECK(b, out(b, k0, 0), F, 4, 1, 8, 28, 28);
	CHECK(b, out(b, k1, 0), F, 4, 1, 16, 30, 31);
}

/* The quantized ops (dynamic quantization's DynamicQuantizeLinear ->
 * ConvInteger / MatMulInteger, and the QLinear and Q/DQ ops): shapes as
 * their float counterparts, operand types allowed to differ, the output
 * type from the op (int32) or its zero point. */
static void test_quantized(void **state)
{
	tb *b = *state;
	int64_t N = sym(b, "N");
	int x = input(b, F, 4, D(N, 8, 20, 20)), s = input(b, F, 0, D(0));
	int xu = input(b, U8, 4, D(N, 8, 20, 20)), w = input(b, I8, 4, D(16, 4, 3, 3));
	int zu = input(b, U8, 0, D(0)), zi = input(b, I8, 0, D(0));
	int a = input(b, U8, 3, D(2, 3, 4)), bw = input(b, I8, 2, D(4, 5));
	int k0 = NODE(b, "DynamicQuantizeLinear", 11, 3, x);
	int k1 = NODE(b, "ConvInteger", 10, 1, xu, w, zu, zi);
	int k2 = NODE(b, "QLinearConv", 10, 1, xu, s, zu, w, s, zi, s, zi);
	int k3 = NODE(b, "MatMulInteger", 10, 1, a, bw, zu, zi);
	int k4 = NODE(b, "QLinearMatMul", 10, 1, a, s, zu, bw, s, zi, s, zu);
	int k5 = NODE(b, "QuantizeLinear", 13, 1, x, s, zi), k6 = NODE(b, "QuantizeLinear", 13, 1, x, s);
	int k7 = NODE(b, "DequantizeLinear", 13, 1, xu, s, zu);

	attr_i(b, k1, "group", 2);
	attr_is(b, k1, "pads", 4, D(1, 1, 1, 1));
	attr_i(b, k2, "group", 2);
	attr_is(b, k2, "strides", 2, D(2, 2));
	run_ok(b);
	CHECK(b, out(b, k0, 0), U8, 4, N, 8, 20, 20);
	CHECK(b, out(b, k0, 1), F, 0, 0);
	CHECK(b, out(b, k0, 2), U8, 0, 0);
	CHECK(b, out(b, k1, 0), I32, 4, N, 16, 20, 20);
	CHECK(b, out(b, k2, 0), I8, 4, N, 16, 9, 9);
	CHECK(b, out(b, k3, 0), I32, 3, 2, 3, 5);
	CHECK(b, out(b, k4, 0), U8, 3, 2, 3, 5);
	CHECK(b, out(b, k5, 0), I8, 4, N, 8, 20, 20);
	CHECK(b, out(b, k6, 0), U8, 4, N, 8, 20, 20);
	CHECK(b, out(b, k7, 0), F, 4, N, 8, 20, 20);
	b->v[w].dims[1] = 3;
	expect_error(b, k1, "ConvInteger_1", "input has 8 channels, weight expects 6");
}

static void test_pool(void **state)
{
	tb *b = *state;
	int64_t N = sym(b, "N");
	int x = input(b, F, 4, D(N, 64, 112, 112)), y = input(b, F, 4, D(1, 1, 5, 5));
	int k0 = NODE(b, "MaxPool", 12, 2, x), k1 = NODE(b, "AveragePool", 11, 1, y);
	int k2 = NODE(b, "AveragePool", 11, 1, y), k3 = NODE(b, "MaxPool", 12, 1, y);
	int g = NODE(b, "GlobalAveragePool", 1, 1, x), g2 = NODE(b, "GlobalMaxPool", 1, 1, x);

	attr_is(b, k0, "kernel_shape", 2, D(3, 3));
	attr_is(b, k0, "strides", 2, D(2, 2));
	attr_is(b, k0, "pads", 4, D(1, 1, 1, 1));
	attr_is(b, k1, "kernel_shape", 2, D(2, 2));
	attr_is(b, k1, "strides", 2, D(2, 2));
	attr_is(b, k2, "kernel_shape", 2, D(2, 2));
	attr_is(b, k2, "strides", 2, D(2, 2));
	attr_i(b, k2, "ceil_mode", 1);
	/* ceil mode drops a window that would start in the end padding */
	attr_is(b, k3, "kernel_shape", 2, D(2, 2));
	attr_is(b, k3, "strides", 2, D(2, 2));
	attr_is(b, k3, "pads", 4, D(1, 1, 1, 1));
	attr_i(b, k3, "ceil_mode", 1);
	run_ok(b);
	CHECK(b, out(b, k0, 0), F, 4, N, 64, 56, 56);
	CHECK(b, out(b, k0, 1), I64, 4, N, 64, 56, 56);
	CHECK(b, out(b, k1, 0), F, 4, 1, 1, 2, 2);
	CHECK(b, out(b, k2, 0), F, 4, 1, 1, 3, 3);
	CHECK(b, out(b, k3, 0), F, 4, 1, 1, 3, 3);
	CHECK(b, out(b, g, 0), F, 4, N, 64, 1, 1);
	CHECK(b, out(b, g2, 0), F, 4, N, 64, 1, 1);
	b->p[k1].n_attribute = 0;
	expect_error(b, k1, "pool1", "kernel_shape is required");
}

/* ------------------------------------------------------------- reshape */

static void test_reshape(void **state)
{
	tb *b = *state;
	int64_t B = sym(b, "B"), S = sym(b, "S");
	int x = input(b, F, 3, D(2, 3, 4)), h = input(b, F, 3, D(B, S, 768));
	int z = input(b, F, 2, D(0, 3));
	int k0 = NODE(b, "Reshape", 14, 1, x, const_i64(b, 2, D(0, -1)));
	int k1 = NODE(b, "Reshape", 14, 1, h, const_i64(b, 4, D(0, 0, 12, 64)));
	int k2 = NODE(b, "Reshape", 14, 1, h, const_i64(b, 4, D(0, 0, -1, 64)));
	int k3 = NODE(b, "Reshape", 14, 1, h, const_i64(b, 2, D(-1, 768)));
	int k4 = NODE(b, "Reshape", 14, 1, z, const_i64(b, 2, D(0, 4)));
	int k5 = NODE(b, "Reshape", 14, 1, x, input(b, I64, 1, D(3)));
	int k6 = NODE(b, "Reshape", 14, 1, h, const_i64(b, 3, D(0, -1, 64)));
	int k8 = NODE(b, "Reshape", 14, 1, input(b, F, 2, D(B, 768)),
		      const_i64(b, 3, D(-1, 12, 64)));
	int k7;

	attr_i(b, k4, "allowzero", 1);
	run_ok(b);
	CHECK(b, out(b, k0, 0), F, 2, 2, 12);
	CHECK(b, out(b, k1, 0), F, 4, B, S, 12, 64);
	CHECK(b, out(b, k2, 0), F, 4, B, S, 12, 64);
	CHECK(b, out(b, k3, 0), F, 2, FRESH, 768);
	CHECK(b, out(b, k4, 0), F, 2, 0, 4);
	CHECK(b, out(b, k5, 0), F, 3, FRESH, FRESH, FRESH);
	CHECK(b, out(b, k6, 0), F, 3, B, FRESH, 64);
	CHECK(b, out(b, k8, 0), F, 3, B, 12, 64);
	k7 = NODE(b, "Reshape", 14, 1, x, const_i64(b, 2, D(0, 4)));
	expect_error(b, k7, "Reshape_4", "cannot reshape [2,3,4] (24 elements) to 8 elements");
}

static void test_reshape_errors(void **state)
{
	tb *b = *state;
	int x = input(b, F, 2, D(2, 3));
	int k0 = NODE(b, "Reshape", 14, 1, x, const_i64(b, 2, D(-1, 4)));

	expect_error(b, k0, "r0", "into a multiple of 4");
	memset(b->bytes[b->n[k0].in[1]] + 8, 0xff, 8);   /* second dim -> -1 */
	expect_error(b, k0, "r0", "one -1 at most");
	memset(b->bytes[b->n[k0].in[1]] + 8, 0, 8);      /* [-1, 0]: copies dim 1 */
	run_ok(b);
	CHECK(b, out(b, k0, 0), F, 2, 2, 3);
}

static void test_transpose_flatten(void **state)
{
	tb *b = *state;
	int64_t B = sym(b, "B");
	int x = input(b, F, 3, D(B, 3, 4));
	int t0 = NODE(b, "Transpose", 13, 1, x), t1 = NODE(b, "Transpose", 13, 1, x);
	int f0 = NODE(b, "Flatten", 13, 1, x), f1 = NODE(b, "Flatten", 13, 1, x);
	int f2 = NODE(b, "Flatten", 13, 1, x);

	attr_is(b, t1, "perm", 3, D(0, 2, 1));
	attr_i(b, f1, "axis", -1);
	attr_i(b, f2, "axis", 0);
	run_ok(b);
	CHECK(b, out(b, t0, 0), F, 3, 4, 3, B);
	CHECK(b, out(b, t1, 0), F, 3, B, 4, 3);
	CHECK(b, out(b, f0, 0), F, 2, B, 12);
	CHECK(b, out(b, f1, 0), F, 2, FRESH, 4);
	CHECK(b, out(b, f2, 0), F, 2, 1, FRESH);
	b->a[t1][0].ints = (int64_t *)D(0, 1, 1);
	expect_error(b, t1, "tr", "not a permutation");
	b->a[t1][0].n_ints = 2;
	expect_error(b, t1, "tr", "perm has 2 entries for rank 3");
}

static void test_concat(void **state)
{
	tb *b = *state;
	int64_t B = sym(b, "B");
	int x = input(b, F, 2, D(B, 3)), y = input(b, F, 2, D(2, 5));
	int z = input(b, F, -1, NULL);
	int k0 = NODE(b, "Concat", 13, 1, x, y), k1 = NODE(b, "Concat", 13, 1, x, x, z);

	attr_i(b, k0, "axis", 1);
	attr_i(b, k1, "axis", -1);
	run_ok(b);
	CHECK(b, out(b, k0, 0), F, 2, 2, 8);
	CHECK(b, out(b, k1, 0), F, 2, B, FRESH);
	b->v[x].dims[0] = 4;
	expect_error(b, k0, "Concat_1", "dim 0 differs: [4,3] vs [2,5]");
	b->a[k0][0].i = 2;
	expect_error(b, k0, "Concat_1", "axis 2 out of range for rank 2");
}

static void test_split(void **state)
{
	tb *b = *state;
	int64_t B = sym(b, "B");
	int x = input(b, F, 2, D(B, 10));
	int k0 = NODE(b, "Split", 11, 2, x), k1 = NODE(b, "Split", 13, 3, x,
							 const_i64(b, 3, D(2, 3, 5)));
	int k2 = NODE(b, "Split", 18, 3, x), k3 = NODE(b, "Split", 13, 2, x);

	attr_i(b, k0, "axis", 1);
	attr_is(b, k0, "split", 2, D(4, 6));
	attr_i(b, k1, "axis", -1);
	attr_i(b, k2, "axis", 1);
	attr_i(b, k2, "num_outputs", 3);
	run_ok(b);
	CHECK(b, out(b, k0, 0), F, 2, B, 4);
	CHECK(b, out(b, k0, 1), F, 2, B, 6);
	CHECK(b, out(b, k1, 2), F, 2, B, 5);
	CHECK(b, out(b, k2, 0), F, 2, B, 4);
	CHECK(b, out(b, k2, 2), F, 2, B, 2);
	CHECK(b, out(b, k3, 1), F, 2, FRESH, 10);
	b->a[k0][1].ints = (int64_t *)D(4, 7);
	expect_error(b, k0, "sp", "split sizes add up to 11, dim is 10");
}

/* ------------------------------------------------------ gather, slice */

static void test_gather(void **state)
{
	tb *b = *state;
	int64_t B = sym(b, "B");
	int x = input(b, F, 3, D(B, 6, 7)), ix = input(b, I64, 2, D(2, 3));
	int k0 = NODE(b, "Gather", 13, 1, x, ix);
	int k1 = NODE(b, "Gather", 13, 1, x, init_ints(b, I64, 0, NULL, D(-1), 1));
	int k2 = NODE(b, "Gather", 13, 1, x, init_ints(b, I64, 1, D(1), D(9), 1));

	attr_i(b, k0, "axis", 1);
	attr_i(b, k1, "axis", 2);
	attr_i(b, k2, "axis", 1);
	b->p[k2].n_attribute = 0;
	run_ok(b);
	CHECK(b, out(b, k0, 0), F, 4, B, 2, 3, 7);
	CHECK(b, out(b, k1, 0), F, 2, B, 6);
	CHECK(b, out(b, k2, 0), F, 3, 1, 6, 7);
	b->p[k2].n_attribute = 1;
	expect_error(b, k2, "g2", "index 9 out of range for dim 6");
	b->v[ix].elem_type = F;
	expect_error(b, k0, "g0", "indices must be int32 or int64");
}

static void test_slice(void **state)
{
	tb *b = *state;
	int64_t B = sym(b, "B");
	int x = input(b, F, 3, D(B, 10, 8));
	int k0 = NODE(b, "Slice", 9, 1, x);
	int k1 = NODE(b, "Slice", 13, 1, x, const_i64(b, 2, D(0, -1)),
		      const_i64(b, 2, D(INT64_MAX, -100)), const_i64(b, 2, D(0, 1)),
		      const_i64(b, 2, D(1, -3)));
	int k2 = NODE(b, "Slice", 13, 1, x, const_i64(b, 1, D(1)), const_i64(b, 1, D(7)),
		      const_i64(b, 1, D(-1)), const_i64(b, 1, D(4)));
	int k3 = NODE(b, "Slice", 13, 1, x, input(b, I64, 1, D(1)), const_i64(b, 1, D(7)));

	attr_is(b, k0, "starts", 2, D(2, -3));
	attr_is(b, k0, "ends", 2, D(100, -1));
	attr_is(b, k0, "axes", 2, D(1, 2));
	run_ok(b);
	CHECK(b, out(b, k0, 0), F, 3, B, 8, 2);
	CHECK(b, out(b, k1, 0), F, 3, B, 4, 8);
	CHECK(b, out(b, k2, 0), F, 3, B, 10, 2);
	CHECK(b, out(b, k3, 0), F, 3, FRESH, FRESH, FRESH);
	b->bytes[b->n[k2].in[4]][0] = 0;
	expect_error(b, k2, "Slice_2", "step is 0");
	b->a[k0][2].ints = (int64_t *)D(1, 1);
	expect_error(b, k0, "Slice_0", "axis 1 repeated");
}

/* ------------------------------------------- squeeze, unsqueeze, misc */

static void test_squeeze_unsqueeze(void **state)
{
	tb *b = *state;
	int64_t B = sym(b, "B");
	int x = input(b, F, 3, D(B, 1, 4)), y = input(b, F, 3, D(2, 1, 4));
	int u0 = NODE(b, "Unsqueeze", 11, 1, x), u1 = NODE(b, "Unsqueeze", 13, 1, x,
							    const_i64(b, 2, D(0, -1)));
	int s0 = NODE(b, "Squeeze", 11, 1, x), s1 = NODE(b, "Squeeze", 13, 1, x,
							 const_i64(b, 1, D(1)));
	int s2 = NODE(b, "Squeeze", 13, 1, y), s3 = NODE(b, "Squeeze", 13, 1, x);

	attr_is(b, u0, "axes", 1, D(1));
	attr_is(b, s0, "axes", 1, D(-2));
	run_ok(b);
	CHECK(b, out(b, u0, 0), F, 4, B, 1, 1, 4);
	CHECK(b, out(b, u1, 0), F, 5, 1, B, 1, 4, 1);
	CHECK(b, out(b, s0, 0), F, 2, B, 4);
	CHECK(b, out(b, s1, 0), F, 2, B, 4);
	CHECK(b, out(b, s2, 0), F, 2, 2, 4);
	assert_int_equal(b->t[out(b, s3, 0)].rank, -1);   /* is B 1? unknown */
	b->a[s0][0].ints = (int64_t *)D(2);
	expect_error(b, s0, "sq", "cannot squeeze dim 2 of size 4");
	b->a[s0][0].ints = (int64_t *)D(1);
	b->a[u0][0].n_ints = 0;
	b->a[u0][0].ints = NULL;
	b->p[u0].n_attribute = 0;
	expect_error(b, u0, "unsq", "axes are required");
}

static void test_reduce(void **state)
{
	tb *b = *state;
	int64_t B = sym(b, "B");
	int x = input(b, F, 3, D(B, 7, 16));
	int r0 = NODE(b, "ReduceMean", 13, 1, x), r1 = NODE(b, "ReduceMean", 18, 1, x,
							    const_i64(b, 1, D(-1)));
	int r2 = NODE(b, "ReduceSum", 13, 1, x, const_i64(b, 2, D(0, 2)));
	int r3 = NODE(b, "ReduceMax", 13, 1, x), r4 = NODE(b, "ReduceSum", 13, 1, x);
	int r5 = NODE(b, "ReduceMin", 18, 1, x, input(b, I64, 1, D(1)));
	int a0 = NODE(b, "ArgMax", 13, 1, x);

	attr_is(b, r0, "axes", 1, D(1));
	attr_i(b, r1, "keepdims", 0);
	attr_i(b, r2, "keepdims", 0);
	attr_i(b, r4, "noop_with_empty_axes", 1);
	attr_i(b, a0, "axis", 2);
	attr_i(b, a0, "keepdims", 0);
	run_ok(b);
	CHECK(b, out(b, r0, 0), F, 3, B, 1, 16);
	CHECK(b, out(b, r1, 0), F, 2, B, 7);
	CHECK(b, out(b, r2, 0), F, 1, 7);
	CHECK(b, out(b, r3, 0), F, 3, 1, 1, 1);
	CHECK(b, out(b, r4, 0), F, 3, B, 7, 16);
	CHECK(b, out(b, r5, 0), F, 3, FRESH, FRESH, FRESH);
	CHECK(b, out(b, a0, 0), I64, 2, B, 7);
	b->a[r0][0].ints = (int64_t *)D(3);
	expect_error(b, r0, "ReduceMean_0", "axis 3 out of range");
}

static void test_tensor_misc(void **state)
{
	tb *b = *state;
	int64_t B = sym(b, "B");
	int x = input(b, F, 2, D(B, 3));
	int e0 = NODE(b, "Expand", 13, 1, x, const_i64(b, 3, D(2, 1, 3)));
	int t0 = NODE(b, "Tile", 13, 1, x, const_i64(b, 2, D(1, 4)));
	int p0 = NODE(b, "Pad", 13, 1, x, const_i64(b, 4, D(0, 1, 0, 2)));
	int p1 = NODE(b, "Pad", 2, 1, x);
	int c0 = NODE(b, "Cast", 13, 1, x), s0 = NODE(b, "Shape", 15, 1, x);
	int nz = NODE(b, "NonZero", 13, 1, x), tk = NODE(b, "TopK", 11, 2, x,
							 const_i64(b, 1, D(2)));
	int ge = NODE(b, "GatherElements", 13, 1, x, input(b, I64, 2, D(B, 2)));

	attr_is(b, p1, "pads", 4, D(1, 0, 1, 0));
	attr_i(b, c0, "to", I32);
	attr_i(b, s0, "start", 1);
	run_ok(b);
	CHECK(b, out(b, e0, 0), F, 3, 2, B, 3);
	CHECK(b, out(b, t0, 0), F, 2, B, 12);
	CHECK(b, out(b, p0, 0), F, 2, B, 6);
	CHECK(b, out(b, p1, 0), F, 2, FRESH, 3);
	CHECK(b, out(b, c0, 0), I32, 2, B, 3);
	CHECK(b, out(b, s0, 0), I64, 1, 1);
	check_data(b, out(b, s0, 0), 1, D(3));
	CHECK(b, out(b, nz, 0), I64, 2, 2, FRESH);
	CHECK(b, out(b, tk, 0), F, 2, B, 2);
	CHECK(b, out(b, tk, 1), I64, 2, B, 2);
	CHECK(b, out(b, ge, 0), F, 2, B, 2);
	b->v[x].dims[1] = 4;
	expect_error(b, e0, "ex", "cannot expand [B,4]");
	b->v[x].dims[1] = 3;
	b->a[p1][0].n_ints = 3;
	expect_error(b, p1, "pad", "pads has 3 values for 2 axes");
}

/* ------------------------------------------------------ known data */

/* The shape arithmetic PyTorch exports for x.view(B, S, 12, 64):
 * Shape -> Gather -> Unsqueeze -> Concat -> Reshape.  Symbolic, the
 * Reshape gets rank 4; with concrete inputs it resolves statically. */
static void test_pytorch_chain(void **state)
{
	tb *b = *state;
	int64_t B = sym(b, "batch"), S = sym(b, "seq");
	int x = input(b, F, 3, D(B, S, 768));
	int sh = NODE(b, "Shape", 15, 1, x);
	int g0 = NODE(b, "Gather", 13, 1, out(b, sh, 0), init_ints(b, I64, 0, NULL, D(0), 1));
	int g1 = NODE(b, "Gather", 13, 1, out(b, sh, 0), init_ints(b, I64, 0, NULL, D(1), 1));
	int ax = const_i64(b, 1, D(0));
	int u0 = NODE(b, "Unsqueeze", 13, 1, out(b, g0, 0), ax);
	int u1 = NODE(b, "Unsqueeze", 13, 1, out(b, g1, 0), ax);
	int tail = NODE(b, "Constant", 13, 1);
	int cat = NODE(b, "Concat", 13, 1, out(b, u0, 0), out(b, u1, 0), out(b, tail, 0));
	int rs = NODE(b, "Reshape", 14, 1, x, out(b, cat, 0));
	int tr = NODE(b, "Transpose", 13, 1, out(b, rs, 0));
	const graph_tinfo *r = &b->t[out(b, rs, 0)];

	attr_is(b, tail, "value_ints", 2, D(12, 64));
	attr_i(b, cat, "axis", 0);
	attr_is(b, tr, "perm", 4, D(0, 2, 1, 3));
	run_ok(b);
	CHECK(b, out(b, cat, 0), I64, 1, 4);
	assert_false(b->t[out(b, cat, 0)].has_data);
	CHECK(b, out(b, rs, 0), F, 4, FRESH, FRESH, FRESH, FRESH);
	assert_false(graph_tinfo_static(r));
	assert_int_equal(graph_tinfo_numel(r), -1);

	if (run_concrete(b, x, 3, D(2, 7, 768)) != 0) {
		print_error("%s\n", b->err);
		fail();
	}
	check_data(b, out(b, sh, 0), 3, D(2, 7, 768));
	check_data(b, out(b, cat, 0), 4, D(2, 7, 12, 64));
	CHECK(b, out(b, rs, 0), F, 4, 2, 7, 12, 64);
	CHECK(b, out(b, tr, 0), F, 4, 2, 12, 7, 64);
	assert_true(graph_tinfo_static(r));
	assert_int_equal(graph_tinfo_numel(r), 2 * 7 * 768);
}

static void test_data_arith(void **state)
{
	tb *b = *state;
	int a = const_i64(b, 3, D(-7, 7, 6)), two = init_ints(b, I64, 0, NULL, D(2), 1);
	int dv = NODE(b, "Div", 14, 1, a, two), ml = NODE(b, "Mul", 14, 1, a, two);
	int ad = NODE(b, "Add", 14, 1, a, two), sb = NODE(b, "Sub", 14, 1, two, a);
	int eq = NODE(b, "Equal", 13, 1, a, init_ints(b, I64, 1, D(3), D(-7, 0, 6), 3));
	int wh = NODE(b, "Where", 16, 1, out(b, eq, 0), two, a);
	int ng = NODE(b, "Neg", 13, 1, a), mx = NODE(b, "Max", 13, 1, a, two);
	int rp = NODE(b, "ReduceProd", 13, 1, a), rsm = NODE(b, "ReduceSum", 13, 1, a);
	int cf = NODE(b, "Constant", 13, 1), cfi = NODE(b, "Cast", 13, 1, out(b, cf, 0));
	int ch = NODE(b, "Constant", 13, 1), dz = NODE(b, "Div", 14, 1, a, out(b, cfi, 0));
	int i32 = init_ints(b, I32, 1, D(2), D(-1, 5), 2);
	int c64 = NODE(b, "Cast", 13, 1, i32);

	attr_is(b, cf, "value_floats", 0, NULL);
	b->a[cf][0].type = AT(FLOATS);
	b->a[cf][0].n_floats = 3;
	b->a[cf][0].floats = (float[]){ 3.0f, 0.0f, -2.0f };
	attr_i(b, cfi, "to", I64);
	attr_f(b, ch, "value_float", 0.5f);
	attr_i(b, rp, "keepdims", 0);
	attr_i(b, c64, "to", I64);
	run_ok(b);
	check_data(b, out(b, dv, 0), 3, D(-3, 3, 3));   /* C truncation */
	check_data(b, out(b, ml, 0), 3, D(-14, 14, 12));
	check_data(b, out(b, ad, 0), 3, D(-5, 9, 8));
	check_data(b, out(b, sb, 0), 3, D(9, -5, -4));
	CHECK(b, out(b, eq, 0), BOOL, 1, 3);
	check_data(b, out(b, eq, 0), 3, D(1, 0, 1));
	check_data(b, out(b, wh, 0), 3, D(2, 7, 2));
	check_data(b, out(b, ng, 0), 3, D(7, -7, -6));
	check_data(b, out(b, mx, 0), 3, D(2, 7, 6));
	CHECK(b, out(b, rp, 0), I64, 0, 0);
	check_data(b, out(b, rp, 0), 1, D(-294));
	check_data(b, out(b, rsm, 0), 1, D(6));
	CHECK(b, out(b, cf, 0), F, 1, 3);
	check_data(b, out(b, cfi, 0), 3, D(3, 0, -2));
	CHECK(b, out(b, ch, 0), F, 0, 0);
	assert_false(b->t[out(b, ch, 0)].has_data);     /* 0.5 is not tracked */
	CHECK(b, out(b, dz, 0), I64, 1, 3);
	assert_false(b->t[out(b, dz, 0)].has_data);     /* divide by zero */
	check_data(b, out(b, c64, 0), 2, D(-1, 5));
}

/* Mod (both signs, both fmod) and Transpose of small int64 tensors fold:
 * torchvision's swin_t computes its window padding with them, and without
 * the data every shape after that Pad was unknown at plan time. */
static void test_data_mod_transpose(void **state)
{
	tb *b = *state;
	int a = const_i64(b, 4, D(-7, 7, -7, 7)), d = const_i64(b, 4, D(3, 3, -3, -3));
	int md = NODE(b, "Mod", 13, 1, a, d), fm = NODE(b, "Mod", 13, 1, a, d);
	int z = NODE(b, "Mod", 13, 1, a, init_ints(b, I64, 0, NULL, D(0), 1));
	int m = init_ints(b, I64, 2, D(2, 3), D(1, 2, 3, 4, 5, 6), 6);
	int tr = NODE(b, "Transpose", 13, 1, m), tp = NODE(b, "Transpose", 13, 1, m);

	attr_i(b, fm, "fmod", 1);
	attr_is(b, tp, "perm", 2, D(0, 1));
	run_ok(b);
	check_data(b, out(b, md, 0), 4, D(2, 1, -1, -2));    /* the divisor's sign */
	check_data(b, out(b, fm, 0), 4, D(-1, 1, -1, 1));    /* the dividend's */
	assert_false(b->t[out(b, z, 0)].has_data);          /* modulo zero */
	CHECK(b, out(b, tr, 0), I64, 2, 3, 2);
	check_data(b, out(b, tr, 0), 6, D(1, 4, 2, 5, 3, 6));
	check_data(b, out(b, tp, 0), 6, D(1, 2, 3, 4, 5, 6));
}

/* Resize and Upsample from constant scales (integral: known; 1.5: not)
 * or sizes, and the recurrent ops' three outputs in both layouts: without
 * them every value after an upsampling or an LSTM had no static plan. */
static void test_resize_rnn(void **state)
{
	tb *b = *state;
	int x = input(b, F, 4, D(1, 3, 4, 5));
	int sc = const_f32(b, 4, (const float[]){1.0f, 1.0f, 2.0f, 2.0f});
	int half = const_f32(b, 4, (const float[]){1.0f, 1.0f, 1.5f, 1.5f});
	int rs = NODE(b, "Resize", 13, 1, x, -1, sc), rh = NODE(b, "Resize", 13, 1, x, -1, half);
	int rz = NODE(b, "Resize", 13, 1, x, -1, -1, const_i64(b, 4, D(1, 3, 7, 9)));
	int ra = NODE(b, "Resize", 18, 1, x, -1, -1, const_i64(b, 2, D(6, 2)));
	int up = NODE(b, "Upsample", 9, 1, x, sc), u7 = NODE(b, "Upsample", 7, 1, x);
	int s = input(b, F, 3, D(5, 2, 8)), w = input(b, F, 3, D(1, 64, 8));
	int lstm = NODE(b, "LSTM", 14, 3, s, w, input(b, F, 3, D(1, 64, 16)));
	int sb = input(b, F, 3, D(2, 5, 8)), wg = input(b, F, 3, D(2, 48, 8));
	int gru = NODE(b, "GRU", 14, 2, sb, wg, input(b, F, 3, D(2, 48, 16)));

	attr_is(b, ra, "axes", 2, D(2, -1));
	attr_is(b, u7, "scales", 0, NULL);   /* Upsample 7: floats attribute */
	b->a[u7][0].type = AT(FLOATS);
	b->a[u7][0].n_floats = 4;
	b->a[u7][0].floats = (float[]){ 1.0f, 1.0f, 3.0f, 2.0f };
	attr_i(b, lstm, "hidden_size", 16);
	attr_s(b, gru, "direction", "bidirectional");
	attr_i(b, gru, "layout", 1);
	run_ok(b);
	CHECK(b, out(b, rs, 0), F, 4, 1, 3, 8, 10);
	CHECK(b, out(b, rh, 0), F, 4, FRESH, FRESH, FRESH, FRESH);   /* 1.5: not tracked */
	CHECK(b, out(b, rz, 0), F, 4, 1, 3, 7, 9);
	CHECK(b, out(b, ra, 0), F, 4, 1, 3, 6, 2);
	CHECK(b, out(b, up, 0), F, 4, 1, 3, 8, 10);
	CHECK(b, out(b, u7, 0), F, 4, 1, 3, 12, 10);
	CHECK(b, out(b, lstm, 0), F, 4, 5, 1, 2, 16);
	CHECK(b, out(b, lstm, 1), F, 3, 1, 2, 16);
	CHECK(b, out(b, lstm, 2), F, 3, 1, 2, 16);
	CHECK(b, out(b, gru, 0), F, 4, 2, 5, 2, 16);   /* hidden from W: 48 / 3 */
	CHECK(b, out(b, gru, 1), F, 3, 2, 2, 16);
}

static void test_data_generators(void **state)
{
	tb *b = *state;
	int s = init_ints(b, I64, 0, NULL, D(10), 1), l = init_ints(b, I64, 0, NULL, D(1), 1);
	int d = init_ints(b, I64, 0, NULL, D(-3), 1);
	int rg = NODE(b, "Range", 11, 1, s, l, d);
	int cs = NODE(b, "ConstantOfShape", 9, 1, const_i64(b, 2, D(2, 3)));
	int cs2 = NODE(b, "ConstantOfShape", 9, 1, out(b, rg, 0));
	int sl = NODE(b, "Slice", 13, 1, out(b, rg, 0), const_i64(b, 1, D(-1)),
		      const_i64(b, 1, D(-100)), const_i64(b, 1, D(0)), const_i64(b, 1, D(-2)));
	int ex = NODE(b, "Expand", 13, 1, init_ints(b, I64, 1, D(1), D(5), 1),
		      const_i64(b, 2, D(2, 2)));
	int ct = NODE(b, "Constant", 13, 1), sz = NODE(b, "Size", 13, 1, out(b, ct, 0));
	int rz = NODE(b, "Range", 11, 1, s, l, init_ints(b, I64, 0, NULL, D(0), 1));

	attr_t(b, cs, "value", I64, 1, D(1), 1, D(7));
	attr_t(b, ct, "value", I64, 2, D(2, 2), 4, D(1, 2, 3, 4));
	set_name(b, rz, "range_z");
	assert_int_equal(run(b), -EINVAL);
	assert_non_null(strstr(b->err, "range_z"));
	b->g.n_nodes--;
	run_ok(b);
	CHECK(b, out(b, rg, 0), I64, 1, 3);
	check_data(b, out(b, rg, 0), 3, D(10, 7, 4));
	CHECK(b, out(b, cs, 0), I64, 2, 2, 3);
	check_data(b, out(b, cs, 0), 6, D(7, 7, 7, 7, 7, 7));
	CHECK(b, out(b, cs2, 0), F, 3, 10, 7, 4);
	assert_false(b->t[out(b, cs2, 0)].has_data);     /* 280 elements: too many */
	check_data(b, out(b, sl, 0), 2, D(4, 10));
	check_data(b, out(b, ex, 0), 4, D(5, 5, 5, 5));
	CHECK(b, out(b, ct, 0), I64, 2, 2, 2);
	check_data(b, out(b, ct, 0), 4, D(1, 2, 3, 4));
	check_data(b, out(b, sz, 0), 1, D(4));
}

/* ----------------------------------------------- driver and fallbacks */

/* An op without an inference function takes the declared value_info, with
 * the symbols that the concrete inputs bind substituted. */
static void test_unknown_op_declared(void **state)
{
	tb *b = *state;
	int64_t B = sym(b, "B");
	int x = input(b, F, 2, D(B, 4));
	int k = NODE(b, "FancyOp", 1, 2, x), r = NODE(b, "Relu", 13, 1, out(b, k, 0));
	int ms = NODE(b, "NoSuchContribOp", 1, 1, x);
	graph_value *d = &b->v[out(b, k, 0)];

	b->n[ms].domain = "com.microsoft";
	d->elem_type = F;
	d->rank = 3;
	d->dims[0] = B;
	d->dims[1] = 4;
	d->dims[2] = sym(b, "anon");
	run_ok(b);
	CHECK(b, out(b, k, 0), F, 3, B, 4, -2);
	CHECK(b, out(b, r, 0), F, 3, B, 4, -2);
	CHECK(b, out(b, k, 1), 0, -1, 0);
	CHECK(b, out(b, ms, 0), 0, -1, 0);
	assert_int_equal(run_concrete(b, x, 2, D(8, 4)), 0);
	CHECK(b, out(b, k, 0), F, 3, 8, 4, -2);
	CHECK(b, out(b, r, 0), F, 3, 8, 4, -2);
}

/* Declared dims fill what inference leaves as fresh symbols. */
static void test_declared_refines(void **state)
{
	tb *b = *state;
	int x = input(b, F, 2, D(3, 4)), y = input(b, F, 2, D(5, 4));
	int c = NODE(b, "Concat", 13, 1, x, input(b, F, -1, NULL));
	graph_value *d = &b->v[out(b, c, 0)];

	attr_i(b, c, "axis", 0);
	(void)y;
	d->elem_type = F;
	d->rank = 2;
	d->dims[0] = 9;
	d->dims[1] = 4;
	run_ok(b);
	CHECK(b, out(b, c, 0), F, 2, 9, 4);
}

static void test_seed(void **state)
{
	tb *b = *state;
	int64_t B = sym(b, "B");
	int x = input(b, F, 2, D(B, 3)), u = input(b, F, -1, NULL);
	int i64 = const_i64(b, 2, D(4, -5)), i32 = init_ints(b, I32, 1, D(1), D(-9), 1);
	int ext = const_i64(b, 1, D(1)), big = init_ints(b, I64, 1, D(65), D(0), 0);
	int act = NODE(b, "Relu", 13, 1, x);

	b->v[ext].init.external = 1;
	b->v[ext].init.data = NULL;
	b->g.values = b->v;
	memset(b->t, 0x5a, sizeof(b->t));
	shape_seed(&b->g, b->t);
	CHECK(b, x, F, 2, B, 3);
	CHECK(b, u, F, -1, 0);
	check_data(b, i64, 2, D(4, -5));
	check_data(b, i32, 1, D(-9));
	assert_false(b->t[ext].has_data);
	CHECK(b, big, I64, 1, 65);
	assert_false(b->t[big].has_data);
	CHECK(b, out(b, act, 0), 0, -1, 0);
	assert_false(graph_tinfo_static(&b->t[x]));
	assert_true(graph_tinfo_static(&b->t[big]));
	assert_int_equal(graph_tinfo_numel(&b->t[big]), 65);
	assert_int_equal(graph_tinfo_numel(&b->t[u]), -1);
}

/* Fresh symbols start at *next_sym (the next id to hand out, as plan.c and
 * session.c pass it) and never reuse one of the model's symbols. */
static void test_fresh_symbols(void **state)
{
	tb *b = *state;
	int64_t B = sym(b, "B"), C = sym(b, "C");
	int k = NODE(b, "Add", 13, 1, input(b, F, 1, D(B)), input(b, F, 1, D(C)));
	int k2 = NODE(b, "Add", 13, 1, input(b, F, 1, D(B)), input(b, F, 1, D(C)));

	b->g.values = b->v;
	b->g.nodes = b->n;
	b->next_sym = -10;
	assert_int_equal(shape_infer(&b->g, b->t, 0, &b->next_sym, b->err, sizeof(b->err)), 0);
	assert_int_equal(b->t[out(b, k, 0)].dims[0], -10);
	assert_int_equal(b->t[out(b, k2, 0)].dims[0], -11);
	assert_int_equal(b->next_sym, -12);
	b->next_sym = 0;
	assert_int_equal(shape_infer(&b->g, b->t, 0, &b->next_sym, NULL, 0), 0);
	assert_int_equal(b->t[out(b, k, 0)].dims[0], -3);
}

/* One node of `op` whose inputs are all `kind`: 0 unknown type and rank,
 * 1 float scalars, 2 int64 [2] with data, 3 float [B,3,1,5], 4 int64 [3]
 * holding negative and huge values, 5 float of the maximum rank; 6 and 7
 * pair a float [B,3,8,8] with int64 data or a conv weight.  Inference may
 * fail on nonsense, but only with a message naming the node. */
static void fuzz_one(tb *b, const char *op, int kind)
{
	int64_t B;
	int x, y, k, rc;

	memset(b, 0, sizeof(*b));
	B = sym(b, "B");
	if (kind == 0)
		x = input(b, 0, -1, NULL);
	else if (kind == 1)
		x = input(b, F, 0, NULL);
	else if (kind == 2)
		x = const_i64(b, 2, D(1, 2));
	else if (kind == 3)
		x = input(b, F, 4, D(B, 3, 1, 5));
	else if (kind == 4)
		x = const_i64(b, 3, D(-1, INT64_MAX, INT64_MIN));
	else if (kind == 5)
		x = input(b, F, GRAPH_MAX_RANK, D(1, 2, 1, 2, 1, 2, 1, 2, 1, 2, 1, 2, 1, 2, 1, B));
	else
		x = input(b, F, 4, D(B, 3, 8, 8));
	y = kind == 6 ? const_i64(b, 2, D(1, -1)) : kind == 7 ? input(b, F, 4, D(4, 3, 3, 3)) : x;
	k = NODE(b, op, 18, 3, x, y, y, y, y);
	set_name(b, k, "fuzzed");
	rc = run(b);
	if (rc != 0 && (rc != -EINVAL || !strstr(b->err, "'fuzzed'"))) {
		print_error("%s kind %d: rc %d, %s\n", op, kind, rc, b->err);
		fail();
	}
	if (kind == 0 && rc != 0) {
		print_error("%s with unknown inputs: %s\n", op, b->err);
		fail();
	}
}

/* Every op in the table, with unknown or odd inputs: no crash, no
 * out-of-bounds access (the ASan build runs this too). */
static void test_fuzz_ops(void **state)
{
	static const char *const ops[] = { "Add", "Sub", "Mul", "Div", "Mod", "Pow",
		"Max", "Min", "Sum", "Mean", "And", "Or", "Xor", "BitShift", "PRelu",
		"Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "Where",
		"Identity", "Neg", "Abs", "Not", "Relu", "IsNaN", "Softmax", "Dropout",
		"BatchNormalization", "LayerNormalization", "MatMul", "Gemm", "Conv",
		"ConvTranspose", "GlobalAveragePool", "Reshape", "Flatten", "Transpose",
		"Concat", "Split", "Gather", "GatherElements", "Slice", "Shape", "Size",
		"Squeeze", "Unsqueeze", "Expand", "Tile", "Pad", "ConstantOfShape", "Range",
		"Cast", "CastLike", "NonZero", "TopK", "ReduceSum", "ReduceMean",
		"ReduceProd", "ArgMax", "MaxPool", "Constant" };
	tb *b = *state;

	for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++)
		for (int kind = 0; kind < 8; kind++)
			if (kind || (strcmp(ops[i], "MaxPool") && strcmp(ops[i], "Constant") &&
				     strcmp(ops[i], "Unsqueeze") && strcmp(ops[i], "Cast")))
				fuzz_one(b, ops[i], kind);
}

/* Ops that grow the rank refuse to pass GRAPH_MAX_RANK. */
static void test_rank_limit(void **state)
{
	tb *b = *state;
	int x = input(b, F, GRAPH_MAX_RANK, D(1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1));
	int u = NODE(b, "Unsqueeze", 13, 1, x, const_i64(b, 1, D(0)));
	int g, c;

	expect_error(b, u, "unsq", "exceeds 16");
	b->g.n_nodes = 0;
	b->g.n_values = 1;
	g = NODE(b, "Gather", 13, 1, x, input(b, I64, 2, D(1, 1)));
	expect_error(b, g, "gath", "exceeds 16");
	b->g.n_nodes = 0;
	c = NODE(b, "Constant", 13, 1);
	attr_t(b, c, "value", F, 17, D(1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1),
	       0, NULL);
	expect_error(b, c, "const", "exceeds 16");
}

/* Constant tensors in each encoding protobuf allows: raw bytes, typed
 * fields; floats keep data only while integral. */
static void test_constant_tensors(void **state)
{
	tb *b = *state;
	static const uint8_t raw_i32[] = { 0xfe, 0xff, 0xff, 0xff, 3, 0, 0, 0 };
	static const uint8_t raw_f[] = { 0, 0, 0x40, 0x40, 0, 0, 0, 0x3f };  /* 3.0, 0.5 */
	int k0 = NODE(b, "Constant", 13, 1), k1 = NODE(b, "Constant", 13, 1);
	int k2 = NODE(b, "Constant", 13, 1), k3 = NODE(b, "Constant", 13, 1);
	int k4 = NODE(b, "ConstantOfShape", 9, 1, input(b, I64, 1, D(3)));
	int k5 = NODE(b, "Constant", 13, 1), sq = NODE(b, "Squeeze", 13, 1, out(b, k0, 0));
	Onnx__TensorProto *t;

	attr_t(b, k0, "value", I32, 2, D(1, 2), 0, NULL);
	t = &b->tp[k0];
	t->has_raw_data = 1;
	t->raw_data.data = (uint8_t *)raw_i32;
	t->raw_data.len = sizeof(raw_i32);
	attr_t(b, k1, "value", F, 1, D(2), 0, NULL);
	t = &b->tp[k1];
	t->has_raw_data = 1;
	t->raw_data.data = (uint8_t *)raw_f;
	t->raw_data.len = sizeof(raw_f);
	attr_t(b, k2, "value", BOOL, 1, D(2), 0, NULL);
	b->tp[k2].n_int32_data = 2;
	b->tp[k2].int32_data = (int32_t[]){ 1, 0 };
	attr_t(b, k3, "value", F, 1, D(2), 0, NULL);
	b->tp[k3].n_float_data = 2;
	b->tp[k3].float_data = (float[]){ -4.0f, 8.0f };
	attr_t(b, k4, "value", I32, 1, D(1), 0, NULL);
	b->tp[k4].n_int32_data = 1;
	b->tp[k4].int32_data = (int32_t[]){ 5 };
	attr(b, k5, "value_strings", AT(STRINGS))->n_strings = 3;
	run_ok(b);
	CHECK(b, out(b, k0, 0), I32, 2, 1, 2);
	check_data(b, out(b, k0, 0), 2, D(-2, 3));
	check_data(b, out(b, sq, 0), 2, D(-2, 3));
	CHECK(b, out(b, k1, 0), F, 1, 2);
	assert_false(b->t[out(b, k1, 0)].has_data);
	check_data(b, out(b, k2, 0), 2, D(1, 0));
	check_data(b, out(b, k3, 0), 2, D(-4, 8));
	CHECK(b, out(b, k4, 0), I32, 3, FRESH, FRESH, FRESH);
	CHECK(b, out(b, k5, 0), ONNX__TENSOR_PROTO__DATA_TYPE__STRING, 1, 3);
}

/* Definite inconsistencies each fail with a message naming the node. */
static void test_more_errors(void **state)
{
	tb *b = *state;
	int x = input(b, F, 2, D(2, 3)), y = input(b, F, 3, D(2, 3, 1));
	int cv = input(b, F, 4, D(1, 3, 8, 8)), w = input(b, F, 4, D(4, 3, 3, 3));
	struct { const char *op; int64_t opset; int in[4], nin; const char *msg; } c[] = {
		{ "Concat", 13, { x, y }, 2, "inputs have ranks 2 and 3" },
		{ "Reshape", 14, { x, const_i64(b, 3, D(2, 3, 0)) }, 2, "copies a dim the input lacks" },
		{ "Slice", 13, { x, const_i64(b, 1, D(0)), const_i64(b, 2, D(1, 1)) }, 3,
		  "differ in length" },
		{ "Tile", 13, { x, const_i64(b, 2, D(1, -1)) }, 2, "repeats[1] = -1 is negative" },
		{ "Tile", 13, { x, const_i64(b, 1, D(1)) }, 2, "repeats has 1 values" },
		{ "Pad", 13, { x, const_i64(b, 4, D(0, -2, 0, -2)) }, 2, "makes dim 1 negative" },
		{ "Split", 13, { y }, 1, "cannot split dim 2 into 3 parts" },
		{ "Conv", 11, { cv, input(b, F, 3, D(4, 3, 3)) }, 2, "does not match 2 spatial dims" },
		{ "Conv", 11, { input(b, F, -1, NULL), input(b, F, 2, D(4, 3)) }, 2,
		  "weight rank 2: expected N, C and spatial dims" },
		{ "Conv", 11, { cv, input(b, F, 4, D(4, 3, 0, 3)) }, 2, "kernel dim 0 is 0" },
		{ "Range", 11, { x, input(b, I64, 0, NULL), x }, 3, "float and int64" },
		{ "Expand", 13, { x, const_i64(b, 17, D(1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
							1, 1, 1)) }, 2, "shape has 17 dims" },
		{ "MatMul", 13, { x, input(b, F, 0, NULL) }, 2, "cannot be scalars" },
		{ "MatMul", 13, { input(b, F, 3, D(2, 4, 3)), input(b, F, 3, D(3, 3, 5)) }, 2,
		  "cannot broadcast batch dims" },
		{ "TopK", 1, { input(b, F, 2, D(2, 3)) }, 1, "k = 5 exceeds dim 3" },
	};
	int n0 = (int)b->g.n_values;

	for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		int k;

		b->g.n_nodes = 0;
		b->g.n_values = (size_t)n0;
		k = node(b, c[i].op, c[i].opset, c[i].nin, c[i].in, c[i].op[0] == 'S' ? 3 : 1);
		if (!strcmp(c[i].op, "TopK"))
			attr_i(b, k, "k", 5);
		expect_error(b, k, c[i].op, c[i].msg);
	}
	b->g.n_nodes = 0;
	attr_i(b, NODE(b, "Conv", 11, 1, cv, w), "group", 0);
	expect_error(b, 0, "conv_g", "group 0 is invalid");
	b->p[0].n_attribute = 0;
	attr_is(b, 0, "strides", 1, D(1));
	expect_error(b, 0, "conv_s", "strides has 1 values, expected 2");
	b->p[0].n_attribute = 0;
	attr_is(b, 0, "pads", 4, D(0, -1, 0, 0));
	expect_error(b, 0, "conv_p", "pads[1] = -1 is invalid");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
		T(test_broadcast), T(test_broadcast_errors), T(test_unary_family),
		T(test_layernorm), T(test_matmul), T(test_gemm), T(test_conv),
		T(test_conv_transpose), T(test_quantized), T(test_pool), T(test_reshape),
		T(test_reshape_errors), T(test_transpose_flatten), T(test_concat),
		T(test_split), T(test_gather), T(test_slice), T(test_squeeze_unsqueeze),
		T(test_reduce), T(test_tensor_misc), T(test_pytorch_chain),
		T(test_data_arith), T(test_data_mod_transpose), T(test_resize_rnn), T(test_data_generators), T(test_unknown_op_declared),
		T(test_declared_refines), T(test_seed), T(test_fresh_symbols),
		T(test_fuzz_ops), T(test_rank_limit),
		T(test_constant_tensors), T(test_more_errors),
#undef T
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
