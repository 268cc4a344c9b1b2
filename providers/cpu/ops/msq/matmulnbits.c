/*
 * matmulnbits: com.microsoft MatMulNBits, Y = A x W (+ bias) with W
 * (K x N) block-quantized along K to 2, 4 or 8 bits (nbits.h has the
 * layout and the arithmetic).
 *
 * Attributes K, N, bits (2, 4, 8), block_size (a power of two >= 16),
 * accuracy_level and weight_prepacked (0 only: the others are CUDA
 * layouts, refused by name).  Inputs A (float32; float16 through the
 * provider's widening), B, scales, zero_points (absent: 2^(bits-1);
 * uint8 packed like B, or float unpacked), g_idx (deprecated: accepted
 * when it is the plain k / block_size order, refused otherwise), bias.
 *
 * A constant B is re-laid out once at load through the pre-pack cache,
 * with its scales and zero points folded into floats (node state).  A few
 * rows of A (decoding) go through the per-column dot products, more through
 * the float GEMM fed with W dequantized block by block.
 *
 * accuracy_level 4 lets ONNX Runtime quantize A to int8 per block
 * (scale max|a| / 127, rounding half to even) and it does so on x86 for 4-
 * and 8-bit weights with uint8 or no zero points; the result is then A's
 * quantized values times W, so ortmk quantizes A the same way: for a few
 * rows of 4-bit weights in integers where the CPU has VNNI (nbits_q8.c),
 * otherwise in float (the same products, rounded differently).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "msq.h"
#include "nbits.h"

#define NBITS_GEMV_ROWS 4

typedef struct nb_state {
	int64_t K, N, bs, nb;
	int bits, acc_level;
	nbits_w w;               /* w.q set when B (and its scales) were constant */
	float *scale_zs;         /* owned: w.scale and w.zs */
} nb_state;

static int nb_attrs(const Onnx__NodeProto *p, nb_state *s, char *why, size_t n)
{
	s->K = cpu_attr_int(p, "K", -1);
	s->N = cpu_attr_int(p, "N", -1);
	s->bits = (int)cpu_attr_int(p, "bits", 4);
	s->bs = cpu_attr_int(p, "block_size", -1);
	s->acc_level = (int)cpu_attr_int(p, "accuracy_level", 0);
	if (s->K <= 0 || s->N <= 0 || s->K > INT32_MAX || s->N > INT32_MAX)
		return snprintf(why, n, "attributes 'K' and 'N' are required and positive"), 0;
	if (s->bits != 2 && s->bits != 4 && s->bits != 8)
		return snprintf(why, n, "attribute 'bits' = %d is not supported (2, 4 or 8)",
				s->bits), 0;
	if (s->bs < 16 || s->bs > 65536 || (s->bs & (s->bs - 1)))
		return snprintf(why, n, "attribute 'block_size' must be a power of two >= 16"), 0;
	if (cpu_attr_int(p, "weight_prepacked", 0) != 0)
		return snprintf(why, n, "attribute 'weight_prepacked' (a CUDA layout) is not "
				"supported"), 0;
	s->nb = (s->K + s->bs - 1) / s->bs;
	return 1;
}

static int nb_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt, int n_in,
		       char *why, size_t n)
{
	static const uint32_t mask[6] = {
		CPU_TYPES_F32, CPU_BIT(CPU_UINT8), CPU_TYPES_F32,
		CPU_BIT(CPU_UINT8) | CPU_TYPES_F32, CPU_BIT(CPU_INT32), CPU_TYPES_F32,
	};
	nb_state s;

	(void)opset;
	if (!nb_attrs(p, &s, why, n))
		return 0;
	if (n_in > 6)
		return snprintf(why, n, "at most 6 inputs"), 0;
	for (int i = 0; i < n_in; i++)
		if (!cpu_supports_dtype(dt, n_in, i, mask[i], why, n))
			return 0;
	return 1;
}

