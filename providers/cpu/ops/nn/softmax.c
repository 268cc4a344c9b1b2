/*
 * softmax: ONNX Softmax and LogSoftmax for float32, numerically stable
 * (the line maximum is subtracted before exp).  Before opset 13 the input
 * is coerced to 2-D at `axis` (default 1) and normalised over the whole
 * trailing block; from opset 13 over the single dim `axis` (default -1).
 *
 * The last axis (BERT's attention scores, a detector's class scores) runs
 * a line at a time in three passes, max, exp and sum, scale, computed as
 * ONNX Runtime's CPU provider computes them on AVX-512 (the same bits; see
 * line(), and line512, its explicit sixteen-lane form that AVX-512 CPUs
 * run).  Another axis runs the same passes over whole rows of the dims
 * after it, so every access is contiguous, with sums kept per column in
 * float (not ONNX Runtime's order: it transposes the axis last first).
 * Lines (or outer blocks) are split over the intra-op pool.
 */
#include <math.h>
#include <string.h>

#include "cpu_ops.h"
#include "par.h"
#include "vmath.h"

static int softmax_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt,
			    int n_in, char *why, size_t n)
{
	(void)p;
	(void)opset;
	return cpu_supports_dtype(dt, n_in, 0, CPU_TYPES_F32, why, n);
}

/* The sum of e[0, n) in the order of ONNX Runtime's AVX-512 sum-exp
 * kernel: sixteen lanes, lane k adding e[k], e[k + 16], ... in turn, then
 * a[k] = lane k + lane k + 8, then ((a0 + a1) + (a2 + a3)) + ((a4 + a5) +
 * (a6 + a7)).  The lanes past n add nothing (0 to a sum of exps). */
static inline __attribute__((always_inline)) float sum16(const float *e, int64_t n)
{
	vf8 lo = vf_splat(0.0f), hi = vf_splat(0.0f), a;
	int64_t i = 0;

	for (; i + 16 <= n; i += 16) {
		lo += vf_load(e + i);
		hi += vf_load(e + i + 8);
	}
	if (i < n) {
		lo += vf_load_part(e + i, n - i < 8 ? n - i : 8, 0.0f);
		if (n - i > 8)
			hi += vf_load_part(e + i + 8, n - i - 8, 0.0f);
	}
	a = hi + lo;
	return ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
}

/* One contiguous line of n, as ONNX Runtime computes it (its MLAS softmax
 * on AVX-512), so scores compared with a threshold or sorted come out in
 * its order: e = exp(x + -max) (vm_exp_mlas), their sum in sum16's order,
 * then e * (1 / sum), or (x + -max) - logf(sum) for LogSoftmax.  The float
 * sum loses ~sqrt(n) ulps where a double one would not, as there.  The
 * exps go to y first, so LogSoftmax needs y apart from x (the core never
 * plans an output over an input; cpu_softmax_rows, in place, is Softmax). */
/* A line's output from its exps in y: e * (1 / sum), or (x + nm) -
 * logf(sum) for LogSoftmax. */
static inline __attribute__((always_inline)) void
line_out(const float *x, float *y, int64_t n, float nm, float sum, int is_log)
{
	float t;

	if (is_log) {
		t = logf(sum);
		for (int64_t i = 0; i < n; i++)
			y[i] = (x[i] + nm) - t;
	} else {
		t = 1.0f / sum;
		for (int64_t i = 0; i < n; i++)
			y[i] *= t;
	}
}

static inline __attribute__((always_inline)) void
line(const float *x, float *y, int64_t n, int is_log)
{
	float nm = -vf_row_max(x, n), sum;
	int64_t i;

	for (i = 0; i < n; i++)
		y[i] = vm_exp_mlas(x[i] + nm);
	sum = sum16(y, n);
	line_out(x, y, n, nm, sum, is_log);
}

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define SOFTMAX_FMA3 1
#include <immintrin.h>

#include "mlas_poly8.h"

/* exp(x) as ONNX Runtime's sum-exp kernel for AVX2 + FMA computes it
 * (MLAS's FMA3 kernel, which it picks on a CPU without AVX-512): x clamped
 * below at -88.3762626647949 (no upper clamp: x + -max <= 0), m =
 * round(x / ln2) by the 1.5 * 2^23 trick, r = x - m ln2 in two FMA steps,
 * vm_exp_mlas's polynomial, times 2^m as one factor whose exponent field
 * is t's bits shifted into place plus 127's. */
