/*
 * signal: ONNX DFT (opset 17 with the axis attribute, opset 20 with the axis
 * input) and STFT (opset 17), for float32, float64 and float16 signals,
 * real ([..., 1]) or complex ([..., 2]).
 *
 * Transforms run in double precision with a twiddle table indexed by
 * (k * n) mod N, so bins whose exact value is zero come out within rounding
 * of zero, as the tests' numpy FFT results do.  Lengths that are powers of
 * two take an iterative radix-2 FFT; other lengths whose prime factors are
 * at most FFT_MAX_RADIX a recursive mixed-radix one (speech frames of 400
 * = 2^4 5^2 samples: 18 instead of 400 operations per value); the rest the
 * direct O(N^2) sum.
 */
#include <math.h>
#include <string.h>

#include "nn_ops.h"

#define SIG_TYPES (CPU_BIT(CPU_FLOAT) | CPU_BIT(CPU_DOUBLE) | CPU_BIT(CPU_FLOAT16))
#define SIG_MAX_LEN ((int64_t)1 << 28)
#define SIG_PI 3.14159265358979323846
#define FFT_MAX_RADIX 64

typedef struct dft_plan {
	int64_t n;            /* transform length */
	int inverse;
	double *cs, *sn;      /* cos and sin of 2 pi m / n, m < n */
	double *wr, *wi;      /* work buffers of n values */
	double *yr, *yi;      /* the mixed-radix FFT's output, n values each */
} dft_plan;

static int plan_init(cpu_ctx *ctx, dft_plan *p, int64_t n, int inverse)
{
	if (n < 1 || n > SIG_MAX_LEN)
		return cpu_fail(ctx, CPU_E_INVALID, "DFT length %lld is invalid", (long long)n);
	p->n = n;
	p->inverse = inverse;
	p->cs = cpu_scratch(ctx, (size_t)n * 6 * sizeof(double));
	if (!p->cs)
		return CPU_E_NOMEM;
	p->sn = p->cs + n;
	p->wr = p->sn + n;
	p->wi = p->wr + n;
	p->yr = p->wi + n;
	p->yi = p->yr + n;
	for (int64_t m = 0; m < n; m++) {
		double a = 2.0 * SIG_PI * (double)m / (double)n;
		p->cs[m] = cos(a);
		p->sn[m] = sin(a);
	}
	return 0;
}

/* In-place iterative radix-2 FFT of p->wr/p->wi (n a power of two). */
static void fft_pow2(const dft_plan *p)
{
	int64_t n = p->n;
	double *re = p->wr, *im = p->wi, sign = p->inverse ? 1.0 : -1.0;

	for (int64_t i = 1, j = 0; i < n; i++) {
		int64_t bit = n >> 1;
		for (; j & bit; bit >>= 1)
			j ^= bit;
		j ^= bit;
		if (i < j) {
			double t = re[i]; re[i] = re[j]; re[j] = t;
			t = im[i]; im[i] = im[j]; im[j] = t;
		}
	}
	for (int64_t len = 2; len <= n; len <<= 1) {
		int64_t step = n / len;
		for (int64_t i = 0; i < n; i += len)
			for (int64_t k = 0; k < len / 2; k++) {
				double c = p->cs[k * step], s = sign * p->sn[k * step];
				double *ar = re + i + k, *ai = im + i + k;
				double br = ar[len / 2] * c - ai[len / 2] * s;
				double bi = ar[len / 2] * s + ai[len / 2] * c;
				ar[len / 2] = *ar - br;
				ai[len / 2] = *ai - bi;
				*ar += br;
				*ai += bi;
			}
	}
}

/* The smallest prime factor of n (n itself when prime). */
static int64_t small_factor(int64_t n)
{
	for (int64_t f = 2; f * f <= n; f++)
		if (n % f == 0)
			return f;
	return n;
}

