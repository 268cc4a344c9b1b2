/*
 * Unit tests for the CPU provider's subgraph executor (cpu_graph.c) and
 * the ops built on it and on sequences, optionals and strings
 * (ops/control/, ops/seq/).  Graphs are built here as protobuf-c structs
 * and run through cpu_node_init_opsets / cpu_node_run_scoped with a scope
 * that stands for the enclosing graph.  Besides results, they check that a
 * value read only inside a nested subgraph lives until that node has run,
 * that loop-carried values survive being passed through unchanged, and the
 * errors: an undefined outer name, a condition of two elements, a body
 * that does not match its node, positions out of range.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cpu_node.h"
#include "ops_table.h"

enum { ERRLEN = 512, MAXA = 6, MAXIO = 12 };

static const char *const opset_domains[] = {""};
static const int64_t opset_versions[] = {17};
static const cpu_opsets opsets = {1, opset_domains, opset_versions};

/* ---- protobuf builders ---- */

/* Splits "a,b,,c" into names (empty ones kept) inside buf. */
static size_t split(char *buf, size_t cap, const char *list, char **names)
{
	size_t n = 0;

	snprintf(buf, cap, "%s", list);
	if (!buf[0])
		return 0;
	names[n++] = buf;
	for (char *p = buf; *p; p++)
		if (*p == ',') {
			*p = 0;
			names[n++] = p + 1;
		}
	return n;
}

typedef struct tnode {
	Onnx__NodeProto p;
	Onnx__AttributeProto attr[MAXA];
	Onnx__AttributeProto *attrp[MAXA];
	ProtobufCBinaryData strs[4];
	char *io[2 * MAXIO];
	char buf[256];
} tnode;

static tnode *tn(tnode *t, const char *op, const char *ins, const char *outs)
{
	Onnx__NodeProto init = ONNX__NODE_PROTO__INIT;
	size_t n_in;

	memset(t, 0, sizeof(*t));
	t->p = init;
	t->p.op_type = (char *)op;
	t->p.name = (char *)op;
	n_in = split(t->buf, sizeof(t->buf) / 2, ins, t->io);
	t->p.n_input = n_in;
	t->p.input = t->io;
	t->p.n_output = split(t->buf + sizeof(t->buf) / 2, sizeof(t->buf) / 2, outs, t->io + n_in);
	t->p.output = t->io + n_in;
	t->p.attribute = t->attrp;
	return t;
}

static Onnx__AttributeProto *tn_attr(tnode *t, const char *name,
				     Onnx__AttributeProto__AttributeType type)
{
	Onnx__AttributeProto init = ONNX__ATTRIBUTE_PROTO__INIT;
	size_t k = t->p.n_attribute++;

	assert_true(k < MAXA);
	t->attr[k] = init;
	t->attr[k].name = (char *)name;
	t->attr[k].has_type = 1;
	t->attr[k].type = type;
	t->attrp[k] = &t->attr[k];
	return &t->attr[k];
}

static void tn_int(tnode *t, const char *name, int64_t v)
{
	Onnx__AttributeProto *a = tn_attr(t, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);

	a->has_i = 1;
	a->i = v;
}

static void tn_ints(tnode *t, const char *name, int64_t *v, size_t n)
{
	Onnx__AttributeProto *a = tn_attr(t, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS);

	a->n_ints = n;
	a->ints = v;
}

static void tn_str(tnode *t, const char *name, const char *s)
{
	Onnx__AttributeProto *a = tn_attr(t, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING);

	a->has_s = 1;
	a->s.data = (uint8_t *)s;
	a->s.len = strlen(s);
}

static void tn_graph(tnode *t, const char *name, Onnx__GraphProto *g)
{
	tn_attr(t, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH)->g = g;
}

