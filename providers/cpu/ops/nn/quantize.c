/*
 * quantize: ONNX QuantizeLinear and DequantizeLinear (opset 10 on;
 * per-tensor and per-axis scale/zero point; 8- and 16-bit integers; float32
 * or float16 scales) and DynamicQuantizeLinear (float32 to uint8).
 *
 * Quantization computes x / scale in float32, rounds half to even
 * (nearbyintf in the default rounding mode), adds the zero point and
 * saturates, as the ONNX reference does.  DynamicQuantizeLinear follows
 * ONNX Runtime bit for bit (see dyn_compute).  Blocked quantization (block_size,
 * opset 21), float8 and 4-bit types are refused at capability time.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "nn_ops.h"
#include "par.h"
#include "vfloat.h"

#define Q_INT_TYPES (CPU_BIT(CPU_UINT8) | CPU_BIT(CPU_INT8) | CPU_BIT(CPU_UINT16) | \
		     CPU_BIT(CPU_INT16))
#define Q_SCALE_TYPES (CPU_BIT(CPU_FLOAT) | CPU_BIT(CPU_FLOAT16))

/* Scale and zero point per channel: element i uses (i / inner) % count. */
typedef struct qparams {
	int64_t count, inner, outer;
	float *scale;
	int32_t *zp;
} qparams;

static void int_range(int32_t dtype, int32_t *lo, int32_t *hi)
{
	switch (dtype) {
	case CPU_INT8: *lo = INT8_MIN, *hi = INT8_MAX; break;
	case CPU_UINT16: *lo = 0, *hi = UINT16_MAX; break;
	case CPU_INT16: *lo = INT16_MIN, *hi = INT16_MAX; break;
	case CPU_INT32: *lo = INT32_MIN, *hi = INT32_MAX; break;
	default: *lo = 0, *hi = UINT8_MAX; break;
	}
}

static int q_supports_attrs(const Onnx__NodeProto *p, char *why, size_t n)
{
	if (cpu_attr_int(p, "block_size", 0) != 0) {
		snprintf(why, n, "blocked quantization (block_size) is not supported");
		return 0;
	}
	return 1;
}

/* Loads scale (input si) and zero point (input si + 1, optional) for x. */
static int qparams_load(cpu_ctx *ctx, const cpu_tensor *x, int si, int64_t axis, qparams *q)
{
	const cpu_tensor *s = cpu_input(ctx, si), *z = cpu_input(ctx, si + 1);
	int rc = 0, ax = 0;
	int64_t per;

	if (!s)
		return cpu_fail(ctx, CPU_E_INVALID, "input %d (scale) is required", si);
	if ((rc = cpu_check_dtype(ctx, s, si, Q_SCALE_TYPES)))
		return rc;
	q->count = cpu_numel(s);
	q->inner = 1;
	if (s->rank > 1 || q->count < 1)
		return cpu_fail(ctx, CPU_E_INVALID, "scale must be a scalar or 1-D (got rank %d, "
				"%lld values)", s->rank, (long long)q->count);
	if (s->rank == 1 && q->count > 1) {
		if ((ax = cpu_norm_axis(axis, x->rank)) < 0 || x->dims[ax] != q->count)
			return cpu_fail(ctx, CPU_E_INVALID, "per-axis scale has %lld values but "
					"axis %lld of the input does not match",
					(long long)q->count, (long long)axis);
		for (int d = ax + 1; d < x->rank; d++)
			q->inner *= x->dims[d];
	}
	if (z && (cpu_numel(z) != q->count || z->rank > 1))
		return cpu_fail(ctx, CPU_E_INVALID, "zero point and scale differ in shape");
	per = q->count * q->inner;
	q->outer = per > 0 ? cpu_numel(x) / per : 0;
	q->scale = cpu_scratch(ctx, (size_t)q->count * sizeof(float));
	q->zp = cpu_scratch(ctx, (size_t)q->count * sizeof(int32_t));
	if (!q->scale || !q->zp)
		return CPU_E_NOMEM;
	for (int64_t c = 0; c < q->count; c++) {
		q->scale[c] = (float)cpu_get_f64(s->dtype, s->data, c);
		q->zp[c] = z ? (int32_t)cpu_get_i64(z->dtype, z->data, c) : 0;
	}
	return 0;
}

