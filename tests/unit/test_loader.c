/*
 * Unit tests for the model loader (core/loader.c, core/graph.c).  Models are
 * built in C with the protobuf-c structs, packed into a fresh temporary
 * directory and loaded back.  Most tests drive an error branch: a malformed
 * model or hostile external-data reference must fail with a message naming
 * the culprit, never crash.
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "external_path.h"
#include "graph.h"
#include "loader.h"

#define DT(x) ONNX__TENSOR_PROTO__DATA_TYPE__##x
#define MAXN 16

/* ---- allocation arena: everything a test model uses, freed per test ---- */

static void **allocs;
static size_t n_allocs, cap_allocs;

static void *talloc(size_t n)
{
	void *p = calloc(1, n ? n : 1);

	assert_non_null(p);
	if (n_allocs == cap_allocs) {
		cap_allocs = cap_allocs ? cap_allocs * 2 : 256;
		allocs = realloc(allocs, cap_allocs * sizeof(*allocs));
		assert_non_null(allocs);
	}
	allocs[n_allocs++] = p;
	return p;
}

static char *tstr(const char *s)
{
	char *p = talloc(strlen(s) + 1);

	return strcpy(p, s);
}

/* "a,b,,c" -> {"a","b","","c"}; "" -> none. */
static char **split(const char *csv, size_t *n)
{
	char **v = talloc(MAXN * sizeof(char *));
	char *s = tstr(csv), *e;

	*n = 0;
	if (!*csv)
		return v;
	for (;;) {
		v[(*n)++] = s;
		e = strchr(s, ',');
		if (!e)
			return v;
		*e = 0;
		s = e + 1;
	}
}

/* ---- model builders ---------------------------------------------------- */

typedef struct gb {
	Onnx__GraphProto g;
	Onnx__NodeProto *nodes[MAXN * 4];
	Onnx__TensorProto *inits[MAXN];
	Onnx__ValueInfoProto *ins[MAXN], *outs[MAXN], *vinfo[MAXN];
} gb;

typedef struct mb {
	Onnx__ModelProto m;
	Onnx__OperatorSetIdProto *opsets[4];
	gb *g;
} mb;

static gb *gb_new(const char *name)
{
	gb *b = talloc(sizeof(*b));
	Onnx__GraphProto g = ONNX__GRAPH_PROTO__INIT;

	b->g = g;
	b->g.name = tstr(name);
	b->g.node = b->nodes;
	b->g.initializer = b->inits;
	b->g.input = b->ins;
	b->g.output = b->outs;
	b->g.value_info = b->vinfo;
	return b;
}

static Onnx__NodeProto *node(gb *b, const char *name, const char *op,
			     const char *ins, const char *outs)
{
	Onnx__NodeProto *n = talloc(sizeof(*n));
	Onnx__NodeProto init = ONNX__NODE_PROTO__INIT;

	*n = init;
	n->name = tstr(name);
	n->op_type = tstr(op);
	n->input = split(ins, &n->n_input);
	n->output = split(outs, &n->n_output);
	n->attribute = talloc(MAXN * sizeof(Onnx__AttributeProto *));
	b->nodes[b->g.n_node++] = n;
	return n;
}

static Onnx__AttributeProto *attr(Onnx__NodeProto *n, const char *name, int type)
{
	Onnx__AttributeProto *a = talloc(sizeof(*a));
	Onnx__AttributeProto init = ONNX__ATTRIBUTE_PROTO__INIT;

	*a = init;
	a->name = tstr(name);
	a->has_type = 1;
	a->type = type;
	n->attribute[n->n_attribute++] = a;
	return a;
}

static void graph_attr_of(Onnx__NodeProto *n, const char *name, gb *sub)
{
	attr(n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH)->g = &sub->g;
}

/* dims: NULL = no shape; "N,3,?" = dim_param N, dim_value 3, neither. */
static Onnx__ValueInfoProto *vi(const char *name, int elem, const char *dims)
{
	Onnx__ValueInfoProto *v = talloc(sizeof(*v));
	Onnx__ValueInfoProto vinit = ONNX__VALUE_INFO_PROTO__INIT;
	Onnx__TypeProto tinit = ONNX__TYPE_PROTO__INIT;
	Onnx__TypeProto__Tensor ttinit = ONNX__TYPE_PROTO__TENSOR__INIT;
	Onnx__TensorShapeProto sinit = ONNX__TENSOR_SHAPE_PROTO__INIT;
	Onnx__TensorShapeProto__Dimension dinit = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__INIT;
	Onnx__TypeProto__Tensor *tt;
	char **tok;
	size_t i, n;

	*v = vinit;
	v->name = tstr(name);
	v->type = talloc(sizeof(*v->type));
	*v->type = tinit;
	v->type->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
	tt = v->type->tensor_type = talloc(sizeof(*tt));
	*tt = ttinit;
	tt->has_elem_type = 1;
	tt->elem_type = elem;
	if (!dims)
		return v;
	tt->shape = talloc(sizeof(*tt->shape));
	*tt->shape = sinit;
	tok = split(dims, &n);
	tt->shape->n_dim = n;
	tt->shape->dim = talloc((n + 1) * sizeof(*tt->shape->dim));
	for (i = 0; i < n; i++) {
		Onnx__TensorShapeProto__Dimension *d = talloc(sizeof(*d));

		*d = dinit;
		if (tok[i][0] >= '0' && tok[i][0] <= '9') {
			d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
			d->dim_value = atoll(tok[i]);
		} else if (strcmp(tok[i], "?") != 0) {
			d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
			d->dim_param = tok[i];
		}
		tt->shape->dim[i] = d;
	}
	return v;
}

static Onnx__TensorProto *tensor(gb *b, const char *name, int elem, const char *dims)
{
	Onnx__TensorProto *t = talloc(sizeof(*t));
	Onnx__TensorProto init = ONNX__TENSOR_PROTO__INIT;
	char **tok;
	size_t i;

	*t = init;
	t->name = tstr(name);
	t->has_data_type = 1;
	t->data_type = elem;
	tok = split(dims, &t->n_dims);
	t->dims = talloc((t->n_dims + 1) * sizeof(int64_t));
	for (i = 0; i < t->n_dims; i++)
		t->dims[i] = atoll(tok[i]);
	b->inits[b->g.n_initializer++] = t;
	return t;
}

static Onnx__TensorProto *tensor_raw(gb *b, const char *name, int elem, const char *dims,
				     const void *data, size_t n)
{
	Onnx__TensorProto *t = tensor(b, name, elem, dims);

	t->has_raw_data = 1;
	t->raw_data.len = n;
	t->raw_data.data = talloc(n);
	if (n)
		memcpy(t->raw_data.data, data, n);
	return t;
}

/* Entries as key/value pairs, NULL-terminated: "location", "w.bin", ... */
static Onnx__TensorProto *tensor_ext(gb *b, const char *name, int elem, const char *dims, ...)
{
	Onnx__TensorProto *t = tensor(b, name, elem, dims);
	Onnx__StringStringEntryProto init = ONNX__STRING_STRING_ENTRY_PROTO__INIT;
	const char *k;
	va_list ap;

	t->has_data_location = 1;
	t->data_location = ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
	t->external_data = talloc(MAXN * sizeof(*t->external_data));
	va_start(ap, dims);
	while ((k = va_arg(ap, const char *))) {
		Onnx__StringStringEntryProto *e = talloc(sizeof(*e));

		*e = init;
		e->key = tstr(k);
		e->value = tstr(va_arg(ap, const char *));
		t->external_data[t->n_external_data++] = e;
	}
	va_end(ap);
	return t;
}

