/*
 * Unit tests for the CPU provider's nn family (providers/cpu/ops/nn): the
 * semantics the ONNX conformance data does not pin down — recurrent
 * directions, sequence_lens, layout=1, GRU's linear_before_reset, LSTM's
 * clip/input_forget/peepholes, ConvTranspose's padding split for
 * output_shape and auto_pad, quantization's rounding and saturation,
 * per-row/per-channel zero points, DFT lengths that are not powers of two —
 * and the error paths (bad attributes, shapes, dtypes).  Kernels run
 * through cpu_node_init/cpu_node_run with NodeProtos built here; expected
 * values are stated inline (computed with numpy from the ONNX formulas) or
 * checked as relations between runs.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cpu_node.h"
#include "cpu_test_util.h"
#include "cpu_ops.h"
#include "threadpool.h"

/* ---- checks ---- */

static void expect_f32(const cpu_tensor *got, const float *want, int64_t n, double tol)
{
	assert_int_equal(got->dtype, CPU_FLOAT);
	assert_int_equal(cpu_numel(got), n);
	for (int64_t i = 0; i < n; i++) {
		double g = ((const float *)got->data)[i];
		if (!(fabs(g - want[i]) <= tol * (1.0 + fabs(want[i]))))
			fail_msg("element %lld: got %.8g, want %.8g", (long long)i, g, want[i]);
	}
}

static void expect_dims(const cpu_tensor *t, int rank, const int64_t *dims)
{
	assert_int_equal(t->rank, rank);
	for (int i = 0; i < rank; i++)
		assert_int_equal(t->dims[i], dims[i]);
}

/* Deterministic values in [-1, 1). */
static void fill(float *v, int64_t n, unsigned seed)
{
	for (int64_t i = 0; i < n; i++) {
		seed = seed * 1103515245u + 12345u;
		v[i] = (float)((seed >> 8) & 0xffff) / 32768.0f - 1.0f;
	}
}

/* ---- recurrent ops ---- */

static const float seq_x[6] = {0.5f, -1.0f, 1.5f, 0.25f, -0.75f, 2.0f};  /* [3, 1, 2] */

static void test_gru_linear_before_reset(void **state)
{
	static const float W[6] = {0.1f, 0.2f, -0.3f, 0.4f, 0.5f, -0.6f};
	static const float R[3] = {0.7f, -0.8f, 0.9f};
	static const float B[6] = {0.1f, -0.2f, 0.3f, 0.05f, 0.15f, -0.25f};
	static const float want[2][3] = {{0.3581489f, 0.4579226f, 0.05101907f},
					 {0.3931023f, 0.5114194f, 0.1095852f}};
	int64_t dx[3] = {3, 1, 2}, dw[3] = {1, 3, 2}, dr[3] = {1, 3, 1}, db[2] = {1, 6};
	cpu_tensor x = tens(CPU_FLOAT, 3, dx, seq_x), w = tens(CPU_FLOAT, 3, dw, W);
	cpu_tensor r = tens(CPU_FLOAT, 3, dr, R), b = tens(CPU_FLOAT, 2, db, B), out[2];
	const cpu_tensor *in[4] = {&x, &w, &r, &b};
	(void)state;
	for (int lbr = 0; lbr < 2; lbr++) {
		tnode t;
		tn(&t, "GRU", 4, 2);
		tn_int(&t, "hidden_size", 1);
		tn_int(&t, "linear_before_reset", lbr);
		run_ok(&t, 14, 4, in, 2, out);
		expect_f32(&out[0], want[lbr], 3, 1e-5);
		expect_f32(&out[1], want[lbr] + 2, 1, 1e-5);
		free_outs(out, 2);
	}
}

static void test_lstm_clip_input_forget_peepholes(void **state)
{
	static const float W[8] = {0.1f, 0.2f, -0.3f, 0.4f, 0.5f, -0.6f, 0.7f, 0.8f};
	static const float R[4] = {0.7f, -0.8f, 0.9f, 0.3f}, P[3] = {0.2f, -0.1f, 0.3f};
	static const float want_y[3] = {-0.07275867f, 0.06374564f, 0.2024368f};
	static const float want_c[1] = {0.3374746f};
	int64_t dx[3] = {3, 1, 2}, dw[3] = {1, 4, 2}, dr[3] = {1, 4, 1}, dp[2] = {1, 3};
	cpu_tensor x = tens(CPU_FLOAT, 3, dx, seq_x), w = tens(CPU_FLOAT, 3, dw, W);
	cpu_tensor r = tens(CPU_FLOAT, 3, dr, R), p = tens(CPU_FLOAT, 2, dp, P), out[3];
	const cpu_tensor *in[8] = {&x, &w, &r, NULL, NULL, NULL, NULL, &p};
	tnode t;
	(void)state;
	tn(&t, "LSTM", 8, 3);
	tn_int(&t, "hidden_size", 1);
	tn_float(&t, "clip", 0.5f);
	tn_int(&t, "input_forget", 1);
	run_ok(&t, 14, 8, in, 3, out);
	expect_f32(&out[0], want_y, 3, 1e-5);
	expect_f32(&out[1], want_y + 2, 1, 1e-5);
	expect_f32(&out[2], want_c, 1, 1e-5);
	free_outs(out, 3);
}

enum { S = 4, NB = 3, I = 3, H = 2, G = 4 };

/* Runs an LSTM over the shared random weights: direction d0 of `ndir`
 * directions starting at weight set `first`, layout 0. */
