/*
 * driver: the GEMM's blocking loops, its split over threads, and the two
 * entry points (gemm_compute with a packed B, gemm_sgemm without).
 *
 * Blocking (BLIS's loops, transposed to a row-major C whose columns are the
 * vector lanes).  Within a row tile, the tile's rows of A (mr x kc, a few
 * KiB) stay in L1 while the microkernel walks the NR-wide panels of a
 * kc x NC block of packed B, which stays in L2 while the tiles of a group
 * of MC rows sweep it.  Two loop orders around that:
 *  - B packed ahead (weights): N block, then row group, then K block.  The
 *    group's C (MC x NC) stays in L2 across the K blocks; the B strip is
 *    re-read from L3 once per group.
 *  - B packed on the fly (gemm_sgemm): N block, then K block, whose B block
 *    the task packs into its scratch, then every row group.  B is read
 *    once and its packed copy never leaves L2.  A row-major B of a single
 *    K block is not packed at all when the ISA has a kernel_bd (AVX-512):
 *    the tiles read its rows in place, the same loops without the pack.
 * C is finished (beta, bias, activation) by the kernel itself: beta
 * applies on the first K block, bias and activation on the last.
 *
 * Rows are not padded to MR: a task's rows are cut into ceil(rows/MR)
 * tiles of nearly equal height, so a ragged M costs a few narrower tiles
 * rather than a mostly-empty one.  A is read in place unless it is
 * transposed or its row stride is a multiple of 2 KiB (then a tile's rows
 * share L1 sets and evict each other): those cases copy a group's rows of
 * the K block into the task's scratch with a padded stride.  A transposed
 * A is read in place too when the ISA has a kernel_t (AVX-512).
 *
 * At most GEMV_ROWS rows against a packed B (batch-1 MatMul/Gemm) go to
 * the ISA's gemv kernel instead, when it has one: see run_gemv.
 *
 * Threads: C is cut into tm x tn rectangles (rows anywhere, columns on
 * panel boundaries), a few per thread when there is enough work; see
 * gemm_drv_split().
 */
#include <errno.h>
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#ifdef __SSE2__
#include <xmmintrin.h>
#endif

#include "driver_int.h"

static const gemm_epilogue default_ep = GEMM_EPILOGUE_INIT;

/* Copies rows [r0, r1) x cols [k0, k0 + kc) of op(A) into dst (stride lds). */
static void copy_a(const problem *p, int64_t r0, int64_t r1, int64_t k0, int64_t kc, float *dst)
{
	if (!p->transA) {
		for (int64_t r = r0; r < r1; r++)
			memcpy(dst + (r - r0) * p->lds, p->A + r * p->lda + k0,
			       (size_t)kc * sizeof(float));
		return;
	}
	/* op(A)[r][k] = A[k][r]: 4 x 4 blocks through SSE registers (baseline
	 * on x86-64), so both sides move four floats at a time; the edges one
	 * by one, reading A's rows in order. */
	int64_t k = 0;
#ifdef __SSE2__
	for (; k + 4 <= kc; k += 4) {
		const float *s0 = p->A + (k0 + k) * p->lda, *s1 = s0 + p->lda;
		const float *s2 = s1 + p->lda, *s3 = s2 + p->lda;
		int64_t r = r0;

		for (; r + 4 <= r1; r += 4) {
			__m128 a = _mm_loadu_ps(s0 + r), b = _mm_loadu_ps(s1 + r);
			__m128 c = _mm_loadu_ps(s2 + r), d = _mm_loadu_ps(s3 + r);
			float *o = dst + (r - r0) * p->lds + k;

			_MM_TRANSPOSE4_PS(a, b, c, d);
			_mm_storeu_ps(o, a);
			_mm_storeu_ps(o + p->lds, b);
			_mm_storeu_ps(o + 2 * p->lds, c);
			_mm_storeu_ps(o + 3 * p->lds, d);
		}
		for (; r < r1; r++) {
			float *o = dst + (r - r0) * p->lds + k;
			o[0] = s0[r];
			o[1] = s1[r];
			o[2] = s2[r];
			o[3] = s3[r];
		}
	}
#endif
	for (; k < kc; k++) {
		const float *src = p->A + (k0 + k) * p->lda;
		for (int64_t r = r0; r < r1; r++)
			dst[(r - r0) * p->lds + k] = src[r];
	}
}

