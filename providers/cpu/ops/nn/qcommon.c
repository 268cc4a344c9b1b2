/*
 * qcommon: the integer pieces that ConvInteger, QLinearConv, MatMulInteger
 * and QLinearMatMul share: an int32 GEMM, zero point and scale loading,
 * zero-point-centred copies of quantized tensors, and requantization.
 * Declared in nn_ops.h.
 */
#include <math.h>
#include <string.h>

#include "nn_ops.h"

void nn_igemm(int64_t M, int64_t N, int64_t K, const int32_t *A, int64_t lda,
	      const int32_t *B, int64_t ldb, int32_t *C, int64_t ldc)
{
	for (int64_t i = 0; i < M; i++) {
		int32_t *c = C + i * ldc;
		memset(c, 0, (size_t)N * sizeof(int32_t));
		for (int64_t k = 0; k < K; k++) {
			/* unsigned arithmetic: int32 overflow wraps instead of being UB */
			uint32_t a = (uint32_t)A[i * lda + k];
			const int32_t *b = B + k * ldb;
			if (!a)
				continue;
			for (int64_t j = 0; j < N; j++)
				c[j] = (int32_t)((uint32_t)c[j] + a * (uint32_t)b[j]);
		}
	}
}

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

int32_t *nn_centered(cpu_ctx *ctx, const cpu_tensor *t, const int32_t *zp, int64_t count,
		     int64_t inner)
{
	int64_t n = cpu_numel(t);
	int32_t *buf = cpu_scratch(ctx, (size_t)(n ? n : 1) * sizeof(int32_t));

	if (!buf)
		return NULL;
	if (t->dtype == CPU_UINT8) {
		const uint8_t *s = t->data;
		for (int64_t e = 0; e < n; e++)
			buf[e] = (int32_t)s[e] - zp[count > 1 ? (e / inner) % count : 0];
	} else {
		const int8_t *s = t->data;
		for (int64_t e = 0; e < n; e++)
			buf[e] = (int32_t)s[e] - zp[count > 1 ? (e / inner) % count : 0];
	}
	return buf;
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