static void lstm_dir(const char *dir, int ndir, int first, const float *x, const int32_t *lens,
		     cpu_tensor *out)
{
	static float w[2][G * H * I], r[2][G * H * H], b[2][2 * G * H], h0[2][NB * H], c0[2][NB * H];
	int64_t dx[3] = {S, NB, I}, dw[3] = {ndir, G * H, I}, dr[3] = {ndir, G * H, H};
	int64_t db[2] = {ndir, 2 * G * H}, ds[3] = {ndir, NB, H}, dl[1] = {NB};
	cpu_tensor tx, tw, tr, tb, th, tc, tl;
	const cpu_tensor *in[7] = {&tx, &tw, &tr, &tb, &tl, &th, &tc};
	tnode t;

	fill(&w[0][0], 2 * G * H * I, 1);
	fill(&r[0][0], 2 * G * H * H, 2);
	fill(&b[0][0], 2 * 2 * G * H, 3);
	fill(&h0[0][0], 2 * NB * H, 4);
	fill(&c0[0][0], 2 * NB * H, 5);
	tx = tens(CPU_FLOAT, 3, dx, x);
	tw = tens(CPU_FLOAT, 3, dw, w[first]);
	tr = tens(CPU_FLOAT, 3, dr, r[first]);
	tb = tens(CPU_FLOAT, 2, db, b[first]);
	th = tens(CPU_FLOAT, 3, ds, h0[first]);
	tc = tens(CPU_FLOAT, 3, ds, c0[first]);
	tl = tens(CPU_INT32, 1, dl, lens);
	tn(&t, "LSTM", 7, 3);
	tn_int(&t, "hidden_size", H);
	tn_str(&t, "direction", dir);
	run_ok(&t, 14, 7, in, 3, out);
}

/* A step's recurrence split over the pool's columns (rnn_recur, hidden 256:
 * every step above its threshold) gives the bits of the caller alone:
 * LSTM, GRU both ways of the reset, batch 1 and 3, both directions. */
static void test_rnn_recurrence_on_pool(void **state)
{
	enum { PS = 9, PI = 16, PH = 256 };   /* 9 steps: at least RECUR_MIN_STEPS */
	static float x[PS * 3 * PI], w[2 * 4 * PH * PI], r[2 * 4 * PH * PH], b[2 * 8 * PH];
	static const char *const ops[] = {"LSTM", "GRU", "GRU"};
	cpu_pool *pool;
	char err[256];
	(void)state;
	assert_int_equal(cpu_pool_create(2, &pool), 0);
	fill(x, PS * 3 * PI, 21);
	fill(w, 2 * 4 * PH * PI, 22);
	fill(r, 2 * 4 * PH * PH, 23);
	fill(b, 2 * 8 * PH, 24);
	for (int k = 0; k < 3; k++)
		for (int nb = 1; nb <= 3; nb += 2) {
			int G = k == 0 ? 4 : 3, dirs = nb == 3 ? 2 : 1, nout = 2;
			int64_t dx[3] = {PS, nb, PI}, dw[3] = {dirs, G * PH, PI};
			int64_t dr[3] = {dirs, G * PH, PH}, db[2] = {dirs, 2 * G * PH};
			cpu_tensor tx = tens(CPU_FLOAT, 3, dx, x), tw = tens(CPU_FLOAT, 3, dw, w);
			cpu_tensor tr = tens(CPU_FLOAT, 3, dr, r), tb = tens(CPU_FLOAT, 2, db, b);
			const cpu_tensor *in[4] = {&tx, &tw, &tr, &tb};
			cpu_tensor one[2], two[2];
			tnode t;

			for (int run = 0; run < 2; run++) {
				tn(&t, ops[k], 4, nout);
				tn_int(&t, "hidden_size", PH);
				tn_str(&t, "direction", dirs == 2 ? "bidirectional" : "forward");
				if (k == 2)
					tn_int(&t, "linear_before_reset", 1);
				assert_int_equal(run_pool(&t, 14, 4, in, nout, run ? two : one,
							  run ? pool : NULL, run ? 2 : 1, err), 0);
			}
			for (int o = 0; o < nout; o++) {
				assert_int_equal(one[o].nbytes, two[o].nbytes);
				assert_memory_equal(one[o].data, two[o].data, one[o].nbytes);
			}
			free_outs(one, nout);
			free_outs(two, nout);
		}
	cpu_pool_destroy(pool);
}

static void test_lstm_bidirectional_is_forward_plus_reverse(void **state)
{
	static const int32_t lens[NB] = {4, 2, 3};
	float x[S * NB * I];
	cpu_tensor bi[3], fw[3], rv[3];
	(void)state;
	fill(x, S * NB * I, 9);
	lstm_dir("bidirectional", 2, 0, x, lens, bi);
	lstm_dir("forward", 1, 0, x, lens, fw);
	lstm_dir("reverse", 1, 1, x, lens, rv);
	for (int s = 0; s < S; s++)
		for (int b = 0; b < NB; b++)
			for (int j = 0; j < H; j++) {
				float *y = bi[0].data, *yf = fw[0].data, *yr = rv[0].data;
				float f = y[((s * 2 + 0) * NB + b) * H + j], r = y[((s * 2 + 1) * NB + b) * H + j];
				assert_float_equal(f, yf[(s * NB + b) * H + j], 1e-6);
				assert_float_equal(r, yr[(s * NB + b) * H + j], 1e-6);
				if (s >= lens[b]) {   /* past the sequence: zeros */
					assert_float_equal(f, 0.0f, 0.0f);
					assert_float_equal(r, 0.0f, 0.0f);
				}
				/* Y_h: forward's last valid step, reverse's step 0 */
				if (s == lens[b] - 1)
					assert_float_equal(((float *)bi[1].data)[b * H + j], f, 1e-6);
				if (s == 0)
					assert_float_equal(((float *)bi[1].data)[(NB + b) * H + j], r, 1e-6);
			}
	for (int k = 0; k < NB * H; k++) {
		assert_float_equal(((float *)bi[2].data)[k], ((float *)fw[2].data)[k], 1e-6);
		assert_float_equal(((float *)bi[2].data)[NB * H + k], ((float *)rv[2].data)[k], 1e-6);
	}
	free_outs(bi, 3);
	free_outs(fw, 3);
	free_outs(rv, 3);
}