/* A task's rectangle of C: rows [m0, m0 + rows) in `tiles` tiles of
 * nearly equal height, columns up to n_end. */
typedef struct span {
	int64_t m0, rows, tiles, n_end;
} span;

static int64_t tile_row(const span *s, int64_t t)
{
	return s->m0 + t * s->rows / s->tiles;
}

/* Tiles [t0, t1) (rows from r0, A copied into `copy` if not NULL) times
 * panels [q0, q1) of the K block at k0, whose panel q0 is at `bq0`. */
static void tiles_x_panels(const problem *p, const span *s, int64_t t0, int64_t t1,
			   const float *copy, int64_t r0, int64_t k0, const float *bq0,
			   int64_t q0, int64_t q1)
{
	const gemm_isa_desc *d = p->b.isa;
	int64_t nr = d->nr, kc = p->K - k0 < p->b.kc ? p->K - k0 : p->b.kc;
	int64_t lda = copy ? p->lds : p->lda;
	gemm_tile_ep ep = p->tile;

	ep.beta = k0 == 0 ? p->ep.beta : 1.0f;
	ep.finish = k0 + kc == p->K;
	for (int64_t t = t0; t < t1; t++) {
		int64_t i0 = tile_row(s, t);
		int mr = (int)(tile_row(s, t + 1) - i0);
		const float *a = copy ? copy + (i0 - r0) * lda :
				 p->transA ? p->A + k0 * lda + i0 : p->A + i0 * lda + k0;
		gemm_kernel_fn *kern = !copy && p->transA ? d->kernel_t : d->kernel;
		int64_t bstep = p->b_direct ? nr : kc * nr;
		ep.bias_row = p->tile.bias_row ? p->tile.bias_row + i0 : NULL;
		/* The group's first tile pulls the next panel of a packed-ahead
		 * B into L2 while it reads this one (B streams from memory). */
		ep.pf_b = p->b.data && t == t0 ? kc * nr : 0;
		for (int64_t q = q0; q < q1; q++) {
			int64_t j0 = q * nr;
			int w = (int)(s->n_end - j0 < nr ? s->n_end - j0 : nr);
			ep.bias_col = p->tile.bias_col ? p->tile.bias_col + j0 : NULL;
			if (p->b_direct)
				d->kernel_bd(kc, a, lda, bq0 + (q - q0) * bstep, p->ldb,
					     p->C + i0 * p->ldc + j0, p->ldc, mr, w, &ep);
			else
				kern(kc, a, lda, bq0 + (q - q0) * bstep, p->C + i0 * p->ldc + j0,
				     p->ldc, mr, w, &ep);
		}
	}
}

/* Row group [g, g_end) of the tiles against panels [q0, q1) of the K
 * block at k0 (packed at bq0): copies A first when it has to. */
static void group_block(const problem *p, const span *s, int64_t g, int64_t g_end,
			int64_t k0, const float *bq0, int64_t q0, int64_t q1, float *acopy)
{
	int64_t r0 = tile_row(s, g);

	if (p->copy_a)
		copy_a(p, r0, tile_row(s, g_end), k0,
		       p->K - k0 < p->b.kc ? p->K - k0 : p->b.kc, acopy);
	tiles_x_panels(p, s, g, g_end, p->copy_a ? acopy : NULL, r0, k0, bq0, q0, q1);
}

static void post_group(const problem *p, const span *s, int64_t g, int64_t g_end, int64_t q0,
		       int64_t q1)
{
	int64_t nr = p->b.isa->nr, r0 = tile_row(s, g), r1 = tile_row(s, g_end);
	int64_t j0 = q0 * nr, j1 = q1 * nr < s->n_end ? q1 * nr : s->n_end;

	if (p->ep.post)
		p->ep.post(p->ep.post_ctx, p->C + r0 * p->ldc + j0, p->ldc, r0, r1 - r0, j0,
			   j1 - j0);
}

