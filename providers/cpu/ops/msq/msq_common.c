/*
 * msq_common: the pieces the quantized com.microsoft ops share (msq.h):
 * scalar scale and zero point inputs, ONNX Runtime's quantization of one
 * float, and the lookup tables of the QLinear element-wise ops.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "igemm.h"
#include "msq.h"
#include "par.h"

int msq_scale(cpu_ctx *ctx, int i, const char *what, float *v)
{
	const cpu_tensor *t = cpu_input(ctx, i);

	if (!t)
		return cpu_fail(ctx, CPU_E_INVALID, "%s (input %d) is required", what, i);
	if (t->dtype != CPU_FLOAT || cpu_numel(t) != 1)
		return cpu_fail(ctx, CPU_E_INVALID, "%s (input %d) must be one float32 (a per-tensor "
				"scale)", what, i);
	*v = *(const float *)t->data;
	return 0;
}

int msq_zero_point(cpu_ctx *ctx, int i, const char *what, int32_t dtype, int32_t *v)
{
	const cpu_tensor *t = cpu_input(ctx, i);

	*v = 0;
	if (!t)
		return 0;
	if (t->dtype != dtype || cpu_numel(t) != 1)
		return cpu_fail(ctx, CPU_E_INVALID, "%s (input %d) must be one %s (a per-tensor zero "
				"point)", what, i, cpu_dtype_name(dtype));
	*v = (int32_t)cpu_get_i64(dtype, t->data, 0);
	return 0;
}

int msq_supports_q8(const int32_t *dt, int n_in, uint32_t q8, char *why, size_t n)
{
	int32_t first = n_in > 0 ? dt[0] : CPU_UNDEFINED;

	for (int i = 0; i < n_in; i++) {
		int is_q = i < 32 && (q8 >> i) & 1;

		if (dt[i] == CPU_UNDEFINED)
			continue;
		if (!cpu_supports_dtype(dt, n_in, i, is_q ? MSQ_Q8 : CPU_TYPES_F32, why, n))
			return 0;
		if (is_q && first != CPU_UNDEFINED && dt[i] != first) {
			snprintf(why, n, "input %d is %s but input 0 is %s", i, cpu_dtype_name(dt[i]),
				 cpu_dtype_name(first));
			return 0;
		}
	}
	return 1;
}

int32_t msq_quantize(float x, float scale, int32_t zp, int32_t dtype)
{
	float lo = dtype == CPU_INT8 ? -128.0f : 0.0f, hi = dtype == CPU_INT8 ? 127.0f : 255.0f;
	float v = x / scale;

	/* MLAS clamps first (so a NaN lands on the low bound), then rounds */
	v = v > lo - (float)zp ? v : lo - (float)zp;
	v = v < hi - (float)zp ? v : hi - (float)zp;
	return (int32_t)nearbyintf(v) + zp;
}

void msq_build_table(int32_t dtype, float xs, int32_t xz, float ys, int32_t yz, msq_map_fn *f,
		     const void *arg, uint8_t table[256])
{
	float x[256], y[256];

	for (int b = 0; b < 256; b++) {
		int32_t v = dtype == CPU_INT8 ? (int32_t)(int8_t)b : b;
		x[b] = xs * (float)(v - xz);
	}
	f(x, y, 256, arg);
	for (int b = 0; b < 256; b++)
		table[b] = (uint8_t)msq_quantize(y[b], ys, yz, dtype);
}

typedef struct table_job {
	const uint8_t *table, *x;
	uint8_t *y;
} table_job;

static void table_rows(void *arg, int64_t b, int64_t e, int member)
{
	const table_job *j = arg;

	(void)member;
	for (int64_t i = b; i < e; i++)
		j->y[i] = j->table[j->x[i]];
}

void msq_apply_table(cpu_ctx *ctx, const uint8_t *table, const uint8_t *x, uint8_t *y,
		     int64_t n)
{
	table_job j = {table, x, y};

	cpu_par_for(ctx, n, 0.5, 16384, table_rows, &j);
}

struct bpack_src {
	const cpu_tensor *B;
	int transB;
	int64_t K, N;
};

static int bpack_fill(void *dst, size_t size, void *arg)
{
	const struct bpack_src *s = arg;

	return igemm_pack_b(s->B->data, s->B->dims[1], s->transB, s->B->dtype == CPU_INT8, s->K,
			    s->N, dst, size) ? CPU_E_INTERNAL : 0;
}

/* B above this many packed bytes is packed per call. */
#define MSQ_PACK_MAX ((size_t)64 << 20)

int msq_pack_b(cpu_node *node, int input, int transB, msq_bpack *bp, char *err, size_t n)
{
	const cpu_tensor *B = input < node->n_in ? cpu_node_const(node, input) : NULL;
	struct bpack_src s;
	char fmt[48];
	size_t size;

	memset(bp, 0, sizeof(*bp));
	if (!B || (B->dtype != CPU_UINT8 && B->dtype != CPU_INT8) || B->rank != 2 ||
	    B->dims[0] <= 0 || B->dims[1] <= 0)
		return 0;
	s.B = B;
	s.transB = transB;
	s.K = transB ? B->dims[1] : B->dims[0];
	s.N = transB ? B->dims[0] : B->dims[1];
	size = igemm_pack_b_size(s.K, s.N);
	if (!size || size > MSQ_PACK_MAX)
		return 0;
	snprintf(fmt, sizeof(fmt), "igemm-b%s-v%d", transB ? "t" : "", IGEMM_PACK_VERSION);
	if (!(bp->packed = cpu_prepack(node, input, fmt, size, bpack_fill, &s, err, n)))
		return CPU_E_NOMEM;
	if (igemm_pack_b_check(bp->packed, size, s.K, s.N)) {
		bp->packed = NULL;
		return 0;
	}
	bp->src = B->data;
	bp->K = s.K;
	bp->N = s.N;
	return 0;
}

void msq_dynamic_quantize(const float *x, int64_t n, uint8_t *q, float *scale, int32_t *zp)
{
	float lo = 0.0f, hi = 0.0f, s, z, qlo, qhi;

	for (int64_t i = 0; i < n; i++) {
		lo = x[i] < lo ? x[i] : lo;
		hi = x[i] > hi ? x[i] : hi;
	}
	s = hi == lo ? 1.0f : (hi - lo) / 255.0f;
	z = 0.0f - lo / s;
	z = nearbyintf(z > 0.0f ? z < 255.0f ? z : 255.0f : 0.0f);
	qlo = -z;
	qhi = 255.0f - z;
	for (int64_t i = 0; i < n; i++) {
		float v = x[i] / s;
		v = v > qlo ? v : qlo;
		v = v < qhi ? v : qhi;
		q[i] = (uint8_t)(int32_t)(nearbyintf(v) + z);
	}
	*scale = s;
	*zp = (int32_t)z;
}