static void test_rnn_layout1_is_transposed_layout0(void **state)
{
	float x0[S * NB * I], x1[NB * S * I], w[2 * H * I], r[2 * H * H];
	int64_t d0[3] = {S, NB, I}, d1[3] = {NB, S, I}, dw[3] = {2, H, I}, dr[3] = {2, H, H};
	int64_t y1[4] = {NB, S, 2, H}, h1[3] = {NB, 2, H};
	cpu_tensor tw = tens(CPU_FLOAT, 3, dw, w), tr = tens(CPU_FLOAT, 3, dr, r), a, b;
	cpu_tensor oa[2], ob[2];
	const cpu_tensor *ina[3] = {&a, &tw, &tr}, *inb[3] = {&b, &tw, &tr};
	tnode t;
	(void)state;
	fill(x0, S * NB * I, 11);
	fill(w, 2 * H * I, 12);
	fill(r, 2 * H * H, 13);
	for (int s = 0; s < S; s++)
		for (int n = 0; n < NB; n++)
			memcpy(x1 + (n * S + s) * I, x0 + (s * NB + n) * I, I * sizeof(float));
	a = tens(CPU_FLOAT, 3, d0, x0);
	b = tens(CPU_FLOAT, 3, d1, x1);
	tn(&t, "RNN", 3, 2);
	tn_int(&t, "hidden_size", H);
	tn_str(&t, "direction", "bidirectional");
	run_ok(&t, 14, 3, ina, 2, oa);
	tn_int(&t, "layout", 1);
	run_ok(&t, 14, 3, inb, 2, ob);
	expect_dims(&ob[0], 4, y1);
	expect_dims(&ob[1], 3, h1);
	for (int s = 0; s < S; s++)
		for (int d = 0; d < 2; d++)
			for (int n = 0; n < NB; n++)
				for (int j = 0; j < H; j++)
					assert_float_equal(((float *)oa[0].data)[((s * 2 + d) * NB + n) * H + j],
							   ((float *)ob[0].data)[((n * S + s) * 2 + d) * H + j],
							   1e-6);
	for (int d = 0; d < 2; d++)
		for (int n = 0; n < NB; n++)
			for (int j = 0; j < H; j++)
				assert_float_equal(((float *)oa[1].data)[(d * NB + n) * H + j],
						   ((float *)ob[1].data)[(n * 2 + d) * H + j], 1e-6);
	free_outs(oa, 2);
	free_outs(ob, 2);
}

static void test_rnn_activation_alpha_beta(void **state)
{
	/* one step, W = 1, R = 0: Y = act(x) */
	static const float x[3] = {-2.0f, 0.5f, 3.0f}, w[1] = {1.0f}, r[1] = {0.0f};
	static const char *const acts[] = {"ScaledTanh"};
	static const float alpha[] = {2.0f}, beta[] = {0.5f};
	int64_t dx[3] = {1, 3, 1}, d1[3] = {1, 1, 1};
	cpu_tensor tx = tens(CPU_FLOAT, 3, dx, x), tw = tens(CPU_FLOAT, 3, d1, w);
	cpu_tensor tr = tens(CPU_FLOAT, 3, d1, r), out[2];
	const cpu_tensor *in[3] = {&tx, &tw, &tr};
	float want[3];
	tnode t;
	(void)state;
	for (int i = 0; i < 3; i++)
		want[i] = 2.0f * tanhf(0.5f * x[i]);
	tn(&t, "RNN", 3, 2);
	tn_int(&t, "hidden_size", 1);
	tn_strs(&t, "activations", acts, 1);
	tn_floats(&t, "activation_alpha", alpha, 1);
	tn_floats(&t, "activation_beta", beta, 1);
	run_ok(&t, 14, 3, in, 2, out);
	expect_f32(&out[0], want, 3, 1e-6);
	free_outs(out, 2);
}

static void test_rnn_errors(void **state)
{
	static const float v[64];
	static const int32_t lens[1] = {3};
	static const char *const bad[] = {"Swish"};
	int64_t dx[3] = {2, 1, 3}, dw[3] = {1, 4, 3}, dwb[3] = {1, 4, 2}, dr[3] = {1, 4, 4}, dl[1] = {1};
	cpu_tensor x = tens(CPU_FLOAT, 3, dx, v), w = tens(CPU_FLOAT, 3, dw, v);
	cpu_tensor wb = tens(CPU_FLOAT, 3, dwb, v), r = tens(CPU_FLOAT, 3, dr, v);
	cpu_tensor l = tens(CPU_INT32, 1, dl, lens), xi = tens(CPU_INT32, 3, dx, v);
	const cpu_tensor *in[5] = {&x, &w, &r, NULL, &l}, *inw[3] = {&x, &wb, &r};
	const cpu_tensor *ini[3] = {&xi, &w, &r};
	tnode t;
	(void)state;
	tn(&t, "RNN", 5, 2);
	tn_int(&t, "hidden_size", 4);
	expect_error(&t, 14, 5, in, CPU_E_INVALID, "sequence_lens[0] = 3");
	expect_error(&t, 14, 3, inw, CPU_E_INVALID, "input 1 (W) must be [1,4,3]");
	expect_error(&t, 14, 3, ini, CPU_E_UNSUPPORTED, "dtype int32");
	tn_str(&t, "direction", "sideways");
	expect_error(&t, 14, 3, inw, CPU_E_INVALID, "unknown direction 'sideways'");
	tn(&t, "RNN", 3, 2);
	tn_strs(&t, "activations", bad, 1);
	expect_error(&t, 14, 3, inw, CPU_E_UNSUPPORTED, "unsupported activation 'Swish'");
	tn(&t, "LSTM", 3, 2);
	tn_int(&t, "layout", 2);
	expect_error(&t, 14, 3, inw, CPU_E_INVALID, "layout must be 0 or 1");
}

