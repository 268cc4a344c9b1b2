/*
 * par: the intra-op pool for the non-GEMM kernels (see par.h).
 *
 * Handing work to the pool costs about a microsecond while its workers
 * spin and tens of microseconds once they sleep (a futex wake on this
 * VM), so small jobs stay on the calling thread: the threshold below is
 * where splitting starts to pay on two cores.
 */
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