__attribute__((target("avx2,fma"))) static inline __m256 exp8_fma3(__m256 x)
{
	const __m256 bias = _mm256_set1_ps(12582912.0f);
	__m256 t, m, r, p;
	__m256i scale;

	x = _mm256_max_ps(_mm256_set1_ps(-88.3762626647949f), x);
	t = _mm256_fmadd_ps(x, _mm256_set1_ps(1.44269504088896341f), bias);
	m = _mm256_sub_ps(t, bias);
	r = _mm256_fmadd_ps(m, _mm256_set1_ps(-6.93145752e-1f), x);
	r = _mm256_fmadd_ps(m, _mm256_set1_ps(-1.42860677e-6f), r);
	p = mlas_exp_poly8(r);
	scale = _mm256_add_epi32(_mm256_slli_epi32(_mm256_castps_si256(t), 23),
				 _mm256_set1_epi32(0x3f800000));
	return _mm256_mul_ps(p, _mm256_castsi256_ps(scale));
}

/* line() as ONNX Runtime computes it on AVX2 + FMA: exp8_fma3 of x + -max,
 * summed into one 8-lane accumulator a vector at a time (a last partial
 * vector's missing lanes adding 0), the lanes then added pairwise, ((a0 +
 * a1) + (a2 + a3)) + ((a4 + a5) + (a6 + a7)); the output passes as line()'s. */
__attribute__((target("avx2,fma"))) static void line_fma3(const float *x, float *y, int64_t n,
							   int is_log)
{
	float nm = -vf_row_max(x, n), sum;
	__m256 vnm = _mm256_set1_ps(nm), acc = _mm256_setzero_ps();
	__m128 lo, hi;
	int64_t i = 0;

	for (; i + 8 <= n; i += 8) {
		__m256 e = exp8_fma3(_mm256_add_ps(vnm, _mm256_loadu_ps(x + i)));

		acc = _mm256_add_ps(acc, e);
		_mm256_storeu_ps(y + i, e);
	}
	if (i < n) {
		__m256i k = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(n - i)),
					       _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
		__m256 e = exp8_fma3(_mm256_add_ps(_mm256_and_ps(vnm, _mm256_castsi256_ps(k)),
						   _mm256_maskload_ps(x + i, k)));

		e = _mm256_and_ps(e, _mm256_castsi256_ps(k));
		acc = _mm256_add_ps(acc, e);
		_mm256_maskstore_ps(y + i, k, e);
	}
	acc = _mm256_hadd_ps(acc, acc);
	acc = _mm256_hadd_ps(acc, acc);
	lo = _mm256_castps256_ps128(acc);
	hi = _mm256_extractf128_ps(acc, 1);
	sum = _mm_cvtss_f32(_mm_add_ss(hi, lo));
	line_out(x, y, n, nm, sum, is_log);
}

/* vm_exp_mlas on sixteen lanes, its operations in its order (the clamps
 * as max/min with the NaN rule of its selects, 2^n as its two factors):
 * its bits.  A lane below the lower clamp (a masked score: -inf, or -3.4e38)
 * takes vm_exp_mlas of the clamp itself, a constant, instead of the
 * scaling that makes it: that product is subnormal, and each subnormal
 * result costs a microcode assist (GPT's causal 4 x 128 x 128 Softmax
 * took 3x its unmasked time; gcc's clone of line() had folded the
 * constant the same way). */
__attribute__((target("arch=x86-64-v4"))) static inline __m512 exp16_mlas(__m512 x)
{
	const __m512 bias = _mm512_set1_ps(12582912.0f), lo = _mm512_set1_ps(-103.972084f);
	const __m512i b127 = _mm512_set1_epi32(127);
	__mmask16 in = _mm512_cmp_ps_mask(x, lo, _CMP_NLT_UQ);   /* x >= lo, or NaN */
	__m512 c = _mm512_max_ps(lo, x), m, r, p;
	__m512i n, h;

	m = _mm512_sub_ps(_mm512_fmadd_ps(c, _mm512_set1_ps(1.44269504f), bias), bias);
	r = _mm512_fmadd_ps(m, _mm512_set1_ps(-0.693145752f), c);
	r = _mm512_fmadd_ps(m, _mm512_set1_ps(-1.42860677e-6f), r);
	p = _mm512_fmadd_ps(_mm512_set1_ps(0x1.694000p-10f), r, _mm512_set1_ps(0x1.125edcp-7f));
	p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0x1.555b5ap-5f));
	p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0x1.555450p-3f));
	p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0x1.fffff6p-2f));
	p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
	p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
	n = _mm512_cvttps_epi32(_mm512_min_ps(m, _mm512_set1_ps(200.0f)));   /* NaN: 200 */
	h = _mm512_srai_epi32(n, 1);
	p = _mm512_maskz_mul_ps(in, p, _mm512_castsi512_ps(_mm512_slli_epi32(
					_mm512_add_epi32(h, b127), 23)));
	p = _mm512_maskz_mul_ps(in, p, _mm512_castsi512_ps(_mm512_slli_epi32(
					_mm512_add_epi32(_mm512_sub_epi32(n, h), b127), 23)));
	p = _mm512_mask_blend_ps(in, _mm512_set1_ps(vm_exp_mlas(-103.972084f)), p);
	return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, _mm512_set1_ps(INFINITY), _CMP_EQ_OQ),
				    p, x);
}