/* n's prime factors are all at most FFT_MAX_RADIX. */
static int mixed_ok(int64_t n)
{
	while (n > 1) {
		int64_t f = small_factor(n);
		if (f > FFT_MAX_RADIX)
			return 0;
		n /= f;
	}
	return 1;
}

/* y[0..n) = the length-n DFT of x[0], x[xs], ... x[(n - 1) xs]
 * (decimation in time by n's smallest prime factor f: f transforms of
 * length n / f, then radix-f butterflies).  tw = N / n picks n's roots of
 * unity out of the plan's table of N. */
static void fft_mixed(const dft_plan *p, const double *xr, const double *xi, int64_t xs,
		      int64_t n, int64_t tw, double *yr, double *yi)
{
	int64_t f = small_factor(n), m = n / f, N = p->n;
	double sign = p->inverse ? 1.0 : -1.0, zr[FFT_MAX_RADIX], zi[FFT_MAX_RADIX];

	if (n == 1) {
		yr[0] = xr[0];
		yi[0] = xi[0];
		return;
	}
	for (int64_t r = 0; r < f; r++)
		fft_mixed(p, xr + r * xs, xi + r * xs, xs * f, m, tw * f, yr + r * m, yi + r * m);
	for (int64_t k = 0; k < m; k++) {
		for (int64_t r = 0; r < f; r++) {
			zr[r] = yr[r * m + k];
			zi[r] = yi[r * m + k];
		}
		for (int64_t q = 0; q < f; q++) {
			int64_t out = k + q * m;
			double sr = zr[0], si = zi[0];

			for (int64_t r = 1; r < f; r++) {
				int64_t e = (r * out % n) * tw % N;
				double c = p->cs[e], s = sign * p->sn[e];

				sr += zr[r] * c - zi[r] * s;
				si += zr[r] * s + zi[r] * c;
			}
			yr[out] = sr;
			yi[out] = si;
		}
	}
}

/* Transforms p->wr/p->wi (n values, zero-padded by the caller) and stores
 * the first nout bins into y as (re, im) pairs at y0 + k * ystride. */
static void dft_run(const dft_plan *p, int64_t nout, int32_t dt, void *y, int64_t y0,
		    int64_t ystride)
{
	int64_t n = p->n;
	double scale = p->inverse ? 1.0 / (double)n : 1.0, sign = p->inverse ? 1.0 : -1.0;

	if ((n & (n - 1)) == 0) {
		fft_pow2(p);
		for (int64_t k = 0; k < nout; k++) {
			cpu_set_f64(dt, y, y0 + k * ystride, p->wr[k] * scale);
			cpu_set_f64(dt, y, y0 + k * ystride + 1, p->wi[k] * scale);
		}
		return;
	}
	if (mixed_ok(n)) {
		fft_mixed(p, p->wr, p->wi, 1, n, 1, p->yr, p->yi);
		for (int64_t k = 0; k < nout; k++) {
			cpu_set_f64(dt, y, y0 + k * ystride, p->yr[k] * scale);
			cpu_set_f64(dt, y, y0 + k * ystride + 1, p->yi[k] * scale);
		}
		return;
	}
	for (int64_t k = 0; k < nout; k++) {
		double sr = 0.0, si = 0.0;
		for (int64_t j = 0, m = 0; j < n; j++, m = (m + k) % n) {
			double c = p->cs[m], s = sign * p->sn[m];
			sr += p->wr[j] * c - p->wi[j] * s;
			si += p->wr[j] * s + p->wi[j] * c;
		}
		cpu_set_f64(dt, y, y0 + k * ystride, sr * scale);
		cpu_set_f64(dt, y, y0 + k * ystride + 1, si * scale);
	}
}

/* Reads a scalar int input (int32/int64, one element) into v. */
static int scalar_int(cpu_ctx *ctx, int i, const char *name, int64_t *v)
{
	const cpu_tensor *t = cpu_input(ctx, i);

	if (!t || (t->dtype != CPU_INT32 && t->dtype != CPU_INT64) || cpu_numel(t) != 1 ||
	    t->rank > 1)
		return cpu_fail(ctx, CPU_E_INVALID, "input %d (%s) must be an int32/int64 scalar", i,
				name);
	*v = cpu_get_i64(t->dtype, t->data, 0);
	return 0;
}

