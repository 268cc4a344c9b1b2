/*
 * qlinear_concat: com.microsoft QLinearConcat: Y_scale, Y_zero_point, then
 * one (tensor, scale, zero point) triple per input, concatenated along
 * `axis` (required; negative counts from the end).  An input already in
 * Y's scale and zero point is copied; the others are requantized through
 * a 256-entry table, quantize(x_scale * (x - x_zp)) as ONNX Runtime builds
 * it, so the bytes are its bytes.
 */
#include <stdio.h>
#include <string.h>

#include "msq.h"

static void map_identity(const float *x, float *y, int n, const void *arg)
{
	(void)arg;
	memcpy(y, x, (size_t)n * sizeof(float));
}

static int qc_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt, int n_in,
		       char *why, size_t n)
{
	uint32_t q8 = CPU_BIT(1);

	(void)opset;
	if (!cpu_attr(p, "axis")) {
		snprintf(why, n, "attribute 'axis' is required");
		return 0;
	}
	if (n_in < 5 || (n_in - 2) % 3) {
		snprintf(why, n, "inputs must be Y_scale, Y_zero_point and (tensor, scale, zero "
			 "point) triples (got %d inputs)", n_in);
		return 0;
	}
	for (int i = 2; i < n_in && i < 32; i += 3)
		q8 |= CPU_BIT(i) | CPU_BIT(i + 2);
	/* input 0 is a float scale: check against input 1's type instead */
	for (int i = 1; i < n_in; i++)
		if (dt[i] != CPU_UNDEFINED && dt[1] != CPU_UNDEFINED && i < 32 && (q8 >> i) & 1 &&
		    dt[i] != dt[1]) {
			snprintf(why, n, "input %d is %s but Y_zero_point is %s", i,
				 cpu_dtype_name(dt[i]), cpu_dtype_name(dt[1]));
			return 0;
		}
	for (int i = 0; i < n_in; i++)
		if (!cpu_supports_dtype(dt, n_in, i, i < 32 && (q8 >> i) & 1 ? MSQ_Q8 : CPU_TYPES_F32,
					why, n))
			return 0;
	return 1;
}

static int qc_compute(cpu_ctx *ctx)
{
	const cpu_tensor *yzt = cpu_input(ctx, 1), *x0 = cpu_input(ctx, 2);
	int64_t axis = cpu_attr_int(ctx->node->proto, "axis", 0), outer = 1, inner = 1, total = 0;
	int64_t at = 0;
	int64_t dims[CPU_MAX_RANK];
	int n = (ctx->n_in - 2) / 3, ax, rc;
	float ys;
	int32_t yz, dt;
	cpu_tensor *y;
	uint8_t *out;

	if (!yzt || !x0)
		return cpu_fail(ctx, CPU_E_INVALID, "Y_zero_point and a first input are required");
	dt = yzt->dtype;
	if ((rc = cpu_check_dtype(ctx, yzt, 1, MSQ_Q8)) ||
	    (rc = msq_scale(ctx, 0, "Y_scale", &ys)) ||
	    (rc = msq_zero_point(ctx, 1, "Y_zero_point", dt, &yz)))
		return rc;
	if ((ax = cpu_norm_axis(axis, x0->rank)) < 0)
		return cpu_fail(ctx, CPU_E_INVALID, "axis %lld is out of range for rank %d",
				(long long)axis, x0->rank);
	for (int k = 0; k < n; k++) {
		const cpu_tensor *x = cpu_input(ctx, 2 + 3 * k);

		if (!x)
			return cpu_fail(ctx, CPU_E_INVALID, "input %d is required", 2 + 3 * k);
		if (x->dtype != dt)
			return cpu_fail(ctx, CPU_E_INVALID, "input %d is %s but Y is %s", 2 + 3 * k,
					cpu_dtype_name(x->dtype), cpu_dtype_name(dt));
		if (x->rank != x0->rank)
			return cpu_fail(ctx, CPU_E_INVALID, "input %d has rank %d, not %d", 2 + 3 * k,
					x->rank, x0->rank);
		for (int d = 0; d < x->rank; d++)
			if (d != ax && x->dims[d] != x0->dims[d])
				return cpu_fail(ctx, CPU_E_INVALID, "input %d differs in dim %d "
						"outside the axis", 2 + 3 * k, d);
		total += x->dims[ax];
	}
	memcpy(dims, x0->dims, sizeof(int64_t) * (size_t)x0->rank);
	dims[ax] = total;
	for (int d = 0; d < ax; d++)
		outer *= dims[d];
	for (int d = ax + 1; d < x0->rank; d++)
		inner *= dims[d];
	if (!(y = cpu_output(ctx, 0, dt, x0->rank, dims)))
		return CPU_E_NOMEM;
	out = y->data;
	for (int k = 0; k < n; k++) {
		const cpu_tensor *x = cpu_input(ctx, 2 + 3 * k);
		int64_t w = x->dims[ax] * inner;
		const uint8_t *src = x->data;
		float xs;
		int32_t xz;
		uint8_t table[256];
		int same;

		if ((rc = msq_scale(ctx, 3 + 3 * k, "an input's scale", &xs)) ||
		    (rc = msq_zero_point(ctx, 4 + 3 * k, "an input's zero point", dt, &xz)))
			return rc;
		same = xs == ys && xz == yz;
		if (!same)
			msq_build_table(dt, xs, xz, ys, yz, map_identity, NULL, table);
		for (int64_t o = 0; o < outer; o++) {
			uint8_t *d = out + o * total * inner + at;
			const uint8_t *s = src + o * w;

			if (same)
				memcpy(d, s, (size_t)w);
			else
				for (int64_t i = 0; i < w; i++)
					d[i] = table[s[i]];
		}
		at += w;
	}
	return 0;
}

const cpu_op cpu_op_msq_qlinearconcat = {
	"QLinearConcat", "com.microsoft", 1, CPU_OPSET_MAX, qc_supports, NULL, qc_compute, NULL,
};
