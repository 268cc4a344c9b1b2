/*
 * igemm_conv: a stride-1 2-D convolution as an implicit int8 GEMM
 * (igemm_conv_compute, see igemm.h).  No im2col: the kernels read B
 * straight from the caller's channel-interleaved, padded input, where the
 * 4 channels of a group sit next to each other for every pixel, so 16
 * consecutive output pixels of one tap are 64 contiguous bytes in exactly
 * the layout of a packed B panel.  Each input byte is touched once by the
 * caller's interleave instead of once per tap by an im2col.
 *
 * Tasks are bands of output rows (and row ranges of the filter when there
 * are few output rows); a task walks its rows 64 (or the ISA's NR)
 * pixels at a time, and for each block of pixels every tile of filter
 * rows: the input the block reads (a few rows of each plane) stays in L1
 * while the filter streams from L2.  A filter that fits L1 (a short K)
 * turns that around over chunks of 256 pixels: each tile of filter rows
 * sweeps the chunk, so it writes its output rows as a few sequential
 * streams rather than every output plane at once (MobileNetV2's 16 -> 96
 * 1x1 at 112x112: 4.4 -> 3.0 ms alone with an int32 output, 1 thread).
 * The whole K is one block, so each tile is finished in registers (no
 * partial sums in C).
 *
 * Zero points: as the driver's, with the column sums of B (per output
 * pixel, from the caller) in the rank-one term: Y = acc + ZB (K ZA -
 * rowsum A_u) - ZA colsum.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "igemm_kern.h"

enum { MIN_MACS_PER_THREAD = 1 << 19 };

typedef struct conv_run {
	const igemm_conv *cv;
	const igemm_isa_desc *d;
	int64_t rows_per_task, tm, tn, mrows;
	const int32_t *row_off, *rk_row;
} conv_run;

static void conv_task(void *arg, int64_t t, int member)
{
	const conv_run *r = arg;
	const igemm_conv *cv = r->cv;
	const igemm_isa_desc *d = r->d;
	const igemm_out *o = &cv->out;
	int64_t im = t / r->tn, in = t % r->tn;
	int64_t m0 = im * r->mrows, m1 = m0 + r->mrows < cv->M ? m0 + r->mrows : cv->M;
	int64_t h0 = in * r->rows_per_task, h1 = h0 + r->rows_per_task < cv->oh ? h0 + r->rows_per_task : cv->oh;
	int64_t tiles = (m1 - m0 + d->mr - 1) / d->mr;
	igemm_bwalk bw = {NULL, 64, cv->ntaps, cv->toff, cv->cg, cv->hp * cv->wp * 4};
	igemm_tile_ep ep = {0};
	/* see the file comment */
	int64_t chunk = (m1 - m0) * cv->A.lda <= 16384 ? 256 : d->nr;

	(void)member;
	if (m0 >= m1 || h0 >= h1)
		return;
	ep.first = 1;
	ep.finish = 1;
	ep.is_float = o->is_float;
	ep.scale = o->scale;
	igemm_ep_clamp(&ep, o);
	for (int64_t y = h0; y < h1; y++)
		for (int64_t c0 = 0; c0 < cv->ow; c0 += chunk) {
			int64_t c1 = c0 + chunk < cv->ow ? c0 + chunk : cv->ow;

			for (int64_t tl = 0; tl < tiles; tl++) {
				int64_t i0, i1;

				igemm_tile_rows(d, m0, m1, tl, tiles, &i0, &i1);

				ep.row_off = r->row_off ? r->row_off + i0 : NULL;
				ep.rk_row = r->rk_row ? r->rk_row + i0 : NULL;
				ep.scale_row = o->scale_row ? o->scale_row + i0 : NULL;
				ep.bias_row = o->bias_row ? o->bias_row + i0 : NULL;
				for (int64_t x = c0; x < c1; x += d->nr) {
					int64_t j0 = y * cv->ow + x, nr = cv->ow - x < d->nr ? cv->ow - x : d->nr;

					bw.b = cv->x4 + (y * cv->wp + x) * 4;
					ep.rk_col = r->rk_row ? cv->colsum + j0 : NULL;
					ep.scale_col = o->scale_col ? o->scale_col + j0 : NULL;
					ep.bias_col = o->bias_col ? o->bias_col + j0 : NULL;
					ep.add = o->add ? o->add + i0 * o->ldc + j0 : NULL;
					d->kernel(cv->A.a + i0 * cv->A.lda, cv->A.lda, &bw,
						  (int32_t *)o->c + i0 * o->ldc + j0, o->ldc, (int)(i1 - i0),
						  (int)nr, &ep);
				}
			}
		}
}

