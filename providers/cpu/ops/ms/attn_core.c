/*
 * attn_core: the scaled dot-product attention under com.microsoft
 * Attention, MultiHeadAttention and GroupQueryAttention (ms_ops.h).
 *
 * The operands are read where they lie through strided views (ms_view):
 * Q, K and V straight out of a packed QKV projection [B, S, 3, N, H], out
 * of [B, N, S, H] caches or [B, S, N, H] inputs, without transposing
 * them.  Per (batch, head) the scores S x T = scale Q K^T (+ the additive
 * mask and bias, which fill the scores first and enter the GEMM as its
 * C with beta 1) are one item of a GEMM batch, Softmax runs over the rows
 * (cpu_softmax_rows: ONNX Runtime's MLAS bits), and P V is a second batch
 * whose results land at their place in the [B, S, N, Hv] output (ldc).
 * Both batches are one job each on the pool.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gemm.h"
#include "ms_ops.h"
#include "vmath.h"

typedef struct attn_ptrs {
	const float **a, **b;
	float **c;
} attn_ptrs;

/* One batch of BN products; a per-item loop when the batch GEMM refuses
 * a shape. */
static int run_batch(cpu_ctx *ctx, int transB, int64_t count, int64_t M, int64_t N, int64_t K,
		     int64_t lda, int64_t ldb, int64_t ldc, float alpha, float beta,
		     const attn_ptrs *p)
{
	gemm_epilogue ep = GEMM_EPILOGUE_INIT;
	gemm_batch b = {count, p->a, p->b, NULL, p->c, NULL};

	ep.alpha = alpha;
	ep.beta = beta;
	if (M > 0 && N > 0 && K > 0 && count > 1 &&
	    gemm_sgemm_batch(ctx->pool, GEMM_ISA_AUTO, 0, transB, M, N, K, lda, ldb, &ep, ldc,
			     &b) == 0)
		return 0;
	for (int64_t i = 0; i < count; i++) {
		if (K == 0) {
			for (int64_t r = 0; r < M; r++)
				for (int64_t c = 0; c < N; c++)
					p->c[i][r * ldc + c] *= beta;
			continue;
		}
		cpu_sgemm_pool(ctx->pool, 0, transB, M, N, K, alpha, p->a[i], lda, p->b[i], ldb, beta,
			       p->c[i], ldc);
	}
	return 0;
}

/* Softmax of rows with one extra logit `sink` (smooth_softmax: 0). */
static void softmax_sink_rows(float *x, int64_t rows, int64_t n, float sink)
{
	for (int64_t r = 0; r < rows; r++) {
		float *y = x + r * n, m = sink, sum;

		for (int64_t i = 0; i < n; i++)
			m = y[i] > m ? y[i] : m;
		sum = vm_exp_mlas(sink - m);
		for (int64_t i = 0; i < n; i++)
			sum += (y[i] = vm_exp_mlas(y[i] - m));
		for (int64_t i = 0; i < n; i++)
			y[i] /= sum;
	}
}

/* scores[i] += mask[b] + bias[b, n] for every (b, n) = i. */
static void add_mask_bias(const ms_attn *a, float *scores)
{
	int64_t st = a->S * a->T;

	for (int64_t b = 0; b < a->B; b++)
		for (int64_t n = 0; n < a->N; n++) {
			float *sc = scores + (b * a->N + n) * st;
			const float *m = a->mask ? a->mask + b * st : NULL;
			const float *bi = a->bias ? a->bias + b * a->bias_bs + n * a->bias_hs : NULL;

			for (int64_t i = 0; i < st; i++)
				sc[i] += (m ? m[i] : 0.0f) + (bi ? bi[i] : 0.0f);
		}
}