/* Scales and zero points as scale and zp * scale per block (N x nb each). */
static int fold_scales(const nb_state *s, const cpu_tensor *sc, const cpu_tensor *zp,
		       float *scale, float *zs, char *err, size_t n)
{
	int64_t cnt = s->N * s->nb, zrow = (s->nb * s->bits + 7) / 8;
	float dflt = (float)(1 << (s->bits - 1));

	if (sc->dtype != CPU_FLOAT || cpu_numel(sc) != cnt)
		return snprintf(err, n, "scales must be float32 with N x k_blocks = %lld values",
				(long long)cnt), CPU_E_INVALID;
	if (zp && zp->dtype == CPU_UINT8 && cpu_numel(zp) != s->N * zrow)
		return snprintf(err, n, "uint8 zero_points must have N x %lld values",
				(long long)zrow), CPU_E_INVALID;
	if (zp && zp->dtype == CPU_FLOAT && cpu_numel(zp) != cnt)
		return snprintf(err, n, "float zero_points must have N x k_blocks values"),
		       CPU_E_INVALID;
	if (zp && zp->dtype != CPU_UINT8 && zp->dtype != CPU_FLOAT)
		return snprintf(err, n, "zero_points must be uint8 or float"), CPU_E_INVALID;
	for (int64_t i = 0; i < cnt; i++) {
		int64_t col = i / s->nb, b = i % s->nb, bit = b * s->bits;
		float z = dflt, v = ((const float *)sc->data)[i];

		if (zp && zp->dtype == CPU_FLOAT)
			z = ((const float *)zp->data)[i];
		else if (zp)
			z = (float)((((const uint8_t *)zp->data)[col * zrow + (bit >> 3)] >>
				    (bit & 7)) & ((1u << s->bits) - 1));
		scale[i] = v;
		zs[i] = z * v;
	}
	return 0;
}

static int check_b(const nb_state *s, const cpu_tensor *B, char *err, size_t n)
{
	int64_t want = s->N * s->nb * (s->bs * s->bits / 8);

	if (B->dtype != CPU_UINT8 || cpu_numel(B) != want)
		return snprintf(err, n, "B must be uint8 with N x k_blocks x blob = %lld bytes",
				(long long)want), CPU_E_INVALID;
	return 0;
}

static int pack_fill(void *dst, size_t size, void *arg)
{
	nb_state *s = arg;
	const uint8_t *src = (const uint8_t *)s->w.q;

	(void)size;
	nbits_relayout(&s->w, src, dst);
	return 0;
}

static int nb_prepare(cpu_node *node, char *err, size_t n)
{
	nb_state *s = calloc(1, sizeof(*s));
	const cpu_tensor *B = cpu_node_const(node, 1), *sc = cpu_node_const(node, 2);
	const cpu_tensor *zp = node->n_in > 3 ? cpu_node_const(node, 3) : NULL;
	int has_zp = node->n_in > 3 && node->proto->input[3][0];
	char fmt[48];
	int rc;

	if (!s)
		return CPU_E_NOMEM;
	node->state = s;
	if (!nb_attrs(node->proto, s, err, n))
		return CPU_E_UNSUPPORTED;
	s->w = (nbits_w){s->K, s->N, s->bs, s->nb, s->bits, NULL, NULL, NULL};
	if (!B || !sc || (has_zp && !zp))
		return 0;
	if ((rc = check_b(s, B, err, n)))
		return rc;
	if (!(s->scale_zs = malloc((size_t)(2 * s->N * s->nb) * sizeof(float))))
		return CPU_E_NOMEM;
	if ((rc = fold_scales(s, sc, zp, s->scale_zs, s->scale_zs + s->N * s->nb, err, n)))
		return rc;
	s->w.scale = s->scale_zs;
	s->w.zs = s->scale_zs + s->N * s->nb;
	snprintf(fmt, sizeof(fmt), "nbits%d-bs%lld-v1", s->bits, (long long)s->bs);
	s->w.q = B->data;        /* the source, for pack_fill */
	s->w.q = cpu_prepack(node, 1, fmt, (size_t)(s->N * nbits_col_bytes(&s->w)), pack_fill, s,
			     err, n);
	return s->w.q ? 0 : CPU_E_NOMEM;
}

static void nb_release(cpu_node *node)
{
	nb_state *s = node->state;

	if (s)
		free(s->scale_zs);
	free(s);
	node->state = NULL;
}

/* The weight of this call: the one packed at load, or packed now. */
static int nb_weight(cpu_ctx *ctx, const nb_state *s, nbits_w *w)
{
	const cpu_tensor *B = cpu_input(ctx, 1), *sc = cpu_input(ctx, 2), *zp = cpu_input(ctx, 3);
	float *f;
	uint8_t *q;
	int rc;

	*w = s->w;
	if (w->q)
		return 0;
	if (!B || !sc)
		return cpu_fail(ctx, CPU_E_INVALID, "inputs B and scales are required");
	if ((rc = check_b(s, B, ctx->err, ctx->errlen)))
		return rc;
	if (!(f = cpu_scratch(ctx, (size_t)(2 * s->N * s->nb) * sizeof(float))) ||
	    !(q = cpu_scratch(ctx, (size_t)(s->N * nbits_col_bytes(w)))))
		return CPU_E_NOMEM;
	if ((rc = fold_scales(s, sc, zp, f, f + s->N * s->nb, ctx->err, ctx->errlen)))
		return rc;
	w->scale = f;
	w->zs = f + s->N * s->nb;
	nbits_relayout(w, B->data, q);
	w->q = q;
	return 0;
}