/* line() on AVX-512 with explicit vectors (the same bits): the exps and
 * their sum in one pass, sixteen lanes summed as sum16 adds them (lanes 0
 * to 7 its lo, 8 to 15 its hi; a partial vector's missing lanes add 0),
 * then line_out.  gcc's clone of line() ran the scalar exp through
 * masked blends and the sum and maximum on eight lanes: a 2 x 960 x 960
 * Softmax took 1.0 ms, ONNX Runtime's 0.57. */
__attribute__((target("arch=x86-64-v4"))) static void line512(const float *x, float *y, int64_t n,
							int is_log)
{
	float nm = -vf_row_max(x, n), sum;
	__m512 vnm = _mm512_set1_ps(nm), acc = _mm512_setzero_ps();
	__m256 lo, hi, a;
	float s[8];
	int64_t i = 0;

	for (; i + 16 <= n; i += 16) {
		__m512 e = exp16_mlas(_mm512_add_ps(_mm512_loadu_ps(x + i), vnm));

		acc = _mm512_add_ps(acc, e);
		_mm512_storeu_ps(y + i, e);
	}
	if (i < n) {
		__mmask16 k = (__mmask16)((1u << (n - i)) - 1);
		__m512 e = exp16_mlas(_mm512_add_ps(_mm512_maskz_loadu_ps(k, x + i), vnm));

		e = _mm512_maskz_mov_ps(k, e);
		acc = _mm512_add_ps(acc, e);
		_mm512_mask_storeu_ps(y + i, k, e);
	}
	lo = _mm512_castps512_ps256(acc);
	hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(acc), 1));
	a = _mm256_add_ps(hi, lo);
	_mm256_storeu_ps(s, a);
	sum = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
	line_out(x, y, n, nm, sum, is_log);
}
#endif

CPU_MULTIVERSION
static void softmax_lines(const float *x, float *y, int64_t lines, int64_t n, int is_log)
{
	for (int64_t l = 0; l < lines; l++)
		if (is_log)
			line(x + l * n, y + l * n, n, 1);
		else
			line(x + l * n, y + l * n, n, 0);
}

/* One outer block [n, inner] normalised over n: the passes run along the
 * contiguous inner rows; m and s (inner floats each) hold the running max
 * and sum per column. */
CPU_MULTIVERSION
static void softmax_block(const float *x, float *y, int64_t n, int64_t inner, int is_log,
			  float *m, float *s)
{
	int64_t j;
	memcpy(m, x, (size_t)inner * sizeof(float));
	for (int64_t i = 1; i < n; i++)
		for (j = 0; j < inner; j++)
			m[j] = x[i * inner + j] > m[j] ? x[i * inner + j] : m[j];
	memset(s, 0, (size_t)inner * sizeof(float));
	for (int64_t i = 0; i < n; i++) {
		const float *xr = x + i * inner;
		float *yr = y + i * inner;
		for (j = 0; j + 8 <= inner; j += 8) {
			vf8 e = vf_exp_nonpos(vf_load(xr + j) - vf_load(m + j));
			vf_store(s + j, vf_load(s + j) + e);
			vf_store(yr + j, e);
		}
		for (; j < inner; j++) {
			vf8 e = vf_exp_nonpos(vf_splat(xr[j] - m[j]));
			s[j] += e[0];
			yr[j] = e[0];
		}
	}
	for (j = 0; j < inner; j++)
		s[j] = is_log ? logf(s[j]) : 1.0f / s[j];
	for (int64_t i = 0; i < n; i++) {
		const float *xr = x + i * inner;
		float *yr = y + i * inner;
		for (j = 0; j < inner; j++)
			yr[j] = is_log ? (xr[j] - m[j]) - s[j] : yr[j] * s[j];
	}
}

