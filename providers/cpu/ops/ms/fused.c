/*
 * fused: com.microsoft FusedConv and FusedGemm, the Conv and Gemm that
 * ONNX Runtime's optimizer writes with the activation (and FusedConv's
 * residual input Z) that followed them folded in, float32.
 *
 * Both are the provider's own Conv and Gemm kernels (ops/nn/) run with a
 * fused tail: prepare builds the cpu_fusion the load-time fusion planner
 * would have built for Conv -> Add(Z) -> act (cpu_fuse.c never gives a
 * com.microsoft node one), points node->fuse at it and hands over to the
 * kernel's prepare, so packing, Winograd and the block-wise epilogue are
 * the same.  FusedGemm's activations that no fused tail has (Elu, Selu,
 * Softplus, Softsign, ThresholdedRelu, ScaledTanh, ParametricSoftplus)
 * run after a plain GEMM here.  An activation ONNX Runtime does not know
 * is refused by name at load.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ms_ops.h"
#include "par.h"
#include "vmath.h"

typedef struct act_name {
	const char *name;
	int kind;
} act_name;

/* FusedConv: MLAS's fused activations as onnxruntime-node 1.30 takes
 * them (it refuses Silu, which newer sources list). */
static const act_name conv_acts[] = {
	{"Relu", CPU_FUSE_ACT_RELU}, {"Tanh", CPU_FUSE_ACT_TANH},
	{"Sigmoid", CPU_FUSE_ACT_SIGMOID}, {"LeakyRelu", CPU_FUSE_ACT_LEAKY},
	{"Clip", CPU_FUSE_ACT_CLIP},
	{"HardSigmoid", CPU_FUSE_ACT_HSIGMOID}, {NULL, 0},
};

/* FusedGemm: ONNX Runtime's element-wise functors. */
static const act_name gemm_acts[] = {
	{"Relu", CPU_FUSE_ACT_RELU}, {"Tanh", CPU_FUSE_ACT_TANH},
	{"Sigmoid", CPU_FUSE_ACT_SIGMOID}, {"LeakyRelu", CPU_FUSE_ACT_LEAKY},
	{"HardSigmoid", CPU_FUSE_ACT_HSIGMOID}, {"Elu", MS_ACT_ELU}, {"Selu", MS_ACT_SELU},
	{"Softplus", MS_ACT_SOFTPLUS}, {"Softsign", MS_ACT_SOFTSIGN},
	{"ThresholdedRelu", MS_ACT_THRESHOLDED_RELU}, {"ScaledTanh", MS_ACT_SCALED_TANH},
	{"ParametricSoftplus", MS_ACT_PARAMETRIC_SOFTPLUS}, {NULL, 0},
};

static int find_act(const act_name *t, const char *name)
{
	for (; t->name; t++)
		if (strcmp(t->name, name) == 0)
			return t->kind;
	return -1;
}

/* FusedConv's activation and activation_params (their count as ONNX
 * Runtime requires it).  0, or -1 with the reason in why. */
static int conv_act(const Onnx__NodeProto *p, ms_act *act, char *why, size_t n)
{
	char name[48];
	const float *v = NULL;
	size_t nv = cpu_attr_floats(p, "activation_params", &v), need;

	memset(act, 0, sizeof(*act));
	if (!cpu_attr_str(p, "activation", name, sizeof(name)))
		return 0;
	if ((act->kind = find_act(conv_acts, name)) < 0)
		return snprintf(why, n, "FusedConv: activation '%s' is not supported", name), -1;
	need = act->kind == CPU_FUSE_ACT_LEAKY ? 1 :
	       act->kind == CPU_FUSE_ACT_CLIP || act->kind == CPU_FUSE_ACT_HSIGMOID ? 2 : 0;
	if (need && nv != need)
		return snprintf(why, n, "FusedConv: activation '%s' needs %zu activation_params, "
				"got %zu", name, need, nv), -1;
	act->a = need ? v[0] : 0.0f;
	act->b = need > 1 ? v[1] : 0.0f;
	return 0;
}

/* FusedGemm's activation and activation_alpha/beta/gamma: ONNX Runtime's
 * functors require the parameters each one uses (LeakyRelu, Elu and
 * ThresholdedRelu alpha; HardSigmoid, ScaledTanh and ParametricSoftplus
 * alpha and beta; Selu alpha and gamma), so ortmk does too.  No
 * activation at all is a plain Gemm (ONNX Runtime refuses it). */
