/*
 * Unit tests for the CPU provider's math family (providers/cpu/ops/math):
 * the semantics the ONNX conformance data does not pin down (integer Mod's
 * sign rule, uint64 values, round half to even, Einsum's implicit output,
 * ellipsis broadcasting and diagonals, legacy PRelu, GroupNormalization by
 * opset) and the error paths (bad attributes, shapes, indices, dtypes).
 * Kernels run through cpu_node_init/cpu_node_run with NodeProtos built here;
 * expected values are stated inline.
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

static const int64_t D1[1] = {1}, D2[1] = {2}, D4[1] = {4}, D6[1] = {6};

static void test_mod(void **state)
{
	static const int32_t a[4] = {-7, 7, -7, 7}, b[4] = {3, -3, -3, 3}, z[4] = {1, 0, 1, 1};
	static const uint64_t ua[2] = {UINT64_MAX, 10}, ub[2] = {UINT64_MAX - 1, 4};
	static const double py[4] = {2, -2, -1, 1}, c[4] = {-1, 1, -1, 1}, u[2] = {1, 2};
	cpu_tensor ta = tens(CPU_INT32, 1, D4, a), tb = tens(CPU_INT32, 1, D4, b);
	const cpu_tensor *in[2] = {&ta, &tb};
	tnode t;
	(void)state;
	tn(&t, "Mod", 2, 1);   /* default: the divisor's sign, like Python */
	expect(&t, 13, 2, in, CPU_INT32, 1, D4, py, 0);
	tn(&t, "Mod", 2, 1);
	tn_int(&t, "fmod", 1);   /* C's fmod: the dividend's sign */
	expect(&t, 13, 2, in, CPU_INT32, 1, D4, c, 0);
	tb = tens(CPU_INT32, 1, D4, z);
	expect_error(&t, 13, 2, in, CPU_E_INVALID, "modulo by zero");
	tn(&t, "Mod", 2, 1);
	tn_int(&t, "fmod", 2);
	expect_error(&t, 13, 2, in, CPU_E_INVALID, "fmod must be 0 or 1");
	ta = tens(CPU_UINT64, 1, D2, ua);   /* uint64 stays unsigned */
	tb = tens(CPU_UINT64, 1, D2, ub);
	tn(&t, "Mod", 2, 1);
	expect(&t, 13, 2, in, CPU_UINT64, 1, D2, u, 0);
	tb = tens(CPU_INT64, 1, D2, ub);
	expect_error(&t, 13, 2, in, CPU_E_INVALID, "operands are uint64 and int64");
}

static void test_bits(void **state)
{
	static const uint8_t a[4] = {1, 0x80, 0xff, 3}, s[4] = {7, 1, 8, 200};
	static const double shl[4] = {128, 0, 0, 0}, shr[4] = {0, 64, 0, 0};
	static const int16_t x[2] = {0x0f0f, -1}, y[2] = {0x00ff, 0x7000};
	static const double band[2] = {0x000f, 0x7000}, bnot[2] = {-0x0f10, 0};
	static const uint8_t p[4] = {1, 1, 0, 0}, q[2] = {1, 0};
	static const int64_t d22[2] = {2, 2};
	static const double xr[4] = {0, 1, 1, 0};
	cpu_tensor ta = tens(CPU_UINT8, 1, D4, a), tb = tens(CPU_UINT8, 1, D4, s);
	const cpu_tensor *in[2] = {&ta, &tb};
	tnode t;
	(void)state;
	tn(&t, "BitShift", 2, 1);   /* shifting by the width or more gives 0 */
	tn_str(&t, "direction", "LEFT");
	expect(&t, 11, 2, in, CPU_UINT8, 1, D4, shl, 0);
	tn(&t, "BitShift", 2, 1);
	tn_str(&t, "direction", "RIGHT");
	expect(&t, 11, 2, in, CPU_UINT8, 1, D4, shr, 0);
	tn(&t, "BitShift", 2, 1);
	tn_str(&t, "direction", "UP");
	expect_error(&t, 11, 2, in, CPU_E_INVALID, "direction 'UP'");
	ta = tens(CPU_INT16, 1, D2, x);
	tb = tens(CPU_INT16, 1, D2, y);
	tn(&t, "BitwiseAnd", 2, 1);
	expect(&t, 18, 2, in, CPU_INT16, 1, D2, band, 0);
	tn(&t, "BitwiseNot", 1, 1);
	expect(&t, 18, 1, in, CPU_INT16, 1, D2, bnot, 0);
	tn(&t, "BitShift", 2, 1);   /* signed integers are not BitShift's */
	tn_str(&t, "direction", "LEFT");
	expect_error(&t, 11, 2, in, CPU_E_UNSUPPORTED, "input 0 dtype int16");
	ta = tens(CPU_BOOL, 2, d22, p);   /* [2,2] xor [2] broadcasts */
	tb = tens(CPU_BOOL, 1, D2, q);
	tn(&t, "Xor", 2, 1);
	expect(&t, 7, 2, in, CPU_BOOL, 2, d22, xr, 0);
}

