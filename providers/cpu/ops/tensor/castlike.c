/*
 * castlike: ONNX CastLike — Cast to the dtype of the second input.  The
 * conversions are Cast's (cast.c): same-type copies, direct float32 <->
 * float16 loops, floating paths through double (float to int saturates,
 * NaN gives 0), integer paths through int64; float to bfloat16 rounds to
 * nearest even as Cast does.
 */
#include "tensor_ops.h"

#define CASTLIKE_TYPES (CPU_TYPES_ALL & ~CPU_BIT(CPU_STRING))

static int castlike_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt,
			     int n_in, char *why, size_t n)
{
	(void)p;
	(void)opset;
	return cpu_supports_dtype(dt, n_in, 0, CASTLIKE_TYPES, why, n) &&
	       cpu_supports_dtype(dt, n_in, 1, CASTLIKE_TYPES, why, n);
}

static int castlike_compute(cpu_ctx *ctx)
{
	const cpu_tensor *X, *T;
	int32_t to, from;
	cpu_tensor *Y;
	int64_t n;
	int rc = 0;

	if (!(X = cpu_require(ctx, 0, &rc)) || !(T = cpu_require(ctx, 1, &rc)))
		return rc;
	if ((rc = cpu_check_dtype(ctx, X, 0, CASTLIKE_TYPES)) ||
	    (rc = cpu_check_dtype(ctx, T, 1, CASTLIKE_TYPES)))
		return rc;
	from = X->dtype;
	to = T->dtype;
	if (!(Y = cpu_output(ctx, 0, to, X->rank, X->dims)))
		return CPU_E_NOMEM;
	n = cpu_numel(X);
	if (from == to) {
		if (n && Y->data != X->data)
			memmove(Y->data, X->data, (size_t)n * cpu_dtype_size(to));
	} else if (from == CPU_FLOAT && to == CPU_FLOAT16) {
		for (int64_t i = 0; i < n; i++)
			((uint16_t *)Y->data)[i] = cpu_f32_to_f16(((const float *)X->data)[i]);
	} else if (from == CPU_FLOAT16 && to == CPU_FLOAT) {
		for (int64_t i = 0; i < n; i++)
			((float *)Y->data)[i] = cpu_f16_to_f32(((const uint16_t *)X->data)[i]);
	} else if (cpu_dtype_is_float(from) || cpu_dtype_is_float(to)) {
		for (int64_t i = 0; i < n; i++)
			cpu_set_f64(to, Y->data, i, cpu_get_f64(from, X->data, i));
	} else {
		for (int64_t i = 0; i < n; i++)
			cpu_set_i64(to, Y->data, i, cpu_get_i64(from, X->data, i));
	}
	return 0;
}

const cpu_op cpu_op_castlike = {
	"CastLike", "", 15, CPU_OPSET_MAX, castlike_supports, NULL, castlike_compute, NULL,
};