static void opset(mb *m, const char *domain, int64_t version)
{
	Onnx__OperatorSetIdProto *o = talloc(sizeof(*o));
	Onnx__OperatorSetIdProto init = ONNX__OPERATOR_SET_ID_PROTO__INIT;

	*o = init;
	o->domain = tstr(domain);
	o->has_version = 1;
	o->version = version;
	m->opsets[m->m.n_opset_import++] = o;
}

static mb *mb_new(void)
{
	mb *m = talloc(sizeof(*m));
	Onnx__ModelProto init = ONNX__MODEL_PROTO__INIT;

	m->m = init;
	m->m.has_ir_version = 1;
	m->m.ir_version = 8;
	m->m.opset_import = m->opsets;
	m->g = gb_new("main");
	m->m.graph = &m->g->g;
	opset(m, "", 17);
	return m;
}

#define IN(b, v) ((b)->ins[(b)->g.n_input++] = (v))
#define OUT(b, v) ((b)->outs[(b)->g.n_output++] = (v))
#define VINFO(b, v) ((b)->vinfo[(b)->g.n_value_info++] = (v))

/* ---- files ------------------------------------------------------------- */

/* root/ holds files outside the model directory; root/m/ is the model's. */
static char root[64], mdir[80], mpath[96];

static char *at(const char *fmt, ...)
{
	char *p = talloc(512);
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(p, 512, fmt, ap);
	va_end(ap);
	return p;
}

static void write_file(const char *path, const void *data, size_t n)
{
	FILE *f = fopen(path, "wb");

	assert_non_null(f);
	assert_int_equal(fwrite(data, 1, n, f), n);
	assert_int_equal(fclose(f), 0);
}

static size_t pack(mb *m, uint8_t **buf)
{
	size_t n = onnx__model_proto__get_packed_size(&m->m);

	*buf = talloc(n);
	assert_int_equal(onnx__model_proto__pack(&m->m, *buf), n);
	return n;
}

static int load(mb *m, graph **g, char *err)
{
	uint8_t *buf;
	size_t n = pack(m, &buf);

	write_file(mpath, buf, n);
	err[0] = 0;
	return graph_load(mpath, g, err, 256);
}

/* Loads a model that must fail; checks the code and that the message
 * contains every NULL-terminated substring given. */
static void expect_fail(mb *m, int code, ...)
{
	char err[256];
	graph *g = (graph *)1;
	const char *s;
	va_list ap;

	assert_int_equal(load(m, &g, err), code);
	assert_null(g);
	va_start(ap, code);
	while ((s = va_arg(ap, const char *))) {
		if (!strstr(err, s))
			fail_msg("message '%s' lacks '%s'", err, s);
	}
	va_end(ap);
}

static int rm_entry(const char *p, const struct stat *st, int flag, struct FTW *f)
{
	(void)st, (void)flag, (void)f;
	return remove(p);
}

static int setup(void **state)
{
	(void)state;
	strcpy(root, "/tmp/ortmk-loader-XXXXXX");
	if (!mkdtemp(root))
		return -1;
	snprintf(mdir, sizeof(mdir), "%s/m", root);
	snprintf(mpath, sizeof(mpath), "%s/model.onnx", mdir);
	return mkdir(mdir, 0700);
}

