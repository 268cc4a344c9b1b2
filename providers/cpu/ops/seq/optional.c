/*
 * optional: ONNX Optional, OptionalHasElement and OptionalGetElement, and
 * Identity for every kind of value.  An optional holding a value is that
 * value; an empty one is CPU_NONE.  Identity of a plain tensor is
 * cpu_tensor_op_identity's (ops/tensor/reshape.c, not in the op table):
 * this entry hands tensors over.
 */
#include "seq_ops.h"

static int is_special(const cpu_tensor *t)
{
	return t && (t->dtype == CPU_SEQUENCE || t->dtype == CPU_NONE);
}

static int optional_compute(cpu_ctx *ctx)
{
	const cpu_tensor *x = cpu_input(ctx, 0);

	return x ? cpu_value_emit(ctx, 0, x) : cpu_output_none(ctx, 0);
}

static int has_element_compute(cpu_ctx *ctx)
{
	const cpu_tensor *x = cpu_input(ctx, 0);
	cpu_tensor *y = cpu_output(ctx, 0, CPU_BOOL, 0, NULL);

	if (!y)
		return CPU_E_NOMEM;
	*(uint8_t *)y->data = x && x->dtype != CPU_NONE;
	return 0;
}

static int get_element_compute(cpu_ctx *ctx)
{
	const cpu_tensor *x = cpu_input(ctx, 0);

	if (!x || x->dtype == CPU_NONE)
		return cpu_fail(ctx, CPU_E_INVALID, "the optional is empty");
	return cpu_value_emit(ctx, 0, x);
}

static int identity_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt,
			     int n_in, char *why, size_t n)
{
	if (!cpu_tensor_op_identity.supports)
		return 1;
	return cpu_tensor_op_identity.supports(p, opset, dt, n_in, why, n);
}

static int identity_compute(cpu_ctx *ctx)
{
	const cpu_tensor *x = cpu_input(ctx, 0);

	if (is_special(x))
		return cpu_value_emit(ctx, 0, x);
	return cpu_tensor_op_identity.compute(ctx);
}

const cpu_op cpu_op_optional = {
	"Optional", "", 15, CPU_OPSET_MAX, NULL, NULL, optional_compute, NULL,
};
const cpu_op cpu_op_optionalhaselement = {
	"OptionalHasElement", "", 15, CPU_OPSET_MAX, NULL, NULL, has_element_compute, NULL,
};
const cpu_op cpu_op_optionalgetelement = {
	"OptionalGetElement", "", 15, CPU_OPSET_MAX, NULL, NULL, get_element_compute, NULL,
};
const cpu_op cpu_op_seq_identity = {
	"Identity", "", 1, CPU_OPSET_MAX, identity_supports, NULL, identity_compute, NULL,
};