/* x as float32: the input itself, or a converted copy in scratch. */
static const float *as_f32(cpu_ctx *ctx, const cpu_tensor *x)
{
	int64_t n = cpu_numel(x);
	float *f;

	if (x->dtype == CPU_FLOAT)
		return x->data;
	if (!(f = cpu_scratch(ctx, (size_t)(n ? n : 1) * sizeof(float))))
		return NULL;
	for (int64_t i = 0; i < n; i++)
		f[i] = (float)cpu_get_f64(x->dtype, x->data, i);
	return f;
}

static void store_int(int32_t dtype, void *base, int64_t i, int32_t v)
{
	switch (dtype) {
	case CPU_INT8: ((int8_t *)base)[i] = (int8_t)v; break;
	case CPU_UINT16: ((uint16_t *)base)[i] = (uint16_t)v; break;
	case CPU_INT16: ((int16_t *)base)[i] = (int16_t)v; break;
	default: ((uint8_t *)base)[i] = (uint8_t)v; break;
	}
}

static int ql_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt, int n_in,
		       char *why, size_t n)
{
	int64_t od = cpu_attr_int(p, "output_dtype", 0);

	(void)opset;
	if (od && (od < 0 || od >= 32 || !(Q_INT_TYPES & CPU_BIT(od)))) {
		snprintf(why, n, "output_dtype %lld is not supported", (long long)od);
		return 0;
	}
	return q_supports_attrs(p, why, n) &&
	       cpu_supports_dtype(dt, n_in, 0, Q_SCALE_TYPES | CPU_BIT(CPU_INT32), why, n) &&
	       cpu_supports_dtype(dt, n_in, 1, Q_SCALE_TYPES, why, n) &&
	       cpu_supports_dtype(dt, n_in, 2, Q_INT_TYPES, why, n);
}

static int ql_compute(cpu_ctx *ctx)
{
	const Onnx__NodeProto *p = ctx->node->proto;
	const cpu_tensor *x, *z = cpu_input(ctx, 2);
	int64_t od = cpu_attr_int(p, "output_dtype", 0);
	int32_t odt = z ? z->dtype : od > 0 && od < 32 ? (int32_t)od : od ? -1 : CPU_UINT8, lo, hi;
	const float *xf;
	cpu_tensor *y;
	qparams q;
	int rc = 0;

	if (!(x = cpu_require(ctx, 0, &rc)))
		return rc;
	if ((rc = cpu_check_dtype(ctx, x, 0, Q_SCALE_TYPES | CPU_BIT(CPU_INT32))) ||
	    (z && (rc = cpu_check_dtype(ctx, z, 2, Q_INT_TYPES))))
		return rc;
	if (odt <= 0 || odt >= 32 || !(Q_INT_TYPES & CPU_BIT(odt)))
		return cpu_fail(ctx, CPU_E_UNSUPPORTED, "output type %d is not supported", odt);
	if ((rc = qparams_load(ctx, x, 1, cpu_attr_int(p, "axis", 1), &q)))
		return rc;
	if (!(xf = as_f32(ctx, x)) || !(y = cpu_output(ctx, 0, odt, x->rank, x->dims)))
		return CPU_E_NOMEM;
	int_range(odt, &lo, &hi);
	for (int64_t o = 0, i = 0; o < q.outer; o++)
		for (int64_t c = 0; c < q.count; c++) {
			float s = q.scale[c], zp = (float)q.zp[c];
			for (int64_t j = 0; j < q.inner; j++, i++) {
				float v = nearbyintf(xf[i] / s) + zp;
				v = fminf(fmaxf(v, (float)lo), (float)hi);
				store_int(odt, y->data, i, (int32_t)v);
			}
		}
	return 0;
}

static int dql_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt, int n_in,
			char *why, size_t n)
{
	(void)opset;
	return q_supports_attrs(p, why, n) &&
	       cpu_supports_dtype(dt, n_in, 0, Q_INT_TYPES | CPU_BIT(CPU_INT32), why, n) &&
	       cpu_supports_dtype(dt, n_in, 1, Q_SCALE_TYPES, why, n) &&
	       cpu_supports_dtype(dt, n_in, 2, Q_INT_TYPES | CPU_BIT(CPU_INT32), why, n);
}