int igemm_conv_compute(cpu_pool *pool, igemm_isa isa, const igemm_conv *cv)
{
	const igemm_isa_desc *d = igemm_desc_for(isa, cv->M, cv->cg);
	int64_t K4 = (int64_t)cv->ntaps * cv->cg * 4;
	uint32_t K = (uint32_t)cv->K;
	double macs;
	conv_run r;
	int32_t *terms;
	int threads = 1, mine = 0;
	int32_t ZA = cv->za + cv->A.off, ZB = cv->zb - cv->b_off;
	int need_cs = ZA != 0 || cv->za_row;

	if (!d)
		return -ENOTSUP;
	if (cv->M < 0 || cv->K < 0 || cv->oh < 0 || cv->ow < 0 || cv->ntaps < 1 || cv->cg < 1 ||
	    !cv->A.a || cv->A.lda < K4 || !cv->x4 || !cv->toff || !cv->out.c ||
	    (need_cs && !cv->colsum) || (ZB && !cv->A.rowsum))
		return -EINVAL;
	if (!cv->M || !cv->oh || !cv->ow)
		return 0;
	if (!(terms = malloc((size_t)cv->M * 8 + 8)))
		return -ENOMEM;
	memset(&r, 0, sizeof(r));
	r.cv = cv;
	r.d = d;
	for (int64_t i = 0; i < cv->M; i++) {
		uint32_t za = cv->za_row ? (uint32_t)cv->za_row[i] + (uint32_t)cv->A.off : (uint32_t)ZA;
		uint32_t rs = cv->A.rowsum ? (uint32_t)cv->A.rowsum[i] : 0u;
		terms[i] = (int32_t)((uint32_t)ZB * (K * za - rs));
		terms[cv->M + i] = (int32_t)(0u - za);
	}
	r.row_off = ZB ? terms : NULL;
	r.rk_row = need_cs ? terms + cv->M : NULL;
	mine = pool && cpu_pool_try_begin(pool);
	if (mine)
		threads = cpu_pool_threads(pool);
	macs = (double)cv->M * (double)cv->oh * (double)cv->ow * (double)K4;
	if (macs / MIN_MACS_PER_THREAD < threads)
		threads = (int)(macs / MIN_MACS_PER_THREAD) + 1;
	/* bands of output rows, about three per thread; few rows: split the
	 * filter's rows too */
	r.rows_per_task = (cv->oh + 3 * threads - 1) / (3 * threads);
	r.tn = (cv->oh + r.rows_per_task - 1) / r.rows_per_task;
	r.tm = 1;
	r.mrows = cv->M;
	if (r.tn < 2 * threads && cv->M > d->mr) {
		int64_t tiles = (cv->M + d->mr - 1) / d->mr, tm = (2 * threads + r.tn - 1) / r.tn;
		tm = tm > tiles ? tiles : tm;
		r.mrows = (tiles + tm - 1) / tm * d->mr;
		r.tm = (cv->M + r.mrows - 1) / r.mrows;
	}
	if (mine && threads > 1)
		cpu_pool_for(pool, threads, r.tm * r.tn, conv_task, &r);
	else
		for (int64_t t = 0; t < r.tm * r.tn; t++)
			conv_task(&r, t, 0);
	if (mine)
		cpu_pool_end(pool);
	free(terms);
	return 0;
}
