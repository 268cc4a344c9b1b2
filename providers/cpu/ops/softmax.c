/*
 * softmax: ONNX Softmax and LogSoftmax for float32, numerically stable
 * (the row maximum is subtracted before exp; sums accumulate in double).
 * Before opset 13 the input is coerced to 2-D at `axis` (default 1) and
 * normalised over the whole trailing block; from opset 13 over the single
 * dim `axis` (default -1).  exp is vmath's vectorizable one.
 */
#include <math.h>

#include "cpu_ops.h"
#include "vmath.h"

static int softmax_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt,
			    int n_in, char *why, size_t n)
{
	(void)p;
	(void)opset;
	return cpu_supports_dtype(dt, n_in, 0, CPU_TYPES_F32, why, n);
}

/* A contiguous line: max, exp and sum, scale — with 16 independent partial
 * maxima and sums so each pass vectorizes. */
CPU_MULTIVERSION
static void softmax_row(const float *x, float *y, int64_t n, int is_log)
{
	float pm[16], ps[16], m = -INFINITY, s = 0.0f;
	int64_t i = 0, tail = n - n % 16;
	for (int t = 0; t < 16; t++) {
		pm[t] = -INFINITY;
		ps[t] = 0.0f;
	}
	for (; i < tail; i += 16)
		for (int t = 0; t < 16; t++)
			pm[t] = x[i + t] > pm[t] ? x[i + t] : pm[t];
	for (; i < n; i++)
		m = x[i] > m ? x[i] : m;
	for (int t = 0; t < 16; t++)
		m = pm[t] > m ? pm[t] : m;
	for (i = 0; i < tail; i += 16)
		for (int t = 0; t < 16; t++) {
			float e = vm_exp_nonpos(x[i + t] - m);
			y[i + t] = e;
			ps[t] += e;
		}
	for (; i < n; i++) {
		y[i] = vm_exp_nonpos(x[i] - m);
		s += y[i];
	}
	for (int t = 0; t < 16; t++)
		s += ps[t];
	if (is_log) {
		float ls = logf(s);
		for (i = 0; i < n; i++)
			y[i] = x[i] - m - ls;
	} else {
		float inv = 1.0f / s;
		for (i = 0; i < n; i++)
			y[i] *= inv;
	}
}

/* One line of n elements, stride st (an axis that is not the last). */
static void softmax_line(const float *x, float *y, int64_t n, int64_t st, int is_log)
{
	float m = -INFINITY;
	double s = 0.0;
	if (st == 1) {
		softmax_row(x, y, n, is_log);
		return;
	}
	for (int64_t i = 0; i < n; i++)
		m = x[i * st] > m ? x[i * st] : m;
	for (int64_t i = 0; i < n; i++) {
		float e = vm_exp_nonpos(x[i * st] - m);
		if (!is_log)
			y[i * st] = e;
		s += e;
	}
	if (is_log) {
		float ls = (float)log(s);
		for (int64_t i = 0; i < n; i++)
			y[i * st] = x[i * st] - m - ls;
	} else {
		float inv = (float)(1.0 / s);
		for (int64_t i = 0; i < n; i++)
			y[i * st] *= inv;
	}
}

static int softmax_compute(cpu_ctx *ctx)
{
	const cpu_tensor *X;
	cpu_tensor *Y;
	int is_log = ctx->node->proto->op_type[0] == 'L', axis, rc = 0;
	int legacy = ctx->node->opset < 13;
	int64_t outer = 1, n = 1, inner = 1;

	if (!(X = cpu_require(ctx, 0, &rc)) || (rc = cpu_check_dtype(ctx, X, 0, CPU_TYPES_F32)))
		return rc;
	axis = cpu_norm_axis(cpu_attr_int(ctx->node->proto, "axis", legacy ? 1 : -1),
			     X->rank ? X->rank : 1);
	if (axis < 0 || (X->rank == 0 && legacy))
		return cpu_fail(ctx, CPU_E_INVALID, "axis %lld out of range for rank %d",
				(long long)cpu_attr_int(ctx->node->proto, "axis", legacy ? 1 : -1),
				X->rank);
	for (int d = 0; d < X->rank; d++) {
		if (d < axis)
			outer *= X->dims[d];
		else if (d == axis || legacy)
			n *= X->dims[d];
		else
			inner *= X->dims[d];
	}
	if (!(Y = cpu_output(ctx, 0, CPU_FLOAT, X->rank, X->dims)))
		return CPU_E_NOMEM;
	for (int64_t o = 0; o < outer; o++)
		for (int64_t i = 0; i < inner; i++)
			softmax_line((const float *)X->data + o * n * inner + i,
				     (float *)Y->data + o * n * inner + i, n, inner, is_log);
	return 0;
}

const cpu_op cpu_op_softmax = {
	"Softmax", "", 1, CPU_OPSET_MAX, softmax_supports, NULL, softmax_compute, NULL,
};
const cpu_op cpu_op_logsoftmax = {
	"LogSoftmax", "", 1, CPU_OPSET_MAX, softmax_supports, NULL, softmax_compute, NULL,
};