/* Rows [m0, m1) x panels [p0, p1) of C: the loops of the file comment. */
static void compute_block(const problem *p, int64_t m0, int64_t m1, int64_t p0, int64_t p1,
			  float *scratch)
{
	const gemm_isa_desc *d = p->b.isa;
	int64_t nr = d->nr, group = d->mc / d->mr, ncp = d->nc / nr;
	span s = {m0, m1 - m0, (m1 - m0 + d->mr - 1) / d->mr, p1 * nr < p->N ? p1 * nr : p->N};
	float *bbuf = scratch, *acopy = scratch ? scratch + p->b_floats : NULL;

	for (int64_t q0 = p0; q0 < p1; q0 += ncp) {
		int64_t q1 = q0 + ncp < p1 ? q0 + ncp : p1;
		/* Group outer while the strip of B (K x the block's panels)
		 * stays in L2 between groups; else K block outer. */
		if (p->b.data && p->K * (q1 - q0) * nr * 4 <= L2_BUDGET) {
			for (int64_t g = 0; g < s.tiles; g += group) {
				int64_t g_end = g + group < s.tiles ? g + group : s.tiles;
				for (int64_t k0 = 0; k0 < p->K; k0 += p->b.kc)
					group_block(p, &s, g, g_end, k0,
						    gemm_packed_panel(&p->b, k0, q0), q0, q1, acopy);
				post_group(p, &s, g, g_end, q0, q1);
			}
			continue;
		}
		for (int64_t k0 = 0; k0 < p->K; k0 += p->b.kc) {
			int64_t kc = p->K - k0 < p->b.kc ? p->K - k0 : p->b.kc;
			const float *bq0 = bbuf;
			if (p->b.data)
				bq0 = gemm_packed_panel(&p->b, k0, q0);
			else if (p->b_direct)
				bq0 = p->B + k0 * p->ldb + q0 * nr;
			else if (p->pack)
				p->pack(p->pack_ctx, k0, kc, q0, q1, nr, bbuf);
			else
				gemm_pack_block(p->B, p->ldb, p->transB, p->N, nr, k0, kc, q0, q1,
						bbuf);
			for (int64_t g = 0; g < s.tiles; g += group)
				group_block(p, &s, g, g + group < s.tiles ? g + group : s.tiles, k0,
					    bq0, q0, q1, acopy);
		}
		for (int64_t g = 0; g < s.tiles; g += group)
			post_group(p, &s, g, g + group < s.tiles ? g + group : s.tiles, q0, q1);
	}
}

static float *scratch_of(const problem *p, int member)
{
	if (!p->copy_a && p->b.data)
		return NULL;
	return p->pool ? cpu_pool_scratch(p->pool, member) : p->scratch;
}

void gemm_drv_task(void *arg, int64_t i, int member)
{
	const problem *p = arg;
	int64_t im = i / p->tn, in = i % p->tn;
	int64_t m0 = p->M * im / p->tm, m1 = p->M * (im + 1) / p->tm;
	int64_t p0 = p->b.panels * in / p->tn, p1 = p->b.panels * (in + 1) / p->tn;

	if (m1 > m0 && p1 > p0)
		compute_block(p, m0, m1, p0, p1, scratch_of(p, member));
}

/* Task grid for T threads: a task per thread, each a rectangle of C,
 * the grid's shape minimising a task's cost: 2 * rows * cols flops plus
 * the A and B it streams, (rows + cols) * K floats at ~10 flops a byte
 * (B twice when the task packs it).  Two tasks a thread (claimed
 * dynamically, so a thread the OS delays holds the others up less) cut
 * the rectangles smaller and reuse less of A and B: on the Xeon of the
 * seventeenth session, 2 threads, one task a thread took 0.95-0.99 of
 * two's time in resnet50, densenet121, inception_v3, googlenet and
 * efficientnet_b0 (paired, 5 rounds), Inception's 17 x 17 1x1 layers'
 * 289 x 192 x 768 ran at 349 GFLOP/s instead of 308 (bench-gemm). */