static int gemm_act(const Onnx__NodeProto *p, ms_act *act, char *why, size_t n)
{
	static const char *const names[3] = {"activation_alpha", "activation_beta",
					     "activation_gamma"};
	char name[48];
	int need = 0;   /* bits: alpha, beta, gamma */

	memset(act, 0, sizeof(*act));
	if (!cpu_attr_str(p, "activation", name, sizeof(name)))
		return 0;
	if ((act->kind = find_act(gemm_acts, name)) < 0)
		return snprintf(why, n, "FusedGemm: activation '%s' is not supported", name), -1;
	switch (act->kind) {
	case CPU_FUSE_ACT_LEAKY: case MS_ACT_ELU: case MS_ACT_THRESHOLDED_RELU: need = 1; break;
	case CPU_FUSE_ACT_HSIGMOID: case MS_ACT_SCALED_TANH: case MS_ACT_PARAMETRIC_SOFTPLUS:
		need = 3;
		break;
	case MS_ACT_SELU: need = 5; break;
	default: break;
	}
	for (int i = 0; i < 3; i++)
		if ((need >> i & 1) && !cpu_attr(p, names[i]))
			return snprintf(why, n, "FusedGemm: activation '%s' needs %s", name, names[i]), -1;
	act->a = cpu_attr_float(p, "activation_alpha", 0.0f);
	act->b = cpu_attr_float(p, "activation_beta", 0.0f);
	act->g = cpu_attr_float(p, "activation_gamma", 0.0f);
	return 0;
}

static float softplus(float x)
{
	return x > 0.0f ? x + log1pf(expf(-x)) : log1pf(expf(x));
}

void ms_act_apply(const ms_act *act, float *x, int64_t n)
{
	cpu_fusion fu;
	float a = act->a, b = act->b, g = act->g;

	switch (act->kind) {
	case MS_ACT_ELU:
		for (int64_t i = 0; i < n; i++)
			x[i] = x[i] >= 0.0f ? x[i] : a * (expf(x[i]) - 1.0f);
		return;
	case MS_ACT_SELU:
		for (int64_t i = 0; i < n; i++)
			x[i] = g * (x[i] > 0.0f ? x[i] : a * (expf(x[i]) - 1.0f));
		return;
	case MS_ACT_SOFTPLUS:
		for (int64_t i = 0; i < n; i++)
			x[i] = softplus(x[i]);
		return;
	case MS_ACT_SOFTSIGN:
		for (int64_t i = 0; i < n; i++)
			x[i] = x[i] / (1.0f + fabsf(x[i]));
		return;
	case MS_ACT_THRESHOLDED_RELU:
		for (int64_t i = 0; i < n; i++)
			x[i] = x[i] > a ? x[i] : 0.0f;
		return;
	case MS_ACT_SCALED_TANH:
		for (int64_t i = 0; i < n; i++)
			x[i] = a * vm_tanh(b * x[i]);
		return;
	case MS_ACT_PARAMETRIC_SOFTPLUS:
		for (int64_t i = 0; i < n; i++)
			x[i] = a * softplus(b * x[i]);
		return;
	default:
		memset(&fu, 0, sizeof(fu));
		fu.act = (cpu_fuse_act)act->kind;
		fu.act_a = a;
		fu.act_b = b;
		cpu_fuse_act_apply(&fu, x, n);
	}
}

/* ---- the delegation: a fused tail the op owns ---- */

static int fused_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt, int n_in,
			  char *why, size_t n)
{
	ms_act act;
	int conv = strcmp(p->op_type, "FusedConv") == 0;

	(void)opset;
	if ((conv ? conv_act(p, &act, why, n) : gemm_act(p, &act, why, n)) < 0)
		return 0;
	for (int i = 0; i < n_in && i < 4; i++)
		if (!cpu_supports_dtype(dt, n_in, i, CPU_TYPES_F32, why, n))
			return 0;
	return 1;
}

/* The tail y = act(op + in[add]) as node->fuse, owned by the node until
 * release; then the kernel's own prepare. */
static int delegate_prepare(cpu_node *node, const cpu_op *op, const ms_act *act, int add,
			    char *err, size_t n)
{
	cpu_fusion *fu;

	if (node->fuse)
		return snprintf(err, n, "%s: the node already has a fused tail",
				node->proto->op_type), CPU_E_INTERNAL;
	if (!(fu = calloc(1, sizeof(*fu))))
		return snprintf(err, n, "out of memory"), CPU_E_NOMEM;
	fu->add_input = add;
	fu->bias_input = -1;
	fu->act = act->kind < MS_ACT_ELU ? (cpu_fuse_act)act->kind : CPU_FUSE_ACT_NONE;
	fu->act_a = act->a;
	fu->act_b = act->b;
	fu->v_input = -1;
	fu->quant_s0 = fu->quant_s1 = -1;
	node->fuse = fu;
	return op->prepare(node, err, n);
}

static void delegate_release(cpu_node *node, const cpu_op *op)
{
	op->release(node);
	free((void *)node->fuse);
	node->fuse = NULL;
}