static void test_unary(void **state)
{
	static const float x[6] = {0.5f, 1.5f, 2.5f, -0.5f, -1.5f, -2.5f};
	static const double rnd[6] = {0, 2, 2, -0.0, -2, -2};
	static const int64_t s[4] = {-5, 0, 7, INT64_MIN};
	static const uint64_t us[2] = {0, UINT64_MAX};
	static const double sg[4] = {-1, 0, 1, -1}, usg[2] = {0, 1};
	static const float m[2] = {1.0f, -2.0f};
	static const double mish[2] = {0.8650983882673103, -0.2525014826957089},
			    selu[2] = {1.0507009873554805, -1.5201664733475926},
			    hsw[2] = {0.6666667, -0.3333333};
	cpu_tensor tx = tens(CPU_FLOAT, 1, D6, x);
	const cpu_tensor *in[1] = {&tx};
	tnode t;
	(void)state;
	tn(&t, "Round", 1, 1);   /* half to even */
	expect(&t, 11, 1, in, CPU_FLOAT, 1, D6, rnd, 0);
	tx = tens(CPU_INT64, 1, D4, s);
	tn(&t, "Sign", 1, 1);
	expect(&t, 13, 1, in, CPU_INT64, 1, D4, sg, 0);
	tx = tens(CPU_UINT64, 1, D2, us);
	expect(&t, 13, 1, in, CPU_UINT64, 1, D2, usg, 0);
	tn(&t, "Cos", 1, 1);   /* trig is for floats only */
	expect_error(&t, 7, 1, in, CPU_E_UNSUPPORTED, "input 0 dtype uint64");
	tx = tens(CPU_FLOAT, 1, D2, m);
	tn(&t, "Mish", 1, 1);
	expect(&t, 18, 1, in, CPU_FLOAT, 1, D2, mish, 1e-6);
	tn(&t, "Selu", 1, 1);
	expect(&t, 6, 1, in, CPU_FLOAT, 1, D2, selu, 1e-6);
	tn(&t, "HardSwish", 1, 1);
	expect(&t, 14, 1, in, CPU_FLOAT, 1, D2, hsw, 1e-6);
	tn(&t, "Celu", 1, 1);
	tn_float(&t, "alpha", 0.0f);
	expect_error(&t, 12, 1, in, CPU_E_INVALID, "alpha must not be 0");
}

static void test_einsum(void **state)
{
	static const double a[6] = {1, 2, 3, 4, 5, 6}, b[6] = {1, 0, 0, 1, 1, 1};
	static const double mm[4] = {4, 5, 10, 11};   /* [2,3] x [3,2] */
	static const double sq[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9}, diag[3] = {1, 5, 9}, tr[1] = {15};
	static const int64_t d23[2] = {2, 3}, d32[2] = {3, 2}, d22[2] = {2, 2}, d33[2] = {3, 3};
	static const int64_t d3[1] = {3};
	cpu_tensor ta = tens(CPU_DOUBLE, 2, d23, a), tb = tens(CPU_DOUBLE, 2, d32, b);
	const cpu_tensor *in[2] = {&ta, &tb};
	tnode t;
	(void)state;
	tn(&t, "Einsum", 2, 1);   /* implicit output: the labels seen once, sorted */
	tn_str(&t, "equation", "ij,jk");
	expect(&t, 12, 2, in, CPU_DOUBLE, 2, d22, mm, 0);
	tn(&t, "Einsum", 2, 1);
	tn_str(&t, "equation", "ij , jk -> ik");
	expect(&t, 12, 2, in, CPU_DOUBLE, 2, d22, mm, 0);
	ta = tens(CPU_DOUBLE, 2, d33, sq);
	tn(&t, "Einsum", 1, 1);   /* a repeated label walks the diagonal */
	tn_str(&t, "equation", "ii->i");
	expect(&t, 12, 1, in, CPU_DOUBLE, 1, d3, diag, 0);
	tn(&t, "Einsum", 1, 1);
	tn_str(&t, "equation", "ii");
	expect(&t, 12, 1, in, CPU_DOUBLE, 0, NULL, tr, 0);
	tn(&t, "Einsum", 1, 1);
	tn_str(&t, "equation", "ij->ik");
	expect_error(&t, 12, 1, in, CPU_E_INVALID, "not in the inputs");
	tn(&t, "Einsum", 1, 1);
	tn_str(&t, "equation", "ijk->i");
	expect_error(&t, 12, 1, in, CPU_E_INVALID, "does not fit input rank 2");
	tn(&t, "Einsum", 1, 1);
	tn_str(&t, "equation", "i,j->ij");
	expect_error(&t, 12, 1, in, CPU_E_INVALID, "does not match 1 inputs");
	tn(&t, "Einsum", 1, 1);
	tn_str(&t, "equation", "i.j");
	expect_error(&t, 12, 1, in, CPU_E_INVALID, "does not match");
}

