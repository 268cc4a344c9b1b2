/*
 * nbits_kern: MatMulNBits' kernels (nbits.h): the weight re-layout, the
 * per-column dot products for a few rows of A (decoding: a gemv per row
 * reading each weight byte once per row), and the GEMM for many rows,
 * which dequantizes W block by block straight into the float GEMM's
 * packed panels (gemm_sgemm_packer), never holding W in float32.
 *
 * The loops are written once on 8-lane vectors (vfloat.h) and compiled
 * per ISA (CPU_MULTIVERSION): the 4-bit unpack is a widening byte load,
 * a mask and a shift, then int-to-float conversions and FMAs.  The gemv of
 * 4-bit weights in blocks of a multiple of 32 has an AVX-512 kernel of its
 * own (gemv4_avx512), chosen by cpuid.
 */
#include <stdlib.h>
#include <string.h>

#include "cpu_ops.h"
#include "gemm.h"
#include "nbits.h"
#include "par.h"
#include "vfloat.h"

typedef uint8_t vb8 __attribute__((vector_size(8)));

int64_t nbits_col_bytes(const nbits_w *w)
{
	return w->bits == 4 ? w->nb * w->bs / 2 : w->nb * w->bs;
}

/* Value k of the block starting at src (bits per value, packed from the
 * low bits of each byte up). */
static inline uint8_t src_val(const uint8_t *src, int bits, int64_t k)
{
	int64_t bit = k * bits;

	return (uint8_t)((src[bit >> 3] >> (bit & 7)) & ((1u << bits) - 1));
}

void nbits_relayout(const nbits_w *w, const uint8_t *src, uint8_t *dst)
{
	int64_t blob = w->bs * w->bits / 8;

	for (int64_t n = 0; n < w->N; n++)
		for (int64_t b = 0; b < w->nb; b++) {
			const uint8_t *s = src + (n * w->nb + b) * blob;

			if (w->bits != 4) {
				uint8_t *d = dst + (n * w->nb + b) * w->bs;
				for (int64_t k = 0; k < w->bs; k++)
					d[k] = src_val(s, w->bits, k);
				continue;
			}
			uint8_t *d = dst + (n * w->nb + b) * (w->bs / 2);
			for (int64_t c = 0; c < w->bs / 16; c++)
				for (int j = 0; j < 8; j++)
					d[c * 8 + j] = (uint8_t)(src_val(s, 4, c * 16 + j) |
								 src_val(s, 4, c * 16 + 8 + j) << 4);
		}
}

/* sum_b scale[b] * dot(a_b, q_b) for one column, a padded to nb * bs. */
CPU_MULTIVERSION
static float col_dot4(const uint8_t *q, const float *a, const float *scale, int64_t nb,
		      int64_t bs)
{
	vf8 acc = vf_splat(0.0f);

	for (int64_t b = 0; b < nb; b++) {
		vf8 t = vf_splat(0.0f);
		for (int64_t c = 0; c < bs; c += 16) {
			vb8 raw;
			memcpy(&raw, q + c / 2, 8);
			vi8 v = __builtin_convertvector(raw, vi8);
			vf8 lo = __builtin_convertvector(v & 15, vf8);
			vf8 hi = __builtin_convertvector(v >> 4, vf8);
			t += lo * vf_load(a + c) + hi * vf_load(a + c + 8);
		}
		acc += t * vf_splat(scale[b]);
		q += bs / 2;
		a += bs;
	}
	return vf_hsum(acc);
}

CPU_MULTIVERSION
static float col_dot8(const uint8_t *q, const float *a, const float *scale, int64_t nb,
		      int64_t bs)
{
	vf8 acc = vf_splat(0.0f);

	for (int64_t b = 0; b < nb; b++) {
		vf8 t = vf_splat(0.0f);
		for (int64_t c = 0; c < bs; c += 8) {
			vb8 raw;
			memcpy(&raw, q + c, 8);
			t += __builtin_convertvector(raw, vf8) * vf_load(a + c);
		}
		acc += t * vf_splat(scale[b]);
		q += bs;
		a += bs;
	}
	return vf_hsum(acc);
}

/* sum x[i] * y[i] in 4 independent sums: the zero points' term of a
 * column (sum_b zs[b] * as[b]), a chain of nb dependent multiply-adds if
 * written as a plain loop. */
