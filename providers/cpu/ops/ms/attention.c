/*
 * attention: com.microsoft Attention, float32: BERT's and GPT-2's
 * self-attention with the Q/K/V projection merged into one weight
 * [in, Hq + Hk + Hv] (qkv_hidden_sizes when V's differs), as ONNX
 * Runtime's optimizer writes it.
 *
 * The projection is one GEMM against the weights packed at load (the
 * pre-pack cache), the bias its epilogue; the heads are then read in
 * place from the projection by attn_core.c.  Supported: every mask_index
 * format ONNX Runtime's CPU provider accepts ([B] end positions, [2B] end
 * and start positions, raw [B, T] and [B, S, T] masks; [B, 1] and [1, 1]
 * mask nothing), unidirectional (causal after the past),
 * past/present ([2, B, N, P, H] in, [2, B, N, P + S, H] out, or one
 * buffer of max length with past_present_share_buffer and the
 * past_sequence_length input), attention_bias, scale and
 * mask_filter_value.  do_rotary is refused by name (ONNX Runtime's CPU
 * provider does not run it either); the [3B + 2] and [B, 1, M, M] mask
 * formats, which only its GPU providers take, fail the run naming them.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gemm.h"
#include "ms_ops.h"

#define ATTN_PACK_MAX ((size_t)64 << 20)

static int attn_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt, int n_in,
			 char *why, size_t n)
{
	(void)opset;
	if (cpu_attr_int(p, "do_rotary", 0))
		return snprintf(why, n, "Attention: do_rotary is not supported"), 0;
	if (cpu_attr_int(p, "num_heads", 0) <= 0)
		return snprintf(why, n, "Attention: num_heads must be > 0"), 0;
	return cpu_supports_dtype(dt, n_in, 0, CPU_TYPES_F32, why, n) &&
	       cpu_supports_dtype(dt, n_in, 1, CPU_TYPES_F32, why, n) &&
	       cpu_supports_dtype(dt, n_in, 2, CPU_TYPES_F32, why, n) &&
	       cpu_supports_dtype(dt, n_in, 3, CPU_BIT(CPU_INT32), why, n);
}

typedef struct attn_state {
	const void *packed;
	const float *src;
	int64_t K, N;
} attn_state;

typedef struct pack_arg {
	const cpu_tensor *W;
} pack_arg;

static int pack_w(void *dst, size_t size, void *arg)
{
	const cpu_tensor *W = ((const pack_arg *)arg)->W;

	return gemm_pack_b(GEMM_ISA_AUTO, W->data, W->dims[1], 0, W->dims[0], W->dims[1], dst, size);
}

static int attn_prepare(cpu_node *node, char *err, size_t n)
{
	const cpu_tensor *W = node->n_in > 1 ? cpu_node_const(node, 1) : NULL;
	attn_state *st = calloc(1, sizeof(*st));
	pack_arg arg = {W};
	char fmt[48];
	size_t size;

	if (!st)
		return snprintf(err, n, "out of memory"), CPU_E_NOMEM;
	node->state = st;
	if (cpu_attr_int(node->proto, "do_rotary", 0))
		return snprintf(err, n, "Attention: do_rotary is not supported"), CPU_E_UNSUPPORTED;
	if (!W || W->dtype != CPU_FLOAT || W->rank != 2 || W->dims[0] <= 0 || W->dims[1] <= 0)
		return 0;
	size = gemm_pack_b_size(GEMM_ISA_AUTO, W->dims[0], W->dims[1]);
	if (!size || size > ATTN_PACK_MAX)
		return 0;
	snprintf(fmt, sizeof(fmt), "gemm-b-v%d-%s", GEMM_PACK_VERSION,
		 gemm_isa_name(gemm_isa_best()));
	if (!(st->packed = cpu_prepack(node, 1, fmt, size, pack_w, &arg, err, n)))
		return CPU_E_NOMEM;
	if (gemm_pack_b_check(st->packed, size, W->dims[0], W->dims[1])) {
		st->packed = NULL;
		return 0;
	}
	st->src = W->data;
	st->K = W->dims[0];
	st->N = W->dims[1];
	return 0;
}

static void attn_release(cpu_node *node)
{
	free(node->state);
	node->state = NULL;
}

/* qkv[B*S, Ht] = X W + bias. */
static int project(cpu_ctx *ctx, const cpu_tensor *X, const cpu_tensor *W, const float *bias,
		   float *qkv)
{
	const attn_state *st = ctx->node->state;
	int64_t M = X->dims[0] * X->dims[1], K = W->dims[0], N = W->dims[1];
	gemm_epilogue ep = GEMM_EPILOGUE_INIT;

	if (bias) {
		ep.bias = bias;
		ep.bias_kind = GEMM_BIAS_COL;
	}
	if (st && st->packed && st->src == W->data && st->K == K && st->N == N) {
		if (gemm_compute(ctx->pool, M, N, K, X->data, K, 0, st->packed, &ep, qkv, N))
			return cpu_fail(ctx, CPU_E_INTERNAL, "Attention: packed GEMM failed");
		return 0;
	}
	cpu_sgemm_pool(ctx->pool, 0, 0, M, N, K, 1.0f, X->data, K, W->data, N, 0.0f, qkv, N);
	for (int64_t i = 0; bias && i < M; i++)
		for (int64_t j = 0; j < N; j++)
			qkv[i * N + j] += bias[j];
	return 0;
}