typedef struct tgraph {
	Onnx__GraphProto g;
	Onnx__NodeProto *nodes[8];
	Onnx__ValueInfoProto vi[2 * MAXIO];
	Onnx__ValueInfoProto *pin[MAXIO], *pout[MAXIO];
	char *names[2 * MAXIO];
	char buf[256];
} tgraph;

/* A graph with these inputs and outputs over nodes[0..n). */
static Onnx__GraphProto *tg(tgraph *t, const char *ins, const char *outs, tnode *nodes, size_t n)
{
	Onnx__GraphProto init = ONNX__GRAPH_PROTO__INIT;
	size_t n_in, n_out;

	memset(t, 0, sizeof(*t));
	t->g = init;
	t->g.name = "g";
	n_in = split(t->buf, sizeof(t->buf) / 2, ins, t->names);
	n_out = split(t->buf + sizeof(t->buf) / 2, sizeof(t->buf) / 2, outs, t->names + n_in);
	for (size_t i = 0; i < n_in + n_out; i++) {
		Onnx__ValueInfoProto vinit = ONNX__VALUE_INFO_PROTO__INIT;

		t->vi[i] = vinit;
		t->vi[i].name = t->names[i];
		if (i < n_in)
			t->pin[i] = &t->vi[i];
		else
			t->pout[i - n_in] = &t->vi[i];
	}
	t->g.n_input = n_in;
	t->g.input = t->pin;
	t->g.n_output = n_out;
	t->g.output = t->pout;
	for (size_t k = 0; k < n; k++)
		t->nodes[k] = &nodes[k].p;
	t->g.n_node = n;
	t->g.node = t->nodes;
	return &t->g;
}

/* ---- values and running ---- */

static cpu_tensor tens(int32_t dt, int rank, const int64_t *dims, const void *data)
{
	cpu_tensor t;
	int64_t n = 1;

	memset(&t, 0, sizeof(t));
	t.dtype = dt;
	t.rank = rank;
	for (int d = 0; d < rank; d++) {
		t.dims[d] = dims[d];
		n *= dims[d];
	}
	t.data = (void *)data;
	t.nbytes = (size_t)n * cpu_dtype_size(dt);
	return t;
}

/* The enclosing graph: a few named values. */
typedef struct tscope {
	cpu_scope base;
	int n;
	const char *names[4];
	const cpu_tensor *vals[4];
} tscope;

static const cpu_tensor *ts_find(const cpu_scope *s, const char *name)
{
	const tscope *t = (const tscope *)s;

	for (int i = 0; i < t->n; i++)
		if (strcmp(t->names[i], name) == 0)
			return t->vals[i];
	return NULL;
}

typedef struct trun {
	cpu_arena *arena;
	cpu_tensor out[MAXIO];
	int heap[MAXIO];
	char err[ERRLEN];
} trun;

static int run(trun *r, tnode *t, const cpu_scope *scope, int n_in, const cpu_tensor **in)
{
	static const cpu_tensor *consts[MAXIO];
	const cpu_tensor *planned[MAXIO] = {0};
	cpu_node node;
	int rc;

	if (!r->arena)
		r->arena = cpu_arena_new();
	rc = cpu_node_init(&node, &(cpu_load_env){&cpu_optable_all, NULL, &opsets, 0}, NULL, &t->p, 17,
			   consts, n_in, (int)t->p.n_output, r->err, ERRLEN);
	if (rc)
		return rc;
	rc = cpu_node_run(&node, &(cpu_run_env){.arena = r->arena, .scope = scope, .threads = 1}, in, planned, r->out,
			  r->heap, r->err, ERRLEN);
	cpu_node_fini(&node);
	return rc;
}

static void run_done(trun *r)
{
	for (int i = 0; i < MAXIO; i++)
		if (r->heap[i])
			free(r->out[i].data);
	memset(r->heap, 0, sizeof(r->heap));
	cpu_arena_free(r->arena);
	r->arena = NULL;
}

static float f32(const cpu_tensor *t, int64_t i)
{
	assert_int_equal(t->dtype, CPU_FLOAT);
	return ((const float *)t->data)[i];
}

