/*
 * batch: the GEMM's batch entry points (gemm.h: gemm_compute_batch,
 * gemm_sgemm_batch): independent products of one shape as one job on the
 * pool, on the driver's steps (driver_int.h).
 */
#include <errno.h>
#include <stdlib.h>

#include "driver_int.h"

/* One job for a batch: item i's problem is p with A, C and B (or the
 * packed B) of item i; `per` tasks per item. */
typedef struct batch_job {
	problem p;
	const gemm_batch *b;
	int64_t per;
	int gemv;
} batch_job;

static void batch_item(const batch_job *j, int64_t item, problem *p)
{
	*p = j->p;
	p->A = j->b->A[item];
	p->C = j->b->C[item];
	if (j->b->packed)
		gemm_packed_view_get(j->b->packed[item], &p->b);   /* checked before */
	else
		p->B = j->b->B[item];
}

static void batch_task(void *arg, int64_t i, int member)
{
	const batch_job *j = arg;
	problem p;

	batch_item(j, i / j->per, &p);
	if (j->gemv)
		p.b.isa->gemv(&p.b, (int)p.M, p.A, p.lda, 0, p.b.panels, p.C, p.ldc, &p.tile);
	else
		gemm_drv_task(&p, i % j->per, member);
}

/* Items go to the threads whole when they divide evenly or are many
 * (dynamic claiming evens out the rest); else each item is split as one
 * product would be.  No more threads than the flops are worth. */
static int run_batch(batch_job *j, cpu_pool *pool)
{
	problem *p = &j->p;
	int64_t n = j->b->count;
	double flops = 2.0 * (double)p->M * (double)p->N * (double)p->K * (double)n;
	int threads = cpu_pool_threads(pool), width, rc;

	if (p->M == 0 || p->N == 0 || n == 0)
		return 0;
	if (p->K == 0) {
		for (int64_t i = 0; i < n; i++) {
			problem q;
			batch_item(j, i, &q);
			gemm_drv_epilogue_only(&q);
		}
		return 0;
	}
	width = flops / MIN_FLOPS_PER_THREAD < threads ? (int)(flops / MIN_FLOPS_PER_THREAD) + 1 :
							threads;
	j->gemv = j->b->packed && p->M <= GEMV_ROWS && !p->transA && p->b.isa->gemv &&
		  gemm_drv_gemv_enabled();
	if (j->gemv) {
		p->tile.beta = p->ep.beta;
		p->tile.finish = 1;
	} else if ((rc = gemm_drv_scratch_setup(p, pool)) != 0) {
		return rc;
	}
	if (j->gemv || n % width == 0 || n >= 4 * width)
		p->tm = p->tn = 1;
	else
		gemm_drv_split(p, width);
	j->per = (int64_t)p->tm * p->tn;
	if (pool && width > 1)
		cpu_pool_for(pool, width, n * j->per, batch_task, j);
	else
		for (int64_t i = 0; i < n * j->per; i++)
			batch_task(j, i, 0);
	free(p->own_scratch);
	p->own_scratch = NULL;
	return 0;
}

/* The checks both batch entry points share: every item's A and C given. */
static int batch_check(const gemm_batch *b, const gemm_epilogue *ep)
{
	if (!b || b->count < 0 || (b->count > 0 && (!b->A || !b->C)) || (ep && ep->post))
		return -EINVAL;
	for (int64_t i = 0; i < b->count; i++)
		if (!b->A[i] || !b->C[i])
			return -EINVAL;
	return 0;
}

/* gemm_compute_batch's checks and set-up of j (every packed B of K x N,
 * for one ISA). */
static int packed_setup(batch_job *j, int64_t M, int64_t N, int64_t K, int64_t lda, int transA,
			const gemm_epilogue *ep, int64_t ldc, const gemm_batch *b)
{
	int rc;

	if ((rc = batch_check(b, ep)) != 0 || !b->packed)
		return rc ? rc : -EINVAL;
	if (b->count == 0)
		return 0;
	if ((rc = gemm_drv_setup(&j->p, M, N, K, b->A[0], lda, transA, ep, b->C[0], ldc)) != 0)
		return rc;
	for (int64_t i = 0; i < b->count; i++) {
		gemm_packed_view v;
		if (gemm_packed_view_get(b->packed[i], &v) || v.K != K || v.N != N ||
		    (i > 0 && v.isa != j->p.b.isa))
			return -EINVAL;
		if (i == 0)
			j->p.b = v;
	}
	j->b = b;
	j->p.given_scratch = b->scratch;
	return 0;
}