typedef struct attn_dims {
	int64_t B, S, N, Hq, Hv, hq, hv, P, T, cap;
	int share;
} attn_dims;

/* Sizes from the inputs and attributes; past is [2, B, N, P (or max), h]. */
static int attn_dims_of(cpu_ctx *ctx, const cpu_tensor *X, const cpu_tensor *W,
			const cpu_tensor *past, attn_dims *d)
{
	const Onnx__NodeProto *p = ctx->node->proto;
	const int64_t *qkv = NULL;
	size_t nq = cpu_attr_ints(p, "qkv_hidden_sizes", &qkv);
	const cpu_tensor *psl = cpu_input(ctx, 6);
	int64_t Hk;

	d->N = cpu_attr_int(p, "num_heads", 0);
	if (X->rank != 3 || W->rank != 2 || W->dims[0] != X->dims[2] || d->N <= 0)
		return cpu_fail(ctx, CPU_E_INVALID, "Attention: input must be [B, S, in] and weights "
				"[in, Hq + Hk + Hv], num_heads > 0");
	d->B = X->dims[0];
	d->S = X->dims[1];
	if (nq == 3) {
		d->Hq = qkv[0];
		Hk = qkv[1];
		d->Hv = qkv[2];
	} else if (nq == 0) {
		d->Hq = Hk = d->Hv = W->dims[1] / 3;
	} else {
		return cpu_fail(ctx, CPU_E_INVALID, "Attention: qkv_hidden_sizes needs 3 values");
	}
	if (d->Hq != Hk || d->Hq + Hk + d->Hv != W->dims[1] || d->Hq % d->N || d->Hv % d->N ||
	    d->Hq <= 0 || d->Hv <= 0)
		return cpu_fail(ctx, CPU_E_INVALID, "Attention: hidden sizes %lld/%lld/%lld do not fit "
				"weights of %lld columns and %lld heads", (long long)d->Hq,
				(long long)Hk, (long long)d->Hv, (long long)W->dims[1], (long long)d->N);
	d->hq = d->Hq / d->N;
	d->hv = d->Hv / d->N;
	d->share = cpu_attr_int(p, "past_present_share_buffer", 0) != 0;
	d->P = 0;
	if (past) {
		if (past->rank != 5 || past->dims[0] != 2 || past->dims[1] != d->B ||
		    past->dims[2] != d->N || past->dims[4] != d->hq || d->hq != d->hv)
			return cpu_fail(ctx, CPU_E_INVALID, "Attention: past must be [2, %lld, %lld, P, %lld]",
					(long long)d->B, (long long)d->N, (long long)d->hq);
		d->P = past->dims[3];
	}
	d->cap = d->P + d->S;
	if (d->share && past) {
		int32_t v;

		if (!psl || psl->dtype != CPU_INT32 || cpu_numel(psl) != 1)
			return cpu_fail(ctx, CPU_E_INVALID, "Attention: past_present_share_buffer needs "
					"the int32 past_sequence_length input");
		v = *(const int32_t *)psl->data;
		d->cap = past->dims[3];
		if (v < 0 || v + d->S > d->cap)
			return cpu_fail(ctx, CPU_E_INVALID, "Attention: past_sequence_length %d does not "
					"fit the buffer of %lld", v, (long long)d->cap);
		d->P = v;
	}
	d->T = d->P + d->S;
	return 0;
}