int ms_attn_run(cpu_ctx *ctx, const ms_attn *a)
{
	int64_t BN = a->B * a->N, st = a->S * a->T, g = a->kv_group > 0 ? a->kv_group : 1;
	int prefill = (a->mask || a->bias) && a->softcap == 0.0f;
	float *scores;
	attn_ptrs p;

	if (BN == 0 || a->S == 0)
		return 0;
	scores = cpu_scratch(ctx, (size_t)(BN * st) * sizeof(float) + 1);
	p.a = cpu_scratch(ctx, sizeof(*p.a) * (size_t)BN);
	p.b = cpu_scratch(ctx, sizeof(*p.b) * (size_t)BN);
	p.c = cpu_scratch(ctx, sizeof(*p.c) * (size_t)BN);
	if (!scores || !p.a || !p.b || !p.c)
		return CPU_E_NOMEM;
	if (prefill) {
		memset(scores, 0, (size_t)(BN * st) * sizeof(float));
		add_mask_bias(a, scores);
	}
	for (int64_t b = 0; b < a->B; b++)
		for (int64_t n = 0; n < a->N; n++) {
			int64_t i = b * a->N + n;

			p.a[i] = a->q.base + b * a->q.bs + n * a->q.hs;
			p.b[i] = a->k.base + b * a->k.bs + (n / g) * a->k.hs;
			p.c[i] = scores + i * st;
		}
	run_batch(ctx, 1, BN, a->S, a->T, a->hq, a->q.ld, a->k.ld, a->T, a->scale,
		  prefill ? 1.0f : 0.0f, &p);
	if (a->softcap != 0.0f) {
		for (int64_t i = 0; i < BN * st; i++)
			scores[i] = a->softcap * tanhf(scores[i] / a->softcap);
		if (a->mask || a->bias)
			add_mask_bias(a, scores);
	}
	if (a->qk)
		memcpy(a->qk, scores, (size_t)(BN * st) * sizeof(float));
	if (a->T > 0 && (a->smooth || a->sink)) {
		for (int64_t i = 0; i < BN; i++)
			softmax_sink_rows(scores + i * st, a->S, a->T,
					  a->sink ? a->sink[i % a->N] : 0.0f);
	} else if (a->T > 0) {
		cpu_softmax_rows(ctx, scores, BN * a->S, a->T);
	}
	for (int64_t b = 0; b < a->B; b++)
		for (int64_t n = 0; n < a->N; n++) {
			int64_t i = b * a->N + n;

			p.a[i] = scores + i * st;
			p.b[i] = a->v.base + b * a->v.bs + (n / g) * a->v.hs;
			p.c[i] = a->out + b * a->out_bs + n * a->hv;
		}
	return run_batch(ctx, 0, BN, a->S, a->hv, a->T, a->T, a->v.ld, a->out_ld, 1.0f, 0.0f, &p);
}

/* Row (b, s) of the key mask: 1 keeps key t, 0 masks it. */
static int key_kept(const cpu_tensor *M, int64_t B, int64_t S, int64_t T, int64_t b,
		    int64_t s, int64_t t)
{
	const int32_t *m = M->data;

	if (M->rank == 1 && M->dims[0] == B)
		return t < m[b];
	if (M->rank == 1)   /* 2B: end positions, then start positions */
		return t < m[b] && t >= m[B + b];
	if (M->rank == 2)
		return m[b * T + t] > 0;
	return m[(b * S + s) * T + t] > 0;
}

