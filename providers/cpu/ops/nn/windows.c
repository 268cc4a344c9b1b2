/*
 * windows: ONNX HannWindow, HammingWindow, BlackmanWindow and
 * MelWeightMatrix (opset 17), generators whose inputs are scalars and whose
 * output type is the output_datatype attribute (any numeric type).
 *
 * The windows are generalized cosine windows over N = size (periodic) or
 * size - 1 (symmetric).  MelWeightMatrix follows the ONNX reference: band
 * edges equally spaced in mel, mapped to spectrogram bins by
 * floor((dft_length + 1) * hz / sample_rate), triangles peaking at 1.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "nn_ops.h"

#define WIN_PI 3.14159265358979323846
#define WIN_MAX_LEN ((int64_t)1 << 32)

/* Output type from output_datatype (default float), as a cpu_op supports(). */
static int out_type_ok(const Onnx__NodeProto *p, char *why, size_t n)
{
	int64_t dt = cpu_attr_int(p, "output_datatype", CPU_FLOAT);

	if (dt <= 0 || dt >= 32 || !(CPU_TYPES_NUMERIC & CPU_BIT(dt))) {
		snprintf(why, n, "output_datatype %lld is not supported", (long long)dt);
		return 0;
	}
	return 1;
}

static int win_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt, int n_in,
			char *why, size_t n)
{
	(void)opset;
	return out_type_ok(p, why, n) && cpu_supports_dtype(dt, n_in, 0, CPU_TYPES_INDEX, why, n);
}

/* Scalar int input i (int32 or int64) into v. */
static int read_int(cpu_ctx *ctx, int i, int64_t *v)
{
	const cpu_tensor *t = cpu_input(ctx, i);

	if (!t || (t->dtype != CPU_INT32 && t->dtype != CPU_INT64) || cpu_numel(t) != 1)
		return cpu_fail(ctx, CPU_E_INVALID, "input %d must be an int32/int64 scalar", i);
	*v = cpu_get_i64(t->dtype, t->data, 0);
	return 0;
}

/* w[n] = a0 - a1 cos(2 pi n / N) + a2 cos(4 pi n / N) */
static int cosine_window(cpu_ctx *ctx, double a0, double a1, double a2)
{
	const Onnx__NodeProto *p = ctx->node->proto;
	int32_t dt = (int32_t)cpu_attr_int(p, "output_datatype", CPU_FLOAT);
	int64_t size, N;
	cpu_tensor *y;
	int rc;

	if ((rc = read_int(ctx, 0, &size)))
		return rc;
	if (size < 0 || size > WIN_MAX_LEN)
		return cpu_fail(ctx, CPU_E_INVALID, "window size %lld is invalid", (long long)size);
	if (dt <= 0 || dt >= 32 || !(CPU_TYPES_NUMERIC & CPU_BIT(dt)))
		return cpu_fail(ctx, CPU_E_UNSUPPORTED, "output_datatype %d is not supported", dt);
	N = cpu_attr_int(p, "periodic", 1) ? size : size - 1;
	if (!(y = cpu_output(ctx, 0, dt, 1, &size)))
		return CPU_E_NOMEM;
	for (int64_t i = 0; i < size; i++) {
		double a = N > 0 ? 2.0 * WIN_PI * (double)i / (double)N : 0.0;
		cpu_set_f64(dt, y->data, i, a0 - a1 * cos(a) + a2 * cos(2.0 * a));
	}
	return 0;
}

static int hann_compute(cpu_ctx *ctx)
{
	return cosine_window(ctx, 0.5, 0.5, 0.0);
}

static int hamming_compute(cpu_ctx *ctx)
{
	return cosine_window(ctx, 25.0 / 46.0, 21.0 / 46.0, 0.0);
}

static int blackman_compute(cpu_ctx *ctx)
{
	return cosine_window(ctx, 0.42, 0.5, 0.08);
}

static int mel_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt, int n_in,
			char *why, size_t n)
{
	(void)opset;
	return out_type_ok(p, why, n) && cpu_supports_dtype(dt, n_in, 0, CPU_TYPES_INDEX, why, n) &&
	       cpu_supports_dtype(dt, n_in, 1, CPU_TYPES_INDEX, why, n) &&
	       cpu_supports_dtype(dt, n_in, 2, CPU_TYPES_INDEX, why, n) &&
	       cpu_supports_dtype(dt, n_in, 3, CPU_TYPES_FLOAT | CPU_BIT(CPU_FLOAT16), why, n) &&
	       cpu_supports_dtype(dt, n_in, 4, CPU_TYPES_FLOAT | CPU_BIT(CPU_FLOAT16), why, n);
}