static void test_einsum_ellipsis(void **state)
{
	/* A [2,1,2,2] and B [3,2,1]: batch dims [2,1] and [3] broadcast to [2,3] */
	static const float a[8] = {1, 0, 0, 1, 2, 0, 0, 2}, b[6] = {1, 2, 3, 4, 5, 6};
	static const int64_t da[4] = {2, 1, 2, 2}, db[3] = {3, 2, 1}, dy[4] = {2, 3, 2, 1};
	static const double y[12] = {1, 2, 3, 4, 5, 6, 2, 4, 6, 8, 10, 12};
	static const int32_t ia[3] = {1, 2, 3};
	static const int64_t d3[1] = {3};
	static const double dot[1] = {14};
	cpu_tensor ta = tens(CPU_FLOAT, 4, da, a), tb = tens(CPU_FLOAT, 3, db, b);
	const cpu_tensor *in[2] = {&ta, &tb};
	tnode t;
	(void)state;
	tn(&t, "Einsum", 2, 1);
	tn_str(&t, "equation", "...ij,...jk->...ik");
	expect(&t, 12, 2, in, CPU_FLOAT, 4, dy, y, 0);
	ta = tens(CPU_INT32, 1, d3, ia);   /* integers, inner product */
	tb = tens(CPU_INT32, 1, d3, ia);
	tn(&t, "Einsum", 2, 1);
	tn_str(&t, "equation", "i,i");
	expect(&t, 12, 2, in, CPU_INT32, 0, NULL, dot, 0);
}

static void test_argmax(void **state)
{
	static const float x[6] = {1, 3, 3, NAN, 0, 2};
	static const uint64_t u[3] = {1, UINT64_MAX, 5};
	static const double first[2] = {1, 0}, last[2] = {2, 0}, um[1] = {1};
	static const double hm[6] = {0, 1, 0, 1, 0, 0};
	static const int64_t d23[2] = {2, 3}, d21[2] = {2, 1}, d3[1] = {3};
	cpu_tensor tx = tens(CPU_FLOAT, 2, d23, x);
	const cpu_tensor *in[1] = {&tx};
	tnode t;
	(void)state;
	tn(&t, "ArgMax", 1, 1);   /* ties: the first; a NaN wins */
	tn_int(&t, "axis", 1);
	expect(&t, 13, 1, in, CPU_INT64, 2, d21, first, 0);
	tn(&t, "ArgMax", 1, 1);
	tn_int(&t, "axis", -1);
	tn_int(&t, "select_last_index", 1);
	expect(&t, 13, 1, in, CPU_INT64, 2, d21, last, 0);
	tn(&t, "ArgMax", 1, 1);
	tn_int(&t, "axis", 2);
	expect_error(&t, 13, 1, in, CPU_E_INVALID, "axis 2 out of range");
	tn(&t, "Hardmax", 1, 1);   /* opset 11: over the 2-D coercion at axis 1 */
	expect(&t, 11, 1, in, CPU_FLOAT, 2, d23, hm, 0);
	tx = tens(CPU_UINT64, 1, d3, u);
	tn(&t, "ArgMax", 1, 1);
	tn_int(&t, "keepdims", 0);
	expect(&t, 13, 1, in, CPU_INT64, 0, NULL, um, 0);
}

