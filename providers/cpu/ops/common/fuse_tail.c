/*
 * fuse_tail: run-time side of fused element-wise tails (see fuse_tail.h).
 */
#include <math.h>
#include <string.h>

#include "fuse_tail.h"
#include "par.h"
#include "vmath.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define FT_X86 1
#include <immintrin.h>

#include "mlas_poly8.h"

/* vm_logistic (vmath.h) on 16 lanes, the same operations in the same
 * order (its clamps as max/min, which keep NaN as its selects do), so the
 * same bits: ONNX Runtime's (ort_bits_test).  gcc's vectorization of the
 * scalar form moved its comparison masks through general registers and
 * blended every product: EfficientNet's SiLU after a 1x1 convolution took
 * ~0.5 ns an element. */
__attribute__((target("avx512f,avx2,fma"))) static inline __m512 logistic16(__m512 x)
{
	__m512 c = _mm512_min_ps(_mm512_set1_ps(18.0f), _mm512_max_ps(_mm512_set1_ps(-18.0f), x));
	__m512 t = _mm512_mul_ps(c, c), p, q;

	p = _mm512_fmadd_ps(t, _mm512_set1_ps(4.37031012579801e-11f), _mm512_set1_ps(1.15627324459942e-07f));
	p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(6.08574864600143e-05f));
	p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(8.51377133304701e-03f));
	p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(2.48287947061529e-01f));
	p = _mm512_mul_ps(p, c);
	q = _mm512_fmadd_ps(t, _mm512_set1_ps(6.10247389755681e-13f), _mm512_set1_ps(5.76102136993427e-09f));
	q = _mm512_fmadd_ps(q, t, _mm512_set1_ps(6.29106785017040e-06f));
	q = _mm512_fmadd_ps(q, t, _mm512_set1_ps(1.70198817374094e-03f));
	q = _mm512_fmadd_ps(q, t, _mm512_set1_ps(1.16817656904453e-01f));
	q = _mm512_fmadd_ps(q, t, _mm512_set1_ps(9.93151921023180e-01f));
	return _mm512_max_ps(_mm512_setzero_ps(),
			     _mm512_add_ps(_mm512_div_ps(p, q), _mm512_set1_ps(0.5f)));
}

/* y = logistic(x), or x * logistic(x) (silu); y may be x. */
__attribute__((target("avx512f,avx2,fma"))) static void logistic_avx512(const float *x, float *y,
									 int64_t n, int silu)
{
	int64_t i = 0;

	for (; i < n; i += 16) {
		__mmask16 k = n - i >= 16 ? 0xffff : (__mmask16)((1u << (n - i)) - 1);
		__m512 v = _mm512_maskz_loadu_ps(k, x + i), s = logistic16(v);

		_mm512_mask_storeu_ps(y + i, k, silu ? _mm512_mul_ps(v, s) : s);
	}
}

/* The same on 8 lanes for AVX2 + FMA CPUs (Zen 3, Haswell to Alder Lake):
 * gcc's x86-64-v3 clone of the scalar loop ran it one float at a time. */
__attribute__((target("avx2,fma"))) static inline __m256 logistic8(__m256 x)
{
	__m256 c = _mm256_min_ps(_mm256_set1_ps(18.0f), _mm256_max_ps(_mm256_set1_ps(-18.0f), x));
	__m256 t = _mm256_mul_ps(c, c), p, q;

	p = _mm256_fmadd_ps(t, _mm256_set1_ps(4.37031012579801e-11f), _mm256_set1_ps(1.15627324459942e-07f));
	p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(6.08574864600143e-05f));
	p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(8.51377133304701e-03f));
	p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(2.48287947061529e-01f));
	p = _mm256_mul_ps(p, c);
	q = _mm256_fmadd_ps(t, _mm256_set1_ps(6.10247389755681e-13f), _mm256_set1_ps(5.76102136993427e-09f));
	q = _mm256_fmadd_ps(q, t, _mm256_set1_ps(6.29106785017040e-06f));
	q = _mm256_fmadd_ps(q, t, _mm256_set1_ps(1.70198817374094e-03f));
	q = _mm256_fmadd_ps(q, t, _mm256_set1_ps(1.16817656904453e-01f));
	q = _mm256_fmadd_ps(q, t, _mm256_set1_ps(9.93151921023180e-01f));
	return _mm256_max_ps(_mm256_setzero_ps(),
			     _mm256_add_ps(_mm256_div_ps(p, q), _mm256_set1_ps(0.5f)));
}