int gemm_compute_batch(cpu_pool *pool, int64_t M, int64_t N, int64_t K, int64_t lda,
		       int transA, const gemm_epilogue *ep, int64_t ldc, const gemm_batch *b)
{
	batch_job j;
	int rc, mine;

	if ((rc = packed_setup(&j, M, N, K, lda, transA, ep, ldc, b)) != 0 || b->count == 0)
		return rc;
	mine = cpu_pool_try_begin(pool);
	rc = run_batch(&j, mine ? pool : NULL);
	if (mine)
		cpu_pool_end(pool);
	return rc;
}

int gemm_compute_batch_part(int64_t M, int64_t N, int64_t K, int64_t lda, int transA,
			    const gemm_epilogue *ep, int64_t ldc, const gemm_batch *b, int part,
			    int parts, int64_t *c0, int64_t *c1)
{
	batch_job j;
	problem *p = &j.p;
	int64_t q0, q1, nr;
	int rc;

	*c0 = *c1 = 0;
	if (parts < 1 || part < 0 || part >= parts)
		return -EINVAL;
	if ((rc = packed_setup(&j, M, N, K, lda, transA, ep, ldc, b)) != 0 || b->count == 0)
		return rc;
	nr = p->b.isa->nr;
	/* gemm_drv_task's columns for task `part` of a 1 x parts grid */
	q0 = p->b.panels * part / parts;
	q1 = p->b.panels * (part + 1) / parts;
	*c0 = q0 * nr < N ? q0 * nr : N;
	*c1 = q1 * nr < N ? q1 * nr : N;
	if (M == 0 || *c1 <= *c0)
		return 0;
	if (K == 0) {
		for (int64_t i = 0; i < b->count; i++) {
			problem q;
			batch_item(&j, i, &q);
			q.C += *c0;
			q.N = *c1 - *c0;
			q.ep.bias = q.ep.bias && q.ep.bias_kind == GEMM_BIAS_COL ? q.ep.bias + *c0 :
									   q.ep.bias;
			gemm_drv_epilogue_only(&q);
		}
		return 0;
	}
	if (M <= GEMV_ROWS && !transA && p->b.isa->gemv && gemm_drv_gemv_enabled()) {
		p->tile.beta = p->ep.beta;
		p->tile.finish = 1;
		for (int64_t i = 0; i < b->count; i++) {
			problem q;
			batch_item(&j, i, &q);
			q.b.isa->gemv(&q.b, (int)M, q.A, q.lda, q0, q1, q.C, q.ldc, &q.tile);
		}
		return 0;
	}
	if ((rc = gemm_drv_scratch_setup(p, NULL)) != 0)
		return rc;
	p->tm = 1;
	p->tn = parts;
	for (int64_t i = 0; i < b->count; i++) {
		problem q;
		batch_item(&j, i, &q);
		gemm_drv_task(&q, part, 0);
	}
	free(p->own_scratch);
	p->own_scratch = NULL;
	return 0;
}

size_t gemm_compute_batch_scratch(int64_t M, int64_t K, int64_t lda, int transA)
{
	const gemm_isa_desc *d = gemm_isa_desc_get(GEMM_ISA_AUTO);
	int64_t lds = gemm_drv_copy_stride(d, transA, lda, M, gemm_choose_kc(d, K));

	return (size_t)d->mc * (size_t)lds * sizeof(float);
}

int gemm_sgemm_batch(cpu_pool *pool, gemm_isa isa, int transA, int transB, int64_t M,
		     int64_t N, int64_t K, int64_t lda, int64_t ldb, const gemm_epilogue *ep,
		     int64_t ldc, const gemm_batch *b)
{
	const gemm_isa_desc *d = gemm_isa_desc_get(isa);
	batch_job j;
	int rc, mine;

	if (!d)
		return -ENOTSUP;
	if ((rc = batch_check(b, ep)) != 0 || (b->count > 0 && !b->B))
		return rc ? rc : -EINVAL;
	if (b->count == 0)
		return 0;
	if ((rc = gemm_drv_setup(&j.p, M, N, K, b->A[0], lda, transA, ep, b->C[0], ldc)) != 0)
		return rc;
	if (M > 0 && N > 0 && K > 0 && ldb < (transB ? K : N))
		return -EINVAL;
	for (int64_t i = 0; M > 0 && N > 0 && K > 0 && i < b->count; i++)
		if (!b->B[i])
			return -EINVAL;
	gemm_drv_fly_b(&j.p, d, K, N, ldb, transB);
	j.p.given_scratch = NULL;   /* it also packs B: allocated per call */
	j.b = b;
	mine = cpu_pool_try_begin(pool);
	rc = run_batch(&j, mine ? pool : NULL);
	if (mine)
		cpu_pool_end(pool);
	return rc;
}