void gemm_drv_split(problem *p, int threads)
{
	double flops = 2.0 * (double)p->M * (double)p->N * (double)p->K, best = INFINITY;
	int64_t nr = p->b.isa->nr, target;
	double pack = p->b.data || p->b_direct ? 1.0 : 2.0;   /* B read, and written packed */

	if (flops / MIN_FLOPS_PER_THREAD < threads)
		threads = (int)(flops / MIN_FLOPS_PER_THREAD) + 1;
	target = threads;
	p->tm = p->tn = 1;
	for (int64_t tm = 1; tm <= target && tm <= p->M; tm++) {
		int64_t tn = target / tm;
		double rows, cols, cost;
		if (tn > p->b.panels)
			tn = p->b.panels;
		rows = (double)((p->M + tm - 1) / tm);
		cols = (double)((p->b.panels + tn - 1) / tn * nr);
		/* Tasks beyond a multiple of the threads leave some idle. */
		cost = (double)((tm * tn + threads - 1) / threads) *
		       (2.0 * rows * cols + 40.0 * (rows + cols * pack));
		if (cost < best * 0.999) {
			best = cost;
			p->tm = (int)tm;
			p->tn = (int)tn;
		}
	}
}

/* K == 0: C = act(beta * C + bias), nothing to multiply. */
void gemm_drv_epilogue_only(const problem *p)
{
	const gemm_epilogue *e = &p->ep;

	for (int64_t i = 0; i < p->M; i++) {
		float *c = p->C + i * p->ldc;
		for (int64_t j = 0; j < p->N; j++) {
			float x = e->beta != 0.0f ? e->beta * c[j] : 0.0f;
			if (e->bias_kind == GEMM_BIAS_COL)
				x += e->bias[j];
			else if (e->bias_kind == GEMM_BIAS_ROW)
				x += e->bias[i];
			if (e->act != GEMM_ACT_NONE)
				x = x < p->tile.lo ? p->tile.lo : x > p->tile.hi ? p->tile.hi : x;
			c[j] = x;
		}
	}
	if (e->post)
		e->post(e->post_ctx, p->C, p->ldc, 0, p->M, 0, p->N);
}

/* Checks the arguments both entry points share and fills p. */
int gemm_drv_setup(problem *p, int64_t M, int64_t N, int64_t K, const float *A, int64_t lda,
		 int transA, const gemm_epilogue *ep, float *C, int64_t ldc)
{
	memset(p, 0, sizeof(*p));
	p->ep = ep ? *ep : default_ep;
	ep = &p->ep;
	/* Strides matter only for matrices that have elements. */
	if (M < 0 || N < 0 || K < 0 || (M > 0 && N > 0 && (!C || ldc < N)) ||
	    (M > 0 && K > 0 && (!A || lda < (transA ? M : K))))
		return -EINVAL;
	if ((ep->bias_kind != GEMM_BIAS_NONE && !ep->bias) ||
	    (unsigned)ep->bias_kind > GEMM_BIAS_ROW || (unsigned)ep->act > GEMM_ACT_CLIP)
		return -EINVAL;
	p->M = M;
	p->N = N;
	p->K = K;
	p->A = A;
	p->lda = lda;
	p->transA = transA;
	p->C = C;
	p->ldc = ldc;
	p->tile.alpha = ep->alpha;
	p->tile.act = ep->act;
	p->tile.lo = ep->act == GEMM_ACT_CLIP ? ep->clip_min : 0.0f;
	p->tile.hi = ep->act == GEMM_ACT_CLIP ? ep->clip_max : INFINITY;
	p->tile.bias_col = ep->bias_kind == GEMM_BIAS_COL ? ep->bias : NULL;
	p->tile.bias_row = ep->bias_kind == GEMM_BIAS_ROW ? ep->bias : NULL;
	return 0;
}

int64_t gemm_drv_copy_stride(const gemm_isa_desc *d, int transA, int64_t lda, int64_t M,
			     int64_t kc)
{
	/* A row stride of a multiple of 2 KiB puts a tile's rows (or, A
	 * transposed, its k steps) in the same L1 sets: copied then too. */
	if ((transA && !d->kernel_t) || (lda % 512 == 0 && M > 1))
		return (kc + 15) / 16 * 16 + 16;
	return 0;
}

/* Sizes the task scratch (packed B block, copied A rows) and reserves it:
 * in the pool's members, else the caller's or one allocated for the call. */