static int attn_compute(cpu_ctx *ctx)
{
	const Onnx__NodeProto *p = ctx->node->proto;
	const cpu_tensor *X, *W, *Bi = cpu_input(ctx, 2), *past = cpu_input(ctx, 4);
	int64_t dims[5], Ht, plane;
	cpu_tensor *Y, *Pr = NULL;
	float *qkv, *kv = NULL;
	attn_dims d = {0};
	ms_attn a;
	int rc = 0;

	if (!(X = cpu_require(ctx, 0, &rc)) || !(W = cpu_require(ctx, 1, &rc)))
		return rc;
	if ((rc = cpu_check_dtype(ctx, X, 0, CPU_TYPES_F32)) ||
	    (rc = cpu_check_dtype(ctx, W, 1, CPU_TYPES_F32)) ||
	    (Bi && (rc = cpu_check_dtype(ctx, Bi, 2, CPU_TYPES_F32))) ||
	    (past && (rc = cpu_check_dtype(ctx, past, 4, CPU_TYPES_F32))) ||
	    (rc = attn_dims_of(ctx, X, W, past, &d)))
		return rc;
	Ht = W->dims[1];
	if (Bi && cpu_numel(Bi) != Ht)
		return cpu_fail(ctx, CPU_E_INVALID, "Attention: bias must have %lld values", (long long)Ht);
	memset(&a, 0, sizeof(a));
	if ((rc = ms_attn_begin(ctx, &a, d.B, d.N, d.S, d.T, d.P, d.hq, d.hv, 3)))
		return rc;
	dims[0] = d.B;
	dims[1] = d.S;
	dims[2] = d.Hv;
	if (!(Y = cpu_output(ctx, 0, CPU_FLOAT, 3, dims)) ||
	    !(qkv = cpu_scratch(ctx, (size_t)(d.B * d.S * Ht) * sizeof(float) + 1)))
		return CPU_E_NOMEM;
	if ((rc = project(ctx, X, W, Bi ? Bi->data : NULL, qkv)))
		return rc;
	a.q = (ms_view){qkv, d.S * Ht, d.hq, Ht};
	a.k = (ms_view){qkv + d.Hq, d.S * Ht, d.hq, Ht};
	a.v = (ms_view){qkv + 2 * d.Hq, d.S * Ht, d.hv, Ht};
	if (ctx->n_out > 1 || past) {
		/* the caches: K and V of every step so far, [2, B, N, cap, h] */
		dims[0] = 2;
		dims[1] = d.B;
		dims[2] = d.N;
		dims[3] = d.cap;
		dims[4] = d.hq;
		if (ctx->n_out > 1) {
			if (!(Pr = cpu_output(ctx, 1, CPU_FLOAT, 5, dims)))
				return CPU_E_NOMEM;
			kv = Pr->data;
		} else if (!(kv = cpu_scratch(ctx, (size_t)(2 * d.B * d.N * d.cap * d.hq) * sizeof(float)))) {
			return CPU_E_NOMEM;
		}
		plane = d.B * d.N * d.cap * d.hq;
		if (d.share && past)
			memcpy(kv, past->data, past->nbytes);
		ms_concat_kv(kv, d.B, d.N, d.cap, d.hq, d.share ? kv : past ? past->data : NULL, d.P,
			     d.share ? d.cap : d.P, &a.k, d.S);
		ms_concat_kv(kv + plane, d.B, d.N, d.cap, d.hv,
			     d.share ? kv + plane : past ? (const float *)past->data + d.B * d.N * d.P * d.hq : NULL,
			     d.P, d.share ? d.cap : d.P, &a.v, d.S);
		a.k = (ms_view){kv, d.N * d.cap * d.hq, d.cap * d.hq, d.hq};
		a.v = (ms_view){kv + plane, d.N * d.cap * d.hv, d.cap * d.hv, d.hv};
	}
	{
		float sc = cpu_attr_float(p, "scale", 0.0f);
		a.scale = sc != 0.0f ? sc : 1.0f / sqrtf((float)d.hq);
	}
	a.out = Y->data;
	a.out_bs = d.S * d.Hv;
	a.out_ld = d.Hv;
	return ms_attn_run(ctx, &a);
}

const cpu_op cpu_op_ms_attention = {
	"Attention", "com.microsoft", 1, 1, attn_supports, attn_prepare, attn_compute, attn_release,
};