/* ---- If ---- */

static void test_if_outer_values(void **state)
{
	tnode then_n[1], else_n[1], node;
	tgraph gt, ge;
	float x[2] = {1, 2}, y[2] = {10, 20};
	uint8_t c = 1, c2[2] = {1, 1};
	int64_t d2[1] = {2};
	cpu_tensor X = tens(CPU_FLOAT, 1, d2, x), Y = tens(CPU_FLOAT, 1, d2, y);
	cpu_tensor C = tens(CPU_BOOL, 0, NULL, &c), C2 = tens(CPU_BOOL, 1, d2, c2);
	tscope sc = {{NULL, ts_find}, 2, {"x", "y"}, {&X, &Y}};
	const cpu_tensor *in[1] = {&C};
	trun r = {0};

	(void)state;
	tn(&then_n[0], "Add", "x,y", "s");
	tn(&else_n[0], "Identity", "x", "s");
	tn(&node, "If", "c", "out");
	tn_graph(&node, "then_branch", tg(&gt, "", "s", then_n, 1));
	tn_graph(&node, "else_branch", tg(&ge, "", "s", else_n, 1));
	assert_int_equal(run(&r, &node, &sc.base, 1, in), 0);
	assert_int_equal(r.out[0].rank, 1);
	assert_true(f32(&r.out[0], 0) == 11 && f32(&r.out[0], 1) == 22);
	run_done(&r);
	c = 0;
	assert_int_equal(run(&r, &node, &sc.base, 1, in), 0);
	assert_true(f32(&r.out[0], 0) == 1 && f32(&r.out[0], 1) == 2);
	run_done(&r);
	/* an outer name nobody defines */
	c = 1;
	sc.n = 1;
	assert_int_equal(run(&r, &node, &sc.base, 1, in), CPU_E_INVALID);
	assert_non_null(strstr(r.err, "'y' is not defined"));
	run_done(&r);
	/* a condition of two elements */
	in[0] = &C2;
	assert_int_equal(run(&r, &node, &sc.base, 1, in), CPU_E_INVALID);
	assert_non_null(strstr(r.err, "cond"));
	run_done(&r);
}

/* ---- Loop ---- */

static void test_loop_carried_scan_and_stop(void **state)
{
	tnode body_n[3], node;
	tgraph gb;
	int64_t trips = 10, lim = 2, d1[1] = {1}, d2[1] = {2};
	uint8_t cond = 1;
	float y0 = 0, one = 1, k[2] = {7, 8};
	cpu_tensor M = tens(CPU_INT64, 0, NULL, &trips), C = tens(CPU_BOOL, 0, NULL, &cond);
	cpu_tensor Y = tens(CPU_FLOAT, 1, d1, &y0), K = tens(CPU_FLOAT, 1, d2, k);
	cpu_tensor ONE = tens(CPU_FLOAT, 1, d1, &one), LIM = tens(CPU_INT64, 0, NULL, &lim);
	tscope sc = {{NULL, ts_find}, 2, {"one", "lim"}, {&ONE, &LIM}};
	const cpu_tensor *in[4] = {&M, &C, &Y, &K};
	trun r = {0};

	(void)state;
	tn(&body_n[0], "Add", "y_in,one", "y_out");
	tn(&body_n[1], "Less", "i,lim", "cond_out");
	tn(&body_n[2], "Identity", "y_out", "scan");
	/* k_in goes straight through: the loop must own a copy of it */
	tn(&node, "Loop", "M,c,y,k", "y_final,k_final,scans");
	tn_graph(&node, "body", tg(&gb, "i,cond_in,y_in,k_in", "cond_out,y_out,k_in,scan",
				   body_n, 3));
	assert_int_equal(run(&r, &node, &sc.base, 4, in), 0);
	assert_true(f32(&r.out[0], 0) == 3);   /* iterations 0, 1 and 2 */
	assert_true(f32(&r.out[1], 0) == 7 && f32(&r.out[1], 1) == 8);
	assert_int_equal(r.out[2].rank, 2);
	assert_int_equal(r.out[2].dims[0], 3);
	assert_int_equal(r.out[2].dims[1], 1);
	assert_true(f32(&r.out[2], 0) == 1 && f32(&r.out[2], 2) == 3);
	run_done(&r);
	/* no trip count, no condition input: only the body's condition stops it */
	in[0] = NULL;
	in[1] = NULL;
	assert_int_equal(run(&r, &node, &sc.base, 4, in), 0);
	assert_true(f32(&r.out[0], 0) == 3);
	run_done(&r);
	/* zero iterations: the initial values, an empty scan output */
	trips = 0;
	in[0] = &M;
	assert_int_equal(run(&r, &node, &sc.base, 4, in), 0);
	assert_true(f32(&r.out[0], 0) == 0);
	assert_int_equal(r.out[2].dims[0], 0);
	run_done(&r);
}