__attribute__((target("avx2,fma"))) static void logistic_avx2(const float *x, float *y, int64_t n,
							       int silu)
{
	int64_t i = 0;

	for (; i + 8 <= n; i += 8) {
		__m256 v = _mm256_loadu_ps(x + i), s = logistic8(v);

		_mm256_storeu_ps(y + i, silu ? _mm256_mul_ps(v, s) : s);
	}
	if (i < n) {
		__m256i k = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(n - i)),
					       _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
		__m256 v = _mm256_maskload_ps(x + i, k), s = logistic8(v);

		_mm256_maskstore_ps(y + i, k, silu ? _mm256_mul_ps(v, s) : s);
	}
}
#endif

#ifdef FT_X86
/* vm_exp_mlas on 8 lanes with AVX2 + FMA, its operations in its order
 * (its clamps as max/min with the NaN rule of its selects): its bits,
 * ONNX Runtime's (ort_bits_test). */
__attribute__((target("avx2,fma"))) static inline __m256 exp8_mlas(__m256 x)
{
	const __m256 bias = _mm256_set1_ps(12582912.0f);
	__m256 c = _mm256_max_ps(_mm256_set1_ps(-103.972084f), x), m, r, p, mc;
	__m256i n, h, b127 = _mm256_set1_epi32(127);

	m = _mm256_sub_ps(_mm256_fmadd_ps(c, _mm256_set1_ps(1.44269504f), bias), bias);
	r = _mm256_fmadd_ps(m, _mm256_set1_ps(-0.693145752f), c);
	r = _mm256_fmadd_ps(m, _mm256_set1_ps(-1.42860677e-6f), r);
	p = mlas_exp_poly8(r);
	mc = _mm256_min_ps(m, _mm256_set1_ps(200.0f));   /* NaN: 200, as m < 200 ? m : 200 */
	n = _mm256_cvttps_epi32(mc);
	h = _mm256_srai_epi32(n, 1);
	p = _mm256_mul_ps(p, _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(h, b127), 23)));
	p = _mm256_mul_ps(p, _mm256_castsi256_ps(_mm256_slli_epi32(
				     _mm256_add_epi32(_mm256_sub_epi32(n, h), b127), 23)));
	return _mm256_blendv_ps(p, x, _mm256_cmp_ps(x, _mm256_set1_ps(INFINITY), _CMP_EQ_OQ));
}

__attribute__((target("avx2,fma"))) static void exp_avx2(const float *x, float *y, int64_t n)
{
	int64_t i = 0;

	for (; i + 8 <= n; i += 8)
		_mm256_storeu_ps(y + i, exp8_mlas(_mm256_loadu_ps(x + i)));
	if (i < n) {
		float b[8] = {0};

		memcpy(b, x + i, (size_t)(n - i) * sizeof(float));
		_mm256_storeu_ps(b, exp8_mlas(_mm256_loadu_ps(b)));
		memcpy(y + i, b, (size_t)(n - i) * sizeof(float));
	}
}
#endif

int cpu_exp_wide(const float *x, float *y, int64_t n)
{
#ifdef FT_X86
	/* AVX-512: gcc's clone of the scalar loop is vectorized there */
	if (!cpu_has_avx512() && cpu_has_avx2_fma()) {
		exp_avx2(x, y, n);
		return 1;
	}
#endif
	(void)x, (void)y, (void)n;
	return 0;
}

int cpu_logistic_wide(const float *x, float *y, int64_t n, int silu)
{
#ifdef FT_X86
	if (cpu_has_avx512()) {
		logistic_avx512(x, y, n, silu);
		return 1;
	}
	if (cpu_has_avx2_fma()) {
		logistic_avx2(x, y, n, silu);
		return 1;
	}
#endif
	(void)x, (void)y, (void)n, (void)silu;
	return 0;
}

/* x * 0.5 * (1 + erf(x / sqrt 2)): the scalar loop (vectorized by gcc on
 * AVX-512), or 8-lane vectors elsewhere (gcc's AVX2 clone of the scalar
 * loop ran it a float at a time). */
static inline __attribute__((always_inline)) void gelu_run(float *x, int64_t n)
{
	int64_t i = 0;

	if (!cpu_has_avx512())
		for (; i + 8 <= n; i += 8) {
			vf8 v = vf_load(x + i);

			vf_store(x + i, v * 0.5f * (1.0f + vf_erf(v * 0.70710678118654752f)));
		}
	for (; i < n; i++)
		x[i] = x[i] * 0.5f * (1.0f + vm_erf(x[i] * 0.70710678118654752f));
}

CPU_MULTIVERSION
void cpu_gelu_inplace(float *x, int64_t n)
{
	gelu_run(x, n);
}

/* HardSigmoid (or HardSwish: x times HardSigmoid(1/6, 1/2)) in place, on
 * explicit vectors: vf_hsigmoid rounds the product before the add, which
 * also keeps gcc from vectorizing a plain loop. */
