/*
 * par: the intra-op pool for the non-GEMM kernels (see par.h).
 *
 * Handing work to the pool costs about a microsecond while its workers
 * spin and tens of microseconds once they sleep (a futex wake on this
 * VM), so small jobs stay on the calling thread: the threshold below is
 * where splitting starts to pay on two cores.
 */
#include "cpu_ops.h"
#include "par.h"

#include "threadpool.h"

enum { PAR_MIN_NS = 30000, PAR_CHUNKS_PER_MEMBER = 4 };

typedef struct par_job {
	cpu_par_fn *fn;
	void *arg;
	int64_t n, chunk;
} par_job;

static void par_task(void *arg, int64_t task, int member)
{
	const par_job *j = arg;
	int64_t b = task * j->chunk, e = b + j->chunk;
	j->fn(j->arg, b, e < j->n ? e : j->n, member);
}

int cpu_par_members(const cpu_ctx *ctx)
{
	return ctx->pool ? cpu_pool_threads(ctx->pool) : 1;
}

void cpu_par_for(cpu_ctx *ctx, int64_t n, double ns_per_item, int64_t grain, cpu_par_fn *fn,
		 void *arg)
{
	int members = cpu_par_members(ctx);
	par_job j = {fn, arg, n, 0};
	int64_t tasks;

	if (n <= 0)
		return;
	if (members < 2 || n < 2 || (double)n * ns_per_item < PAR_MIN_NS ||
	    !cpu_pool_try_begin(ctx->pool)) {
		fn(arg, 0, n, 0);
		return;
	}
	grain = grain < 1 ? 1 : grain;
	tasks = (int64_t)members * PAR_CHUNKS_PER_MEMBER;
	j.chunk = (n + tasks - 1) / tasks;
	j.chunk = j.chunk < grain ? grain : j.chunk;
	tasks = (n + j.chunk - 1) / j.chunk;
	cpu_pool_for(ctx->pool, 0, tasks, par_task, &j);
	cpu_pool_end(ctx->pool);
}

typedef struct strided_job {
	char *dst;
	const char *src;
	size_t esize;
	int rank;                 /* of the dims after the split one */
	const int64_t *dims, *strides;
	int64_t split_stride, inner; /* source stride of the split dim; elements per item */
} strided_job;

/* Items [i0, i1) of the split dim as one copy, so that cpu_copy_strided
 * still sees that dim: where it reads contiguously it is what a transpose
 * tiles (ConvNeXt's NHWC -> NCHW, split a channel an item, gathered every
 * element from its own cache line: 2 threads took 2x one's time). */
static void strided_range(void *arg, int64_t i0, int64_t i1, int member)
{
	const strided_job *j = arg;
	int64_t dims[CPU_MAX_RANK], strides[CPU_MAX_RANK];

	(void)member;
	dims[0] = i1 - i0;
	strides[0] = j->split_stride;
	for (int k = 0; k < j->rank; k++) {
		dims[k + 1] = j->dims[k];
		strides[k + 1] = j->strides[k];
	}
	cpu_copy_strided(j->dst + (size_t)(i0 * j->inner) * j->esize,
			 j->src + i0 * j->split_stride * (int64_t)j->esize, j->esize, j->rank + 1,
			 dims, strides);
}

void cpu_copy_strided_par(cpu_ctx *ctx, void *dst, const void *src, size_t esize, int rank,
			  const int64_t *dims, const int64_t *strides)
{
	int64_t n = cpu_shape_numel(rank, dims), inner = 1;
	int d = 0;
	strided_job j;

	while (d < rank && dims[d] == 1)
		d++;
	if (n < 65536 || d >= rank - 1 || cpu_par_members(ctx) < 2) {
		cpu_copy_strided(dst, src, esize, rank, dims, strides);
		return;
	}
	for (int k = d + 1; k < rank; k++)
		inner *= dims[k];
	j = (strided_job){dst, src, esize, rank - d - 1, dims + d + 1, strides + d + 1, strides[d],
			  inner};
	/* ~0.5 ns an element: a gather; a split dim read contiguously goes in
	 * runs of 16 at least (cpu_copy_strided's transpose tile) */
	cpu_par_for(ctx, dims[d], 0.5 * (double)inner, strides[d] == 1 ? 16 : 1, strided_range,
		    &j);
}