/* A body value read only by a nested If must live until the If ran. */
static void test_loop_nested_liveness(void **state)
{
	tnode body_n[3], then_n[1], else_n[1], node;
	tgraph gb, gt, ge;
	int64_t trips = 3, d1[1] = {1};
	float y0 = 1;
	cpu_tensor M = tens(CPU_INT64, 0, NULL, &trips), Y = tens(CPU_FLOAT, 1, d1, &y0);
	const cpu_tensor *in[3] = {&M, NULL, &Y};
	trun r = {0};

	(void)state;
	tn(&then_n[0], "Identity", "t", "r");
	tn(&else_n[0], "Neg", "t", "r");
	tn(&body_n[0], "Add", "y_in,y_in", "t");
	tn(&body_n[1], "If", "cond_in", "y_out");
	tn_graph(&body_n[1], "then_branch", tg(&gt, "", "r", then_n, 1));
	tn_graph(&body_n[1], "else_branch", tg(&ge, "", "r", else_n, 1));
	tn(&body_n[2], "Identity", "cond_in", "cond_out");
	tn(&node, "Loop", "M,,y", "y_final");
	tn_graph(&node, "body", tg(&gb, "i,cond_in,y_in", "cond_out,y_out", body_n, 3));
	assert_int_equal(run(&r, &node, NULL, 3, in), 0);
	assert_true(f32(&r.out[0], 0) == 8);
	run_done(&r);
}

static void test_loop_body_mismatch(void **state)
{
	tnode body_n[1], node;
	tgraph gb;
	int64_t trips = 1, d1[1] = {1};
	float y0 = 1;
	cpu_tensor M = tens(CPU_INT64, 0, NULL, &trips), Y = tens(CPU_FLOAT, 1, d1, &y0);
	const cpu_tensor *in[3] = {&M, NULL, &Y};
	trun r = {0};

	(void)state;
	tn(&body_n[0], "Identity", "cond_in", "cond_out");
	tn(&node, "Loop", "M,,y", "y_final");
	tn_graph(&node, "body", tg(&gb, "i,cond_in", "cond_out", body_n, 1));
	assert_int_equal(run(&r, &node, NULL, 3, in), CPU_E_INVALID);
	assert_non_null(strstr(r.err, "inputs"));
	run_done(&r);
}

/* ---- Scan ---- */

