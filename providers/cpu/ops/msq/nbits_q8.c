/*
 * nbits_q8: MatMulNBits at accuracy_level 4 for a few rows of A and
 * 4-bit weights, in integers (nbits.h): each block of A quantized to int8
 * (scale max|a| / 127, rounding half to even: ONNX Runtime's
 * quantization), each block's dot product with the 4-bit values in
 * vpdpbusd (unsigned weight bytes 0..15 times signed A bytes, exact in
 * int32), then per block
 *   y += sa[b] * (scale[b] * dot_b - zs[b] * sum(qa_b))
 * with zs = zero point * scale as the re-layout keeps it.
 *
 * The re-laid-out weights hold each run of 16 values as 8 bytes, values
 * 0..7 in the low nibbles and 8..15 in the high ones.  A group of 32
 * values is 16 bytes; its low nibbles then its high nibbles make one ymm
 * of 32 weight bytes in the order 0-7, 16-23, 8-15, 24-31, so A's bytes
 * are stored in that order when quantized and the weights are used as
 * they unpack.
 *
 * The kernel is compiled for AVX-512 VNNI (64 values a step in zmm) and for
 * AVX-VNNI (32 in ymm), chosen at run time by the int8 GEMM's cpuid check
 * (igemm_isa_best, which ORTMK_IGEMM_ISA lowers); nbits_q8_available says
 * whether either runs here.  Block sizes that are multiples of 32.
 */
#include <math.h>
#include <string.h>

#include "igemm.h"
#include "nbits.h"
#include "par.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define NBQ8_X86 1
#include <immintrin.h>
#endif

/* Columns per step of the kernel (independent chains in flight). */
#define NBQ8_COLS 4

typedef struct q8_job {
	const nbits_w *w;
	const int8_t *qa;        /* rows x nb * bs, permuted per 32 */
	const float *sa;         /* rows x nb: A's block scales */
	const float *ca;         /* rows x nb: sa * sum(qa) of each block */
	int64_t rows, ldy;
	const float *bias;
	float *y;
} q8_job;

int nbits_q8_available(const nbits_w *w)
{
#ifdef NBQ8_X86
	igemm_isa isa = igemm_isa_best();

	return w->bits == 4 && w->bs % 32 == 0 &&
	       (isa >= IGEMM_ISA_AVX512VNNI || isa == IGEMM_ISA_AVXVNNI);
#else
	(void)w;
	return 0;
#endif
}

/* One row: int8 values (in the kernel's order), block scales and the
 * zero-point term's block factors.  A past K counts as zero. */
static void quantize_row(const float *a, int64_t K, int64_t bs, int64_t nb, int8_t *qa, float *sa,
			 float *ca)
{
	static const int order[4] = {0, 2, 1, 3};   /* 8-groups 0-7, 16-23, 8-15, 24-31 */

	for (int64_t b = 0; b < nb; b++) {
		int64_t k0 = b * bs, len = K - k0 < bs ? K - k0 : bs;
		float inv = nbits_q8_factor(a + k0, len, &sa[b]);
		int32_t sum = 0;

		for (int64_t g = 0; g < bs; g += 32)
			for (int p = 0; p < 4; p++)
				for (int j = 0; j < 8; j++) {
					int64_t k = g + order[p] * 8 + j;
					int8_t q = (int8_t)(k < len ? nearbyintf(a[k0 + k] * inv) : 0.0f);

					qa[k0 + g + p * 8 + j] = q;
					sum += q;
				}
		ca[b] = sa[b] * (float)sum;
	}
}

/* From the ymm step's order to cols_avx512vnni's: in every whole 64, the
 * second and third 16 bytes trade places. */
static void zmm_order(int8_t *qa, int64_t n)
{
	int8_t t[16];

	for (int64_t k = 0; k + 64 <= n; k += 64) {
		memcpy(t, qa + k + 16, 16);
		memcpy(qa + k + 16, qa + k + 32, 16);
		memcpy(qa + k + 32, t, 16);
	}
}

#ifdef NBQ8_X86
/* The loop of one kernel: columns col[0..NBQ8_COLS), one row.  DPBUSD is
 * the ISA's 256-bit vpdpbusd. */