/* ---- ConvTranspose ---- */

/* X = 1..6 as [1,1,2,3], W [1,1,2,3], strides 2: the full output is 4 x 7,
 * so a 4 x 6 output drops one column — at the start for output_shape and
 * SAME_LOWER, at the end for SAME_UPPER (the ONNX spec's split). */
static void convt_run(const char *attr, const char *value, cpu_tensor *out)
{
	static const float x[6] = {1, 2, 3, 4, 5, 6}, w[6] = {1, -1, 2, 0.5f, 3, -2};
	static const int64_t strides[2] = {2, 2}, os[2] = {4, 6};
	int64_t dx[4] = {1, 1, 2, 3};
	cpu_tensor tx = tens(CPU_FLOAT, 4, dx, x), tw = tens(CPU_FLOAT, 4, dx, w);
	const cpu_tensor *in[2] = {&tx, &tw};
	tnode t;
	tn(&t, "ConvTranspose", 2, 1);
	tn_ints(&t, "strides", strides, 2);
	if (value)
		tn_str(&t, attr, value);
	else
		tn_ints(&t, attr, os, 2);
	run_ok(&t, 11, 2, in, 1, out);
}

static void test_convtranspose_padding_split(void **state)
{
	static const float lower[24] = {-1, 4, -2, 7, -3, 6, 3, -1, 6, -2.5f, 9, -6,
					-4, 13, -5, 16, -6, 12, 12, -5.5f, 15, -7, 18, -12};
	static const float upper[24] = {1, -1, 4, -2, 7, -3, 0.5f, 3, -1, 6, -2.5f, 9,
					4, -4, 13, -5, 16, -6, 2, 12, -5.5f, 15, -7, 18};
	int64_t dy[4] = {1, 1, 4, 6};
	cpu_tensor out;
	(void)state;
	convt_run("output_shape", NULL, &out);
	expect_dims(&out, 4, dy);
	expect_f32(&out, lower, 24, 1e-6);
	free(out.data);
	convt_run("auto_pad", "SAME_LOWER", &out);
	expect_f32(&out, lower, 24, 1e-6);
	free(out.data);
	convt_run("auto_pad", "SAME_UPPER", &out);
	expect_dims(&out, 4, dy);
	expect_f32(&out, upper, 24, 1e-6);
	free(out.data);
}

/* Windows that tile the output (kernel == stride, no pads: convtranspose.c
 * writes each output once, two taps interleaved at stride 2): N=2, groups
 * 1 and 2, strides 2 and 3, rows around a vector, with a bias, on the pool,
 * against the sum written out. */
static void test_convtranspose_tiles(void **state)
{
	static const int64_t cases[][4] = {{1, 2, 5, 9}, {1, 2, 3, 20}, {2, 2, 4, 17}, {1, 3, 4, 6},
					   {2, 3, 2, 11}};   /* group, stride, H, W */
	cpu_pool *pool;
	(void)state;
	assert_int_equal(cpu_pool_create(2, &pool), 0);
	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		int64_t G = cases[c][0], s = cases[c][1], H = cases[c][2], W = cases[c][3];
		int64_t C = 4, Mg = 3, OH = H * s, OW = W * s, ks[2] = {s, s}, st[2] = {s, s};
		int64_t dx[4] = {2, C, H, W}, dw[4] = {C, Mg, s, s}, db[1] = {G * Mg};
		float *x = malloc(sizeof(float) * (size_t)(2 * C * H * W));
		float *w = malloc(sizeof(float) * (size_t)(C * Mg * s * s)), b[6];
		cpu_tensor tx = tens(CPU_FLOAT, 4, dx, x), tw = tens(CPU_FLOAT, 4, dw, w);
		cpu_tensor tb = tens(CPU_FLOAT, 1, db, b), out;
		const cpu_tensor *in[3] = {&tx, &tw, &tb};
		char err[ERRLEN];
		tnode t;

		for (int64_t i = 0; i < 2 * C * H * W; i++)
			x[i] = (float)((i * 37) % 23) / 4.0f - 2.5f;
		for (int64_t i = 0; i < C * Mg * s * s; i++)
			w[i] = (float)((i * 11) % 13) / 8.0f - 0.75f;
		for (int i = 0; i < 6; i++)
			b[i] = (float)i - 2.0f;
		tn(&t, "ConvTranspose", 3, 1);
		tn_ints(&t, "kernel_shape", ks, 2);
		tn_ints(&t, "strides", st, 2);
		tn_int(&t, "group", G);
		assert_int_equal(run_pool(&t, 11, 3, in, 1, &out, pool, 2, err), 0);
		assert_int_equal(out.dims[1], G * Mg);
		assert_int_equal(out.dims[2], OH);
		assert_int_equal(out.dims[3], OW);
		for (int64_t n = 0; n < 2; n++)
			for (int64_t m = 0; m < G * Mg; m++)
				for (int64_t oh = 0; oh < OH; oh++)
					for (int64_t ow = 0; ow < OW; ow++) {
						int64_t g = m / Mg, Cg = C / G;
						double want = b[m];

						for (int64_t ci = 0; ci < Cg; ci++) {
							int64_t cc = g * Cg + ci;

							want += (double)x[((n * C + cc) * H + oh / s) * W + ow / s] *
								w[((cc * Mg + m % Mg) * s + oh % s) * s + ow % s];
						}
						float got = ((float *)out.data)[((n * G * Mg + m) * OH + oh) * OW + ow];
						if (fabs(got - want) > 1e-5 * (1 + fabs(want)))
							fail_msg("g%d s%d %dx%d [%d,%d,%d,%d]: %g, want %g", (int)G,
								 (int)s, (int)H, (int)W, (int)n, (int)m, (int)oh,
								 (int)ow, got, want);
					}
		free(out.data);
		free(x);
		free(w);
	}
	cpu_pool_destroy(pool);
}