static int teardown(void **state)
{
	(void)state;
	while (n_allocs)
		free(allocs[--n_allocs]);
	free(allocs);
	allocs = NULL;
	cap_allocs = 0;
	return nftw(root, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* Open descriptors: error paths must close every external file they open. */
static int count_fds(void)
{
	int fd, n = 0;

	for (fd = 0; fd < 1024; fd++)
		n += fcntl(fd, F_GETFD) >= 0;
	return n;
}

static int find(const graph *g, const char *name)
{
	int v = graph_find_value(g, name);

	if (v < 0)
		fail_msg("no value '%s'", name);
	return v;
}


/* ---- well-formed models ------------------------------------------------ */

static void test_inline_initializers(void **state)
{
	static const float w[6] = { 1, 2, 3, 4, 5, 6 };
	mb *m = mb_new();
	char err[256];
	graph *g;
	int v;

	(void)state;
	m->m.ir_version = 3;    /* IR < 4: initializers are listed as inputs too */
	IN(m->g, vi("X", DT(FLOAT), "N,3"));
	IN(m->g, vi("W", DT(FLOAT), "3,2"));
	tensor_raw(m->g, "W", DT(FLOAT), "3,2", w, sizeof(w));
	tensor_raw(m->g, "B", DT(FLOAT), "2", w, 8);
	node(m->g, "mm", "MatMul", "X,W", "Y");
	node(m->g, "add", "Add", "Y,B", "Z");
	OUT(m->g, vi("Z", DT(FLOAT), "N,2"));

	assert_int_equal(load(m, &g, err), 0);
	assert_int_equal(g->n_inputs, 1);
	assert_string_equal(g->values[g->inputs[0]].name, "X");
	v = find(g, "W");
	assert_int_equal(g->values[v].kind, GRAPH_VALUE_INITIALIZER);
	assert_non_null(g->values[v].type);
	assert_int_equal(g->values[v].init.nbytes, sizeof(w));
	assert_memory_equal(g->values[v].init.data, w, sizeof(w));
	assert_null(g->values[v].init.owned);
	assert_false(g->values[v].init.external);
	assert_int_equal(g->values[v].rank, 2);
	assert_int_equal(g->values[v].dims[1], 2);

	assert_int_equal(g->n_nodes, 2);
	assert_string_equal(g->nodes[1].op_type, "Add");
	assert_string_equal(g->nodes[1].domain, "");
	assert_int_equal(g->nodes[1].opset, 17);
	assert_int_equal(g->nodes[1].n_in, 2);
	assert_int_equal(g->nodes[1].in[0], find(g, "Y"));
	v = find(g, "Z");
	assert_int_equal(g->values[v].kind, GRAPH_VALUE_ACTIVATION);
	assert_int_equal(g->values[v].producer, 1);
	assert_int_equal(g->values[v].elem_type, DT(FLOAT));
	assert_true(g->values[v].is_graph_output);
	assert_int_equal(g->n_outputs, 1);
	assert_int_equal(g->outputs[0], v);
	assert_int_equal(g->values[find(g, "Y")].rank, -1);
	assert_int_equal(graph_find_value(g, "nope"), -1);
	graph_free(g);
}

/* Typed *_data fields come out in the raw little-endian layout. */
static void test_typed_initializers(void **state)
{
	static const uint8_t b_le[8] = { 0, 0, 0, 0x3f, 0, 0, 0x80, 0xbf };  /* .5, -1 */
	static const uint8_t i_le[16] = { 1, 0, 0, 0, 0, 0, 0, 0, 0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff };
	mb *m = mb_new();
	Onnx__TensorProto *t;
	char err[256];
	graph *g;
	int v;

	(void)state;
	t = tensor(m->g, "B", DT(FLOAT), "2");
	t->n_float_data = 2, t->float_data = talloc(8), t->float_data[0] = .5f, t->float_data[1] = -1;
	t = tensor(m->g, "I", DT(INT64), "2");
	t->n_int64_data = 2, t->int64_data = talloc(16), t->int64_data[0] = 1, t->int64_data[1] = -2;
	t = tensor(m->g, "S", DT(INT8), "3");
	t->n_int32_data = 3, t->int32_data = talloc(12);
	t->int32_data[0] = -1, t->int32_data[1] = 2, t->int32_data[2] = 127;
	t = tensor(m->g, "H", DT(FLOAT16), "1");
	t->n_int32_data = 1, t->int32_data = talloc(4), t->int32_data[0] = 0x3c00;
	t = tensor(m->g, "U", DT(UINT32), "");
	t->n_uint64_data = 1, t->uint64_data = talloc(8), t->uint64_data[0] = 0xdeadbeef;
	t = tensor(m->g, "D", DT(DOUBLE), "1");
	t->n_double_data = 1, t->double_data = talloc(8), t->double_data[0] = 1.5;
	t = tensor(m->g, "STR", DT(STRING), "1");
	t->n_string_data = 1, t->string_data = talloc(sizeof(ProtobufCBinaryData));
	t->string_data[0].len = 2, t->string_data[0].data = (uint8_t *)tstr("hi");
	tensor(m->g, "empty", DT(FLOAT), "0,3");
	node(m->g, "n", "Sum", "B,I,S,H,U,D,STR,empty", "y");
	OUT(m->g, vi("y", DT(FLOAT), NULL));

	assert_int_equal(load(m, &g, err), 0);
	v = find(g, "B");
	assert_non_null(g->values[v].init.owned);
	assert_memory_equal(g->values[v].init.data, b_le, 8);
	assert_memory_equal(g->values[find(g, "I")].init.data, i_le, 16);
	assert_memory_equal(g->values[find(g, "S")].init.data, "\xff\x02\x7f", 3);
	assert_memory_equal(g->values[find(g, "H")].init.data, "\x00\x3c", 2);
	assert_memory_equal(g->values[find(g, "U")].init.data, "\xef\xbe\xad\xde", 4);
	assert_int_equal(g->values[find(g, "U")].rank, 0);
	assert_memory_equal(g->values[find(g, "D")].init.data, "\0\0\0\0\0\0\xf8\x3f", 8);
	assert_int_equal(g->values[find(g, "empty")].init.nbytes, 0);
	v = find(g, "STR");
	assert_int_equal(g->values[v].is_tensor, 1);
	assert_int_equal(g->values[v].elem_type, DT(STRING));
	assert_int_equal(g->values[v].init.nbytes, 0);
	assert_null(g->values[v].init.data);
	graph_free(g);
}

static void test_initializer_size_mismatch(void **state)
{
	static const float w[3] = { 1, 2, 3 };
	mb *m = mb_new();
	Onnx__TensorProto *t;

	(void)state;
	tensor_raw(m->g, "w", DT(FLOAT), "2,3", w, sizeof(w));
	expect_fail(m, -EINVAL, "initializer 'w': 12 bytes of data for shape [2,3] float32 (24 bytes)", NULL);

	m = mb_new();
	t = tensor(m->g, "k", DT(INT64), "4");
	t->n_int64_data = 3, t->int64_data = talloc(24);
	expect_fail(m, -EINVAL, "initializer 'k': 24 bytes of data for shape [4] int64 (32 bytes)", NULL);

	m = mb_new();
	t = tensor(m->g, "neg", DT(FLOAT), "-1");
	expect_fail(m, -EINVAL, "initializer 'neg'", "shape", NULL);

	m = mb_new();
	tensor(m->g, "odd", 99, "1");
	expect_fail(m, -EINVAL, "initializer 'odd'", "data type 99", NULL);
}

static void test_unsorted_nodes_sorted(void **state)
{
	static const char *want[] = { "n0", "n1", "n2", "n3" };
	mb *m = mb_new();
	char err[256];
	graph *g;
	size_t i;

	(void)state;
	IN(m->g, vi("x", DT(FLOAT), "1"));
	node(m->g, "n2", "Relu", "b", "c");
	node(m->g, "n0", "Relu", "x", "a");
	node(m->g, "n1", "Relu", "a", "b");
	node(m->g, "n3", "Relu", "x", "d");
	OUT(m->g, vi("c", DT(FLOAT), "1"));
	OUT(m->g, vi("d", DT(FLOAT), "1"));
	assert_int_equal(load(m, &g, err), 0);
	for (i = 0; i < 4; i++) {
		assert_string_equal(g->nodes[i].proto->name, want[i]);
		assert_int_equal(g->values[g->nodes[i].out[0]].producer, (int)i);
	}
	graph_free(g);
}

static void test_sorted_model_keeps_order(void **state)
{
	static const char *want[] = { "p", "q", "r", "s" };
	mb *m = mb_new();
	char err[256];
	graph *g;
	size_t i;

	(void)state;
	IN(m->g, vi("x", DT(FLOAT), "1"));
	node(m->g, "p", "Relu", "x", "a");
	node(m->g, "q", "Relu", "x", "b");      /* independent of p */
	node(m->g, "r", "Add", "b,a", "c");
	node(m->g, "s", "Relu", "x", "d");
	OUT(m->g, vi("c", DT(FLOAT), NULL));
	OUT(m->g, vi("d", DT(FLOAT), NULL));
	assert_int_equal(load(m, &g, err), 0);
	for (i = 0; i < 4; i++)
		assert_string_equal(g->nodes[i].proto->name, want[i]);
	graph_free(g);
}

/* 20000 nodes listed back to front: the loader must stay near-linear. */
static void test_large_reversed_chain(void **state)
{
	enum { N = 20000 };
	mb *m = mb_new();
	Onnx__NodeProto **nodes = talloc(N * sizeof(*nodes));
	char err[256];
	graph *g;
	int i;

	(void)state;
	IN(m->g, vi("v0", DT(FLOAT), "1"));
	for (i = 0; i < N; i++) {
		Onnx__NodeProto *n = node(m->g, at("n%d", i), "Relu", at("v%d", i), at("v%d", i + 1));

		nodes[N - 1 - i] = n;
		m->g->g.n_node = 0;
	}
	m->g->g.node = nodes;
	m->g->g.n_node = N;
	OUT(m->g, vi(at("v%d", N), DT(FLOAT), "1"));
	assert_int_equal(load(m, &g, err), 0);
	assert_int_equal(g->n_nodes, N);
	for (i = 0; i < N; i++)
		assert_string_equal(g->values[g->nodes[i].in[0]].name, at("v%d", i));
	graph_free(g);
}

/* ---- malformed graphs -------------------------------------------------- */

static void test_undefined_input(void **state)
{
	mb *m = mb_new();

	(void)state;
	IN(m->g, vi("x", DT(FLOAT), "1"));
	node(m->g, "ok", "Relu", "x", "a");
	node(m->g, "bad", "Add", "a,ghost", "b");
	OUT(m->g, vi("b", DT(FLOAT), "1"));
	expect_fail(m, -EINVAL, "node 'bad' (Add)", "'ghost'", "not defined", NULL);

	m = mb_new();
	node(m->g, "", "Relu", "nothing", "a");
	OUT(m->g, vi("a", DT(FLOAT), "1"));
	expect_fail(m, -EINVAL, "node #0 (Relu)", "'nothing'", NULL);
}

static void test_cycle(void **state)
{
	mb *m = mb_new();
	char err[256];
	graph *g;

	(void)state;
	IN(m->g, vi("x", DT(FLOAT), "1"));
	node(m->g, "D", "Relu", "c", "d");      /* downstream of the cycle */
	node(m->g, "A", "Add", "x,c", "a");
	node(m->g, "B", "Relu", "a", "b");
	node(m->g, "C", "Relu", "b", "c");
	OUT(m->g, vi("d", DT(FLOAT), "1"));
	assert_int_equal(load(m, &g, err), -EINVAL);
	assert_non_null(strstr(err, "cycle"));
	assert_true(strstr(err, "node 'A'") || strstr(err, "node 'B'") || strstr(err, "node 'C'"));
	assert_null(strstr(err, "node 'D'"));

	m = mb_new();
	node(m->g, "self", "Relu", "s", "s");
	OUT(m->g, vi("s", DT(FLOAT), "1"));
	expect_fail(m, -EINVAL, "node 'self' (Relu)", "cycle", "'s'", NULL);
}

static void test_duplicate_outputs(void **state)
{
	mb *m = mb_new();

	(void)state;
	IN(m->g, vi("x", DT(FLOAT), "1"));
	node(m->g, "first", "Relu", "x", "y");
	node(m->g, "second", "Neg", "x", "y");
	OUT(m->g, vi("y", DT(FLOAT), "1"));
	expect_fail(m, -EINVAL, "node 'second' (Neg)", "output 'y'", "already defined", NULL);

	m = mb_new();
	IN(m->g, vi("x", DT(FLOAT), "1"));
	node(m->g, "clobber", "Relu", "x", "x");
	OUT(m->g, vi("x", DT(FLOAT), "1"));
	expect_fail(m, -EINVAL, "node 'clobber'", "'x'", "graph input", NULL);

	m = mb_new();
	IN(m->g, vi("x", DT(FLOAT), "1"));
	OUT(m->g, vi("missing", DT(FLOAT), "1"));
	expect_fail(m, -EINVAL, "graph output 'missing'", NULL);
}

static void test_model_header(void **state)
{
	mb *m = mb_new();
	char err[256];
	graph *g;

	(void)state;
	m->m.has_ir_version = 0;
	expect_fail(m, -EINVAL, "model.onnx", "no ir_version", NULL);

	m = mb_new();
	m->m.graph = NULL;
	expect_fail(m, -EINVAL, "model.onnx", "not an ONNX model", NULL);

	m = mb_new();
	opset(m, "ai.onnx", 13);        /* same domain as "" */
	expect_fail(m, -EINVAL, "domain ''", "imported twice", NULL);

	m = mb_new();
	m->m.n_opset_import = 0;
	expect_fail(m, -EINVAL, "opset_import", NULL);

	/* an ai.onnx opset newer than any kernel follows is refused up front */
	m = mb_new();
	m->m.n_opset_import = 0;
	opset(m, "", GRAPH_ONNX_OPSET_MAX + 2);
	expect_fail(m, -EINVAL, "ai.onnx opset", "newer than ortmk knows", NULL);

	m = mb_new();
	IN(m->g, vi("x", DT(FLOAT), "1"));
	node(m->g, "custom", "Foo", "x", "y")->domain = tstr("com.example");
	OUT(m->g, vi("y", DT(FLOAT), "1"));
	expect_fail(m, -EINVAL, "node 'custom' (Foo)", "'com.example'", "not imported", NULL);

	m = mb_new();
	m->m.n_opset_import = 0;
	opset(m, "ai.onnx", 13);
	opset(m, "com.example", 2);
	IN(m->g, vi("x", DT(FLOAT), "1"));
	node(m->g, "n", "Relu", "x", "y");
	node(m->g, "c", "Foo", "y", "z")->domain = tstr("com.example");
	OUT(m->g, vi("z", DT(FLOAT), "1"));
	assert_int_equal(load(m, &g, err), 0);
	assert_int_equal(graph_opset(g, ""), 13);
	assert_int_equal(graph_opset(g, "ai.onnx"), 13);
	assert_int_equal(graph_opset(g, "com.example"), 2);
	assert_int_equal(graph_opset(g, "com.other"), 0);
	assert_string_equal(g->nodes[0].domain, "");
	assert_int_equal(g->nodes[1].opset, 2);
	graph_free(g);
}

/* ---- not a model at all ------------------------------------------------ */

static void expect_not_onnx(const void *bytes, size_t n, const char *name)
{
	char *path = at("%s/%s", mdir, name), err[256];
	graph *g = (graph *)1;

	write_file(path, bytes, n);
	assert_int_equal(graph_load(path, &g, err, sizeof(err)), -EINVAL);
	assert_null(g);
	assert_non_null(strstr(err, name));
	assert_non_null(strstr(err, "not an ONNX model"));
}

static void test_not_onnx(void **state)
{
	static const char text[] = "hello, this is a text file\nnot a model\n";
	uint8_t junk[4096], *buf;
	char err[256];
	graph *g = (graph *)1;
	size_t i, n;
	mb *m = mb_new();

	(void)state;
	srand(12345);
	for (i = 0; i < sizeof(junk); i++)
		junk[i] = (uint8_t)rand();
	expect_not_onnx(junk, sizeof(junk), "junk.onnx");
	expect_not_onnx("", 0, "empty.onnx");
	expect_not_onnx(text, sizeof(text) - 1, "text.onnx");

	IN(m->g, vi("x", DT(FLOAT), "N,3"));
	node(m->g, "n", "Relu", "x", "y");
	OUT(m->g, vi("y", DT(FLOAT), "N,3"));
	n = pack(m, &buf);
	expect_not_onnx(buf, n / 2, "truncated.onnx");
	expect_not_onnx(buf, n - 1, "truncated1.onnx");

	assert_int_equal(graph_load_bytes(junk, sizeof(junk), NULL, &g, err, sizeof(err)), -EINVAL);
	assert_null(g);
	assert_non_null(strstr(err, "not an ONNX model"));
	assert_int_equal(graph_load(at("%s/absent.onnx", mdir), &g, err, sizeof(err)), -ENOENT);
	assert_non_null(strstr(err, "absent.onnx"));
	assert_int_equal(graph_load(mdir, &g, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, mdir));
}

/* ---- external data ----------------------------------------------------- */

static void make_weights(void)
{
	static const float w[8] = { 1, 2, 3, 4, 5, 6, 7, 8 };

	write_file(at("%s/w.bin", mdir), w, sizeof(w));
	write_file(at("%s/x.bin", root), w, sizeof(w));       /* outside */
	assert_int_equal(mkdir(at("%s/sub", mdir), 0700), 0);
	write_file(at("%s/sub/c.bin", mdir), w, 4);
}

static void test_external_valid(void **state)
{
	mb *m = mb_new();
	const graph_value *v;
	char err[256];
	graph *g;

	(void)state;
	make_weights();
	assert_int_equal(symlink("w.bin", at("%s/link.bin", mdir)), 0);
	tensor_ext(m->g, "A", DT(FLOAT), "2,3", "location", "w.bin", "offset", "0", "length", "24", NULL);
	tensor_ext(m->g, "B", DT(FLOAT), "2", "location", "w.bin", "offset", "24", NULL);
	tensor_ext(m->g, "C", DT(FLOAT), "1", "location", "sub/c.bin", NULL);
	tensor_ext(m->g, "D", DT(FLOAT), "1", "location", "sub/../w.bin", "offset", "28",
		   "length", "4", "checksum", "ignored", NULL);
	tensor_ext(m->g, "E", DT(FLOAT), "1", "location", "./link.bin", "length", "4", "offset", "4", NULL);
	node(m->g, "n", "Sum", "A,B,C,D,E", "y");
	OUT(m->g, vi("y", DT(FLOAT), NULL));
	assert_int_equal(load(m, &g, err), 0);

	/* w.bin, sub/../w.bin and link.bin are one file. */
	assert_int_equal(g->n_files, 2);
	assert_string_equal(g->files[0].location, "w.bin");
	assert_string_equal(g->files[1].location, "sub/c.bin");
	assert_int_equal(g->files[0].size, 32);
	assert_true(fcntl(g->files[0].fd, F_GETFD) & FD_CLOEXEC);
	v = &g->values[find(g, "A")];
	assert_true(v->init.external);
	assert_null(v->init.data);
	assert_int_equal(v->init.file, 0);
	assert_int_equal(v->init.offset, 0);
	assert_int_equal(v->init.nbytes, 24);
	v = &g->values[find(g, "B")];
	assert_int_equal(v->init.offset, 24);
	assert_int_equal(v->init.nbytes, 8);
	assert_int_equal(g->values[find(g, "C")].init.file, 1);
	v = &g->values[find(g, "D")];
	assert_int_equal(v->init.file, 0);
	assert_int_equal(v->init.offset, 28);
	assert_int_equal(g->values[find(g, "E")].init.file, 0);
	graph_free(g);
}

/* A large embedded initializer (>= LOADER_SLIM_MIN bytes) is loaded as
 * external data of the model file itself, at the offset of its raw bytes;
 * a small one stays embedded; ORTMK_SLIM=0 or a model reached through a
 * symlink keep both embedded. */
static void test_slim(void **state)
{
	size_t big = LOADER_SLIM_MIN / 4 + 5, n;
	float *w = talloc(big * sizeof(float)), small[3] = {1, 2, 3};
	char dims[32], err[256], *bytes;
	const graph_value *v;
	mb *m = mb_new();
	uint8_t *buf;
	graph *g;
	FILE *f;

	(void)state;
	for (size_t i = 0; i < big; i++)
		w[i] = (float)i * 0.5f - 7.0f;
	snprintf(dims, sizeof(dims), "%zu", big);
	tensor_raw(m->g, "W", DT(FLOAT), dims, w, big * sizeof(float));
	tensor_raw(m->g, "S", DT(FLOAT), "3", small, sizeof(small));
	node(m->g, "n", "Relu", "W", "y");
	node(m->g, "n2", "Relu", "S", "z");
	OUT(m->g, vi("y", DT(FLOAT), NULL));
	OUT(m->g, vi("z", DT(FLOAT), NULL));
	assert_int_equal(load(m, &g, err), 0);
	v = &g->values[find(g, "W")];
	assert_true(v->init.external);
	assert_int_equal(v->init.nbytes, big * sizeof(float));
	assert_string_equal(g->files[v->init.file].location, "model.onnx");
	/* the offset is where the model file holds those bytes */
	n = onnx__model_proto__get_packed_size(&m->m);
	buf = talloc(n);
	f = fopen(mpath, "rb");
	assert_non_null(f);
	assert_int_equal(fread(buf, 1, n, f), n);
	fclose(f);
	assert_true(v->init.offset + v->init.nbytes <= n);
	assert_memory_equal(buf + v->init.offset, w, big * sizeof(float));
	v = &g->values[find(g, "S")];
	assert_false(v->init.external);
	assert_memory_equal(v->init.data, small, sizeof(small));
	graph_free(g);

	setenv("ORTMK_SLIM", "0", 1);
	assert_int_equal(graph_load(mpath, &g, err, sizeof(err)), 0);
	unsetenv("ORTMK_SLIM");
	assert_false(g->values[find(g, "W")].init.external);
	assert_memory_equal(g->values[find(g, "W")].init.data, w, big * sizeof(float));
	graph_free(g);

	bytes = at("%s/link.onnx", mdir);
	assert_int_equal(symlink("model.onnx", bytes), 0);
	assert_int_equal(graph_load(bytes, &g, err, sizeof(err)), 0);
	assert_false(g->values[find(g, "W")].init.external);
	graph_free(g);
}

/* The walk gives up on what it does not expect, and the parser's own
 * verdict stands: a model cut inside an initializer fails as a model
 * that does not parse, not as external data past the end of a file. */
static void test_slim_truncated(void **state)
{
	size_t big = LOADER_SLIM_MIN / 4 + 5, n;
	float *w = talloc(big * sizeof(float));
	char dims[32], err[256];
	mb *m = mb_new();
	uint8_t *buf, *out;
	graph *g;

	(void)state;
	snprintf(dims, sizeof(dims), "%zu", big);
	tensor_raw(m->g, "W", DT(FLOAT), dims, w, big * sizeof(float));
	node(m->g, "n", "Relu", "W", "y");
	OUT(m->g, vi("y", DT(FLOAT), NULL));
	n = pack(m, &buf);
	assert_int_equal(loader_slim(buf, n - 100, "model.onnx", &out, &n), 0);
	assert_null(out);
	n = onnx__model_proto__get_packed_size(&m->m);
	write_file(mpath, buf, n - 100);
	assert_int_equal(graph_load(mpath, &g, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "protobuf parse failed"));
}

/* One initializer 'fc.weight' float [2,3] with the given entries; the load
 * must fail with `code` and a message naming the tensor and `what`. */
static void expect_ext_fail(int code, const char *what, ...)
{
	const char *kv[8] = { 0 };
	mb *m = mb_new();
	va_list ap;
	int i = 0;

	va_start(ap, what);
	while (i < 7 && (kv[i] = va_arg(ap, const char *)))
		i++;
	va_end(ap);
	tensor_ext(m->g, "fc.weight", DT(FLOAT), "2,3", kv[0], kv[1], kv[2], kv[3], kv[4], kv[5], NULL);
	node(m->g, "n", "Relu", "fc.weight", "y");
	OUT(m->g, vi("y", DT(FLOAT), NULL));
	expect_fail(m, code, "initializer 'fc.weight'", what, NULL);
}

static void test_external_escapes(void **state)
{
	int fds = count_fds();

	(void)state;
	make_weights();
	assert_int_equal(symlink(at("%s/x.bin", root), at("%s/out.bin", mdir)), 0);
	assert_int_equal(symlink(root, at("%s/outdir", mdir)), 0);
	assert_int_equal(symlink("../../x.bin", at("%s/sub/rel.bin", mdir)), 0);

	expect_ext_fail(-EINVAL, "'/etc/passwd' is an absolute path", "location", "/etc/passwd", NULL);
	expect_ext_fail(-EINVAL, "'../x.bin' escapes the model directory", "location", "../x.bin", NULL);
	expect_ext_fail(-EINVAL, "'sub/../../x.bin' escapes", "location", "sub/../../x.bin", NULL);
	expect_ext_fail(-EINVAL, "'out.bin' escapes", "location", "out.bin", NULL);
	expect_ext_fail(-EINVAL, "'outdir/x.bin' escapes", "location", "outdir/x.bin", NULL);
	/* Lexically inside (sub/rel.bin) but the link climbs out. */
	expect_ext_fail(-EINVAL, "'sub/rel.bin' escapes", "location", "sub/rel.bin", NULL);
	assert_int_equal(count_fds(), fds);
}

static void test_external_bounds(void **state)
{
	int fds = count_fds();

	(void)state;
	make_weights();        /* w.bin: 32 bytes */
	expect_ext_fail(-EINVAL, "offset 100 is past the end of 'w.bin' (32 bytes)",
			"location", "w.bin", "offset", "100", NULL);
	expect_ext_fail(-EINVAL, "offset 16 length 24 runs past the end",
			"location", "w.bin", "offset", "16", "length", "24", NULL);
	expect_ext_fail(-EINVAL, "runs past the end", "location", "w.bin", "offset", "8",
			"length", "18446744073709551615", NULL);
	expect_ext_fail(-EINVAL, "20 bytes of external data for shape [2,3] float32 (24 bytes)",
			"location", "w.bin", "length", "20", NULL);
	/* No length: the rest of the file, which is too much here. */
	expect_ext_fail(-EINVAL, "32 bytes of external data", "location", "w.bin", NULL);
	expect_ext_fail(-EINVAL, "offset 'x12' is not a number", "location", "w.bin", "offset", "x12", NULL);
	expect_ext_fail(-EINVAL, "length '-4' is not a number", "location", "w.bin", "length", "-4", NULL);
	expect_ext_fail(-EINVAL, "offset '99999999999999999999' is not a number",
			"location", "w.bin", "offset", "99999999999999999999", NULL);
	expect_ext_fail(-ENOENT, "'nope.bin'", "location", "nope.bin", NULL);
	expect_ext_fail(-EINVAL, "no location", "offset", "0", NULL);
	expect_ext_fail(-EINVAL, "'sub' is not a regular file", "location", "sub", NULL);
	assert_int_equal(count_fds(), fds);
}

static void test_external_from_bytes(void **state)
{
	mb *m = mb_new();
	uint8_t *buf;
	char err[256];
	graph *g;
	size_t n;

	(void)state;
	make_weights();
	tensor_ext(m->g, "fc.weight", DT(FLOAT), "2,3", "location", "w.bin", "length", "24", NULL);
	node(m->g, "n", "Relu", "fc.weight", "y");
	OUT(m->g, vi("y", DT(FLOAT), NULL));
	n = pack(m, &buf);
	assert_int_equal(graph_load_bytes(buf, n, NULL, &g, err, sizeof(err)), -EINVAL);
	assert_null(g);
	assert_non_null(strstr(err, "initializer 'fc.weight'"));
	assert_int_equal(graph_load_bytes(buf, n, mdir, &g, err, sizeof(err)), 0);
	assert_int_equal(g->n_files, 1);
	assert_int_equal(g->values[find(g, "fc.weight")].init.nbytes, 24);
	graph_free(g);
}

/* ---- subgraphs --------------------------------------------------------- */

/* A Constant's value tensor, not an initializer of the graph. */
static Onnx__TensorProto *const_value(gb *b, Onnx__NodeProto *n, const char *dims,
				      const void *data, size_t nbytes)
{
	Onnx__TensorProto *t = tensor_raw(b, "", DT(FLOAT), dims, data, nbytes);

	b->g.n_initializer--;
	attr(n, "value", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR)->t = t;
	return t;
}

/* graph_fold (core/graph_fold.c): Constant nodes and Identity nodes of
 * initializers become initializers (an Identity of an Identity shares the
 * root's bytes; an initializer that is also an input is a weight); an
 * Identity of an activation and an inference Dropout go, their readers
 * reading the input (NodeProto names too), as does a Pad of zero pads; a
 * training Dropout, a Pad that pads, a Constant that is a graph output and
 * an empty Constant stay nodes. */
static void test_fold(void **state)
{
	mb *m = mb_new();
	static const float w[4] = {1, 2, 3, 4}, c[2] = {5, 6}, ratio = 0.3f;
	static const uint8_t yes = 1;
	static const int64_t pz[2] = {0, 0}, pn[2] = {0, 1};
	char err[256];
	graph *g;
	int vw, vw1, vw2, vk, vx;

	(void)state;
	IN(m->g, vi("x", DT(FLOAT), "4"));
	IN(m->g, vi("wi", DT(FLOAT), "4"));
	tensor_raw(m->g, "w", DT(FLOAT), "4", w, sizeof(w));
	tensor_raw(m->g, "wi", DT(FLOAT), "4", w, sizeof(w));
	node(m->g, "id1", "Identity", "w", "w1");
	node(m->g, "id2", "Identity", "w1", "w2");
	node(m->g, "id3", "Identity", "wi", "w3");
	node(m->g, "idx", "Identity", "x", "x1");
	const_value(m->g, node(m->g, "c", "Constant", "", "k"), "2", c, sizeof(c));
	const_value(m->g, node(m->g, "cg", "Constant", "", "kout"), "2", c, sizeof(c));
	const_value(m->g, node(m->g, "ce", "Constant", "", "kempty"), "0", NULL, 0);
	tensor_raw(m->g, "ratio", DT(FLOAT), "", &ratio, sizeof(ratio));
	tensor_raw(m->g, "train", DT(BOOL), "", &yes, sizeof(yes));
	node(m->g, "do1", "Dropout", "x", "xd");
	node(m->g, "do2", "Dropout", "x,ratio,train", "xt");
	tensor_raw(m->g, "pz", DT(INT64), "2", pz, sizeof(pz));
	tensor_raw(m->g, "pn", DT(INT64), "2", pn, sizeof(pn));
	node(m->g, "pad0", "Pad", "x,pz", "xp");
	node(m->g, "pad1", "Pad", "x,pn", "xq");
	node(m->g, "negq", "Neg", "xq", "q");
	node(m->g, "sum", "Sum", "x1,w2,w3,xd,xt,xp", "y");
	node(m->g, "cat", "Concat", "k,kempty", "z");
	OUT(m->g, vi("y", DT(FLOAT), "4"));
	OUT(m->g, vi("z", DT(FLOAT), "2"));
	OUT(m->g, vi("kout", DT(FLOAT), "2"));
	OUT(m->g, vi("q", DT(FLOAT), "5"));
	assert_int_equal(load(m, &g, err), 0);
	assert_int_equal(g->n_nodes, 7);   /* do2, cg, ce, pad1, negq, sum, cat */
	for (size_t k = 0; k < g->n_nodes; k++) {
		assert_string_not_equal(g->nodes[k].proto->name, "id1");
		assert_string_not_equal(g->nodes[k].proto->name, "id2");
		assert_string_not_equal(g->nodes[k].proto->name, "id3");
		assert_string_not_equal(g->nodes[k].proto->name, "idx");
		assert_string_not_equal(g->nodes[k].proto->name, "do1");
		assert_string_not_equal(g->nodes[k].proto->name, "c");
		assert_string_not_equal(g->nodes[k].proto->name, "pad0");
		for (int o = 0; o < g->nodes[k].n_out; o++)
			assert_int_equal(g->values[g->nodes[k].out[o]].producer, (int)k);
	}
	vw = graph_find_value(g, "w");
	vw1 = graph_find_value(g, "w1");
	vw2 = graph_find_value(g, "w2");
	vk = graph_find_value(g, "k");
	assert_int_equal(g->values[vw1].kind, GRAPH_VALUE_INITIALIZER);
	assert_int_equal(g->values[vw2].kind, GRAPH_VALUE_INITIALIZER);
	assert_int_equal(g->values[vw2].init.alias, vw);
	assert_ptr_equal(g->values[vw2].init.data, g->values[vw].init.data);
	assert_null(g->values[vw2].init.owned);
	assert_int_equal(g->values[vw2].rank, 1);
	assert_int_equal(g->values[vw2].dims[0], 4);
	assert_int_equal(g->values[vk].kind, GRAPH_VALUE_INITIALIZER);
	assert_int_equal(g->values[vk].producer, -1);
	assert_int_equal(g->values[vk].init.nbytes, sizeof(c));
	assert_memory_equal(g->values[vk].init.data, c, sizeof(c));
	assert_int_equal(g->values[graph_find_value(g, "w3")].kind, GRAPH_VALUE_INITIALIZER);
	vx = graph_find_value(g, "x");
	for (size_t k = 0; k < g->n_nodes; k++)
		if (strcmp(g->nodes[k].proto->name, "sum") == 0) {
			/* x1 and xd are read as x, under x's name */
			assert_int_equal(g->nodes[k].in[0], vx);
			assert_int_equal(g->nodes[k].in[3], vx);
			assert_string_equal(g->nodes[k].proto->input[0], "x");
			assert_string_equal(g->nodes[k].proto->input[3], "x");
			assert_int_equal(g->nodes[k].in[4], graph_find_value(g, "xt"));
			assert_int_equal(g->nodes[k].in[5], vx);   /* xp: the zero Pad's */
		}
	assert_int_equal(g->values[graph_find_value(g, "kout")].kind, GRAPH_VALUE_ACTIVATION);
	assert_int_equal(g->values[graph_find_value(g, "kempty")].kind, GRAPH_VALUE_ACTIVATION);
	graph_free(g);
}

static void test_if_implicit_inputs(void **state)
{
	mb *m = mb_new();
	gb *then_g = gb_new("then"), *else_g = gb_new("else"), *nested = gb_new("nested");
	gb *nested_else = gb_new("nested_else");
	Onnx__NodeProto *iff, *inner;
	static const float k = 2;
	char err[256];
	graph *g;
	int i, j, seen[4] = { 0 };
	/* cond: the nested If inside else_branch reads it too. */
	const char *names[4] = { "a", "k", "x", "cond" };

	(void)state;
	IN(m->g, vi("cond", DT(BOOL), ""));
	IN(m->g, vi("x", DT(FLOAT), "2"));
	tensor_raw(m->g, "k", DT(FLOAT), "", &k, sizeof(k));
	/* then: t = a + k */
	node(then_g, "t_add", "Add", "a,k", "t");
	OUT(then_g, vi("t", DT(FLOAT), NULL));
	/* else: e1 = Neg(a); n = If(cond) { then: Mul(e1, x)  else: output x } */
	node(else_g, "e_neg", "Neg", "a", "e1");
	node(nested, "n_mul", "Mul", "e1,x", "nm");
	OUT(nested, vi("nm", DT(FLOAT), NULL));
	OUT(nested_else, vi("x", DT(FLOAT), NULL));
	inner = node(else_g, "e_if", "If", "cond", "n");
	graph_attr_of(inner, "then_branch", nested);
	graph_attr_of(inner, "else_branch", nested_else);
	OUT(else_g, vi("n", DT(FLOAT), NULL));

	iff = node(m->g, "if0", "If", "cond", "y");
	graph_attr_of(iff, "then_branch", then_g);
	graph_attr_of(iff, "else_branch", else_g);
	node(m->g, "p", "Relu", "x", "a");      /* listed after its consumer */
	OUT(m->g, vi("y", DT(FLOAT), NULL));

	assert_int_equal(load(m, &g, err), 0);
	assert_string_equal(g->nodes[0].proto->name, "p");
	assert_string_equal(g->nodes[1].proto->name, "if0");
	assert_int_equal(g->nodes[1].n_in, 1);
	assert_int_equal(g->nodes[1].n_implicit, 4);
	for (i = 0; i < 4; i++)
		for (j = 0; j < 4; j++)
			seen[j] += strcmp(g->values[g->nodes[1].implicit[i]].name, names[j]) == 0;
	for (j = 0; j < 4; j++)
		assert_int_equal(seen[j], 1);
	assert_int_equal(g->nodes[0].n_implicit, 0);
	graph_free(g);

	/* A subgraph that reads a name nobody defines. */
	node(nested, "n_bad", "Relu", "ghost", "gz");
	expect_fail(m, -EINVAL, "node 'if0' (If)", "'ghost'", NULL);
}

/* The If reads its own output through the subgraph: a cycle. */
static void test_implicit_cycle(void **state)
{
	mb *m = mb_new();
	gb *br = gb_new("br");
	Onnx__NodeProto *iff;

	(void)state;
	IN(m->g, vi("cond", DT(BOOL), ""));
	node(br, "b", "Identity", "z", "bo");
	OUT(br, vi("bo", DT(FLOAT), NULL));
	iff = node(m->g, "loopy", "If", "cond", "y");
	graph_attr_of(iff, "then_branch", br);
	graph_attr_of(iff, "else_branch", br);
	node(m->g, "after", "Relu", "y", "z");
	OUT(m->g, vi("z", DT(FLOAT), NULL));
	expect_fail(m, -EINVAL, "cycle", NULL);
}

/* ---- declared types ---------------------------------------------------- */

static void test_symbolic_dims(void **state)
{
	Onnx__ValueInfoProto *seq = vi("S", DT(FLOAT), NULL);
	mb *m = mb_new();
	const graph_value *x, *y, *z, *w, *h;
	char err[256];
	graph *g;

	(void)state;
	seq->type->value_case = ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE;
	seq->type->sequence_type = talloc(sizeof(Onnx__TypeProto__Sequence));
	onnx__type_proto__sequence__init(seq->type->sequence_type);
	IN(m->g, vi("X", DT(FLOAT), "N,3"));
	IN(m->g, vi("Y", DT(FLOAT), "N,M"));
	IN(m->g, vi("Z", DT(INT64), "?,M"));
	IN(m->g, vi("W", DT(FLOAT), "?,?"));
	IN(m->g, seq);
	node(m->g, "n", "Add", "X,Y", "H");
	node(m->g, "o", "Relu", "H", "O");
	VINFO(m->g, vi("H", DT(FLOAT), "N,batch"));
	VINFO(m->g, vi("unused", DT(FLOAT), "1"));
	OUT(m->g, vi("O", DT(FLOAT), NULL));
	assert_int_equal(load(m, &g, err), 0);
	x = &g->values[find(g, "X")], y = &g->values[find(g, "Y")];
	z = &g->values[find(g, "Z")], w = &g->values[find(g, "W")];
	h = &g->values[find(g, "H")];
	assert_int_equal(x->rank, 2);
	assert_int_equal(x->dims[1], 3);
	assert_true(x->dims[0] < 0);
	assert_int_equal(x->dims[0], y->dims[0]);
	assert_int_equal(y->dims[1], z->dims[1]);
	assert_true(z->dims[0] < 0 && z->dims[0] != x->dims[0] && z->dims[0] != y->dims[1]);
	assert_true(w->dims[0] < 0 && w->dims[1] < 0 && w->dims[0] != w->dims[1]);
	assert_int_equal(h->dims[0], x->dims[0]);
	assert_int_equal(z->elem_type, DT(INT64));
	assert_int_equal(g->n_symbols, 6);     /* N, M, ?, ?, ?, batch */
	assert_string_equal(g->symbols[-x->dims[0] - 1], "N");
	assert_string_equal(g->symbols[-h->dims[1] - 1], "batch");
	assert_null(g->symbols[-z->dims[0] - 1]);
	assert_int_equal(g->values[find(g, "S")].is_tensor, 0);
	assert_int_equal(g->values[find(g, "O")].rank, -1);
	assert_int_equal(graph_find_value(g, "unused"), -1);
	graph_free(g);
}

/* ---- helpers ----------------------------------------------------------- */

static void test_helpers(void **state)
{
	static const int64_t ints[3] = { 1, 2, 3 };
	mb *m = mb_new();
	Onnx__NodeProto *n;
	Onnx__AttributeProto *a;
	const int64_t *v;
	char err[256];
	graph *g;

	(void)state;
	assert_int_equal(graph_dtype_size(DT(FLOAT)), 4);
	assert_int_equal(graph_dtype_size(DT(BOOL)), 1);
	assert_int_equal(graph_dtype_size(DT(FLOAT16)), 2);
	assert_int_equal(graph_dtype_size(DT(BFLOAT16)), 2);
	assert_int_equal(graph_dtype_size(DT(COMPLEX128)), 16);
	assert_int_equal(graph_dtype_size(DT(UINT32)), 4);
	assert_int_equal(graph_dtype_size(DT(STRING)), 0);
	assert_int_equal(graph_dtype_size(-1), 0);
	assert_int_equal(graph_dtype_size(1000), 0);
	assert_string_equal(graph_dtype_name(DT(FLOAT)), "float32");
	assert_string_equal(graph_dtype_name(DT(INT64)), "int64");
	assert_string_equal(graph_dtype_name(DT(DOUBLE)), "float64");
	assert_string_equal(graph_dtype_name(1000), "unknown");
	graph_free(NULL);

	IN(m->g, vi("x", DT(FLOAT), "1"));
	n = node(m->g, "n", "Foo", "x", "y");
	attr(n, "axis", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT)->has_i = 1;
	n->attribute[0]->i = -2;
	a = attr(n, "alpha", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT);
	a->has_f = 1, a->f = 0.25f;
	a = attr(n, "perm", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS);
	a->n_ints = 3, a->ints = (int64_t *)ints;
	a = attr(n, "mode", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING);
	a->has_s = 1, a->s.len = 7, a->s.data = (uint8_t *)tstr("nearestXYZ");
	OUT(m->g, vi("y", DT(FLOAT), "1"));
	assert_int_equal(load(m, &g, err), 0);
	n = (Onnx__NodeProto *)g->nodes[0].proto;
	assert_int_equal(proto_attr_int(n, "axis", 0), -2);
	assert_int_equal(proto_attr_int(n, "missing", 7), 7);
	assert_true(proto_attr_float(n, "alpha", 1) == 0.25f);
	assert_true(proto_attr_float(n, "axis", 1) == 1);
	assert_int_equal(graph_attr_ints(n, "perm", &v), 3);
	assert_int_equal(v[2], 3);
	assert_int_equal(graph_attr_ints(n, "none", &v), 0);
	assert_string_equal(graph_attr_string(n, "mode", "x"), "nearest");
	assert_string_equal(graph_attr_string(n, "none", "dflt"), "dflt");
	assert_null(proto_attr(n, "none"));
	graph_free(g);
}

/* The symlink race: a location resolved inside the model directory, then
 * a directory on its path swapped for a symlink pointing out before the
 * open.  The open must not follow it: O_NOFOLLOW covers the last component
 * only, openat2 beneath the directory with no symlinks covers them all. */
static void test_external_open_race(void **state)
{
	char sub[128], moved[128], out_dir[128], path[160], dir_real[PATH_MAX], err[256];
	char *real = NULL, *dr = NULL;
	int fd;

	(void)state;
	snprintf(sub, sizeof(sub), "%s/sub", mdir);
	snprintf(moved, sizeof(moved), "%s/sub.moved", mdir);
	snprintf(out_dir, sizeof(out_dir), "%s/outside", root);
	assert_int_equal(mkdir(sub, 0700), 0);
	assert_int_equal(mkdir(out_dir, 0700), 0);
	snprintf(path, sizeof(path), "%s/w.bin", sub);
	write_file(path, "weights!", 8);
	snprintf(path, sizeof(path), "%s/w.bin", out_dir);
	write_file(path, "secret", 6);
	assert_int_equal(proto_external_resolve(mdir, &dr, "w", "sub/w.bin", &real, err, sizeof(err)), 0);
	assert_non_null(realpath(mdir, dir_real));
	fd = proto_external_open(dir_real, real);
	assert_true(fd >= 0);
	close(fd);
	/* The swap, after the check: sub/ now leads outside. */
	assert_int_equal(rename(sub, moved), 0);
	assert_int_equal(symlink(out_dir, sub), 0);
	fd = proto_external_open(dir_real, real);
	if (fd >= 0)
		close(fd);
	assert_true(fd < 0);
	/* A path that is not below the directory at all. */
	assert_true(proto_external_open(dir_real, path) == -EINVAL);
	free(real);
	free(dr);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_inline_initializers, setup, teardown),
		cmocka_unit_test_setup_teardown(test_typed_initializers, setup, teardown),
		cmocka_unit_test_setup_teardown(test_initializer_size_mismatch, setup, teardown),
		cmocka_unit_test_setup_teardown(test_unsorted_nodes_sorted, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sorted_model_keeps_order, setup, teardown),
		cmocka_unit_test_setup_teardown(test_large_reversed_chain, setup, teardown),
		cmocka_unit_test_setup_teardown(test_undefined_input, setup, teardown),
		cmocka_unit_test_setup_teardown(test_cycle, setup, teardown),
		cmocka_unit_test_setup_teardown(test_duplicate_outputs, setup, teardown),
		cmocka_unit_test_setup_teardown(test_model_header, setup, teardown),
		cmocka_unit_test_setup_teardown(test_not_onnx, setup, teardown),
		cmocka_unit_test_setup_teardown(test_external_valid, setup, teardown),
		cmocka_unit_test_setup_teardown(test_slim, setup, teardown),
		cmocka_unit_test_setup_teardown(test_slim_truncated, setup, teardown),
		cmocka_unit_test_setup_teardown(test_external_escapes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_external_bounds, setup, teardown),
		cmocka_unit_test_setup_teardown(test_external_from_bytes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fold, setup, teardown),
		cmocka_unit_test_setup_teardown(test_if_implicit_inputs, setup, teardown),
		cmocka_unit_test_setup_teardown(test_implicit_cycle, setup, teardown),
		cmocka_unit_test_setup_teardown(test_symbolic_dims, setup, teardown),
		cmocka_unit_test_setup_teardown(test_helpers, setup, teardown),
		cmocka_unit_test_setup_teardown(test_external_open_race, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