int gemm_drv_scratch_setup(problem *p, cpu_pool *pool)
{
	const gemm_isa_desc *d = p->b.isa;
	size_t bytes;

	p->pool = pool;
	p->lds = gemm_drv_copy_stride(d, p->transA, p->lda, p->M, p->b.kc);
	p->copy_a = p->lds > 0;
	if (!p->b.data && !p->b_direct)
		p->b_floats = (size_t)p->b.kc * (size_t)(p->b.panels * d->nr < d->nc ?
							 p->b.panels * d->nr : d->nc);
	bytes = (p->b_floats + (size_t)d->mc * (size_t)p->lds) * sizeof(float);
	if (bytes && pool)
		return cpu_pool_reserve(pool, bytes);
	if (bytes && p->given_scratch) {
		p->scratch = p->given_scratch;
		return 0;
	}
	if (bytes && !(p->own_scratch = aligned_alloc(64, (bytes + 63) & ~(size_t)63)))
		return -ENOMEM;
	p->scratch = p->own_scratch;
	return 0;
}

/* Runs a set-up problem; pool acquired or NULL. */
static int run(problem *p, cpu_pool *pool)
{
	int rc;

	if (p->M == 0 || p->N == 0)
		return 0;
	if (p->K == 0) {
		gemm_drv_epilogue_only(p);
		return 0;
	}
	if ((rc = gemm_drv_scratch_setup(p, pool)) != 0)
		return rc;
	gemm_drv_split(p, cpu_pool_threads(pool));
	if (pool)
		cpu_pool_for(pool, p->tm * p->tn, p->tm * p->tn, gemm_drv_task, p);
	else
		for (int64_t i = 0; i < (int64_t)p->tm * p->tn; i++)
			gemm_drv_task(p, i, 0);
	free(p->own_scratch);
	p->own_scratch = NULL;
	return 0;
}

/* 0 for a switch set to "0" (value: its getenv), else 1. */
static int env_on(const char *value)
{
	return !(value && strcmp(value, "0") == 0);
}

/* ORTMK_CPU_GEMV=0 sends few-row products through the tiles instead (for
 * comparisons); read once. */
int gemm_drv_gemv_enabled(void)
{
	static _Atomic int on = -1;
	int v = atomic_load_explicit(&on, memory_order_relaxed);

	if (v < 0)
		atomic_store_explicit(&on, v = env_on(getenv("ORTMK_CPU_GEMV")), memory_order_relaxed);
	return v;
}

/* ORTMK_CPU_GEMM_DIRECT=0 packs every on-the-fly B (for comparisons). */
int gemm_drv_direct_enabled(void)
{
	static _Atomic int on = -1;
	int v = atomic_load_explicit(&on, memory_order_relaxed);

	if (v < 0)
		atomic_store_explicit(&on, v = env_on(getenv("ORTMK_CPU_GEMM_DIRECT")),
				      memory_order_relaxed);
	return v;
}

/* A gemv task: one contiguous run of panels, all of K, the few rows. */
static void gemv_task(void *arg, int64_t i, int member)
{
	const problem *p = arg;
	int64_t q0 = p->b.panels * i / p->tn, q1 = p->b.panels * (i + 1) / p->tn;
	int64_t nr = p->b.isa->nr, j0 = q0 * nr, j1 = q1 * nr < p->N ? q1 * nr : p->N;

	(void)member;
	if (q1 <= q0)
		return;
	p->b.isa->gemv(&p->b, (int)p->M, p->A, p->lda, q0, q1, p->C, p->ldc, &p->tile);
	if (p->ep.post)
		p->ep.post(p->ep.post_ctx, p->C + j0, p->ldc, 0, p->M, j0, j1 - j0);
}

/* At most GEMV_ROWS rows against a packed B: B is read once, from L3 or
 * memory, so the product runs at its bandwidth.  N is cut into one
 * contiguous run of panels per thread (each streams its own part of every
 * K block), none smaller than MIN_FLOPS_PER_THREAD's worth. */
static void run_gemv(problem *p, cpu_pool *pool)
{
	double flops = 2.0 * (double)p->M * (double)p->N * (double)p->K;
	int threads = cpu_pool_threads(pool);

	if (flops / MIN_FLOPS_PER_THREAD < threads)
		threads = (int)(flops / MIN_FLOPS_PER_THREAD) + 1;
	if (threads > p->b.panels)
		threads = (int)p->b.panels;
	p->tile.beta = p->ep.beta;
	p->tile.finish = 1;
	p->tm = 1;
	p->tn = threads;
	if (pool && threads > 1)
		cpu_pool_for(pool, threads, threads, gemv_task, p);
	else
		gemv_task(p, 0, 0);
}

