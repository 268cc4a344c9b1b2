/*
 * math_ops: what the math family (providers/cpu/ops/math/) shares between
 * its files — the two-operand broadcasting driver, the reduction-axes
 * parser, small dtype helpers.
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

#endif
