/*
 * gelu: com.microsoft Gelu (erf), BiasGelu (A + B, then Gelu), FastGelu
 * (the tanh approximation, with an optional bias) and QuickGelu (x *
 * sigmoid(alpha x), alpha 1.702 by default), float32.  A bias is a 1-D
 * tensor of the last dim's size, added to every row, as ONNX Runtime
 * takes it.  Rows are split over the intra-op pool; erf and tanh are
 * vmath.h's, the sigmoid is MLAS's logistic (ONNX Runtime's bits).
 */
#include <string.h>

#include "ms_ops.h"
#include "par.h"
#include "vmath.h"

enum { G_ERF, G_FAST, G_QUICK };

static int gelu_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt, int n_in,
			 char *why, size_t n)
{
	(void)p;
	(void)opset;
	return cpu_supports_dtype(dt, n_in, 0, CPU_TYPES_F32, why, n) &&
	       cpu_supports_dtype(dt, n_in, 1, CPU_TYPES_F32, why, n);
}

typedef struct gelu_job {
	const float *x, *bias;
	float *y;
	int64_t row;
	int kind;
	float alpha;
} gelu_job;

CPU_MULTIVERSION
static void gelu_rows(void *arg, int64_t r0, int64_t r1, int member)
{
	const gelu_job *j = arg;
	(void)member;
	for (int64_t r = r0; r < r1; r++) {
		const float *x = j->x + r * j->row;
		float *y = j->y + r * j->row;

		for (int64_t i = 0; i < j->row; i++) {
			float v = x[i] + (j->bias ? j->bias[i] : 0.0f);

			if (j->kind == G_ERF)
				y[i] = v * 0.5f * (1.0f + vm_erf(v * 0.70710678118654752f));
			else if (j->kind == G_FAST)
				y[i] = v * 0.5f * (1.0f + vm_tanh(0.7978845608028654f *
								  (v + 0.044715f * v * v * v)));
			else
				y[i] = v * vm_logistic(j->alpha * v);
		}
	}
}

static int gelu_run(cpu_ctx *ctx, int kind, int bias_idx)
{
	const cpu_tensor *X, *Bi = bias_idx >= 0 ? cpu_input(ctx, bias_idx) : NULL;
	cpu_tensor *Y;
	gelu_job j;
	int rc = 0;

	if (!(X = cpu_require(ctx, 0, &rc)) || (rc = cpu_check_dtype(ctx, X, 0, CPU_TYPES_F32)))
		return rc;
	if (bias_idx >= 0 && kind == G_ERF && !Bi)
		return cpu_fail(ctx, CPU_E_INVALID, "BiasGelu: input B is required");
	memset(&j, 0, sizeof(j));
	j.row = X->rank ? X->dims[X->rank - 1] : 1;
	if (Bi) {
		if ((rc = cpu_check_dtype(ctx, Bi, bias_idx, CPU_TYPES_F32)))
			return rc;
		if (Bi->rank != 1 || Bi->dims[0] != j.row)
			return cpu_fail(ctx, CPU_E_INVALID, "%s: the bias must be 1-D of the last "
					"dim's size %lld", ctx->node->proto->op_type, (long long)j.row);
		j.bias = Bi->data;
	}
	if (!(Y = cpu_output(ctx, 0, CPU_FLOAT, X->rank, X->dims)))
		return CPU_E_NOMEM;
	j.x = X->data;
	j.y = Y->data;
	j.kind = kind;
	j.alpha = cpu_attr_float(ctx->node->proto, "alpha", 1.702f);
	if (j.row > 0)
		cpu_par_for(ctx, cpu_numel(X) / j.row, (double)j.row * 0.5 + 5.0, 1, gelu_rows, &j);
	return 0;
}

static int gelu_compute(cpu_ctx *ctx)
{
	return gelu_run(ctx, G_ERF, -1);
}

static int bias_gelu_compute(cpu_ctx *ctx)
{
	return gelu_run(ctx, G_ERF, 1);
}

static int fast_gelu_compute(cpu_ctx *ctx)
{
	return gelu_run(ctx, G_FAST, 1);
}

static int quick_gelu_compute(cpu_ctx *ctx)
{
	return gelu_run(ctx, G_QUICK, -1);
}

const cpu_op cpu_op_ms_gelu = {
	"Gelu", "com.microsoft", 1, 1, gelu_supports, NULL, gelu_compute, NULL,
};
const cpu_op cpu_op_ms_bias_gelu = {
	"BiasGelu", "com.microsoft", 1, 1, gelu_supports, NULL, bias_gelu_compute, NULL,
};
const cpu_op cpu_op_ms_fast_gelu = {
	"FastGelu", "com.microsoft", 1, 1, gelu_supports, NULL, fast_gelu_compute, NULL,
};
const cpu_op cpu_op_ms_quick_gelu = {
	"QuickGelu", "com.microsoft", 1, 1, gelu_supports, NULL, quick_gelu_compute, NULL,
};