static int dql_compute(cpu_ctx *ctx)
{
	const cpu_tensor *x, *s = cpu_input(ctx, 1), *z = cpu_input(ctx, 2);
	uint32_t types = Q_INT_TYPES | CPU_BIT(CPU_INT32);
	int32_t odt;
	cpu_tensor *y;
	qparams q;
	int rc = 0;

	if (!(x = cpu_require(ctx, 0, &rc)))
		return rc;
	if ((rc = cpu_check_dtype(ctx, x, 0, types)) || (z && (rc = cpu_check_dtype(ctx, z, 2, types))))
		return rc;
	if (z && z->dtype != x->dtype)
		return cpu_fail(ctx, CPU_E_INVALID, "x is %s but its zero point %s",
				cpu_dtype_name(x->dtype), cpu_dtype_name(z->dtype));
	if ((rc = qparams_load(ctx, x, 1, cpu_attr_int(ctx->node->proto, "axis", 1), &q)))
		return rc;
	odt = (int32_t)cpu_attr_int(ctx->node->proto, "output_dtype", s->dtype);
	if (odt != CPU_FLOAT && odt != CPU_FLOAT16)
		return cpu_fail(ctx, CPU_E_UNSUPPORTED, "output type %d is not supported", odt);
	if (!(y = cpu_output(ctx, 0, odt, x->rank, x->dims)))
		return CPU_E_NOMEM;
	for (int64_t o = 0, i = 0; o < q.outer; o++)
		for (int64_t c = 0; c < q.count; c++) {
			float sc = q.scale[c];
			int64_t zp = q.zp[c];
			for (int64_t j = 0; j < q.inner; j++, i++) {
				float v = (float)(cpu_get_i64(x->dtype, x->data, i) - zp) * sc;
				if (odt == CPU_FLOAT)
					((float *)y->data)[i] = v;
				else
					((uint16_t *)y->data)[i] = cpu_f32_to_f16(v);
			}
		}
	return 0;
}

static int dyn_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt, int n_in,
			char *why, size_t n)
{
	(void)p;
	(void)opset;
	return cpu_supports_dtype(dt, n_in, 0, CPU_TYPES_F32, why, n);
}

/* DynamicQuantizeLinear in two passes over the pool: min/max (partial
 * results per pool member, combined in any order: min and max do not
 * round), then quantize.  Both loops are plain C that gcc vectorizes in
 * each CPU_MULTIVERSION clone. */
typedef struct dyn_job {
	const float *x;
	uint8_t *y;
	float *lo, *hi;         /* per member */
	float scale, qlo, qhi, zp;
} dyn_job;

/* Min and max of x[b, e) folded into the member's: 16 lanes of explicit
 * vectors (the scalar selects stayed scalar, 10% of MobileNetV2 int8's
 * time on Zen 3), each v < lo ? v : lo as minps is, so a NaN never
 * becomes the minimum; lanes start at 0, as the range always holds 0. */
CPU_MULTIVERSION
static void dyn_minmax(void *arg, int64_t b, int64_t e, int member)
{
	dyn_job *j = arg;
	const float *x = j->x;
	vf8 lo0 = vf_splat(0.0f), lo1 = lo0, hi0 = lo0, hi1 = lo0;
	float lo[8], hi[8];
	int64_t i = b;

	for (; i + 16 <= e; i += 16) {
		vf8 v0 = vf_load(x + i), v1 = vf_load(x + i + 8);

		lo0 = vf_min(v0, lo0);
		lo1 = vf_min(v1, lo1);
		hi0 = vf_max(v0, hi0);
		hi1 = vf_max(v1, hi1);
	}
	lo0 = vf_min(lo1, lo0);
	hi0 = vf_max(hi1, hi0);
	memcpy(lo, &lo0, sizeof(lo));
	memcpy(hi, &hi0, sizeof(hi));
	for (; i < e; i++) {
		lo[0] = x[i] < lo[0] ? x[i] : lo[0];
		hi[0] = x[i] > hi[0] ? x[i] : hi[0];
	}
	for (int l = 0; l < 8; l++) {
		j->lo[member] = lo[l] < j->lo[member] ? lo[l] : j->lo[member];
		j->hi[member] = hi[l] > j->hi[member] ? hi[l] : j->hi[member];
	}
}