static int dft_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt, int n_in,
			char *why, size_t n)
{
	(void)p;
	(void)opset;
	return cpu_supports_dtype(dt, n_in, 0, SIG_TYPES, why, n) &&
	       cpu_supports_dtype(dt, n_in, 1, CPU_TYPES_INDEX, why, n) &&
	       cpu_supports_dtype(dt, n_in, 2, CPU_TYPES_INDEX, why, n);
}

/* The DFT axis (attribute before opset 20, input 2 from it), in [0, rank - 2]. */
static int dft_axis(cpu_ctx *ctx, int rank, int *axis)
{
	int64_t a = ctx->node->opset >= 20 ? -2 : cpu_attr_int(ctx->node->proto, "axis", 1);
	int rc;

	if (ctx->node->opset >= 20 && cpu_input(ctx, 2) && (rc = scalar_int(ctx, 2, "axis", &a)))
		return rc;
	if (a < 0)
		a += rank;
	if (a < 0 || a > rank - 2)
		return cpu_fail(ctx, CPU_E_INVALID, "axis is outside [0, %d]", rank - 2);
	*axis = (int)a;
	return 0;
}

static int dft_compute(cpu_ctx *ctx)
{
	const Onnx__NodeProto *p = ctx->node->proto;
	const cpu_tensor *x;
	int inverse = cpu_attr_int(p, "inverse", 0) != 0, onesided = cpu_attr_int(p, "onesided", 0) != 0;
	int64_t dims[CPU_MAX_RANK], outer = 1, inner = 1, L, N, nout, C;
	int axis = 0, rc = 0;
	cpu_tensor *y;
	dft_plan pl;

	if (!(x = cpu_require(ctx, 0, &rc)))
		return rc;
	if ((rc = cpu_check_dtype(ctx, x, 0, SIG_TYPES)))
		return rc;
	if (x->rank < 2 || (x->dims[x->rank - 1] != 1 && x->dims[x->rank - 1] != 2))
		return cpu_fail(ctx, CPU_E_INVALID, "input must be [..., 1] (real) or [..., 2] "
				"(complex)");
	if ((rc = dft_axis(ctx, x->rank, &axis)))
		return rc;
	C = x->dims[x->rank - 1];
	L = x->dims[axis];
	N = L;
	if (cpu_input(ctx, 1) && (rc = scalar_int(ctx, 1, "dft_length", &N)))
		return rc;
	if ((rc = plan_init(ctx, &pl, N, inverse)))
		return rc;
	nout = onesided ? N / 2 + 1 : N;
	memcpy(dims, x->dims, sizeof(int64_t) * (size_t)x->rank);
	dims[axis] = nout;
	dims[x->rank - 1] = 2;
	for (int d = 0; d < axis; d++)
		outer *= x->dims[d];
	for (int d = axis + 1; d < x->rank - 1; d++)
		inner *= x->dims[d];
	if (!(y = cpu_output(ctx, 0, x->dtype, x->rank, dims)))
		return CPU_E_NOMEM;
	for (int64_t o = 0; o < outer; o++)
		for (int64_t i = 0; i < inner; i++) {
			for (int64_t j = 0; j < N; j++) {
				int64_t e = ((o * L + j) * inner + i) * C;
				pl.wr[j] = j < L ? cpu_get_f64(x->dtype, x->data, e) : 0.0;
				pl.wi[j] = j < L && C == 2 ? cpu_get_f64(x->dtype, x->data, e + 1) : 0.0;
			}
			dft_run(&pl, nout, y->dtype, y->data, (o * nout * inner + i) * 2, inner * 2);
		}
	return 0;
}