static void test_scan_axes_directions(void **state)
{
	tnode body_n[2], node;
	tgraph gb;
	float s0[2] = {0, 0}, x[6] = {1, 2, 3, 4, 5, 6};
	int64_t d2[1] = {2}, d23[2] = {2, 3}, in_axes[1] = {1}, in_dirs[1] = {1};
	int64_t out_axes[1] = {1};
	cpu_tensor S = tens(CPU_FLOAT, 1, d2, s0), X = tens(CPU_FLOAT, 2, d23, x);
	const cpu_tensor *in[2] = {&S, &X};
	static const float want[6] = {3, 5, 6, 6, 11, 15};
	trun r = {0};

	(void)state;
	tn(&body_n[0], "Add", "s_in,x_t", "s_out");
	tn(&body_n[1], "Identity", "s_out", "y");
	tn(&node, "Scan", "s,x", "s_final,ys");
	tn_int(&node, "num_scan_inputs", 1);
	tn_ints(&node, "scan_input_axes", in_axes, 1);
	tn_ints(&node, "scan_input_directions", in_dirs, 1);
	tn_ints(&node, "scan_output_axes", out_axes, 1);
	tn_graph(&node, "body", tg(&gb, "s_in,x_t", "s_out,y", body_n, 2));
	assert_int_equal(run(&r, &node, NULL, 2, in), 0);
	assert_true(f32(&r.out[0], 0) == 6 && f32(&r.out[0], 1) == 15);
	assert_int_equal(r.out[1].rank, 2);
	assert_int_equal(r.out[1].dims[0], 2);
	assert_int_equal(r.out[1].dims[1], 3);
	for (int i = 0; i < 6; i++)
		assert_true(f32(&r.out[1], i) == want[i]);
	run_done(&r);
}

/* ---- sequences and optionals ---- */

static const cpu_seq *seq_of(const cpu_tensor *t)
{
	assert_int_equal(t->dtype, CPU_SEQUENCE);
	return t->data;
}

static void test_sequence_ops(void **state)
{
	tnode ctor, ins, at, erase, len;
	float a = 1, b = 2, c = 3;
	int64_t pos0 = 0, pos5 = 5, posm1 = -1, d1[1] = {1};
	cpu_tensor A = tens(CPU_FLOAT, 1, d1, &a), B = tens(CPU_FLOAT, 1, d1, &b);
	cpu_tensor C = tens(CPU_FLOAT, 1, d1, &c), P0 = tens(CPU_INT64, 0, NULL, &pos0);
	cpu_tensor P5 = tens(CPU_INT64, 0, NULL, &pos5), PM1 = tens(CPU_INT64, 0, NULL, &posm1);
	const cpu_tensor *in[3] = {&A, &B, NULL};
	trun r1 = {0}, r2 = {0}, r3 = {0};
	cpu_tensor seq2;

	(void)state;
	tn(&ctor, "SequenceConstruct", "a,b", "s");
	assert_int_equal(run(&r1, &ctor, NULL, 2, in), 0);
	a = 100;   /* the sequence holds copies */
	assert_int_equal(seq_of(&r1.out[0])->n, 2);
	r2.arena = r1.arena;
	tn(&ins, "SequenceInsert", "s,c,p", "s2");
	in[0] = &r1.out[0];
	in[1] = &C;
	in[2] = &P0;
	assert_int_equal(run(&r2, &ins, NULL, 3, in), 0);
	seq2 = r2.out[0];
	assert_int_equal(seq_of(&seq2)->n, 3);
	assert_true(f32(&seq_of(&seq2)->items[0], 0) == 3 && f32(&seq_of(&seq2)->items[1], 0) == 1);
	r3.arena = r1.arena;
	tn(&at, "SequenceAt", "s,p", "t");
	in[0] = &seq2;
	in[1] = &PM1;
	assert_int_equal(run(&r3, &at, NULL, 2, in), 0);
	assert_true(f32(&r3.out[0], 0) == 2);
	free(r3.out[0].data);
	in[1] = &P5;
	assert_int_equal(run(&r3, &at, NULL, 2, in), CPU_E_INVALID);
	assert_non_null(strstr(r3.err, "out of range"));
	tn(&erase, "SequenceErase", "s", "s3");
	assert_int_equal(run(&r3, &erase, NULL, 1, in), 0);
	assert_int_equal(seq_of(&r3.out[0])->n, 2);
	tn(&len, "SequenceLength", "s", "n");
	in[0] = &r3.out[0];
	assert_int_equal(run(&r2, &len, NULL, 1, in), 0);
	assert_int_equal(*(int64_t *)r2.out[0].data, 2);
	free(r2.out[0].data);
	cpu_arena_free(r1.arena);
}