static void test_reduce(void **state)
{
	static const float x[6] = {1000, 1000, 1, -2, 3, -4};
	static const int64_t d23[2] = {2, 3}, d2[1] = {2}, ax1[1] = {1}, dup[2] = {1, -1};
	const double lse[2] = {1000 + log(2.0), 3.0 + log(1 + exp(-5.0) + exp(-7.0))};
	static const double l1[2] = {2001, 9}, prod[3] = {-2000, 3000, -4};
	static const double x6[6] = {1000, 1000, 1, -2, 3, -4};
	static const int32_t xi[6] = {1, 2, 3, -4, 5, 6};
	static const double pi[1] = {-720};
	static const int64_t d13[2] = {1, 3}, none[1] = {0};
	cpu_tensor tx = tens(CPU_FLOAT, 2, d23, x), ta = tens(CPU_INT64, 1, D1, ax1);
	const cpu_tensor *in[2] = {&tx, &ta};
	tnode t;
	(void)state;
	tn(&t, "ReduceLogSumExp", 2, 1);   /* opset 18: axes from input 1 */
	tn_int(&t, "keepdims", 0);
	expect(&t, 18, 2, in, CPU_FLOAT, 1, d2, lse, 1e-6);
	tn(&t, "ReduceL1", 1, 1);
	tn_ints(&t, "axes", ax1, 1);
	tn_int(&t, "keepdims", 0);
	expect(&t, 13, 1, in, CPU_FLOAT, 1, d2, l1, 1e-6);
	tn(&t, "ReduceProd", 1, 1);
	tn_ints(&t, "axes", none, 1);
	expect(&t, 13, 1, in, CPU_FLOAT, 2, d13, prod, 1e-6);
	ta = tens(CPU_INT64, 1, none, NULL);   /* empty axes + noop: the input */
	tn(&t, "ReduceSumSquare", 2, 1);
	tn_int(&t, "noop_with_empty_axes", 1);
	expect(&t, 18, 2, in, CPU_FLOAT, 2, d23, x6, 0);
	tx = tens(CPU_INT32, 2, d23, xi);
	tn(&t, "ReduceProd", 1, 1);
	tn_int(&t, "keepdims", 0);
	expect(&t, 13, 1, in, CPU_INT32, 0, NULL, pi, 0);
	tn(&t, "ReduceL2", 1, 1);
	tn_ints(&t, "axes", dup, 2);
	expect_error(&t, 13, 1, in, CPU_E_INVALID, "repeated");
}

static void test_loss(void **state)
{
	/* N=2, C=3: log-probabilities as given */
	static const float x[6] = {-1, -2, -3, -0.5f, -1.5f, -2.5f}, w[3] = {1, 2, 3};
	static const int64_t tg[4] = {2, 1, 0, 0}, bad[2] = {3, 0}, ii[2] = {2, -100};
	static const int64_t d23[2] = {2, 3}, d3[1] = {3};
	static const double none[2] = {9, 3}, mean[1] = {12.0 / 5.0}, iim[1] = {3};
	cpu_tensor tx = tens(CPU_FLOAT, 2, d23, x), tt = tens(CPU_INT64, 1, D2, tg);
	cpu_tensor tw = tens(CPU_FLOAT, 1, d3, w);
	const cpu_tensor *in[3] = {&tx, &tt, &tw};
	tnode t;
	(void)state;
	tn(&t, "NegativeLogLikelihoodLoss", 3, 1);
	tn_str(&t, "reduction", "none");
	expect(&t, 13, 3, in, CPU_FLOAT, 1, D2, none, 1e-6);
	tn(&t, "NegativeLogLikelihoodLoss", 3, 1);   /* weighted mean: / (3 + 2) */
	expect(&t, 13, 3, in, CPU_FLOAT, 0, NULL, mean, 1e-6);
	tt = tens(CPU_INT64, 1, D2, ii);   /* ignored samples weigh 0 */
	tn(&t, "NegativeLogLikelihoodLoss", 2, 1);
	tn_int(&t, "ignore_index", -100);
	expect(&t, 13, 2, in, CPU_FLOAT, 0, NULL, iim, 1e-6);
	tt = tens(CPU_INT64, 1, D2, bad);
	tn(&t, "NegativeLogLikelihoodLoss", 2, 1);
	expect_error(&t, 13, 2, in, CPU_E_INVALID, "target 3 out of range [0, 3)");
	tn(&t, "SoftmaxCrossEntropyLoss", 2, 2);
	tn_str(&t, "reduction", "avg");
	expect_error(&t, 13, 2, in, CPU_E_INVALID, "unknown reduction 'avg'");
	tt = tens(CPU_INT64, 1, D4, tg);
	tn(&t, "SoftmaxCrossEntropyLoss", 2, 2);
	expect_error(&t, 13, 2, in, CPU_E_INVALID, "target must be (N, d1..dk)");
}

