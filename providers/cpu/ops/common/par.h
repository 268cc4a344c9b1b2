/*
 * par: spreading an element-wise or per-row kernel over the intra-op
 * thread pool (ctx->pool, the one the GEMM uses).  Callers: pool.c,
 * softmax.c, norm.c, unary.c, binary.c, transpose.c.
 */
#ifndef ORTMK_CPU_PAR_H
#define ORTMK_CPU_PAR_H

#include <stdint.h>

#include "cpu_kernel.h"

/* fn does items [begin, end) on pool member `member` (0 = the caller;
 * below cpu_par_members). */
typedef void cpu_par_fn(void *arg, int64_t begin, int64_t end, int member);

/* How many members cpu_par_for may use: 1 without a pool.  Size per-member
 * scratch with it. */
int cpu_par_members(const cpu_ctx *ctx);

/* Runs fn over [0, n) items.  ns_per_item estimates one item's time on one
 * core: when n * ns_per_item is under ~30 us, the pool is missing or busy,
 * or n is 1, fn(arg, 0, n, 0) runs on the caller alone; otherwise the items
 * are cut into contiguous chunks (a few per member, each at least `grain`
 * items) that the members claim. */
void cpu_par_for(cpu_ctx *ctx, int64_t n, double ns_per_item, int64_t grain, cpu_par_fn *fn,
		 void *arg);

#endif