int ms_attn_mask(cpu_ctx *ctx, const cpu_tensor *M, int idx, int64_t B, int64_t S, int64_t T,
		 int64_t past, int causal, float filter, float **out)
{
	float *m;
	int rc;

	*out = NULL;
	if (M && (rc = cpu_check_dtype(ctx, M, idx, CPU_BIT(CPU_INT32))))
		return rc;
	/* [B, 1] or [1, 1]: the same value for every key masks nothing */
	if (M && M->rank == 2 && M->dims[1] == 1 && T != 1 && (M->dims[0] == B || M->dims[0] == 1))
		M = NULL;
	if (M && M->rank == 4)
		return cpu_fail(ctx, CPU_E_UNSUPPORTED, "%s: the 4-D mask [B,1,M,M] is not supported "
				"(nor by ONNX Runtime's CPU provider)", ctx->node->proto->op_type);
	if (M && !((M->rank == 1 && (M->dims[0] == B || M->dims[0] == 2 * B)) ||
		   (M->rank == 2 && M->dims[0] == B && M->dims[1] == T) ||
		   (M->rank == 3 && M->dims[0] == B && M->dims[1] == S && M->dims[2] == T)))
		return cpu_fail(ctx, CPU_E_UNSUPPORTED, "%s: mask of rank %d is not one of "
				"[B], [2B], [B,T], [B,S,T] (B=%lld S=%lld T=%lld; the [3B+2] "
				"mask is not supported)",
				ctx->node->proto->op_type, M->rank, (long long)B, (long long)S,
				(long long)T);
	if ((!M && !causal) || B * S * T == 0)
		return 0;
	if (!(m = cpu_scratch(ctx, (size_t)(B * S * T) * sizeof(float))))
		return CPU_E_NOMEM;
	for (int64_t b = 0; b < B; b++)
		for (int64_t s = 0; s < S; s++)
			for (int64_t t = 0; t < T; t++) {
				float v = M && !key_kept(M, B, S, T, b, s, t) ? filter : 0.0f;

				if (causal && t > past + s)
					v += filter;
				m[(b * S + s) * T + t] = v;
			}
	*out = m;
	return 0;
}

int ms_attn_bias(cpu_ctx *ctx, int idx, ms_attn *a)
{
	const cpu_tensor *t = cpu_input(ctx, idx);
	int rc;

	a->bias = NULL;
	if (!t)
		return 0;
	if ((rc = cpu_check_dtype(ctx, t, idx, CPU_TYPES_F32)))
		return rc;
	if (t->rank != 4 || (t->dims[0] != a->B && t->dims[0] != 1) ||
	    (t->dims[1] != a->N && t->dims[1] != 1) || t->dims[2] != a->S || t->dims[3] != a->T)
		return cpu_fail(ctx, CPU_E_INVALID, "%s: attention_bias must be [%lld or 1, %lld or 1, "
				"%lld, %lld]", ctx->node->proto->op_type, (long long)a->B,
				(long long)a->N, (long long)a->S, (long long)a->T);
	a->bias = t->data;
	a->bias_hs = t->dims[1] == 1 ? 0 : a->S * a->T;
	a->bias_bs = t->dims[0] == 1 ? 0 : t->dims[1] * a->S * a->T;
	return 0;
}

void ms_concat_kv(float *dst, int64_t B, int64_t N, int64_t cap, int64_t h, const float *past,
		  int64_t P, int64_t past_cap, const ms_view *src, int64_t L)
{
	for (int64_t b = 0; b < B; b++)
		for (int64_t n = 0; n < N; n++) {
			float *d = dst + (b * N + n) * cap * h;

			if (P > 0 && past && past + (b * N + n) * past_cap * h != d)
				memmove(d, past + (b * N + n) * past_cap * h, (size_t)(P * h) * sizeof(float));
			for (int64_t t = 0; t < L; t++)
				memcpy(d + (P + t) * h, src->base + b * src->bs + n * src->hs + t * src->ld,
				       (size_t)h * sizeof(float));
		}
}

int ms_attn_begin(cpu_ctx *ctx, ms_attn *a, int64_t B, int64_t N, int64_t S, int64_t T,
		  int64_t P, int64_t hq, int64_t hv, int mask_in)
{
	const Onnx__NodeProto *p = ctx->node->proto;
	float *mask;
	int rc;

	a->B = B;
	a->N = N;
	a->S = S;
	a->T = T;
	a->hq = hq;
	a->hv = hv;
	a->kv_group = 1;
	if ((rc = ms_attn_mask(ctx, cpu_input(ctx, mask_in), mask_in, B, S, T, P,
			       cpu_attr_int(p, "unidirectional", 0) != 0,
			       cpu_attr_float(p, "mask_filter_value", -10000.0f), &mask)) ||
	    (rc = ms_attn_bias(ctx, 5, a)))
		return rc;
	a->mask = mask;
	return 0;
}
