/*
 * registry_math: the CPU provider's math ops, one line each.  registry.c
 * searches this table after its own.
 */
#include <stddef.h>

#include "math_ops.h"

const cpu_op *const cpu_ops_math[] = {
	/* unary_math.c */
	&cpu_op_cos, &cpu_op_sin, &cpu_op_tan, &cpu_op_acos, &cpu_op_asin, &cpu_op_atan,
	&cpu_op_cosh, &cpu_op_sinh, &cpu_op_acosh, &cpu_op_asinh, &cpu_op_atanh,
	&cpu_op_sign, &cpu_op_round, &cpu_op_floor, &cpu_op_ceil, &cpu_op_isnan, &cpu_op_isinf,
	&cpu_op_selu, &cpu_op_elu, &cpu_op_celu, &cpu_op_softplus, &cpu_op_softsign,
	&cpu_op_hardsigmoid, &cpu_op_hardswish, &cpu_op_mish, &cpu_op_thresholdedrelu,
	&cpu_op_shrink,
	/* binary_math.c */
	&cpu_op_and, &cpu_op_or, &cpu_op_xor, &cpu_op_not, &cpu_op_bitshift,
	&cpu_op_bitwiseand, &cpu_op_bitwiseor, &cpu_op_bitwisexor, &cpu_op_bitwisenot,
	&cpu_op_mod, &cpu_op_prelu,
	/* variadic.c */
	&cpu_op_sum, &cpu_op_mean,
	/* argmax.c */
	&cpu_op_argmax, &cpu_op_argmin, &cpu_op_hardmax,
	/* reduce_more.c */
	&cpu_op_reducel1, &cpu_op_reducel2, &cpu_op_reducelogsum, &cpu_op_reducelogsumexp,
	&cpu_op_reduceprod, &cpu_op_reducesumsquare,
	/* normalize.c */
	&cpu_op_instancenorm, &cpu_op_groupnorm, &cpu_op_lpnorm, &cpu_op_mvn, &cpu_op_lrn,
	/* loss.c */
	&cpu_op_nllloss, &cpu_op_sceloss,
	/* einsum.c */
	&cpu_op_einsum,
	/* cumsum.c */
	&cpu_op_cumsum, &cpu_op_det,
	/* optimizer.c */
	&cpu_op_adagrad, &cpu_op_adam, &cpu_op_momentum,
	NULL,
};