#define NBQ8_BODY(DPBUSD)                                                                          \
	__m256 acc[NBQ8_COLS];                                                                     \
	const __m128i lo4 = _mm_set1_epi8(0x0f);                                                   \
	for (int c = 0; c < NBQ8_COLS; c++)                                                        \
		acc[c] = _mm256_setzero_ps();                                                      \
	for (int64_t b = 0; b < w->nb; b++) {                                                      \
		__m256i dot[NBQ8_COLS];                                                            \
		for (int c = 0; c < NBQ8_COLS; c++)                                                \
			dot[c] = _mm256_setzero_si256();                                           \
		for (int64_t g = 0; g < w->bs; g += 32) {                                          \
			__m256i av = _mm256_loadu_si256((const __m256i *)(qa + b * w->bs + g));    \
			for (int c = 0; c < NBQ8_COLS; c++) {                                      \
				const uint8_t *p = w->q + col[c] * cb + (b * w->bs + g) / 2;      \
				__m128i x = _mm_loadu_si128((const __m128i *)p);                   \
				__m128i lo = _mm_and_si128(x, lo4);                                \
				__m128i hi = _mm_and_si128(_mm_srli_epi16(x, 4), lo4);             \
				dot[c] = DPBUSD(dot[c], _mm256_set_m128i(hi, lo), av);             \
			}                                                                          \
		}                                                                                  \
		for (int c = 0; c < NBQ8_COLS; c++) {                                              \
			__m256 s = _mm256_set1_ps(sa[b] * w->scale[col[c] * w->nb + b]);          \
			acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot[c]), s, acc[c]);           \
		}                                                                                  \
	}                                                                                          \
	for (int c = 0; c < NBQ8_COLS; c++) {                                                      \
		__m128 h = _mm_add_ps(_mm256_castps256_ps128(acc[c]),                              \
				      _mm256_extractf128_ps(acc[c], 1));                           \
		h = _mm_add_ps(h, _mm_movehl_ps(h, h));                                            \
		h = _mm_add_ss(h, _mm_movehdup_ps(h));                                             \
		out[c] = _mm_cvtss_f32(h);                                                         \
	}

/* AVX-512 VNNI: 64 values a step.  The 32 weight bytes of two groups of
 * 32 become [group 0's low nibbles, group 1's low, group 0's high, group
 * 1's high] (16 bytes each), and A's 64 bytes are stored in that order
 * (zmm_order): int32 lanes 0-3 and 8-11 then hold sums of group 0, lanes
 * 4-7 and 12-15 of group 1, whose blocks may differ (blocks of 32), so
 * each lane is scaled by its group's block.  A last lone group of 32 goes
 * through the ymm step. */
__attribute__((target("avx2,fma,avx512f,avx512vl,avx512bw,avx512vnni")))
static void cols_avx512vnni(const nbits_w *w, const int8_t *qa, const float *sa,
			    const int64_t *col, int64_t cb, float *out)
{
	const __m512i pair = _mm512_set_epi32(1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1, 0, 0, 0, 0);
	const __m256i lo4 = _mm256_set1_epi8(0x0f);
	int64_t kp = w->nb * w->bs, k = 0;
	__m512 acc[NBQ8_COLS];

	for (int c = 0; c < NBQ8_COLS; c++)
		acc[c] = _mm512_setzero_ps();
	for (; k + 64 <= kp; k += 64) {
		int64_t b0 = k / w->bs, b1 = (k + 32) / w->bs;
		__m512i av = _mm512_loadu_si512(qa + k);
		__m512 sav = _mm512_permutexvar_ps(pair, _mm512_castps128_ps512(
			_mm_unpacklo_ps(_mm_set_ss(sa[b0]), _mm_set_ss(sa[b1]))));

		for (int c = 0; c < NBQ8_COLS; c++) {
			const float *sc = w->scale + col[c] * w->nb;
			__m256i x = _mm256_loadu_si256((const __m256i *)(w->q + col[c] * cb + k / 2));
			__m256i lo = _mm256_and_si256(x, lo4);
			__m256i hi = _mm256_and_si256(_mm256_srli_epi16(x, 4), lo4);
			__m512i d = _mm512_dpbusd_epi32(_mm512_setzero_si512(),
							_mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1),
							av);
			__m512 s = _mm512_permutexvar_ps(pair, _mm512_castps128_ps512(
				_mm_unpacklo_ps(_mm_set_ss(sc[b0]), _mm_set_ss(sc[b1]))));

			acc[c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(d), _mm512_mul_ps(s, sav), acc[c]);
		}
	}
	for (int c = 0; c < NBQ8_COLS; c++)
		out[c] = _mm512_reduce_add_ps(acc[c]);
	if (k < kp) {
		int64_t b = k / w->bs;
		__m256i av = _mm256_loadu_si256((const __m256i *)(qa + k));
		const __m128i lo4x = _mm_set1_epi8(0x0f);

		for (int c = 0; c < NBQ8_COLS; c++) {
			__m128i x = _mm_loadu_si128((const __m128i *)(w->q + col[c] * cb + k / 2));
			__m128i lo = _mm_and_si128(x, lo4x);
			__m128i hi = _mm_and_si128(_mm_srli_epi16(x, 4), lo4x);
			__m256i d = _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_set_m128i(hi, lo),
							av);
			__m256 f = _mm256_cvtepi32_ps(d);
			__m128 h = _mm_add_ps(_mm256_castps256_ps128(f), _mm256_extractf128_ps(f, 1));

			h = _mm_add_ps(h, _mm_movehl_ps(h, h));
			h = _mm_add_ss(h, _mm_movehdup_ps(h));
			out[c] += _mm_cvtss_f32(h) * sa[b] * w->scale[col[c] * w->nb + b];
		}
	}
}