typedef struct softmax_job {
	const float *x;
	float *y;
	int64_t n, inner;
	float *scratch;      /* 2 * inner floats per member */
	int is_log;
} softmax_job;

static void lines_range(void *arg, int64_t l0, int64_t l1, int member)
{
	const softmax_job *j = arg;
	(void)member;
#ifdef SOFTMAX_FMA3
	/* ONNX Runtime's kernel is AVX-512's where the CPU has it (line(), as
	 * line512), else FMA3's */
	if (cpu_has_avx512()) {
		for (int64_t l = l0; l < l1; l++)
			line512(j->x + l * j->n, j->y + l * j->n, j->n, j->is_log);
		return;
	}
	if (cpu_has_avx2_fma()) {
		for (int64_t l = l0; l < l1; l++)
			line_fma3(j->x + l * j->n, j->y + l * j->n, j->n, j->is_log);
		return;
	}
#endif
	softmax_lines(j->x + l0 * j->n, j->y + l0 * j->n, l1 - l0, j->n, j->is_log);
}

static void blocks_range(void *arg, int64_t o0, int64_t o1, int member)
{
	const softmax_job *j = arg;
	float *m = j->scratch + member * 2 * j->inner;
	for (int64_t o = o0; o < o1; o++)
		softmax_block(j->x + o * j->n * j->inner, j->y + o * j->n * j->inner, j->n,
			      j->inner, j->is_log, m, m + j->inner);
}

void cpu_softmax_rows(cpu_ctx *ctx, float *x, int64_t rows, int64_t n)
{
	softmax_job j;

	memset(&j, 0, sizeof(j));
	j.x = x;
	j.y = x;
	j.n = n;
	j.inner = 1;
	cpu_par_for(ctx, rows, (double)n * 0.4 + 10.0, 1, lines_range, &j);
}

static int softmax_compute(cpu_ctx *ctx)
{
	const cpu_tensor *X;
	cpu_tensor *Y;
	int is_log = ctx->node->proto->op_type[0] == 'L', axis, rc = 0;
	int legacy = ctx->node->opset < 13;
	int64_t outer = 1, n = 1, inner = 1;
	softmax_job j;

	if (!(X = cpu_require(ctx, 0, &rc)) || (rc = cpu_check_dtype(ctx, X, 0, CPU_TYPES_F32)))
		return rc;
	axis = cpu_norm_axis(cpu_attr_int(ctx->node->proto, "axis", legacy ? 1 : -1),
			     X->rank ? X->rank : 1);
	if (axis < 0 || (X->rank == 0 && legacy))
		return cpu_fail(ctx, CPU_E_INVALID, "axis %lld out of range for rank %d",
				(long long)cpu_attr_int(ctx->node->proto, "axis", legacy ? 1 : -1),
				X->rank);
	for (int d = 0; d < X->rank; d++) {
		if (d < axis)
			outer *= X->dims[d];
		else if (d == axis || legacy)
			n *= X->dims[d];
		else
			inner *= X->dims[d];
	}
	if (!(Y = cpu_output(ctx, 0, CPU_FLOAT, X->rank, X->dims)))
		return CPU_E_NOMEM;
	if (outer * n * inner == 0)
		return 0;
	memset(&j, 0, sizeof(j));
	j.x = X->data;
	j.y = Y->data;
	j.n = n;
	j.inner = inner;
	j.is_log = is_log;
	if (inner == 1) {
		cpu_par_for(ctx, outer, (double)n * 0.4 + 10.0, 1, lines_range, &j);
		return 0;
	}
	j.scratch = cpu_scratch(ctx, (size_t)(2 * inner * cpu_par_members(ctx)) * sizeof(float));
	if (!j.scratch)
		return CPU_E_NOMEM;
	cpu_par_for(ctx, outer, (double)(n * inner) * 0.5 + 10.0, 1, blocks_range, &j);
	return 0;
}

const cpu_op cpu_op_softmax = {
	"Softmax", "", 1, CPU_OPSET_MAX, softmax_supports, NULL, softmax_compute, NULL,
};
const cpu_op cpu_op_logsoftmax = {
	"LogSoftmax", "", 1, CPU_OPSET_MAX, softmax_supports, NULL, softmax_compute, NULL,
};
