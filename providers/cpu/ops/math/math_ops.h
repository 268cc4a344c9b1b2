/*
 * math_ops: what the math family (providers/cpu/ops/math/) shares between
 * its files — the two-operand broadcasting driver, the reduction-axes
 * parser, small dtype helpers — and the op table entries registry_math.c
 * lists.
 */
#ifndef ORTMK_CPU_MATH_OPS_H
#define ORTMK_CPU_MATH_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "cpu_ops.h"

#define MATH_TYPES_FLOAT (CPU_TYPES_FLOAT | CPU_BIT(CPU_FLOAT16) | CPU_BIT(CPU_BFLOAT16))
#define MATH_TYPES_UINT (CPU_BIT(CPU_UINT8) | CPU_BIT(CPU_UINT16) | CPU_BIT(CPU_UINT32) | \
			 CPU_BIT(CPU_UINT64))
#define MATH_TYPES_SINT (CPU_BIT(CPU_INT8) | CPU_BIT(CPU_INT16) | CPU_BIT(CPU_INT32) | \
			 CPU_BIT(CPU_INT64))
#define MATH_TYPES_INT (MATH_TYPES_UINT | MATH_TYPES_SINT)
/* Every numeric dtype, uint64 included: the math kernels read it unsigned. */
#define MATH_TYPES_NUM (MATH_TYPES_FLOAT | MATH_TYPES_INT)

/* ---- math_common.c ---- */

/* One broadcast binary op: the kernel fills a, b, op and the parameters,
 * math_bin_run allocates y and calls the row function with off[0], off[1]
 * (a's and b's first elements), off[2] (y's, dense) and step[0], step[1]. */
typedef struct math_bin {
	const cpu_tensor *a, *b;
	cpu_tensor *y;
	int op;
	int64_t iparam;
	double fparam;
} math_bin;

/* Broadcasts m->a with m->b (numpy rules; before opset 7, when legacy is
 * set, the `broadcast`/`axis` attributes), creates output 0 of dtype ydt in
 * m->y and runs row over every broadcast row.  A nonzero return of row
 * stops the walk and is returned (row sets the error text itself). */
int math_bin_run(cpu_ctx *ctx, math_bin *m, int32_t ydt, int legacy, cpu_bcast_row row);

/* Raw unsigned view of an integer element (uint64 keeps its 64 bits). */
uint64_t math_get_u64(int32_t dtype, const void *base, int64_t i);
int math_dtype_is_unsigned(int32_t dtype);

/* For supports(): every input with a known dtype inside mask. */
int math_supports_all(const int32_t *dt, int n_in, uint32_t mask, char *why, size_t n);

/* Reduction axes: the `axes` attribute while opset < input_from, else the
 * optional input 1.  red[d] = 1 for each reduced dim.  Returns 1 for a
 * no-op (empty axes with noop_with_empty_axes), 0, or an error status. */
int math_reduce_axes(cpu_ctx *ctx, const cpu_tensor *X, int64_t input_from,
		     unsigned char *red);

/* t's elements as a double scratch array (NULL with the error set), and
 * back into y's dtype (float16/bfloat16 round to nearest even). */
double *math_to_f64(cpu_ctx *ctx, const cpu_tensor *t);
void math_from_f64(cpu_tensor *y, const double *v, int64_t n);

/* outer x n x inner split of dims around one axis. */
void math_split_axis(const cpu_tensor *X, int axis, int64_t *outer, int64_t *n, int64_t *inner);

/* ---- op table entries (registry_math.c lists them) ---- */

extern const cpu_op cpu_op_cos, cpu_op_sin, cpu_op_tan, cpu_op_acos, cpu_op_asin, cpu_op_atan,
	cpu_op_cosh, cpu_op_sinh, cpu_op_acosh, cpu_op_asinh, cpu_op_atanh, cpu_op_sign,
	cpu_op_round, cpu_op_floor, cpu_op_ceil, cpu_op_isnan, cpu_op_isinf, cpu_op_selu,
	cpu_op_elu, cpu_op_celu, cpu_op_softplus, cpu_op_softsign, cpu_op_hardsigmoid,
	cpu_op_hardswish, cpu_op_mish, cpu_op_thresholdedrelu, cpu_op_shrink;
extern const cpu_op cpu_op_and, cpu_op_or, cpu_op_xor, cpu_op_not, cpu_op_bitshift,
	cpu_op_bitwiseand, cpu_op_bitwiseor, cpu_op_bitwisexor, cpu_op_bitwisenot, cpu_op_mod,
	cpu_op_prelu;
extern const cpu_op cpu_op_sum, cpu_op_mean;
extern const cpu_op cpu_op_argmax, cpu_op_argmin, cpu_op_hardmax;
extern const cpu_op cpu_op_reducel1, cpu_op_reducel2, cpu_op_reducelogsum,
	cpu_op_reducelogsumexp, cpu_op_reduceprod, cpu_op_reducesumsquare;
extern const cpu_op cpu_op_instancenorm, cpu_op_groupnorm, cpu_op_lpnorm, cpu_op_mvn,
	cpu_op_lrn;
extern const cpu_op cpu_op_nllloss, cpu_op_sceloss;
extern const cpu_op cpu_op_einsum;
extern const cpu_op cpu_op_cumsum, cpu_op_det;
extern const cpu_op cpu_op_adagrad, cpu_op_adam, cpu_op_momentum;

#endif