static void test_convtranspose_errors(void **state)
{
	static const float v[64];
	static const int64_t pads[2] = {2, 2};
	int64_t dx[3] = {1, 3, 2}, dw[3] = {3, 2, 1}, db[1] = {3};
	cpu_tensor x = tens(CPU_FLOAT, 3, dx, v), w = tens(CPU_FLOAT, 3, dw, v);
	cpu_tensor b = tens(CPU_FLOAT, 1, db, v);
	const cpu_tensor *in[3] = {&x, &w, &b};
	tnode t;
	(void)state;
	tn(&t, "ConvTranspose", 3, 1);
	expect_error(&t, 11, 3, in, CPU_E_INVALID, "bias must be [2]");
	tn_int(&t, "group", 2);
	expect_error(&t, 11, 2, in, CPU_E_INVALID, "with group 2");
	tn(&t, "ConvTranspose", 2, 1);
	tn_ints(&t, "pads", pads, 2);
	expect_error(&t, 11, 2, in, CPU_E_INVALID, "output dim 0 would be -2");
}

/* ---- quantization ---- */

static void test_quantize_rounding_saturation(void **state)
{
	static const float x[8] = {0.5f, 1.5f, 2.5f, -0.5f, -1.5f, 1000.0f, -1000.0f, 2.4999f};
	static const int8_t want8[8] = {0, 2, 2, 0, -2, 127, -128, 2};
	static const uint8_t want_u8[8] = {128, 130, 130, 128, 126, 255, 0, 130};
	static const float one = 1.0f;
	static const int8_t z8 = 0;
	static const uint8_t zu8 = 128;
	int64_t dx[1] = {8};
	cpu_tensor tx = tens(CPU_FLOAT, 1, dx, x), ts = tens(CPU_FLOAT, 0, NULL, &one), out;
	cpu_tensor tz8 = tens(CPU_INT8, 0, NULL, &z8), tzu = tens(CPU_UINT8, 0, NULL, &zu8);
	const cpu_tensor *in8[3] = {&tx, &ts, &tz8}, *inu[3] = {&tx, &ts, &tzu};
	tnode t;
	(void)state;
	tn(&t, "QuantizeLinear", 3, 1);
	run_ok(&t, 13, 3, in8, 1, &out);
	assert_int_equal(out.dtype, CPU_INT8);
	assert_memory_equal(out.data, want8, 8);
	free(out.data);
	run_ok(&t, 13, 3, inu, 1, &out);
	assert_int_equal(out.dtype, CPU_UINT8);
	assert_memory_equal(out.data, want_u8, 8);
	free(out.data);
}

static void test_quantize_errors(void **state)
{
	static const float x[6], s2[2] = {1, 1};
	static const uint8_t z2[2], zu[1];
	static const int8_t zs[1];
	int64_t dx[2] = {2, 3}, d2[1] = {2};
	cpu_tensor tx = tens(CPU_FLOAT, 2, dx, x), ts = tens(CPU_FLOAT, 1, d2, s2);
	cpu_tensor tz = tens(CPU_UINT8, 1, d2, z2), tq = tens(CPU_UINT8, 2, dx, x);
	cpu_tensor tsc = tens(CPU_FLOAT, 0, NULL, s2), tzs = tens(CPU_INT8, 0, NULL, zs);
	cpu_tensor tzu = tens(CPU_UINT8, 0, NULL, zu);
	const cpu_tensor *in[3] = {&tx, &ts, &tz}, *ind[3] = {&tq, &tsc, &tzs};
	const cpu_tensor *inz[3] = {&tq, &ts, &tzu};
	tnode t;
	(void)state;
	tn(&t, "QuantizeLinear", 3, 1);
	expect_error(&t, 13, 3, in, CPU_E_INVALID, "per-axis scale has 2 values");
	tn_int(&t, "axis", 0);
	run_ok(&t, 13, 3, in, 1, &tq);     /* axis 0 has 2 entries: fine */
	free(tq.data);
	tq = tens(CPU_UINT8, 2, dx, x);
	tn(&t, "DequantizeLinear", 3, 1);
	expect_error(&t, 13, 3, ind, CPU_E_INVALID, "x is uint8 but its zero point int8");
	tn_int(&t, "axis", 0);
	expect_error(&t, 13, 3, inz, CPU_E_INVALID, "zero point and scale differ in shape");
}