static inline __attribute__((always_inline)) void
hard_run(float *x, int64_t n, int swish, float a, float b)
{
	int64_t i = 0;

	if (swish) {
		a = 1.0f / 6.0f;
		b = 0.5f;
	}
	for (; i + 8 <= n; i += 8) {
		vf8 v = vf_load(x + i), h = vf_hsigmoid(v, a, b);

		vf_store(x + i, swish ? v * h : h);
	}
	if (i < n) {
		vf8 v = vf_load_part(x + i, n - i, 0.0f), h = vf_hsigmoid(v, a, b);

		vf_store_part(x + i, swish ? v * h : h, n - i);
	}
}

/* One activation over n floats in place, a loop per kind for the
 * vectorizer.  NaN stays NaN where the op's definition keeps it. */
CPU_MULTIVERSION
static void act_run(float *x, int64_t n, cpu_fuse_act act, float a, float b)
{
	switch (act) {
	case CPU_FUSE_ACT_RELU:
		for (int64_t i = 0; i < n; i++)
			x[i] = x[i] > 0.0f || x[i] != x[i] ? x[i] : 0.0f;
		break;
	case CPU_FUSE_ACT_GELU:
		gelu_run(x, n);
		break;
	case CPU_FUSE_ACT_CLIP:
		for (int64_t i = 0; i < n; i++)
			x[i] = x[i] < a ? a : x[i] > b ? b : x[i];
		break;
	case CPU_FUSE_ACT_LEAKY:
		for (int64_t i = 0; i < n; i++)
			x[i] = x[i] < 0.0f ? a * x[i] : x[i];
		break;
	case CPU_FUSE_ACT_HSIGMOID:
	case CPU_FUSE_ACT_HSWISH:
		hard_run(x, n, act == CPU_FUSE_ACT_HSWISH, a, b);
		break;
	case CPU_FUSE_ACT_SIGMOID:
		if (cpu_logistic_wide(x, x, n, 0))
			break;
		for (int64_t i = 0; i < n; i++)
			x[i] = vm_logistic(x[i]);
		break;
	case CPU_FUSE_ACT_SILU:
		if (cpu_logistic_wide(x, x, n, 1))
			break;
		for (int64_t i = 0; i < n; i++)
			x[i] = x[i] * vm_logistic(x[i]);
		break;
	case CPU_FUSE_ACT_TANH: {
		int64_t i = 0;

		if (!cpu_has_avx512())
			for (; i + 8 <= n; i += 8)
				vf_store(x + i, vf_tanh(vf_load(x + i)));
		for (; i < n; i++)
			x[i] = vm_tanh(x[i]);
		break;
	}
	default:
		break;
	}
}

void cpu_fuse_act_apply(const cpu_fusion *fu, float *x, int64_t n)
{
	if (fu && fu->act != CPU_FUSE_ACT_NONE)
		act_run(x, n, fu->act, fu->act_a, fu->act_b);
}

void cpu_fuse_act_block(void *fu, float *c, int64_t ldc, int64_t row0, int64_t rows,
			int64_t col0, int64_t cols)
{
	(void)row0;
	(void)col0;
	for (int64_t i = 0; i < rows; i++)
		cpu_fuse_act_apply(fu, c + i * ldc, cols);
}

typedef struct act_job {
	float *x;
	const cpu_fusion *fu;
} act_job;

static void act_range(void *arg, int64_t b, int64_t e, int member)
{
	const act_job *j = arg;

	(void)member;
	act_run(j->x + b, e - b, j->fu->act, j->fu->act_a, j->fu->act_b);
}

static void apply_act(cpu_ctx *ctx, float *x, int64_t n, const cpu_fusion *fu)
{
	act_job j = {x, fu};

	if (fu->act == CPU_FUSE_ACT_NONE)
		return;
	/* ~0.3 ns an element for the transcendental ones, vectorized */
	cpu_par_for(ctx, n, fu->act >= CPU_FUSE_ACT_SIGMOID || fu->act == CPU_FUSE_ACT_GELU ? 0.3 : 0.05,
		    4096, act_range, &j);
}

static int overlaps(const cpu_tensor *a, const cpu_tensor *b)
{
	return cpu_bytes_overlap(a->data, a->nbytes, b->data, b->nbytes);
}