static int check_gidx(cpu_ctx *ctx, const nb_state *s)
{
	const cpu_tensor *g = cpu_input(ctx, 4);

	if (!g)
		return 0;
	if (g->dtype != CPU_INT32 || cpu_numel(g) != s->K)
		return cpu_fail(ctx, CPU_E_INVALID, "g_idx must be int32 with K values");
	for (int64_t k = 0; k < s->K; k++)
		if (((const int32_t *)g->data)[k] != k / s->bs)
			return cpu_fail(ctx, CPU_E_UNSUPPORTED, "g_idx (deprecated) with an order "
					"other than k / block_size is not supported");
	return 0;
}

/* ONNX Runtime's int8 quantization of A per block (accuracy_level 4):
 * a -> round(a * 127 / max|a|) * (max|a| / 127), in place.  The rounding
 * is rintf's (half to even in the default mode, as nearbyintf), which gcc
 * vectorizes: the scalar loop was a tenth of nbits_decoder's run (16 rows
 * of 128 to 512). */
CPU_MULTIVERSION
static void quantize_a(float *a, int64_t rows, int64_t K, int64_t bs)
{
	for (int64_t r = 0; r < rows; r++)
		for (int64_t k0 = 0; k0 < K; k0 += bs) {
			float *x = a + r * K + k0, scale, inv;
			int64_t len = K - k0 < bs ? K - k0 : bs;

			inv = nbits_q8_factor(x, len, &scale);
			for (int64_t k = 0; k < len; k++)
				x[k] = __builtin_rintf(x[k] * inv) * scale;
		}
}

static int nb_compute(cpu_ctx *ctx)
{
	const nb_state *s = ctx->node->state;
	const cpu_tensor *A, *bias = cpu_input(ctx, 5), *zp = cpu_input(ctx, 3);
	int64_t dims[CPU_MAX_RANK], M;
	const float *a;
	cpu_tensor *Y;
	nbits_w w;
	int rc = 0;

	if (!(A = cpu_require(ctx, 0, &rc)))
		return rc;
	if ((rc = cpu_check_dtype(ctx, A, 0, CPU_TYPES_F32)))
		return rc;
	if (A->rank < 1 || A->dims[A->rank - 1] != s->K)
		return cpu_fail(ctx, CPU_E_INVALID, "A's last dim must be K = %lld", (long long)s->K);
	if (bias && (bias->dtype != CPU_FLOAT || cpu_numel(bias) != s->N))
		return cpu_fail(ctx, CPU_E_INVALID, "bias must be float32 with N = %lld values",
				(long long)s->N);
	if ((rc = check_gidx(ctx, s)) || (rc = nb_weight(ctx, s, &w)))
		return rc;
	memcpy(dims, A->dims, sizeof(int64_t) * (size_t)A->rank);
	dims[A->rank - 1] = s->N;
	if (!(Y = cpu_output(ctx, 0, CPU_FLOAT, A->rank, dims)))
		return CPU_E_NOMEM;
	M = cpu_numel(A) / s->K;
	if (M == 0)
		return 0;
	a = A->data;
	if (s->acc_level == 4 && s->bits != 2 && (!zp || zp->dtype == CPU_UINT8) &&
	    M <= NBITS_GEMV_ROWS && nbits_q8_available(&w))
		return nbits_gemv_q8(ctx, &w, a, s->K, M, bias ? bias->data : NULL, Y->data, s->N);
	if (s->acc_level == 4 && s->bits != 2 && (!zp || zp->dtype == CPU_UINT8)) {
		float *aq = cpu_scratch(ctx, (size_t)(M * s->K) * sizeof(float));
		if (!aq)
			return CPU_E_NOMEM;
		memcpy(aq, a, (size_t)(M * s->K) * sizeof(float));
		quantize_a(aq, M, s->K, s->bs);
		a = aq;
	}
	if (M <= NBITS_GEMV_ROWS)
		return nbits_gemv(ctx, &w, a, s->K, M, bias ? bias->data : NULL, Y->data, s->N);
	if (nbits_gemm(ctx, &w, a, M, bias ? bias->data : NULL, Y->data))
		return cpu_fail(ctx, CPU_E_INTERNAL, "MatMulNBits: the float GEMM failed");
	return 0;
}

const cpu_op cpu_op_msq_matmulnbits = {
	"MatMulNBits", "com.microsoft", 1, CPU_OPSET_MAX, nb_supports, nb_prepare, nb_compute,
	nb_release,
};