static int fused_conv_prepare(cpu_node *node, char *err, size_t n)
{
	const Onnx__NodeProto *p = node->proto;
	int has_z = p->n_input > 3 && p->input[3][0];
	ms_act act;

	if (conv_act(p, &act, err, n) < 0)
		return CPU_E_UNSUPPORTED;
	return delegate_prepare(node, &cpu_op_conv, &act, has_z ? 3 : -1, err, n);
}

static void fused_conv_release(cpu_node *node)
{
	delegate_release(node, &cpu_op_conv);
}

static int fused_conv_compute(cpu_ctx *ctx)
{
	return cpu_op_conv.compute(ctx);
}

/* ---- FusedGemm with an activation no fused tail has ---- */

typedef struct gemm_extra {
	ms_act act;
} gemm_extra;

static int fused_gemm_prepare(cpu_node *node, char *err, size_t n)
{
	ms_act act;

	if (gemm_act(node->proto, &act, err, n) < 0)
		return CPU_E_UNSUPPORTED;
	if (act.kind >= MS_ACT_ELU)
		return 0;   /* computed here, node->state stays NULL */
	return delegate_prepare(node, &cpu_op_gemm, &act, -1, err, n);
}

static void fused_gemm_release(cpu_node *node)
{
	if (node->fuse)
		delegate_release(node, &cpu_op_gemm);
}

/* alpha * op(A) op(B) + beta * C, then the activation, without packing. */
static int gemm_plain(cpu_ctx *ctx, const ms_act *act)
{
	const Onnx__NodeProto *p = ctx->node->proto;
	const cpu_tensor *A, *B, *C = cpu_input(ctx, 2);
	int ta = cpu_attr_int(p, "transA", 0) != 0, tb = cpu_attr_int(p, "transB", 0) != 0, rc = 0;
	float alpha = cpu_attr_float(p, "alpha", 1.0f), beta = cpu_attr_float(p, "beta", 1.0f);
	int64_t dims[2], K;
	cpu_tensor *Y;

	if (!(A = cpu_require(ctx, 0, &rc)) || !(B = cpu_require(ctx, 1, &rc)))
		return rc;
	if ((rc = cpu_check_dtype(ctx, A, 0, CPU_TYPES_F32)) ||
	    (rc = cpu_check_dtype(ctx, B, 1, CPU_TYPES_F32)) ||
	    (C && (rc = cpu_check_dtype(ctx, C, 2, CPU_TYPES_F32))))
		return rc;
	if (A->rank != 2 || B->rank != 2)
		return cpu_fail(ctx, CPU_E_INVALID, "FusedGemm needs 2-D A and B");
	dims[0] = A->dims[ta ? 1 : 0];
	K = A->dims[ta ? 0 : 1];
	dims[1] = B->dims[tb ? 0 : 1];
	if (B->dims[tb ? 1 : 0] != K)
		return cpu_fail(ctx, CPU_E_INVALID, "FusedGemm: inner dims differ");
	if (!(Y = cpu_output(ctx, 0, CPU_FLOAT, 2, dims)))
		return CPU_E_NOMEM;
	if (C && beta != 0.0f) {
		int ranks[2] = {C->rank, 2};
		const int64_t *ds[2] = {C->dims, dims};
		cpu_bcast bc;

		if (cpu_bcast_init(&bc, 2, ranks, ds) || bc.out_rank != 2 ||
		    bc.out_dims[0] != dims[0] || bc.out_dims[1] != dims[1])
			return cpu_fail(ctx, CPU_E_INVALID, "FusedGemm: C does not broadcast onto Y");
		cpu_copy_strided(Y->data, C->data, sizeof(float), bc.rank, bc.dims, bc.strides[0]);
	}
	cpu_sgemm_pool(ctx->pool, ta, tb, dims[0], dims[1], K, alpha, A->data, A->dims[1],
		       B->data, B->dims[1], C && beta != 0.0f ? beta : 0.0f, Y->data, dims[1]);
	ms_act_apply(act, Y->data, dims[0] * dims[1]);
	return 0;
}

static int fused_gemm_compute(cpu_ctx *ctx)
{
	ms_act act;
	char why[120];

	if (ctx->node->fuse)
		return cpu_op_gemm.compute(ctx);
	if (gemm_act(ctx->node->proto, &act, why, sizeof(why)) < 0)
		return cpu_fail(ctx, CPU_E_UNSUPPORTED, "%s", why);
	return gemm_plain(ctx, &act);
}

const cpu_op cpu_op_ms_fused_conv = {
	"FusedConv", "com.microsoft", 1, 1, fused_supports, fused_conv_prepare,
	fused_conv_compute, fused_conv_release,
};
const cpu_op cpu_op_ms_fused_gemm = {
	"FusedGemm", "com.microsoft", 1, 1, fused_supports, fused_gemm_prepare,
	fused_gemm_compute, fused_gemm_release,
};