CPU_MULTIVERSION
float nbits_dot(const float *x, const float *y, int64_t n)
{
	vf8 s[4] = {vf_splat(0.0f), vf_splat(0.0f), vf_splat(0.0f), vf_splat(0.0f)};
	float t = 0.0f;
	int64_t i = 0;

	for (; i + 32 <= n; i += 32)
		for (int k = 0; k < 4; k++)
			s[k] += vf_load(x + i + 8 * k) * vf_load(y + i + 8 * k);
	for (; i + 8 <= n; i += 8)
		s[0] += vf_load(x + i) * vf_load(y + i);
	for (; i < n; i++)
		t += x[i] * y[i];
	return vf_hsum((s[0] + s[1]) + (s[2] + s[3])) + t;
}

typedef struct gemv_job {
	const nbits_w *w;
	const float *a;           /* rows x (nb * bs), zero past K; permuted per 32 when wide */
	const float *asum;        /* rows x nb */
	int64_t rows, ldy;
	const float *bias;
	float *y;
	int wide;                 /* the AVX-512 kernel (gemv4_avx512) */
} gemv_job;

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define NB_WIDE_X86 1
#include <immintrin.h>

/* 4 bits, blocks of a multiple of 32, an AVX-512 CPU: 4 columns at a time,
 * 32 values a step.  A step's 16 weight bytes widen to 16 lanes whose low
 * nibbles are values 0-7 and 16-23 and high nibbles 8-15 and 24-31; A's
 * copy is in that order (permute_a), so the weights are used as loaded.
 * (gcc turns the generic loop's byte-to-int conversion into scalar
 * inserts: 6x slower than ONNX Runtime at 4096 x 4096.) */
__attribute__((target("avx512f,avx2,fma")))
static void gemv4_avx512(const nbits_w *w, const float *a, const int64_t *col, int64_t cb,
			 float *out)
{
	__m512 acc[4];
	const __m512i lo4 = _mm512_set1_epi32(15);

	for (int c = 0; c < 4; c++)
		acc[c] = _mm512_setzero_ps();
	for (int64_t b = 0; b < w->nb; b++) {
		__m512 t[4];

		for (int c = 0; c < 4; c++)
			t[c] = _mm512_setzero_ps();
		for (int64_t g = 0; g < w->bs; g += 32) {
			const float *ap = a + b * w->bs + g;
			__m512 a0 = _mm512_loadu_ps(ap), a1 = _mm512_loadu_ps(ap + 16);

			for (int c = 0; c < 4; c++) {
				const uint8_t *p = w->q + col[c] * cb + (b * w->bs + g) / 2;
				__m512i v = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)p));

				t[c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_and_si512(v, lo4)), a0, t[c]);
				t[c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_srli_epi32(v, 4)), a1, t[c]);
			}
		}
		for (int c = 0; c < 4; c++)
			acc[c] = _mm512_fmadd_ps(t[c], _mm512_set1_ps(w->scale[col[c] * w->nb + b]), acc[c]);
	}
	for (int c = 0; c < 4; c++)
		out[c] = _mm512_reduce_add_ps(acc[c]);
}

#endif

static int wide_avx512(void)
{
#ifdef NB_WIDE_X86
	return __builtin_cpu_supports("avx512f");
#else
	return 0;
#endif
}

static int wide_ok(const nbits_w *w)
{
	return w->bits == 4 && w->bs % 32 == 0 && wide_avx512();
}

/* Values 0-7, 16-23, 8-15, 24-31 of every 32: the order gemv4_avx512's
 * weights unpack in. */
static void permute_a(float *a, int64_t n)
{
	float t[8];

	for (int64_t g = 0; g + 32 <= n; g += 32) {
		memcpy(t, a + g + 8, sizeof(t));
		memcpy(a + g + 8, a + g + 16, sizeof(t));
		memcpy(a + g + 16, t, sizeof(t));
	}
}

/* Columns [g0, g1) * 4 through gemv4_avx512 (the last group repeats
 * column N - 1 where N runs out). */