static int stft_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt, int n_in,
			 char *why, size_t n)
{
	(void)p;
	(void)opset;
	return cpu_supports_dtype(dt, n_in, 0, SIG_TYPES, why, n) &&
	       cpu_supports_dtype(dt, n_in, 1, CPU_TYPES_INDEX, why, n) &&
	       cpu_supports_dtype(dt, n_in, 2, SIG_TYPES, why, n) &&
	       cpu_supports_dtype(dt, n_in, 3, CPU_TYPES_INDEX, why, n);
}

/* Frame length from the window and/or frame_length; validates both. */
static int stft_frame(cpu_ctx *ctx, const cpu_tensor *x, const cpu_tensor *win, int64_t *fl)
{
	int rc;

	*fl = -1;
	if (cpu_input(ctx, 3) && (rc = scalar_int(ctx, 3, "frame_length", fl)))
		return rc;
	if (win) {
		if (win->dtype != x->dtype || win->rank != 1)
			return cpu_fail(ctx, CPU_E_INVALID, "window must be 1-D of the signal's dtype");
		if (*fl >= 0 && *fl != win->dims[0])
			return cpu_fail(ctx, CPU_E_INVALID, "frame_length %lld differs from the "
					"window length %lld", (long long)*fl, (long long)win->dims[0]);
		*fl = win->dims[0];
	}
	if (*fl < 1 || *fl > x->dims[1])
		return cpu_fail(ctx, CPU_E_INVALID, "frame length %lld is missing or outside "
				"[1, %lld]", (long long)*fl, (long long)x->dims[1]);
	return 0;
}

static int stft_compute(cpu_ctx *ctx)
{
	const cpu_tensor *x, *win = cpu_input(ctx, 2);
	int onesided = cpu_attr_int(ctx->node->proto, "onesided", 1) != 0, rc = 0;
	int64_t step = 0, fl = 0, frames, nout, C, dims[4];
	cpu_tensor *y;
	dft_plan pl;

	if (!(x = cpu_require(ctx, 0, &rc)))
		return rc;
	if ((rc = cpu_check_dtype(ctx, x, 0, SIG_TYPES)))
		return rc;
	if (x->rank != 3 || (x->dims[2] != 1 && x->dims[2] != 2))
		return cpu_fail(ctx, CPU_E_INVALID, "signal must be [batch, length, 1 or 2]");
	if ((rc = scalar_int(ctx, 1, "frame_step", &step)) || (rc = stft_frame(ctx, x, win, &fl)))
		return rc;
	if (step < 1)
		return cpu_fail(ctx, CPU_E_INVALID, "frame_step must be >= 1");
	if ((rc = plan_init(ctx, &pl, fl, 0)))
		return rc;
	C = x->dims[2];
	frames = (x->dims[1] - fl) / step + 1;
	nout = onesided ? fl / 2 + 1 : fl;
	dims[0] = x->dims[0], dims[1] = frames, dims[2] = nout, dims[3] = 2;
	if (!(y = cpu_output(ctx, 0, x->dtype, 4, dims)))
		return CPU_E_NOMEM;
	for (int64_t b = 0; b < x->dims[0]; b++)
		for (int64_t f = 0; f < frames; f++) {
			for (int64_t j = 0; j < fl; j++) {
				int64_t e = (b * x->dims[1] + f * step + j) * C;
				double w = win ? cpu_get_f64(win->dtype, win->data, j) : 1.0;
				pl.wr[j] = w * cpu_get_f64(x->dtype, x->data, e);
				pl.wi[j] = C == 2 ? w * cpu_get_f64(x->dtype, x->data, e + 1) : 0.0;
			}
			dft_run(&pl, nout, y->dtype, y->data, (b * frames + f) * nout * 2, 2);
		}
	return 0;
}

const cpu_op cpu_op_dft = {
	"DFT", "", 17, CPU_OPSET_MAX, dft_supports, NULL, dft_compute, NULL,
};
const cpu_op cpu_op_stft = {
	"STFT", "", 17, CPU_OPSET_MAX, stft_supports, NULL, stft_compute, NULL,
};