int cpu_fuse_begin(cpu_ctx *ctx, int rank, const int64_t *dims, cpu_fuse_run *fr)
{
	const cpu_fusion *fu = ctx->node->fuse;
	const int64_t *ds[2];
	int ranks[2], widen = 0, alias = 0, rc = 0;
	cpu_bcast bc;

	memset(fr, 0, sizeof(*fr));
	if (!fu) {
		fr->out = fr->y = cpu_output(ctx, 0, CPU_FLOAT, rank, dims);
		return fr->out ? 0 : CPU_E_NOMEM;
	}
	fr->act = fu->act;
	fr->fu = fu;
	if (fu->add_input >= 0) {
		if (!(fr->add = cpu_require(ctx, fu->add_input, &rc)))
			return rc;
		if ((rc = cpu_check_dtype(ctx, fr->add, fu->add_input, CPU_TYPES_F32)))
			return rc;
		ranks[0] = rank;
		ranks[1] = fr->add->rank;
		ds[0] = dims;
		ds[1] = fr->add->dims;
		if (cpu_bcast_init(&bc, 2, ranks, ds))
			return cpu_fail(ctx, CPU_E_INVALID, "fused Add: shapes do not broadcast");
		widen = bc.out_rank != rank || memcmp(bc.out_dims, dims, sizeof(int64_t) * rank);
		fr->out = cpu_output(ctx, 0, CPU_FLOAT, bc.out_rank, bc.out_dims);
	} else {
		fr->out = cpu_output(ctx, 0, CPU_FLOAT, rank, dims);
	}
	if (!fr->out)
		return CPU_E_NOMEM;
	/* The addend may be the output's own bytes when it has the output's
	 * shape (added element by element in place).  One that broadcasts and
	 * overlaps the output (the core placed the last node's output over it,
	 * dead after the Add in the graph's own order) would be overwritten
	 * before its last read: it is copied first.  Any other overlap with
	 * an input needs scratch for y. */
	if (fr->add && overlaps(fr->add, fr->out) &&
	    !(fr->add->data == fr->out->data && !widen && fr->add->nbytes == fr->out->nbytes)) {
		fr->add_copy = *fr->add;
		if (!(fr->add_copy.data = cpu_scratch(ctx, fr->add->nbytes + 1)))
			return CPU_E_NOMEM;
		memcpy(fr->add_copy.data, fr->add->data, fr->add->nbytes);
		fr->add = &fr->add_copy;
	}
	for (int i = 0; i < ctx->n_in; i++) {
		const cpu_tensor *t = ctx->in[i];
		if (t && t->dtype != CPU_SEQUENCE && t->dtype != CPU_NONE && overlaps(t, fr->out) &&
		    !(i == fu->add_input && (fr->add == &fr->add_copy ||
					     (t->data == fr->out->data && !widen))))
			alias = 1;
	}
	fr->y = fr->out;
	if (widen || alias) {
		fr->tmp = *fr->out;
		fr->tmp.rank = rank;
		memcpy(fr->tmp.dims, dims, sizeof(int64_t) * (size_t)rank);
		fr->tmp.nbytes = (size_t)cpu_shape_numel(rank, dims) * sizeof(float);
		fr->tmp.data = cpu_scratch(ctx, fr->tmp.nbytes + 1);
		if (!fr->tmp.data)
			return CPU_E_NOMEM;
		fr->y = &fr->tmp;
	}
	if (fr->add && !widen && fr->add->rank == rank &&
	    !memcmp(fr->add->dims, dims, sizeof(int64_t) * (size_t)rank))
		fr->add_inline = fr->add;
	/* The activation follows the addition, applied by the kernel as its
	 * blocks finish (while they are in cache) unless the addend widens
	 * the result. */
	if (!fr->add || fr->add_inline)
		fr->act_inline = fr->act;
	return 0;
}

typedef struct add_arg {
	const float *a, *b;
	float *out;
} add_arg;

static int add_row(void *arg, int64_t len, const int64_t *off, const int64_t *st)
{
	const add_arg *r = arg;
	const float *a = r->a + off[0], *b = r->b + off[1];
	float *o = r->out + off[2];

	for (int64_t i = 0; i < len; i++)
		o[i] = a[i * st[0]] + b[i * st[1]];
	return 0;
}

void cpu_bcast_add_f32(const cpu_bcast *bc, const float *a, const float *b, float *out)
{
	add_arg r = {a, b, out};

	cpu_bcast_each(bc, add_row, &r);
}

int cpu_fuse_end(cpu_ctx *ctx, cpu_fuse_run *fr, int done)
{
	int kernel_added = done && fr->add_inline, kernel_act = done && fr->act_inline;

	if (!ctx->node->fuse)
		return 0;
	if (fr->add && !kernel_added) {
		/* out = y + add, broadcast (out may be y itself: same index). */
		int ranks[2] = {fr->y->rank, fr->add->rank};
		const int64_t *ds[2] = {fr->y->dims, fr->add->dims};
		cpu_bcast bc;

		if (cpu_bcast_init(&bc, 2, ranks, ds))
			return cpu_fail(ctx, CPU_E_INVALID, "fused Add: shapes do not broadcast");
		cpu_bcast_add_f32(&bc, fr->y->data, fr->add->data, fr->out->data);
	} else if (fr->y != fr->out) {
		memcpy(fr->out->data, fr->y->data, fr->out->nbytes);
	}
	if (!kernel_act)
		apply_act(ctx, fr->out->data, cpu_numel(fr->out), ctx->node->fuse);
	return 0;
}