static void gemv_cols_wide(const gemv_job *j, int64_t g0, int64_t g1)
{
#ifdef NB_WIDE_X86
	const nbits_w *w = j->w;
	int64_t kp = w->nb * w->bs, cb = nbits_col_bytes(w);

	for (int64_t r = 0; r < j->rows; r++) {
		const float *a = j->a + r * kp, *as = j->asum + r * w->nb;

		for (int64_t g = g0; g < g1; g++) {
			int64_t col[4];
			float out[4];

			for (int c = 0; c < 4; c++)
				col[c] = g * 4 + c < w->N ? g * 4 + c : w->N - 1;
			gemv4_avx512(w, a, col, cb, out);
			for (int c = 0; c < 4 && g * 4 + c < w->N; c++) {
				float v = out[c] - nbits_dot(w->zs + col[c] * w->nb, as, w->nb);

				j->y[r * j->ldy + col[c]] = j->bias ? v + j->bias[col[c]] : v;
			}
		}
	}
#else
	(void)j;
	(void)g0;
	(void)g1;
#endif
}

static void gemv_cols(void *arg, int64_t n0, int64_t n1, int member)
{
	const gemv_job *j = arg;
	const nbits_w *w = j->w;
	int64_t kp = w->nb * w->bs, cb = nbits_col_bytes(w);

	(void)member;
	if (j->wide) {
		gemv_cols_wide(j, n0, n1);
		return;
	}
	for (int64_t r = 0; r < j->rows; r++) {
		const float *a = j->a + r * kp, *as = j->asum + r * w->nb;
		for (int64_t n = n0; n < n1; n++) {
			const float *sc = w->scale + n * w->nb, *zs = w->zs + n * w->nb;
			const uint8_t *q = w->q + n * cb;
			float v = w->bits == 4 ? col_dot4(q, a, sc, w->nb, w->bs) :
				  col_dot8(q, a, sc, w->nb, w->bs);

			v -= nbits_dot(zs, as, w->nb);
			j->y[r * j->ldy + n] = j->bias ? v + j->bias[n] : v;
		}
	}
}

int nbits_gemv(cpu_ctx *ctx, const nbits_w *w, const float *A, int64_t lda, int64_t rows,
	       const float *bias, float *Y, int64_t ldy)
{
	int64_t kp = w->nb * w->bs;
	float *a = cpu_scratch(ctx, (size_t)(rows * (kp + w->nb)) * sizeof(float));
	gemv_job j = {w, a, a + rows * kp, rows, ldy, bias, Y, wide_ok(w)};
	int64_t items = j.wide ? (w->N + 3) / 4 : w->N;

	if (!a)
		return CPU_E_NOMEM;
	for (int64_t r = 0; r < rows; r++) {
		float *ar = a + r * kp, *as = a + rows * kp + r * w->nb;
		memcpy(ar, A + r * lda, (size_t)w->K * sizeof(float));
		memset(ar + w->K, 0, (size_t)(kp - w->K) * sizeof(float));
		for (int64_t b = 0; b < w->nb; b++) {
			float s = 0.0f;
			for (int64_t k = 0; k < w->bs; k++)
				s += ar[b * w->bs + k];
			as[b] = s;
		}
		if (j.wide)
			permute_a(ar, kp);
	}
	/* items: columns, or groups of 4 of them for the wide kernel */
	cpu_par_for(ctx, items, (double)rows * (double)kp * (j.wide ? 0.04 : 0.06), j.wide ? 2 : 8,
		    gemv_cols, &j);
	return 0;
}

/* Values [k0, k0 + n) of a 4-bit column (re-laid out), all in one run of
 * 16 and one block (scale sc, zs), dequantized into dst with stride nr. */
static void col_run4(const uint8_t *col, int64_t k0, int64_t n, float sc, float zs, float *dst,
		     int64_t nr)
{
	const uint8_t *run = col + (k0 >> 4) * 8;
	int64_t j0 = k0 & 15;

	for (int64_t j = 0; j < n; j++) {
		int64_t jj = j0 + j;
		uint8_t byte = run[jj & 7];
		dst[j * nr] = (float)(jj < 8 ? byte & 15 : byte >> 4) * sc - zs;
	}
}