__attribute__((target("avx2,fma,avxvnni")))
static void cols_avxvnni(const nbits_w *w, const int8_t *qa, const float *sa, const int64_t *col,
			 int64_t cb, float *out)
{
	NBQ8_BODY(_mm256_dpbusd_avx_epi32)
}
#endif

static void q8_cols(void *arg, int64_t g0, int64_t g1, int member)
{
	const q8_job *j = arg;
	const nbits_w *w = j->w;
	int64_t cb = nbits_col_bytes(w), kp = w->nb * w->bs;
	int vnni512 = igemm_isa_best() >= IGEMM_ISA_AVX512VNNI;

	(void)member;
	for (int64_t r = 0; r < j->rows; r++) {
		const int8_t *qa = j->qa + r * kp;
		const float *sa = j->sa + r * w->nb, *ca = j->ca + r * w->nb;

		for (int64_t g = g0; g < g1; g++) {
			int64_t n = g * NBQ8_COLS, col[NBQ8_COLS];
			float out[NBQ8_COLS];

			/* the last step repeats column N - 1 where N runs out */
			for (int c = 0; c < NBQ8_COLS; c++)
				col[c] = n + c < w->N ? n + c : w->N - 1;

#ifdef NBQ8_X86
			if (vnni512)
				cols_avx512vnni(w, qa, sa, col, cb, out);
			else
				cols_avxvnni(w, qa, sa, col, cb, out);
#else
			(void)vnni512;
			(void)qa;
			(void)sa;
			(void)cb;
			(void)col;
			memset(out, 0, sizeof(out));
#endif
			for (int c = 0; c < NBQ8_COLS && n + c < w->N; c++) {
				float v = out[c] - nbits_dot(w->zs + (n + c) * w->nb, ca, w->nb);

				j->y[r * j->ldy + n + c] = j->bias ? v + j->bias[n + c] : v;
			}
		}
	}
}

int nbits_gemv_q8(cpu_ctx *ctx, const nbits_w *w, const float *A, int64_t lda, int64_t rows,
		  const float *bias, float *Y, int64_t ldy)
{
	int64_t kp = w->nb * w->bs, groups = (w->N + NBQ8_COLS - 1) / NBQ8_COLS;
	size_t qbytes = ((size_t)(rows * kp) + 63) & ~(size_t)63;
	uint8_t *scratch = cpu_scratch(ctx, qbytes + (size_t)(2 * rows * w->nb) * sizeof(float));
	q8_job j = {w, (int8_t *)scratch, NULL, NULL, rows, ldy, bias, Y};

	if (!scratch)
		return CPU_E_NOMEM;
	j.sa = (float *)(scratch + qbytes);
	j.ca = j.sa + rows * w->nb;
	for (int64_t r = 0; r < rows; r++) {
		quantize_row(A + r * lda, w->K, w->bs, w->nb, (int8_t *)scratch + r * kp,
			     (float *)j.sa + r * w->nb, (float *)j.ca + r * w->nb);
		if (igemm_isa_best() >= IGEMM_ISA_AVX512VNNI)
			zmm_order((int8_t *)scratch + r * kp, kp);
	}
	cpu_par_for(ctx, groups, (double)rows * (double)kp * NBQ8_COLS * 0.02, 4, q8_cols, &j);
	return 0;
}