static void test_dynamic_quantize_all_zero(void **state)
{
	static const float x[4];
	static const uint8_t zeros[4];
	int64_t dx[1] = {4};
	cpu_tensor tx = tens(CPU_FLOAT, 1, dx, x), out[3];
	const cpu_tensor *in[1] = {&tx};
	tnode t;
	(void)state;
	tn(&t, "DynamicQuantizeLinear", 1, 3);
	run_ok(&t, 11, 1, in, 3, out);
	assert_memory_equal(out[0].data, zeros, 4);
	/* ONNX Runtime's rule: an empty range gets scale 1 (not 0, which a
	 * consumer would divide by). */
	assert_true(*(float *)out[1].data == 1.0f);
	assert_int_equal(*(uint8_t *)out[2].data, 0);
	assert_int_equal(out[1].rank, 0);
	free_outs(out, 3);
}

/* The scale is (hi - lo) / 255 in float32, as ONNX Runtime and the ONNX
 * reference compute it.  For this range the same formula in double gives
 * 0x1.0d10dap-6, one ulp more, and x[2] quantized to 183 instead of 184
 * (EfficientNet-B0's input diverged from ONNX Runtime that way). */
static void test_dynamic_quantize_float_scale(void **state)
{
	static const float x[3] = {-0x1.95f8d2p+0f, 0x1.4d0b28p+1f, 0x1.6ba8c6p+0f};
	static const uint8_t want[3] = {0, 255, 184};
	int64_t dx[1] = {3};
	cpu_tensor tx = tens(CPU_FLOAT, 1, dx, x), out[3];
	const cpu_tensor *in[1] = {&tx};
	tnode t;
	(void)state;
	tn(&t, "DynamicQuantizeLinear", 1, 3);
	run_ok(&t, 11, 1, in, 3, out);
	assert_true(*(float *)out[1].data == 0x1.0d10d8p-6f);
	assert_int_equal(*(uint8_t *)out[2].data, 97);
	assert_memory_equal(out[0].data, want, 3);
	free_outs(out, 3);
}

/* Large inputs go through the pool and the vector loops: every element
 * against the scalar formula (a division), with ties, quotients an ulp
 * from a half, NaN and values past both ends. */
static void test_dynamic_quantize_large(void **state)
{
	enum { N = 300007 };
	float *x = malloc(N * sizeof(float));
	int64_t dx[1] = {N};
	cpu_tensor tx = tens(CPU_FLOAT, 1, dx, x), out[3];
	const cpu_tensor *in[1] = {&tx};
	struct cpu_pool *pool = NULL;
	uint32_t r = 12345;
	tnode t;
	(void)state;
	assert_non_null(x);
	for (int i = 0; i < N; i++) {
		r = r * 1664525u + 1013904223u;
		x[i] = (float)((int32_t)(r >> 8) % 100000) / 40000.0f - 0.7f;
	}
	x[7] = NAN;
	x[N - 1] = 3.75f;
	/* quotients within an ulp or two of a half (k + 0.5) * s and its
	 * neighbours, where x * (1 / s) and x / s can round apart (the
	 * AVX-512 loop divides those lanes): lo and hi stay those of the
	 * random values, so s is known here */
	{
		float l0 = 0.0f, h0 = 0.0f, s0;
		for (int i = 0; i < N; i++)
			if (!isnan(x[i])) {
				l0 = fminf(l0, x[i]);
				h0 = fmaxf(h0, x[i]);
			}
		s0 = (h0 - l0) / 255.0f;
		for (int k = -30, i = 1000; k < 200; k++, i += 5) {
			float v = ((float)k + 0.5f) * s0;
			x[i] = v;
			x[i + 1] = nextafterf(v, INFINITY);
			x[i + 2] = nextafterf(v, -INFINITY);
			x[i + 3] = nextafterf(nextafterf(v, INFINITY), INFINITY);
			x[i + 4] = nextafterf(nextafterf(v, -INFINITY), -INFINITY);
		}
	}
	assert_int_equal(cpu_pool_create(2, &pool), 0);
	tn(&t, "DynamicQuantizeLinear", 1, 3);
	char err[ERRLEN];
	assert_int_equal(run_pool(&t, 11, 1, in, 3, out, pool, 2, err), 0);
	float lo = 0.0f, hi = 0.0f;
	for (int i = 0; i < N; i++)
		if (!isnan(x[i])) {
			lo = fminf(lo, x[i]);
			hi = fmaxf(hi, x[i]);
		}
	float s = (hi - lo) / 255.0f, zp = nearbyintf(fminf(fmaxf(0.0f - lo / s, 0.0f), 255.0f));
	assert_true(*(float *)out[1].data == s);
	assert_int_equal(*(uint8_t *)out[2].data, (int)zp);
	for (int i = 0; i < N; i++) {
		float v = isnan(x[i]) ? 0.0f : fminf(fmaxf(nearbyintf(x[i] / s) + zp, 0.0f), 255.0f);
		if (((uint8_t *)out[0].data)[i] != (uint8_t)v)
			fail_msg("element %d (%a): %d, want %d", i, x[i],
				 ((uint8_t *)out[0].data)[i], (int)v);
	}
	free_outs(out, 3);
	cpu_pool_destroy(pool);
	free(x);
}