#ifdef NB_WIDE_X86
/* Column n's run of 16 values from k0 (a multiple of 16), dequantized. */
__attribute__((target("avx512f,avx2,fma")))
static inline __m512 run16_avx512(const nbits_w *w, int64_t n, int64_t k0)
{
	int64_t b = n * w->nb + k0 / w->bs;
	uint64_t raw;
	__m512i v;

	memcpy(&raw, w->q + n * nbits_col_bytes(w) + (k0 >> 4) * 8, 8);
	/* bytes 0-7 as lanes 0-7 and again as lanes 8-15: low nibbles, then high */
	v = _mm512_cvtepu8_epi32(_mm_set_epi64x((long long)raw, (long long)raw));
	v = _mm512_mask_srli_epi32(v, 0xff00, v, 4);
	v = _mm512_and_si512(v, _mm512_set1_epi32(15));
	return _mm512_fmsub_ps(_mm512_cvtepi32_ps(v), _mm512_set1_ps(w->scale[b]),
			       _mm512_set1_ps(w->zs[b]));
}

/* r[0..16) (a column each) -> r[m] = element m of every one (a row). */
__attribute__((target("avx512f,avx2,fma")))
static inline void transpose16(__m512 r[16])
{
	__m512 t[16], u[16];

	for (int i = 0; i < 8; i++) {
		t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
		t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
	}
	for (int i = 0; i < 4; i++) {
		__m512d a = _mm512_castps_pd(t[4 * i]), b = _mm512_castps_pd(t[4 * i + 1]);
		__m512d c = _mm512_castps_pd(t[4 * i + 2]), d = _mm512_castps_pd(t[4 * i + 3]);

		u[4 * i] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, c));
		u[4 * i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, c));
		u[4 * i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(b, d));
		u[4 * i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(b, d));
	}
	for (int j = 0; j < 4; j++) {
		__m512 x0 = _mm512_shuffle_f32x4(u[j], u[4 + j], 0x44);
		__m512 x1 = _mm512_shuffle_f32x4(u[j], u[4 + j], 0xee);
		__m512 y0 = _mm512_shuffle_f32x4(u[8 + j], u[12 + j], 0x44);
		__m512 y1 = _mm512_shuffle_f32x4(u[8 + j], u[12 + j], 0xee);

		r[j] = _mm512_shuffle_f32x4(x0, y0, 0x88);
		r[4 + j] = _mm512_shuffle_f32x4(x0, y0, 0xdd);
		r[8 + j] = _mm512_shuffle_f32x4(x1, y1, 0x88);
		r[12 + j] = _mm512_shuffle_f32x4(x1, y1, 0xdd);
	}
}

/* Columns [n0, n0 + 16) x rows [k0, k0 + 16) (k0 a multiple of 16) into
 * dst (16 floats a row, stride nr): 16 column runs, transposed. */
__attribute__((target("avx512f,avx2,fma")))
static void tile16_avx512(const nbits_w *w, int64_t n0, int64_t k0, int64_t nr, float *dst)
{
	__m512 r[16];

	for (int c = 0; c < 16; c++)
		r[c] = n0 + c < w->N ? run16_avx512(w, n0 + c, k0) : _mm512_setzero_ps();
	transpose16(r);
	for (int m = 0; m < 16; m++)
		_mm512_storeu_ps(dst + m * nr, r[m]);
}
#endif

#ifdef NB_WIDE_X86
/* tile16_avx512 on AVX2 + FMA: columns [n0, n0 + 8) x rows [k0, k0 + 16),
 * each column's run of 16 values two ymm (its low nibbles, then its high
 * ones), each half transposed 8 x 8 into rows of 8 floats (stride nr). */
__attribute__((target("avx2,fma")))
static void tile8_avx2(const nbits_w *w, int64_t n0, int64_t k0, int64_t nr, float *dst)
{
	vf8 lo[8], hi[8];

	for (int c = 0; c < 8; c++) {
		int64_t n = n0 + c, b = n * w->nb + k0 / w->bs;
		uint64_t raw;
		__m256i v;
		__m256 sc, zs;

		if (n >= w->N) {
			lo[c] = hi[c] = vf_splat(0.0f);
			continue;
		}
		memcpy(&raw, w->q + n * nbits_col_bytes(w) + (k0 >> 4) * 8, 8);
		v = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128((long long)raw));
		sc = _mm256_set1_ps(w->scale[b]);
		zs = _mm256_set1_ps(w->zs[b]);
		lo[c] = (vf8)_mm256_fmsub_ps(_mm256_cvtepi32_ps(_mm256_and_si256(
							v, _mm256_set1_epi32(15))), sc, zs);
		hi[c] = (vf8)_mm256_fmsub_ps(_mm256_cvtepi32_ps(_mm256_srli_epi32(v, 4)), sc, zs);
	}
	vf_transpose8(lo);
	vf_transpose8(hi);
	for (int m = 0; m < 8; m++) {
		vf_store(dst + m * nr, lo[m]);
		vf_store(dst + (8 + m) * nr, hi[m]);
	}
}
#endif