/* y = saturate(round_half_even(x / scale) + zp): x / scale is clamped to
 * [-zp, 255 - zp] first (a NaN becomes -zp, so y = 0, as ONNX Runtime's
 * MLAS does), then rounded by adding and subtracting 1.5 * 2^23, which
 * rounds to nearest even for |v| < 2^22 in the default rounding mode and
 * vectorizes where nearbyintf would not. */
CPU_MULTIVERSION
static void dyn_quantize(void *arg, int64_t b, int64_t e, int member)
{
	const dyn_job *j = arg;
	const float *x = j->x;
	uint8_t *y = j->y;
	const float magic = 12582912.0f, qlo = j->qlo, qhi = j->qhi, s = j->scale, zp = j->zp;

	(void)member;
	for (int64_t i = b; i < e; i++) {
		float v = x[i] / s;
		v = v > qlo ? v : qlo;
		v = v < qhi ? v : qhi;
		v = (v + magic) - magic;
		y[i] = (uint8_t)(int32_t)(v + zp);
	}
}

/* ONNX Runtime's rule (onnxruntime/core/util/qmath.h, which the ONNX
 * reference quotes), all in float32:
 *   lo = min(0, min x), hi = max(0, max x)
 *   scale = hi == lo ? 1 : (hi - lo) / 255
 *   zero point = round_half_even(clamp(0 - lo / scale, 0, 255))
 * The scale's float rounding matters: computed in double it differs by an
 * ulp for some ranges, and every element near a rounding boundary then
 * lands in the neighbouring step (EfficientNet-B0's input did).  An empty
 * x gives scale 1 and zero point 0. */
static int dyn_compute(cpu_ctx *ctx)
{
	const cpu_tensor *x;
	cpu_tensor *y, *ys, *yz;
	int members = cpu_par_members(ctx);
	float lo = 0.0f, hi = 0.0f, scale, zp;
	dyn_job j;
	int64_t n;
	int rc = 0;

	if (!(x = cpu_require(ctx, 0, &rc)))
		return rc;
	if ((rc = cpu_check_dtype(ctx, x, 0, CPU_TYPES_F32)))
		return rc;
	n = cpu_numel(x);
	if (!(y = cpu_output(ctx, 0, CPU_UINT8, x->rank, x->dims)) ||
	    !(ys = cpu_output(ctx, 1, CPU_FLOAT, 0, NULL)) ||
	    !(yz = cpu_output(ctx, 2, CPU_UINT8, 0, NULL)) ||
	    !(j.lo = cpu_scratch(ctx, 2 * (size_t)members * sizeof(float))))
		return CPU_E_NOMEM;
	j.hi = j.lo + members;
	for (int m = 0; m < members; m++)
		j.lo[m] = j.hi[m] = 0.0f;
	j.x = x->data;
	j.y = y->data;
	cpu_par_for(ctx, n, 0.15, 4096, dyn_minmax, &j);
	for (int m = 0; m < members; m++) {
		lo = j.lo[m] < lo ? j.lo[m] : lo;
		hi = j.hi[m] > hi ? j.hi[m] : hi;
	}
	scale = hi == lo ? 1.0f : (hi - lo) / 255.0f;
	zp = 0.0f - lo / scale;
	zp = nearbyintf(zp > 0.0f ? zp < 255.0f ? zp : 255.0f : 0.0f);
	*(float *)ys->data = scale;
	*(uint8_t *)yz->data = (uint8_t)zp;
	j.scale = scale;
	j.zp = zp;
	j.qlo = -zp;
	j.qhi = 255.0f - zp;
	cpu_par_for(ctx, n, 0.3, 4096, dyn_quantize, &j);
	return 0;
}

const cpu_op cpu_op_quantizelinear = {
	"QuantizeLinear", "", 10, CPU_OPSET_MAX, ql_supports, NULL, ql_compute, NULL,
};
const cpu_op cpu_op_dequantizelinear = {
	"DequantizeLinear", "", 10, CPU_OPSET_MAX, dql_supports, NULL, dql_compute, NULL,
};
const cpu_op cpu_op_dynamicquantizelinear = {
	"DynamicQuantizeLinear", "", 11, CPU_OPSET_MAX, dyn_supports, NULL, dyn_compute, NULL,
};
