/*
 * shape_ops_msq.c: type and shape inference for the quantized ops of the
 * com.microsoft domain (shape_ops_ms.c falls back to this table), and the
 * table.  The contract is shape_ops.h's; an op missing
 * here takes what the model declares (SHAPE_DECLARED), and its outputs are
 * sized at run time.  The CPU kernels (providers/cpu/ops/msq/) compute the
 * same shapes and check them against these.
 */
#include <errno.h>
#include <string.h>

#include "shape_ops.h"
#include "shape_ops_fn.h"
#include "window.h"

/* QLinearSigmoid, QLinearLeakyRelu: X's type and shape. */
/* QLinearAdd, QLinearMul: A and B (inputs 0 and 3) broadcast. */
static int fn_binary(shape_ctx *c)
{
	return shape_bcast(c, shape_in(c, 0), shape_in(c, 3), shape_out(c, 0));
}

/* QLinearConcat: Y_zero_point's type; the inputs' dims, summed on axis. */
static int fn_concat(shape_ctx *c)
{
	const graph_tinfo *x0 = shape_in(c, 2);
	graph_tinfo *o = shape_out(c, 0);
	int ax, n = (c->n->n_in - 2) / 3;

	o->elem_type = shape_in(c, 1)->elem_type;
	if (x0->rank < 0)
		return 0;
	if (shape_axis(c, shape_attr_int(c, "axis", 0), x0->rank, &ax))
		return -EINVAL;
	shape_copy(o, x0, 0);
	o->elem_type = shape_in(c, 1)->elem_type;
	for (int k = 1; k < n; k++) {
		const graph_tinfo *x = shape_in(c, 2 + 3 * k);
		if (x->rank != x0->rank || o->dims[ax] < 0 || x->dims[ax] < 0) {
			o->dims[ax] = SHAPE_NEW;
			continue;
		}
		o->dims[ax] += x->dims[ax];
	}
	return 0;
}

/* QLinearGlobalAveragePool: spatial dims 1 (channels_last: dims 1..r-2). */
static int fn_global_pool(shape_ctx *c)
{
	const graph_tinfo *x = shape_in(c, 0);
	graph_tinfo *o = shape_out(c, 0);
	int last = shape_attr_int(c, "channels_last", 0) != 0;

	shape_copy(o, x, 0);
	for (int i = last ? 1 : 2; i < (last ? o->rank - 1 : o->rank); i++)
		o->dims[i] = 1;
	return 0;
}

/* QLinearAveragePool (arg 0, channels_last attribute) and NhwcMaxPool
 * (arg 1, always channels last): N and C kept, the spatial dims by the
 * window rules; SAME_* with a dilated window as ONNX Runtime sizes it
 * (padding from the undilated kernel). */
static int fn_pool(shape_ctx *c)
{
	const graph_tinfo *x = shape_in(c, 0);
	graph_tinfo *o = shape_out(c, 0);
	int last = c->arg || shape_attr_int(c, "channels_last", 0) != 0, nsp, known = 1;
	int64_t in[3];
	onnx_window w;
	onnx_geom g;
	char why[SHAPE_WHY_LEN];

	shape_copy(o, x, 0);
	if (x->rank < 0)
		return 0;
	if (x->rank < 3 || x->rank > 5)
		return shape_fail(c, "input rank %d: 1 to 3 spatial dims expected", x->rank);
	nsp = x->rank - 2;
	for (int i = 0; i < nsp; i++) {
		in[i] = x->dims[last ? 1 + i : 2 + i];
		known &= in[i] >= 0;
	}
	if (!known || onnx_window_parse(c->n->proto, &w, why, sizeof(why)) ||
	    onnx_window_geom(&w, nsp, in, NULL, &g, why, sizeof(why))) {
		for (int i = 0; i < nsp; i++)
			o->dims[last ? 1 + i : 2 + i] = SHAPE_NEW;
		return 0;
	}
	for (int i = 0; i < nsp; i++) {
		int s = 3 - nsp + i;
		int64_t out = g.out[s];
		if (w.auto_pad == ONNX_PAD_SAME_UPPER || w.auto_pad == ONNX_PAD_SAME_LOWER) {
			int64_t pad = ((in[i] + g.s[s] - 1) / g.s[s] - 1) * g.s[s] + g.k[s] - in[i];
			pad = pad > 0 ? pad : 0;
			out = (in[i] + pad - g.d[s] * (g.k[s] - 1) - 1) / g.s[s] + 1;
		}
		o->dims[last ? 1 + i : 2 + i] = out;
	}
	return 0;
}

/* MatMulNBits: A's dims with the last one N, A's type. */
static int fn_matmulnbits(shape_ctx *c)
{
	const graph_tinfo *a = shape_in(c, 0);
	graph_tinfo *o = shape_out(c, 0);

	shape_copy(o, a, 0);
	if (o->rank == 0)
		return shape_fail(c, "A cannot be a scalar");
	if (o->rank > 0)
		o->dims[o->rank - 1] = shape_attr_int(c, "N", SHAPE_NEW);
	return 0;
}

/* MatMulIntegerToFloat, DynamicQuantizeMatMul: matmul shapes, float32. */
static int fn_matmul_float(shape_ctx *c)
{
	int rc;

	c->arg = SHAPE_MATMUL_INTEGER;
	rc = shape_fn_matmul(c);
	shape_out(c, 0)->elem_type = DT(FLOAT);
	return rc;
}

/* QGemm: (M, N); y_zero_point's type (uint8 without one) when y_scale is
 * given, else float32. */
static int fn_qgemm(shape_ctx *c)
{
	const graph_tinfo *a = shape_in(c, 0), *b = shape_in(c, 3);
	graph_tinfo *o = shape_out(c, 0);
	int ta = shape_attr_int(c, "transA", 0) != 0, tb = shape_attr_int(c, "transB", 0) != 0;

	o->elem_type = !shape_has_in(c, 7) ? DT(FLOAT) :
		       shape_in(c, 8)->elem_type ? shape_in(c, 8)->elem_type : DT(UINT8);
	if ((a->rank >= 0 && a->rank != 2) || (b->rank >= 0 && b->rank != 2))
		return shape_fail(c, "A and B must be 2-D");
	o->rank = 2;
	o->dims[0] = a->rank == 2 ? a->dims[ta ? 1 : 0] : SHAPE_NEW;
	o->dims[1] = b->rank == 2 ? b->dims[tb ? 0 : 1] : SHAPE_NEW;
	return 0;
}

static const shape_op_entry op_table[] = {
	{ "QLinearSigmoid", shape_fn_unary, OP_NONE },
	{ "QLinearLeakyRelu", shape_fn_unary, OP_NONE },
	{ "QLinearAdd", fn_binary, 0 },
	{ "QLinearMul", fn_binary, 0 },
	{ "QLinearConcat", fn_concat, 0 },
	{ "QLinearGlobalAveragePool", fn_global_pool, 0 },
	{ "QLinearAveragePool", fn_pool, 0 },
	{ "NhwcMaxPool", fn_pool, 1 },
	{ "MatMulNBits", fn_matmulnbits, 0 },
	{ "MatMulIntegerToFloat", fn_matmul_float, 0 },
	{ "DynamicQuantizeMatMul", fn_matmul_float, 0 },
	{ "QGemm", fn_qgemm, 0 },
	{ NULL, NULL, 0 },
};

shape_fn shape_op_find_msq(const char *op_type, int *arg)
{
	return shape_table_find(op_table, sizeof(op_table) / sizeof(op_table[0]), op_type, arg);
}
