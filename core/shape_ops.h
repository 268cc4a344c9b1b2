/*
 * shape_ops.h: the internal seam between the shape-inference driver
 * (shape.c) and the per-op inference functions (shape_ops.c, the op table;
 * shape_ops_{math,nn,tensor,data}.c, the functions).  Only those files
 * include it; everything else goes through shape_infer() in graph.h.
 *
 * An op function reads its inputs' facts through shape_in(), writes its
 * outputs through shape_out() and returns 0, a negative errno-style code from
 * shape_fail(), or SHAPE_DECLARED to say "nothing to infer here, take what
 * the model declares".  Dims it cannot tell are written as SHAPE_NEW; the
 * driver turns each into a fresh symbol afterwards, so op code never has to
 * thread the symbol counter through its arithmetic.
 */
#ifndef ORTMK_SHAPE_OPS_H
#define ORTMK_SHAPE_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "dims.h"
#include "graph.h"

#define SHAPE_DECLARED 1
/* An unknown dim the driver replaces with a fresh symbol.  Never stored in a
 * tinfo that outlives one op call. */
#define SHAPE_NEW ONNX_DIM_NEW
#define SHAPE_FMT_LEN 160

typedef struct shape_ctx {
	const graph *g;
	const graph_node *n;
	int idx;                  /* node index, for messages */
	int arg;                  /* per-op argument from the op table */
	graph_tinfo *t;           /* the whole per-value table */
	graph_tinfo scratch;      /* target of writes to omitted outputs */
	char *err;
	size_t errlen;
} shape_ctx;

typedef int (*shape_fn)(shape_ctx *c);

/* One op table row: the op, its function and the argument it gets. */
typedef struct shape_op_entry {
	const char *op_type;
	shape_fn fn;
	int arg;
} shape_op_entry;

/* The row of op_type among the n of t (stopping early at a row with no
 * op_type), its fn and *arg; NULL when absent. */
shape_fn shape_table_find(const shape_op_entry *t, size_t n, const char *op_type, int *arg);

/* shape_ops.c: the op table.  NULL when the op is not known. */
shape_fn shape_op_find(const char *domain, const char *op_type, int *arg);
/* The tables of the other domains: com.microsoft (shape_ops_ms.c) and
 * ai.onnx.ml (shape_ops_ml.c).  NULL when the op is not known. */
shape_fn shape_op_find_ms(const char *op_type, int *arg);
shape_fn shape_op_find_msq(const char *op_type, int *arg);  /* its quantized ops */
shape_fn shape_op_find_ml(const char *op_type, int *arg);

/* shape.c: accessors.  shape_in() of an omitted input is an unknown tensor,
 * shape_out() of an omitted output is scratch, so ops need no NULL checks. */
int shape_has_in(const shape_ctx *c, int i);
const graph_tinfo *shape_in(const shape_ctx *c, int i);
graph_tinfo *shape_out(shape_ctx *c, int i);
int shape_fail(shape_ctx *c, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
const char *shape_fmt(const shape_ctx *c, const graph_tinfo *t, char *buf);
/* A rule of onnxrules/ (dims.h) that failed (rc < 0, its message in why)
 * as this node's error; rc itself otherwise. */
int shape_rule(shape_ctx *c, int rc, const char *why);
#define SHAPE_WHY_LEN 160
const char *shape_dtype_name(int32_t et);

/* shape.c: facts. */
void shape_copy(graph_tinfo *dst, const graph_tinfo *src, int with_data);
int shape_set_rank(shape_ctx *c, graph_tinfo *t, int32_t et, int64_t rank);
int shape_same_type(shape_ctx *c, int32_t a, int32_t b);
int shape_axis(shape_ctx *c, int64_t axis, int rank, int *out);
int shape_merge(int64_t a, int64_t b, int64_t *out);
int shape_bcast(shape_ctx *c, const graph_tinfo *a, const graph_tinfo *b,
		graph_tinfo *o);
int64_t shape_bcast_src(const graph_tinfo *o, const graph_tinfo *in, int64_t flat);

/* shape.c: known data. */
int shape_is_int(int32_t et);
void shape_set_data(graph_tinfo *t, const int64_t *v, int64_t n);
int shape_in_ints(const shape_ctx *c, int i, const int64_t **v);
int shape_tensor_ints(const Onnx__TensorProto *tp, int64_t *out, size_t max);
/* d as an int64 when it is integral and within +-2^53: 0, or -1. */
int shape_float_int(double d, int64_t *v);

/* shape.c: attributes (graph_attr_* without depending on graph.c). */
const Onnx__AttributeProto *shape_attr(const shape_ctx *c, const char *name);
int64_t shape_attr_int(const shape_ctx *c, const char *name, int64_t dflt);
int shape_attr_ints(const shape_ctx *c, const char *name, const int64_t **v);
int shape_attr_is(const shape_ctx *c, const char *name, const char *s);

#endif