int gemm_compute(cpu_pool *pool, int64_t M, int64_t N, int64_t K, const float *A,
		 int64_t lda, int transA, const void *packed_b, const gemm_epilogue *ep,
		 float *C, int64_t ldc)
{
	problem p;
	int rc = gemm_drv_setup(&p, M, N, K, A, lda, transA, ep, C, ldc), mine;

	if (rc)
		return rc;
	if (gemm_packed_view_get(packed_b, &p.b) || p.b.K != K || p.b.N != N)
		return -EINVAL;
	mine = cpu_pool_try_begin(pool);
	if (M >= 1 && M <= GEMV_ROWS && N > 0 && K > 0 && !transA && p.b.isa->gemv &&
	    gemm_drv_gemv_enabled())
		run_gemv(&p, mine ? pool : NULL);
	else
		rc = run(&p, mine ? pool : NULL);
	if (mine)
		cpu_pool_end(pool);
	return rc;
}

/* A B (K x N) the tasks pack as they go, for the ISA d. */
void gemm_drv_fly_b(problem *p, const gemm_isa_desc *d, int64_t K, int64_t N, int64_t ldb,
		  int transB)
{
	p->b.isa = d;
	p->b.K = K;
	p->b.N = N;
	p->b.kc = gemm_choose_kc(d, K);
	p->b.panels = (N + d->nr - 1) / d->nr;
	p->ldb = ldb;
	p->transB = transB;
}

/* Both on-the-fly entry points: B from a matrix or from fn. */
static int sgemm_any(cpu_pool *pool, gemm_isa isa, int transA, int transB, int64_t M,
		     int64_t N, int64_t K, const float *A, int64_t lda, const float *B, int64_t ldb,
		     gemm_pack_fn *fn, void *fn_ctx, const gemm_epilogue *ep, float *C, int64_t ldc)
{
	const gemm_isa_desc *d = gemm_isa_desc_get(isa);
	problem p;
	int rc, mine;

	if (!d)
		return -ENOTSUP;
	rc = gemm_drv_setup(&p, M, N, K, A, lda, transA, ep, C, ldc);
	if (rc)
		return rc;
	if (M > 0 && N > 0 && K > 0 && !fn && (!B || ldb < (transB ? K : N)))
		return -EINVAL;
	p.pack = fn;
	p.pack_ctx = fn_ctx;
	p.B = B;
	gemm_drv_fly_b(&p, d, K, N, ldb, transB);
	/* A row-major B of one K block is read in place when the ISA can
	 * and M is a few row tiles: packing it costs a pass over B for every
	 * product, as much as the multiply when M is small (a 1x1
	 * convolution's 16 to 40 output channels: 0.5-0.9x); with more row
	 * tiles the packed copy is reused enough to pay (resnet50's 1x1
	 * layers, M 64-2048: 3-5% slower read in place), and a deeper K walks
	 * more rows of B at a stride than the caches follow. */
	p.b_direct = !fn && !transB && !transA && d->kernel_bd && K <= p.b.kc &&
		     M <= 3 * d->mr && gemm_drv_direct_enabled();
	mine = cpu_pool_try_begin(pool);
	rc = run(&p, mine ? pool : NULL);
	if (mine)
		cpu_pool_end(pool);
	return rc;
}

int gemm_sgemm(cpu_pool *pool, gemm_isa isa, int transA, int transB, int64_t M, int64_t N,
	       int64_t K, const float *A, int64_t lda, const float *B, int64_t ldb,
	       const gemm_epilogue *ep, float *C, int64_t ldc)
{
	return sgemm_any(pool, isa, transA, transB, M, N, K, A, lda, B, ldb, NULL, NULL, ep, C,
			 ldc);
}

int gemm_sgemm_packer(cpu_pool *pool, gemm_isa isa, int transA, int64_t M, int64_t N,
		      int64_t K, const float *A, int64_t lda, gemm_pack_fn *fn, void *fn_ctx,
		      const gemm_epilogue *ep, float *C, int64_t ldc)
{
	if (!fn)
		return -EINVAL;
	return sgemm_any(pool, isa, transA, 0, M, N, K, A, lda, NULL, 0, fn, fn_ctx, ep, C, ldc);
}
