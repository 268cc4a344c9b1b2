/*
 * qcommon: the integer pieces that ConvInteger, QLinearConv, MatMulInteger
 * and QLinearMatMul share besides the int8 GEMM (gemm/igemm.h): zero
 * point and scale loading, and requantization.
 * Declared in nn_ops.h.
 */
#include <errno.h>
#include <math.h>
#include <string.h>

#include "nn_ops.h"

int nn_load_zp(cpu_ctx *ctx, const cpu_tensor *zp, int i, int32_t x_dtype, const int32_t **v,
	       int64_t *count)
{
	static const int32_t zero = 0;
	int32_t *buf;

	*v = &zero;
	*count = 1;
	if (!zp)
		return 0;
	if (zp->dtype != x_dtype)
		return cpu_fail(ctx, CPU_E_INVALID, "zero point (input %d) is %s but its input is %s",
				i, cpu_dtype_name(zp->dtype), cpu_dtype_name(x_dtype));
	*count = cpu_numel(zp);
	if (zp->rank > 1 || *count < 1)
		return cpu_fail(ctx, CPU_E_INVALID, "zero point (input %d) must be a scalar or 1-D", i);
	if (!(buf = cpu_scratch(ctx, (size_t)*count * sizeof(int32_t))))
		return CPU_E_NOMEM;
	for (int64_t k = 0; k < *count; k++)
		buf[k] = (int32_t)cpu_get_i64(zp->dtype, zp->data, k);
	*v = buf;
	return 0;
}

int nn_load_scale(cpu_ctx *ctx, int i, const float **v, int64_t *count)
{
	const cpu_tensor *s = cpu_input(ctx, i);
	int rc;

	if (!s)
		return cpu_fail(ctx, CPU_E_INVALID, "input %d (scale) is required", i);
	if ((rc = cpu_check_dtype(ctx, s, i, CPU_TYPES_F32)))
		return rc;
	*count = cpu_numel(s);
	if (s->rank > 1 || *count < 1)
		return cpu_fail(ctx, CPU_E_INVALID, "scale (input %d) must be a scalar or 1-D", i);
	*v = s->data;
	return 0;
}

void nn_requant(int32_t dtype, void *y, int64_t i, int32_t acc, float mult, int32_t zp)
{
	float v = nearbyintf((float)acc * mult) + (float)zp;

	if (dtype == CPU_UINT8)
		((uint8_t *)y)[i] = (uint8_t)fminf(fmaxf(v, 0.0f), 255.0f);
	else
		((int8_t *)y)[i] = (int8_t)fminf(fmaxf(v, -128.0f), 127.0f);
}

int nn_igemm_fail(cpu_ctx *ctx, int rc, const char *what)
{
	return cpu_fail(ctx, rc == -ENOMEM ? CPU_E_NOMEM : CPU_E_INTERNAL, "%s failed (%s)", what,
			strerror(-rc));
}