static void test_split_concat(void **state)
{
	tnode split, concat;
	float x[5] = {1, 2, 3, 4, 5};
	int64_t two = 2, d5[1] = {5};
	cpu_tensor X = tens(CPU_FLOAT, 1, d5, x), S = tens(CPU_INT64, 0, NULL, &two);
	const cpu_tensor *in[2] = {&X, &S};
	const cpu_seq *s;
	trun r1 = {0}, r2 = {0};

	(void)state;
	tn(&split, "SplitToSequence", "x,split", "s");
	assert_int_equal(run(&r1, &split, NULL, 2, in), 0);
	s = seq_of(&r1.out[0]);
	assert_int_equal(s->n, 3);
	assert_int_equal(s->items[2].dims[0], 1);
	assert_true(f32(&s->items[2], 0) == 5);
	r2.arena = r1.arena;
	tn(&concat, "ConcatFromSequence", "s", "y");
	tn_int(&concat, "axis", 0);
	in[0] = &r1.out[0];
	assert_int_equal(run(&r2, &concat, NULL, 1, in), 0);
	assert_int_equal(r2.out[0].dims[0], 5);
	for (int i = 0; i < 5; i++)
		assert_true(f32(&r2.out[0], i) == x[i]);
	free(r2.out[0].data);
	/* stacking needs equal shapes: [2], [2], [1] are not */
	tn_int(&concat, "new_axis", 1);
	assert_int_equal(run(&r2, &concat, NULL, 1, in), CPU_E_INVALID);
	cpu_arena_free(r1.arena);
}

static void test_optional_and_identity(void **state)
{
	tnode opt, has, get, id;
	float a = 4;
	int64_t d1[1] = {1};
	cpu_tensor A = tens(CPU_FLOAT, 1, d1, &a), NONE;
	const cpu_tensor *in[1] = {NULL};
	trun r = {0};

	(void)state;
	memset(&NONE, 0, sizeof(NONE));
	NONE.dtype = CPU_NONE;
	tn(&opt, "Optional", "", "o");
	assert_int_equal(run(&r, &opt, NULL, 0, in), 0);
	assert_int_equal(r.out[0].dtype, CPU_NONE);
	tn(&has, "OptionalHasElement", "o", "b");
	in[0] = &NONE;
	assert_int_equal(run(&r, &has, NULL, 1, in), 0);
	assert_int_equal(*(uint8_t *)r.out[0].data, 0);
	free(r.out[0].data);
	tn(&get, "OptionalGetElement", "o", "v");
	assert_int_equal(run(&r, &get, NULL, 1, in), CPU_E_INVALID);
	in[0] = &A;
	assert_int_equal(run(&r, &get, NULL, 1, in), 0);
	assert_true(f32(&r.out[0], 0) == 4);
	free(r.out[0].data);
	tn(&id, "Identity", "x", "y");
	in[0] = &NONE;
	assert_int_equal(run(&r, &id, NULL, 1, in), 0);
	assert_int_equal(r.out[0].dtype, CPU_NONE);
	in[0] = &A;
	assert_int_equal(run(&r, &id, NULL, 1, in), 0);
	assert_true(f32(&r.out[0], 0) == 4);
	free(r.out[0].data);
	cpu_arena_free(r.arena);
}

/* ---- strings ---- */

static const char *str_at(const cpu_tensor *t, int64_t i)
{
	assert_int_equal(t->dtype, CPU_STRING);
	return ((const char *const *)t->data)[i];
}