/* Band edge b of nbins + 2 as a spectrogram bin index. */
static int64_t mel_edge(int64_t b, int64_t nbins, double lo_hz, double hi_hz, int64_t dft_len,
			int64_t rate)
{
	double lo_mel = 2595.0 * log10(1.0 + lo_hz / 700.0);
	double hi_mel = 2595.0 * log10(1.0 + hi_hz / 700.0);
	double mel = (double)b * ((hi_mel - lo_mel) / (double)(nbins + 2)) + lo_mel;
	double hz = 700.0 * (pow(10.0, mel / 2595.0) - 1.0);

	return (int64_t)floor((double)(dft_len + 1) * hz / (double)rate);
}

/* Reads the five inputs and checks that every band edge is a valid bin. */
static int mel_inputs(cpu_ctx *ctx, int64_t *nbins, int64_t *dft_len, int64_t *rate,
		      double *lo, double *hi)
{
	const cpu_tensor *tl = cpu_input(ctx, 3), *th = cpu_input(ctx, 4);
	int rc;

	if ((rc = read_int(ctx, 0, nbins)) || (rc = read_int(ctx, 1, dft_len)) ||
	    (rc = read_int(ctx, 2, rate)))
		return rc;
	if (cpu_read_scalar(tl, lo) || cpu_read_scalar(th, hi) ||
	    !cpu_dtype_is_float(tl->dtype) || !cpu_dtype_is_float(th->dtype))
		return cpu_fail(ctx, CPU_E_INVALID, "lower/upper_edge_hertz must be float scalars");
	if (*nbins < 1 || *nbins > INT32_MAX || *dft_len < 1 || *dft_len > INT32_MAX ||
	    *rate < 1 || !(*lo >= 0.0) || !(*hi > *lo) || !(*hi <= 1e12))
		return cpu_fail(ctx, CPU_E_INVALID, "invalid MelWeightMatrix parameters");
	for (int64_t b = 0; b < *nbins + 2; b++) {
		int64_t e = mel_edge(b, *nbins, *lo, *hi, *dft_len, *rate);
		if (e < 0 || e > *dft_len / 2)
			return cpu_fail(ctx, CPU_E_INVALID, "band edge %lld falls on bin %lld, outside "
					"the %lld spectrogram bins (upper_edge_hertz above Nyquist?)",
					(long long)b, (long long)e, (long long)(*dft_len / 2 + 1));
	}
	return 0;
}

static int mel_compute(cpu_ctx *ctx)
{
	int32_t dt = (int32_t)cpu_attr_int(ctx->node->proto, "output_datatype", CPU_FLOAT);
	int64_t nbins = 0, dft_len = 0, rate = 0, dims[2];
	double lo = 0.0, hi = 0.0;
	cpu_tensor *y;
	int rc;

	if ((rc = mel_inputs(ctx, &nbins, &dft_len, &rate, &lo, &hi)))
		return rc;
	if (dt <= 0 || dt >= 32 || !(CPU_TYPES_NUMERIC & CPU_BIT(dt)))
		return cpu_fail(ctx, CPU_E_UNSUPPORTED, "output_datatype %d is not supported", dt);
	dims[0] = dft_len / 2 + 1;
	dims[1] = nbins;
	if (!(y = cpu_output(ctx, 0, dt, 2, dims)))
		return CPU_E_NOMEM;
	memset(y->data, 0, (size_t)(dims[0] * nbins) * cpu_dtype_size(dt));
	for (int64_t i = 0; i < nbins; i++) {
		int64_t l = mel_edge(i, nbins, lo, hi, dft_len, rate);
		int64_t c = mel_edge(i + 1, nbins, lo, hi, dft_len, rate);
		int64_t h = mel_edge(i + 2, nbins, lo, hi, dft_len, rate);
		if (c == l)
			cpu_set_f64(dt, y->data, c * nbins + i, 1.0);
		for (int64_t j = l; c > l && j <= c; j++)
			cpu_set_f64(dt, y->data, j * nbins + i, (double)(j - l) / (double)(c - l));
		for (int64_t j = c; h > c && j < h; j++)
			cpu_set_f64(dt, y->data, j * nbins + i, (double)(h - j) / (double)(h - c));
	}
	return 0;
}

const cpu_op cpu_op_hannwindow = {
	"HannWindow", "", 17, CPU_OPSET_MAX, win_supports, NULL, hann_compute, NULL,
};
const cpu_op cpu_op_hammingwindow = {
	"HammingWindow", "", 17, CPU_OPSET_MAX, win_supports, NULL, hamming_compute, NULL,
};
const cpu_op cpu_op_blackmanwindow = {
	"BlackmanWindow", "", 17, CPU_OPSET_MAX, win_supports, NULL, blackman_compute, NULL,
};
const cpu_op cpu_op_melweightmatrix = {
	"MelWeightMatrix", "", 17, CPU_OPSET_MAX, mel_supports, NULL, mel_compute, NULL,
};