static void test_cumsum_det(void **state)
{
	static const int32_t x[4] = {1, 2, 3, 4};
	static const double ex_rev[4] = {9, 7, 4, 0};
	static const float m[2 * 9] = {2, 0, 0, 0, 3, 0, 0, 0, 4, 1, 2, 3, 2, 4, 6, 0, 1, 1};
	static const int64_t ax0[1] = {0}, ax2[1] = {2}, dm[3] = {2, 3, 3};
	static const double det[2] = {24, 0};
	cpu_tensor tx = tens(CPU_INT32, 1, D4, x), ta = tens(CPU_INT64, 0, NULL, ax0);
	const cpu_tensor *in[2] = {&tx, &ta};
	tnode t;
	(void)state;
	tn(&t, "CumSum", 2, 1);
	tn_int(&t, "exclusive", 1);
	tn_int(&t, "reverse", 1);
	expect(&t, 14, 2, in, CPU_INT32, 1, D4, ex_rev, 0);
	ta = tens(CPU_INT64, 0, NULL, ax2);
	expect_error(&t, 14, 2, in, CPU_E_INVALID, "axis 2 out of range for rank 1");
	tx = tens(CPU_FLOAT, 3, dm, m);   /* a diagonal and a singular matrix */
	tn(&t, "Det", 1, 1);
	expect(&t, 11, 1, in, CPU_FLOAT, 1, D2, det, 1e-6);
	tx = tens(CPU_FLOAT, 1, D4, m);
	expect_error(&t, 11, 1, in, CPU_E_INVALID, "[*, M, M]");
}

static void test_prelu_sum(void **state)
{
	static const float x[8] = {-1, 1, -2, 2, -3, 3, -4, 4}, s2[3] = {0.5f, 0.25f, 1};
	static const double s2d[2] = {0.5, 0.25};
	static const int64_t d222[3] = {2, 2, 2}, d3[1] = {3};
	static const double per_ch[8] = {-0.5, 1, -0.5, 2, -1.5, 3, -1, 4};
	static const double last[8] = {-0.5, 1, -1, 2, -1.5, 3, -2, 4};
	static const double sum[8] = {0, 1.5, -1, 2.5, -2, 3.5, -3, 4.5};
	cpu_tensor tx = tens(CPU_FLOAT, 3, d222, x), ts = tens(CPU_FLOAT, 1, D2, s2);
	const cpu_tensor *in[3] = {&tx, &ts, &ts};
	tnode t;
	(void)state;
	tn(&t, "PRelu", 2, 1);   /* opset 6: one slope per channel (axis 1) */
	expect(&t, 6, 2, in, CPU_FLOAT, 3, d222, per_ch, 0);
	expect(&t, 16, 2, in, CPU_FLOAT, 3, d222, last, 0);   /* numpy broadcasting */
	ts = tens(CPU_FLOAT, 1, d3, s2);
	expect_error(&t, 16, 2, in, CPU_E_INVALID, "does not broadcast onto X");
	ts = tens(CPU_FLOAT, 1, D2, s2);
	tn(&t, "Sum", 3, 1);
	expect(&t, 13, 3, in, CPU_FLOAT, 3, d222, sum, 0);
	ts = tens(CPU_DOUBLE, 1, D2, s2d);
	tn(&t, "Mean", 2, 1);
	expect_error(&t, 13, 2, in, CPU_E_INVALID, "input 1 is float64, input 0 float32");
}