static void test_string_normalizer(void **state)
{
	tnode node;
	const char *x[3] = {"Monday", "\xc3\x84rger", "tuesday"}, *only[1] = {"monday"};
	int64_t d3[1] = {3}, d1[1] = {1};
	cpu_tensor X = tens(CPU_STRING, 1, d3, x), ONLY = tens(CPU_STRING, 1, d1, only);
	const cpu_tensor *in[1] = {&X};
	Onnx__AttributeProto *sw;
	trun r = {0};

	(void)state;
	tn(&node, "StringNormalizer", "x", "y");
	tn_str(&node, "case_change_action", "UPPER");
	sw = tn_attr(&node, "stopwords", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRINGS);
	node.strs[0].data = (uint8_t *)"MONDAY";
	node.strs[0].len = 6;
	sw->n_strings = 1;
	sw->strings = node.strs;
	assert_int_equal(run(&r, &node, NULL, 1, in), 0);
	assert_int_equal(r.out[0].dims[0], 2);
	assert_string_equal(str_at(&r.out[0], 0), "\xc3\x84RGER");
	assert_string_equal(str_at(&r.out[0], 1), "TUESDAY");
	free(r.out[0].data);
	node.attr[0].s.data = (uint8_t *)"LOWER";
	assert_int_equal(run(&r, &node, NULL, 1, in), 0);
	assert_string_equal(str_at(&r.out[0], 0), "\xc3\xa4rger");
	free(r.out[0].data);
	/* everything dropped: one empty string */
	in[0] = &ONLY;
	assert_int_equal(run(&r, &node, NULL, 1, in), 0);
	assert_int_equal(r.out[0].dims[0], 1);
	assert_string_equal(str_at(&r.out[0], 0), "");
	free(r.out[0].data);
	cpu_arena_free(r.arena);
}

static void test_cast_strings(void **state)
{
	tnode to_s, from_s;
	float x[8] = {0.5f, 100.0f, 1e-5f, 1.5e16f, -0.25f, 0.1f, 0.0f, 0.0f};
	static const char *const want[8] = {"0.5", "100.0", "1e-05", "1.5e+16", "-0.25", "0.1",
					    "0.0", "NaN"};
	const char *s[4] = {"+INF", "NaN", "1.5", "-2"};
	int64_t d8[1] = {8}, d4[1] = {4};
	cpu_tensor X = tens(CPU_FLOAT, 1, d8, x), S = tens(CPU_STRING, 1, d4, s);
	const cpu_tensor *in[1] = {&X};
	trun r = {0};

	(void)state;
	x[7] = strtof("nan", NULL);
	tn(&to_s, "Cast", "x", "y");
	tn_int(&to_s, "to", CPU_STRING);
	assert_int_equal(run(&r, &to_s, NULL, 1, in), 0);
	for (int i = 0; i < 8; i++)
		assert_string_equal(str_at(&r.out[0], i), want[i]);
	free(r.out[0].data);
	tn(&from_s, "Cast", "s", "y");
	tn_int(&from_s, "to", CPU_FLOAT);
	in[0] = &S;
	assert_int_equal(run(&r, &from_s, NULL, 1, in), 0);
	assert_true(f32(&r.out[0], 0) > 1e38f && f32(&r.out[0], 1) != f32(&r.out[0], 1));
	assert_true(f32(&r.out[0], 2) == 1.5f && f32(&r.out[0], 3) == -2.0f);
	free(r.out[0].data);
	cpu_arena_free(r.arena);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_if_outer_values),
		cmocka_unit_test(test_loop_carried_scan_and_stop),
		cmocka_unit_test(test_loop_nested_liveness),
		cmocka_unit_test(test_loop_body_mismatch),
		cmocka_unit_test(test_scan_axes_directions),
		cmocka_unit_test(test_sequence_ops),
		cmocka_unit_test(test_split_concat),
		cmocka_unit_test(test_optional_and_identity),
		cmocka_unit_test(test_string_normalizer),
		cmocka_unit_test(test_cast_strings),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