/* Column n's dequantized values [k0, k0 + rows) into dst with stride nr. */
static void pack_col(const nbits_w *w, int64_t n, int64_t k0, int64_t rows, int64_t nr,
		     float *dst)
{
	const uint8_t *col = w->q + n * nbits_col_bytes(w);
	const float *sc = w->scale + n * w->nb, *zs = w->zs + n * w->nb;

	if (w->bits != 4) {
		for (int64_t r = 0; r < rows; r++) {
			int64_t k = k0 + r, b = k / w->bs;
			dst[r * nr] = (float)col[k] * sc[b] - zs[b];
		}
		return;
	}
	for (int64_t r = 0; r < rows;) {
		int64_t k = k0 + r, n16 = 16 - (k & 15);

		n16 = n16 < rows - r ? n16 : rows - r;
		col_run4(col, k, n16, sc[k / w->bs], zs[k / w->bs], dst + r * nr, nr);
		r += n16;
	}
}

/* gemm_pack_fn: rows [k0, k0 + rows) x panels [p0, p1) of W, dequantized
 * a run of 16 values of a column at a time (blocks are at least 16 long,
 * so a run never straddles two). */
static void pack_w(void *arg, int64_t k0, int64_t rows, int64_t p0, int64_t p1, int64_t nr,
		   float *dst)
{
	const nbits_w *w = arg;
	/* whole 16 x 16 tiles transposed in registers (AVX-512), or 8 columns
	 * x 16 rows (AVX2 + FMA: column by column took 30% of a 4-bit
	 * decoder's prefill on Zen 3), else column by column with strided
	 * stores */
	int w512 = wide_avx512(), w256 = 0;
#ifdef NB_WIDE_X86
	/* only where tile8_avx2 was compiled (as wide_avx512 says for the
	 * AVX-512 tile): a clang build has neither and must not skip rows */
	w256 = !w512 && cpu_has_avx2_fma();
#endif
	int64_t tiled = w->bits == 4 && nr % 16 == 0 && k0 % 16 == 0 && (w512 || w256) ?
			rows / 16 * 16 : 0;

	for (int64_t p = p0; p < p1; p++, dst += rows * nr) {
#ifdef NB_WIDE_X86
		for (int64_t r = 0; r < tiled; r += 16)
			for (int64_t c = 0; c < nr; c += w512 ? 16 : 8) {
				if (w512)
					tile16_avx512(w, p * nr + c, k0 + r, nr, dst + r * nr + c);
				else
					tile8_avx2(w, p * nr + c, k0 + r, nr, dst + r * nr + c);
			}
#endif
		for (int64_t jj = 0; jj < nr && tiled < rows; jj++) {
			int64_t n = p * nr + jj;

			if (n < w->N) {
				pack_col(w, n, k0 + tiled, rows - tiled, nr, dst + tiled * nr + jj);
				continue;
			}
			for (int64_t r = tiled; r < rows; r++)
				dst[r * nr + jj] = 0.0f;
		}
	}
}

int nbits_gemm(cpu_ctx *ctx, const nbits_w *w, const float *A, int64_t M, const float *bias,
	       float *Y)
{
	gemm_epilogue ep = GEMM_EPILOGUE_INIT;

	if (bias) {
		ep.bias = bias;
		ep.bias_kind = GEMM_BIAS_COL;
	}
	return gemm_sgemm_packer(ctx->pool, GEMM_ISA_AUTO, 0, M, w->N, w->K, A, w->K, pack_w,
				 (void *)w, &ep, Y, w->N);
}
