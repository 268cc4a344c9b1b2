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
	int32_t to;
	cpu_tensor *Y;
	int rc = 0;

	if (!(X = cpu_require(ctx, 0, &rc)) || !(T = cpu_require(ctx, 1, &rc)))
		return rc;
	if ((rc = cpu_check_dtype(ctx, X, 0, CASTLIKE_TYPES)) ||
	    (rc = cpu_check_dtype(ctx, T, 1, CASTLIKE_TYPES)))
		return rc;
	to = T->dtype;
	if (!(Y = cpu_output(ctx, 0, to, X->rank, X->dims)))
		return CPU_E_NOMEM;
	cpu_cast_values(X, Y);
	return 0;
}

const cpu_op cpu_tensor_op_castlike = {
	"CastLike", "", 15, CPU_OPSET_MAX, castlike_supports, NULL, castlike_compute, NULL,
};
