/*
 * qlinear_unary: com.microsoft QLinearSigmoid and QLinearLeakyRelu on
 * uint8/int8 with per-tensor scales and zero points:
 *   y = quantize(f(x_scale * (x - x_zero_point)), y_scale, y_zero_point)
 * An 8-bit input has 256 values, so f is tabulated once per call over all
 * of them (msq_build_table) and the tensor goes through the table: the
 * same construction as ONNX Runtime's, with its Sigmoid (vm_logistic,
 * MLAS's rational approximation), so every output byte is its byte.
 */
#include <string.h>

#include "msq.h"
#include "vmath.h"

/* X, X_scale, X_zero_point, Y_scale, Y_zero_point */
#define QU_Q8 (CPU_BIT(0) | CPU_BIT(2) | CPU_BIT(4))

static void map_sigmoid(const float *x, float *y, int n, const void *arg)
{
	(void)arg;
	for (int i = 0; i < n; i++)
		y[i] = vm_logistic(x[i]);
}

static void map_leaky(const float *x, float *y, int n, const void *arg)
{
	float alpha = *(const float *)arg;

	for (int i = 0; i < n; i++)
		y[i] = x[i] >= 0.0f ? x[i] : x[i] * alpha;
}

static int qu_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt, int n_in,
		       char *why, size_t n)
{
	(void)p;
	(void)opset;
	return msq_supports_q8(dt, n_in, QU_Q8, why, n);
}

static int qu_compute(cpu_ctx *ctx, msq_map_fn *f, const void *arg)
{
	const cpu_tensor *x;
	cpu_tensor *y;
	float xs, ys;
	int32_t xz, yz;
	uint8_t table[256];
	int rc = 0;

	if (!(x = cpu_require(ctx, 0, &rc)))
		return rc;
	if ((rc = cpu_check_dtype(ctx, x, 0, MSQ_Q8)) ||
	    (rc = msq_scale(ctx, 1, "X_scale", &xs)) ||
	    (rc = msq_zero_point(ctx, 2, "X_zero_point", x->dtype, &xz)) ||
	    (rc = msq_scale(ctx, 3, "Y_scale", &ys)) ||
	    (rc = msq_zero_point(ctx, 4, "Y_zero_point", x->dtype, &yz)))
		return rc;
	if (!(y = cpu_output(ctx, 0, x->dtype, x->rank, x->dims)))
		return CPU_E_NOMEM;
	msq_build_table(x->dtype, xs, xz, ys, yz, f, arg, table);
	msq_apply_table(ctx, table, x->data, y->data, cpu_numel(x));
	return 0;
}

static int sigmoid_compute(cpu_ctx *ctx)
{
	return qu_compute(ctx, map_sigmoid, NULL);
}

static int leaky_compute(cpu_ctx *ctx)
{
	float alpha = cpu_attr_float(ctx->node->proto, "alpha", 0.01f);

	return qu_compute(ctx, map_leaky, &alpha);
}

const cpu_op cpu_op_msq_qlinearsigmoid = {
	"QLinearSigmoid", "com.microsoft", 1, CPU_OPSET_MAX, qu_supports, NULL, sigmoid_compute,
	NULL,
};
const cpu_op cpu_op_msq_qlinearleakyrelu = {
	"QLinearLeakyRelu", "com.microsoft", 1, CPU_OPSET_MAX, qu_supports, NULL, leaky_compute,
	NULL,
};