static void test_matmulinteger_per_row_col_zero_points(void **state)
{
	static const uint8_t a[6] = {1, 2, 3, 4, 5, 6}, b[6] = {1, 0, 0, 1, 1, 1};
	static const uint8_t za[2] = {1, 4}, zb[2] = {0, 1};
	static const int32_t want[4] = {2, 0, 2, 0};
	int64_t d23[2] = {2, 3}, d32[2] = {3, 2}, d2[1] = {2};
	cpu_tensor ta = tens(CPU_UINT8, 2, d23, a), tb = tens(CPU_UINT8, 2, d32, b);
	cpu_tensor tza = tens(CPU_UINT8, 1, d2, za), tzb = tens(CPU_UINT8, 1, d2, zb), out;
	const cpu_tensor *in[4] = {&ta, &tb, &tza, &tzb};
	tnode t;
	(void)state;
	tn(&t, "MatMulInteger", 4, 1);
	run_ok(&t, 10, 4, in, 1, &out);
	assert_int_equal(out.dtype, CPU_INT32);
	assert_memory_equal(out.data, want, sizeof(want));
	free(out.data);
}

static void test_qlinearconv_per_channel(void **state)
{
	static const uint8_t x[4] = {10, 20, 30, 40}, zx = 10, zy = 100;
	static const int8_t w[2] = {2, -3}, zw = 0;
	static const float xs = 1.0f, ws[2] = {0.5f, 0.25f}, ys = 1.0f;
	static const int32_t bias[2] = {1, -2};
	static const uint8_t want[8] = {100, 110, 120, 130, 100, 92, 84, 77};
	int64_t dx[4] = {1, 1, 2, 2}, dw[4] = {2, 1, 1, 1}, d2[1] = {2};
	cpu_tensor tx = tens(CPU_UINT8, 4, dx, x), tzx = tens(CPU_UINT8, 0, NULL, &zx);
	cpu_tensor tw = tens(CPU_INT8, 4, dw, w), tzw = tens(CPU_INT8, 0, NULL, &zw);
	cpu_tensor txs = tens(CPU_FLOAT, 0, NULL, &xs), tws = tens(CPU_FLOAT, 1, d2, ws);
	cpu_tensor tys = tens(CPU_FLOAT, 0, NULL, &ys), tzy = tens(CPU_UINT8, 0, NULL, &zy);
	cpu_tensor tb = tens(CPU_INT32, 1, d2, bias), out;
	const cpu_tensor *in[9] = {&tx, &txs, &tzx, &tw, &tws, &tzw, &tys, &tzy, &tb};
	tnode t;
	(void)state;
	tn(&t, "QLinearConv", 9, 1);
	run_ok(&t, 10, 9, in, 1, &out);
	assert_int_equal(out.dtype, CPU_UINT8);
	assert_memory_equal(out.data, want, 8);
	free(out.data);
}

/* ---- DFT, windows ---- */

static void dft_run(const cpu_tensor *x, int inverse, const int64_t *len, cpu_tensor *out)
{
	int64_t n = len ? *len : 0;
	cpu_tensor tl = tens(CPU_INT64, 0, NULL, &n);
	const cpu_tensor *in[2] = {x, len ? &tl : NULL};
	tnode t;
	tn(&t, "DFT", 2, 1);
	tn_int(&t, "axis", 1);
	tn_int(&t, "inverse", inverse);
	run_ok(&t, 17, 2, in, 1, out);
}

static void test_dft_roundtrip_and_padding(void **state)
{
	float x[2 * 6 * 2], padded[2 * 8 * 1], real[2 * 6 * 1];
	int64_t dx[3] = {2, 6, 2}, dr[3] = {2, 6, 1}, dp[3] = {2, 8, 1}, eight = 8;
	cpu_tensor tx = tens(CPU_FLOAT, 3, dx, x), f, back, a, b;
	(void)state;
	fill(x, 24, 21);
	dft_run(&tx, 0, NULL, &f);          /* length 6: the direct sum */
	dft_run(&f, 1, NULL, &back);
	expect_f32(&back, x, 24, 1e-5);
	free(f.data);
	free(back.data);
	fill(real, 12, 22);
	memset(padded, 0, sizeof(padded));
	for (int b0 = 0; b0 < 2; b0++)
		memcpy(padded + b0 * 8, real + b0 * 6, 6 * sizeof(float));
	tx = tens(CPU_FLOAT, 3, dr, real);
	dft_run(&tx, 0, &eight, &a);        /* zero-padded to 8 by dft_length */
	tx = tens(CPU_FLOAT, 3, dp, padded);
	dft_run(&tx, 0, NULL, &b);          /* the radix-2 path */
	expect_f32(&a, b.data, 32, 1e-5);
	free(a.data);
	free(b.data);
}

/* Lengths through each path of signal.c against the DFT's definition
 * summed here in double: 12 = 2^2 3 and 400 = 2^4 5^2 (mixed radix), 7
 * and 134 = 2 x 67 (a factor above FFT_MAX_RADIX: the direct sum), 64
 * (radix 2); forward and inverse. */
static void test_dft_mixed_radix(void **state)
{
	static const int64_t lens[] = {12, 400, 7, 134, 64, 30};
	(void)state;
	for (size_t li = 0; li < sizeof(lens) / sizeof(lens[0]); li++) {
		int64_t n = lens[li], d[3] = {1, n, 2};
		float *x = malloc(sizeof(float) * (size_t)(2 * n));
		cpu_tensor tx = tens(CPU_FLOAT, 3, d, x), f;

		assert_non_null(x);
		fill(x, 2 * n, 40 + (int)li);
		for (int inv = 0; inv < 2; inv++) {
			double maxmag = 0.0, maxerr = 0.0;

			dft_run(&tx, inv, NULL, &f);
			assert_int_equal(cpu_numel(&f), 2 * n);
			for (int64_t k = 0; k < n; k++) {
				double sr = 0.0, si = 0.0;

				for (int64_t j = 0; j < n; j++) {
					double a = (inv ? 2.0 : -2.0) * 3.14159265358979323846 * (double)(j * k % n) /
						   (double)n;
					sr += x[2 * j] * cos(a) - x[2 * j + 1] * sin(a);
					si += x[2 * j] * sin(a) + x[2 * j + 1] * cos(a);
				}
				if (inv)
					sr /= (double)n, si /= (double)n;
				maxmag = fmax(maxmag, fmax(fabs(sr), fabs(si)));
				maxerr = fmax(maxerr, fabs(((float *)f.data)[2 * k] - sr));
				maxerr = fmax(maxerr, fabs(((float *)f.data)[2 * k + 1] - si));
			}
			if (maxerr > 1e-5 * maxmag + 1e-6)
				fail_msg("DFT length %lld inverse %d: max error %g of %g", (long long)n, inv,
					 maxerr, maxmag);
			free(f.data);
		}
		free(x);
	}
}

