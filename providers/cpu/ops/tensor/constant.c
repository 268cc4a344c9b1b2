/*
 * constant: ONNX Constant.  prepare turns the attribute (value as a tensor
 * with raw_data or typed fields, value_float(s), value_int(s)) into a
 * cpu_tensor kept in node->state; compute copies it to the output.  Strings
 * and sparse tensors are refused.
 */
#include <stdio.h>
#include <stdlib.h>

#include "cpu_ops.h"

static cpu_tensor *constant_from_attrs(const Onnx__NodeProto *p, char *err, size_t n)
{
	Onnx__TensorProto tp = ONNX__TENSOR_PROTO__INIT;
	const Onnx__AttributeProto *a;
	int64_t count;
	const Onnx__TensorProto *value = cpu_attr_tensor(p, "value");
	if (value)
		return cpu_tensor_from_proto(value, err, n);
	tp.name = p->output && p->n_output ? p->output[0] : NULL;
	if ((a = cpu_attr(p, "value_float")) != NULL) {
		tp.data_type = CPU_FLOAT;
		tp.n_float_data = 1;
		tp.float_data = &((Onnx__AttributeProto *)a)->f;
	} else if ((a = cpu_attr(p, "value_floats")) != NULL) {
		tp.data_type = CPU_FLOAT;
		tp.n_float_data = a->n_floats;
		tp.float_data = a->floats;
		count = (int64_t)a->n_floats;
		tp.n_dims = 1;
		tp.dims = &count;
	} else if ((a = cpu_attr(p, "value_int")) != NULL) {
		tp.data_type = CPU_INT64;
		tp.n_int64_data = 1;
		tp.int64_data = &((Onnx__AttributeProto *)a)->i;
	} else if ((a = cpu_attr(p, "value_ints")) != NULL) {
		tp.data_type = CPU_INT64;
		tp.n_int64_data = a->n_ints;
		tp.int64_data = a->ints;
		count = (int64_t)a->n_ints;
		tp.n_dims = 1;
		tp.dims = &count;
	} else {
		snprintf(err, n, "no supported value attribute (sparse and string constants are "
			 "not supported)");
		return NULL;
	}
	return cpu_tensor_from_proto(&tp, err, n);
}

static int constant_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt,
			     int n_in, char *why, size_t n)
{
	cpu_tensor *t = constant_from_attrs(p, why, n);
	int ok = t != NULL;
	(void)opset;
	(void)dt;
	(void)n_in;
	free(t);
	return ok;
}

static int constant_prepare(cpu_node *node, char *err, size_t n)
{
	cpu_tensor *t = constant_from_attrs(node->proto, err, n);
	if (!t)
		return CPU_E_UNSUPPORTED;
	node->state = t;
	return 0;
}

static void constant_release(cpu_node *node)
{
	free(node->state);
	node->state = NULL;
}

static int constant_compute(cpu_ctx *ctx)
{
	const cpu_tensor *t = ctx->node->state;
	return cpu_copy_to_output(ctx, t, t->rank, t->dims);
}

const cpu_op cpu_op_constant = {
	"Constant", "", 1, CPU_OPSET_MAX, constant_supports, constant_prepare, constant_compute,
	constant_release,
};
