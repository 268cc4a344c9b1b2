/*
 * fuse_tail: the run-time side of the element-wise tails the provider fuses
 * into a kernel at load (node->fuse, cpu_fuse.c): y = act(op(...) + addend).
 *
 * A kernel with a tail calls cpu_fuse_begin instead of cpu_output for its
 * output 0.  It gets y, where it writes its own result, and what it may do
 * itself while the result is hot: add add_inline (an addend of exactly y's
 * shape; NULL when there is none or it broadcasts) and apply act_inline
 * (any activation: cpu_fuse_act_apply), block by block as it finishes.
 * cpu_fuse_end does whatever the kernel did not: the broadcast addition,
 * the activation, and the copy out of scratch.  y is scratch, not the
 * output, when the output's memory overlaps one of the node's inputs (the
 * core planned the fused-away node's output over a value that was dead
 * after the first node) or when the addend widens the result.
 * Callers: conv.c, matmul.c.
 */
#ifndef ORTMK_FUSE_TAIL_H
#define ORTMK_FUSE_TAIL_H

#include "cpu_ops.h"

typedef struct cpu_fuse_run {
	cpu_tensor *out;                /* the node's output 0 */
	cpu_tensor *y;                  /* the kernel's result: out or scratch */
	cpu_tensor tmp;                 /* y's header when it is scratch */
	const cpu_tensor *add;          /* the addend (or add_copy), or NULL */
	cpu_tensor add_copy;            /* the addend copied when it overlaps out */
	const cpu_tensor *add_inline;   /* add, when the kernel may add it itself */
	cpu_fuse_act act;               /* the tail's activation */
	cpu_fuse_act act_inline;        /* act, when the kernel may apply it itself */
	const cpu_fusion *fu;           /* the node's fusion (act parameters), or NULL */
} cpu_fuse_run;

/* Without a tail (node->fuse NULL) y = out = cpu_output(ctx, 0, float,
 * rank, dims).  0 or a status (error set). */
int cpu_fuse_begin(cpu_ctx *ctx, int rank, const int64_t *dims, cpu_fuse_run *fr);
/* done: 1 when the kernel added add_inline and applied act_inline (both
 * when set), 0 when it did neither. */
int cpu_fuse_end(cpu_ctx *ctx, cpu_fuse_run *fr, int done);

/* The fused activation of fu over n floats in place: what a kernel that
 * took act_inline applies to each finished block while it is in cache. */
void cpu_fuse_act_apply(const cpu_fusion *fu, float *x, int64_t n);
/* A gemm_post_fn (gemm.h) doing that to a block; its ctx is the fusion. */
void cpu_fuse_act_block(void *fu, float *c, int64_t ldc, int64_t row0, int64_t rows,
			int64_t col0, int64_t cols);

/* out = a + b over float32 operands of bc's two shapes (bc from
 * cpu_bcast_init with a's and b's; out has bc's output shape and may be a
 * itself). */
void cpu_bcast_add_f32(const cpu_bcast *bc, const float *a, const float *b, float *out);

/* x * 0.5 * (1 + erf(x / sqrt 2)) over n floats in place. */
void cpu_gelu_inplace(float *x, int64_t n);
/* y = vm_logistic(x) (or x times it, silu) on AVX-512 or AVX2 + FMA, bit
 * for bit the scalar's; 0 (nothing done) on a CPU with neither.  y may be
 * x. */
int cpu_logistic_wide(const float *x, float *y, int64_t n, int silu);
/* y = vm_exp_mlas(x) on AVX2 + FMA without AVX-512, bit for bit; 0 (nothing
 * done) elsewhere (an AVX-512 CPU vectorizes the scalar loop).  y may be x. */
int cpu_exp_wide(const float *x, float *y, int64_t n);

#endif