static void test_windows(void **state)
{
	static const float hann_sym5[5] = {0.0f, 0.5f, 1.0f, 0.5f, 0.0f};
	static const float hann_per4[4] = {0.0f, 0.5f, 1.0f, 0.5f};
	int64_t n5 = 5, n4 = 4, n1 = 1;
	cpu_tensor t5 = tens(CPU_INT64, 0, NULL, &n5), t4 = tens(CPU_INT64, 0, NULL, &n4);
	cpu_tensor t1 = tens(CPU_INT64, 0, NULL, &n1), out;
	const cpu_tensor *in5[1] = {&t5}, *in4[1] = {&t4}, *in1[1] = {&t1};
	tnode t;
	(void)state;
	tn(&t, "HannWindow", 1, 1);
	run_ok(&t, 17, 1, in4, 1, &out);
	expect_f32(&out, hann_per4, 4, 1e-6);
	free(out.data);
	tn_int(&t, "periodic", 0);
	run_ok(&t, 17, 1, in5, 1, &out);
	expect_f32(&out, hann_sym5, 5, 1e-6);
	free(out.data);
	tn(&t, "BlackmanWindow", 1, 1);
	tn_int(&t, "periodic", 0);
	run_ok(&t, 17, 1, in1, 1, &out);       /* size 1: N = 0, the window's value at 0 */
	expect_f32(&out, (const float[]){0.0f}, 1, 1e-6);
	free(out.data);
	tn(&t, "HammingWindow", 1, 1);
	tn_int(&t, "output_datatype", CPU_DOUBLE);
	run_ok(&t, 17, 1, in1, 1, &out);
	assert_int_equal(out.dtype, CPU_DOUBLE);
	assert_float_equal(((double *)out.data)[0], 25.0 / 46.0 - 21.0 / 46.0, 1e-12);
	free(out.data);
}

static void test_signal_errors(void **state)
{
	static const float sig[40], win[8];
	int32_t nb = 8, dl = 16, rate = 8000;
	float lo = 0.0f, hi = 6000.0f;
	int64_t step = 4, fl = 6, ds[3] = {1, 20, 2}, dw[1] = {8};
	cpu_tensor ts = tens(CPU_FLOAT, 3, ds, sig), tst = tens(CPU_INT64, 0, NULL, &step);
	cpu_tensor tw = tens(CPU_FLOAT, 1, dw, win), tf = tens(CPU_INT64, 0, NULL, &fl);
	cpu_tensor m0 = tens(CPU_INT32, 0, NULL, &nb), m1 = tens(CPU_INT32, 0, NULL, &dl);
	cpu_tensor m2 = tens(CPU_INT32, 0, NULL, &rate), m3 = tens(CPU_FLOAT, 0, NULL, &lo);
	cpu_tensor m4 = tens(CPU_FLOAT, 0, NULL, &hi);
	const cpu_tensor *in[4] = {&ts, &tst, &tw, &tf}, *mel[5] = {&m0, &m1, &m2, &m3, &m4};
	tnode t;
	(void)state;
	tn(&t, "STFT", 4, 1);
	expect_error(&t, 17, 4, in, CPU_E_INVALID, "frame_length 6 differs from the window");
	tn(&t, "MelWeightMatrix", 5, 1);
	expect_error(&t, 17, 5, mel, CPU_E_INVALID, "above Nyquist");
	tn(&t, "DFT", 1, 1);
	tn_int(&t, "axis", 2);
	expect_error(&t, 17, 1, in, CPU_E_INVALID, "axis is outside [0, 1]");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_gru_linear_before_reset),
		cmocka_unit_test(test_lstm_clip_input_forget_peepholes),
		cmocka_unit_test(test_lstm_bidirectional_is_forward_plus_reverse),
		cmocka_unit_test(test_rnn_recurrence_on_pool),
		cmocka_unit_test(test_rnn_layout1_is_transposed_layout0),
		cmocka_unit_test(test_rnn_activation_alpha_beta),
		cmocka_unit_test(test_rnn_errors),
		cmocka_unit_test(test_convtranspose_padding_split),
		cmocka_unit_test(test_convtranspose_tiles),
		cmocka_unit_test(test_convtranspose_errors),
		cmocka_unit_test(test_quantize_rounding_saturation),
		cmocka_unit_test(test_quantize_errors),
		cmocka_unit_test(test_dynamic_quantize_all_zero),
		cmocka_unit_test(test_dynamic_quantize_float_scale),
		cmocka_unit_test(test_dynamic_quantize_large),
		cmocka_unit_test(test_matmulinteger_per_row_col_zero_points),
		cmocka_unit_test(test_qlinearconv_per_channel),
		cmocka_unit_test(test_dft_roundtrip_and_padding),
		cmocka_unit_test(test_dft_mixed_radix),
		cmocka_unit_test(test_windows),
		cmocka_unit_test(test_signal_errors),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
