/*
 * qlinear_binary: com.microsoft QLinearAdd and QLinearMul on uint8/int8
 * with numpy broadcasting and per-tensor scales and zero points:
 *   Add: c = round((a_s (a - a_zp) + b_s (b - b_zp)) / c_s) + c_zp
 *   Mul: c = round((a - a_zp) (b - b_zp) a_s b_s / c_s) + c_zp
 * saturated to the type, rounding half to even.  Computed in float32 with
 * the scale ratios folded first, as ONNX Runtime's portable MLAS path does;
 * its x86 kernels use a fixed-point form of the same ratios, which can land
 * one unit away on values within a rounding error of a half.
 */
#include <math.h>
#include <string.h>

#include "msq.h"

/* A, A_scale, A_zero_point, B, B_scale, B_zero_point, C_scale, C_zero_point */
#define QB_Q8 (CPU_BIT(0) | CPU_BIT(2) | CPU_BIT(3) | CPU_BIT(5) | CPU_BIT(7))

typedef struct qb_job {
	int is_mul, is_s8;
	const uint8_t *a, *b;
	uint8_t *c;
	int32_t za, zb, zc;
	float ra, rb;            /* Add: a_s / c_s, b_s / c_s; Mul: ra = a_s b_s / c_s */
} qb_job;

static inline int32_t qb_val(const qb_job *j, const uint8_t *p, int64_t i)
{
	return j->is_s8 ? (int32_t)((const int8_t *)p)[i] : (int32_t)p[i];
}

static int qb_row(void *arg, int64_t len, const int64_t *off, const int64_t *st)
{
	const qb_job *j = arg;
	int32_t lo = j->is_s8 ? -128 : 0, hi = j->is_s8 ? 127 : 255;

	for (int64_t k = 0; k < len; k++) {
		int32_t a = qb_val(j, j->a, off[0] + k * st[0]) - j->za;
		int32_t b = qb_val(j, j->b, off[1] + k * st[1]) - j->zb;
		float v = j->is_mul ? (float)(a * b) * j->ra : j->ra * (float)a + j->rb * (float)b;
		int32_t q = (int32_t)nearbyintf(v) + j->zc;

		q = q < lo ? lo : q > hi ? hi : q;
		j->c[off[2] + k] = (uint8_t)q;
	}
	return 0;
}

static int qb_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt, int n_in,
		       char *why, size_t n)
{
	(void)p;
	(void)opset;
	return msq_supports_q8(dt, n_in, QB_Q8, why, n);
}

static int qb_compute(cpu_ctx *ctx, int is_mul)
{
	const cpu_tensor *a, *b;
	cpu_tensor *c;
	float as, bs, cs;
	cpu_bcast bc;
	int ranks[2];
	const int64_t *dims[2];
	qb_job j;
	int rc = 0;

	memset(&j, 0, sizeof(j));
	if (!(a = cpu_require(ctx, 0, &rc)) || !(b = cpu_require(ctx, 3, &rc)))
		return rc;
	if ((rc = cpu_check_dtype(ctx, a, 0, MSQ_Q8)))
		return rc;
	if (b->dtype != a->dtype)
		return cpu_fail(ctx, CPU_E_INVALID, "B is %s but A is %s", cpu_dtype_name(b->dtype),
				cpu_dtype_name(a->dtype));
	if ((rc = msq_scale(ctx, 1, "A_scale", &as)) ||
	    (rc = msq_zero_point(ctx, 2, "A_zero_point", a->dtype, &j.za)) ||
	    (rc = msq_scale(ctx, 4, "B_scale", &bs)) ||
	    (rc = msq_zero_point(ctx, 5, "B_zero_point", a->dtype, &j.zb)) ||
	    (rc = msq_scale(ctx, 6, "C_scale", &cs)) ||
	    (rc = msq_zero_point(ctx, 7, "C_zero_point", a->dtype, &j.zc)))
		return rc;
	ranks[0] = a->rank;
	ranks[1] = b->rank;
	dims[0] = a->dims;
	dims[1] = b->dims;
	if (cpu_bcast_init(&bc, 2, ranks, dims)) {
		const cpu_tensor *ts[2] = {a, b};
		cpu_bcast_error(ctx, 2, ts);
		return CPU_E_INVALID;
	}
	if (!(c = cpu_output(ctx, 0, a->dtype, bc.out_rank, bc.out_dims)))
		return CPU_E_NOMEM;
	j.is_mul = is_mul;
	j.is_s8 = a->dtype == CPU_INT8;
	j.a = a->data;
	j.b = b->data;
	j.c = c->data;
	if (is_mul) {
		j.ra = as * bs / cs;
	} else {
		j.ra = as / cs;
		j.rb = bs / cs;
	}
	if (cpu_numel(c) > 0)
		cpu_bcast_each(&bc, qb_row, &j);
	return 0;
}

static int add_compute(cpu_ctx *ctx)
{
	return qb_compute(ctx, 0);
}

static int mul_compute(cpu_ctx *ctx)
{
	return qb_compute(ctx, 1);
}

const cpu_op cpu_op_msq_qlinearadd = {
	"QLinearAdd", "com.microsoft", 1, CPU_OPSET_MAX, qb_supports, NULL, add_compute, NULL,
};
const cpu_op cpu_op_msq_qlinearmul = {
	"QLinearMul", "com.microsoft", 1, CPU_OPSET_MAX, qb_supports, NULL, mul_compute, NULL,
};