static void test_norms(void **state)
{
	/* N=1, C=4, 2 values per channel; 2 groups */
	static const float x[8] = {0, 2, 4, 6, 1, 1, 1, 3}, s2[2] = {1, 2}, b2[2] = {0, 1};
	static const float s4[4] = {1, 1, 2, 2}, b4[4] = {0, 0, 1, 1};
	static const int64_t dx[3] = {1, 4, 2};
	const double k = 1.0 / sqrt(5.0 + 1e-5), q = 1.0 / sqrt(0.75 + 1e-5);
	const double g18[8] = {-3 * k, -k, k, 3 * k, 1 - q, 1 - q, 1 - q, 1 + 3 * q};
	static const float v[4] = {3, 4, 0, 0};
	static const int64_t d22[2] = {2, 2};
	static const double l1[4] = {3.0 / 7, 4.0 / 7, NAN, NAN};
	cpu_tensor tx = tens(CPU_FLOAT, 3, dx, x), ts = tens(CPU_FLOAT, 1, D2, s2);
	cpu_tensor tb = tens(CPU_FLOAT, 1, D2, b2);
	const cpu_tensor *in[3] = {&tx, &ts, &tb};
	tnode t;
	(void)state;
	tn(&t, "GroupNormalization", 3, 1);   /* opset 18: scale/bias per group */
	tn_int(&t, "num_groups", 2);
	expect(&t, 18, 3, in, CPU_FLOAT, 3, dx, g18, 1e-5);
	ts = tens(CPU_FLOAT, 1, D4, s4);   /* opset 21: per channel, same here */
	tb = tens(CPU_FLOAT, 1, D4, b4);
	expect(&t, 21, 3, in, CPU_FLOAT, 3, dx, g18, 1e-5);
	expect_error(&t, 18, 3, in, CPU_E_INVALID, "input 1 must have shape [2]");
	tn(&t, "GroupNormalization", 3, 1);
	tn_int(&t, "num_groups", 3);
	expect_error(&t, 21, 3, in, CPU_E_INVALID, "num_groups 3 does not divide 4");
	tx = tens(CPU_FLOAT, 2, d22, v);
	tn(&t, "LpNormalization", 1, 1);
	tn_int(&t, "p", 1);
	expect(&t, 1, 1, in, CPU_FLOAT, 2, d22, l1, 1e-6);
	tn(&t, "LpNormalization", 1, 1);
	tn_int(&t, "p", 3);
	expect_error(&t, 1, 1, in, CPU_E_INVALID, "p must be 1 or 2");
	tn(&t, "MeanVarianceNormalization", 1, 1);   /* default axes need rank 4 */
	expect_error(&t, 13, 1, in, CPU_E_INVALID, "axis 2 out of range");
}

static void test_optimizers(void **state)
{
	static const float r[1] = {0.1f}, x[2] = {1, 2}, g[2] = {-1, 1}, v[2] = {0.5f, 0};
	static const int64_t t0[1] = {0};
	static const double xn[2] = {1.1, 1.9};   /* T = 0: beta adjusted to 1 */
	cpu_tensor tr = tens(CPU_FLOAT, 0, NULL, r), tt = tens(CPU_INT64, 0, NULL, t0);
	cpu_tensor tx = tens(CPU_FLOAT, 1, D2, x), tg = tens(CPU_FLOAT, 1, D2, g);
	cpu_tensor tv = tens(CPU_FLOAT, 1, D2, v);
	const cpu_tensor *in[5] = {&tr, &tt, &tx, &tg, &tv};
	static const float vz[2] = {0, 0};
	tnode t;
	(void)state;
	tv = tens(CPU_FLOAT, 1, D2, vz);
	tn(&t, "Momentum", 5, 2);
	t.p.domain = "ai.onnx.preview.training";
	tn_float(&t, "alpha", 0.9f);
	tn_float(&t, "beta", 0.5f);
	tn_float(&t, "norm_coefficient", 0.0f);
	tn_str(&t, "mode", "standard");
	expect(&t, 1, 5, in, CPU_FLOAT, 1, D2, xn, 1e-6);
	tn(&t, "Momentum", 5, 2);
	t.p.domain = "ai.onnx.preview.training";
	tn_float(&t, "alpha", 0.9f);
	expect_error(&t, 1, 5, in, CPU_E_INVALID, "Momentum needs alpha, beta, mode");
	tn(&t, "Adagrad", 4, 2);
	t.p.domain = "ai.onnx.preview.training";
	expect_error(&t, 1, 4, in, CPU_E_INVALID, "4 inputs: expected R, T and 3 per tensor");
	tx = tens(CPU_FLOAT, 1, D1, x);
	tn(&t, "Adagrad", 5, 2);
	t.p.domain = "ai.onnx.preview.training";
	expect_error(&t, 1, 5, in, CPU_E_INVALID, "input 3 differs from its X");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_mod),
		cmocka_unit_test(test_bits),
		cmocka_unit_test(test_unary),
		cmocka_unit_test(test_einsum),
		cmocka_unit_test(test_einsum_ellipsis),
		cmocka_unit_test(test_argmax),
		cmocka_unit_test(test_reduce),
		cmocka_unit_test(test_loss),
		cmocka_unit_test(test_cumsum_det),
		cmocka_unit_test(test_prelu_sum),
		cmocka_unit_test(test_norms),
		cmocka_unit_test(test_optimizers),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
