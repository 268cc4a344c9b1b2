/*
 * mha: com.microsoft MultiHeadAttention, float32, on attn_core.c.
 *
 * Query [B, S, D] with key/value [B, L, D] and [B, L, Dv], or key/value
 * already split into heads [B, N, L, H] (a cross-attention cache), or the
 * packed forms ONNX Runtime's GPU providers take: query [B, S, N, 3, H]
 * with no key and value, key [B, L, N, 2, H] with no value.  Optional:
 * bias [D + D + Dv] (added to Q, and to K and V given as [B, L, D]),
 * key_padding_mask ([B] lengths, [2B], [B, T], [B, S, T]),
 * attention_bias [B or 1, N or 1, S, T], past_key/past_value [B, N, P, H]
 * (present_key/present_value [B, N, P + L, H] out), unidirectional,
 * scale, mask_filter_value.  The [3B + 2] mask, past_sequence_length
 * and cache_indirection (DecoderMaskedMultiHeadAttention's beam search)
 * are refused by name.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ms_ops.h"

static int mha_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt, int n_in,
			char *why, size_t n)
{
	(void)opset;
	if (cpu_attr_int(p, "num_heads", 0) <= 0)
		return snprintf(why, n, "MultiHeadAttention: num_heads must be > 0"), 0;
	if ((p->n_input > 8 && p->input[8][0]) || (p->n_input > 9 && p->input[9][0]))
		return snprintf(why, n, "MultiHeadAttention: past_sequence_length and "
				"cache_indirection are not supported"), 0;
	for (int i = 0; i < 8 && i < n_in; i++)
		if (!cpu_supports_dtype(dt, n_in, i, i == 4 ? CPU_BIT(CPU_INT32) : CPU_TYPES_F32, why, n))
			return 0;
	return 1;
}

/* A dense [B, L, N * h] copy of view v plus bias[N * h] (NULL: none). */
static int with_bias(cpu_ctx *ctx, ms_view *v, int64_t B, int64_t N, int64_t L, int64_t h,
		     const float *bias)
{
	float *d;

	if (!bias)
		return 0;
	if (!(d = cpu_scratch(ctx, (size_t)(B * L * N * h) * sizeof(float) + 1)))
		return CPU_E_NOMEM;
	for (int64_t b = 0; b < B; b++)
		for (int64_t t = 0; t < L; t++)
			for (int64_t n = 0; n < N; n++) {
				const float *s = v->base + b * v->bs + n * v->hs + t * v->ld;
				float *o = d + ((b * L + t) * N + n) * h;

				for (int64_t i = 0; i < h; i++)
					o[i] = s[i] + bias[n * h + i];
			}
	*v = (ms_view){d, L * N * h, h, N * h};
	return 0;
}

typedef struct mha_dims {
	int64_t B, S, L, N, hq, hv, P;
	int bnsh;   /* key/value given as [B, N, L, H] */
} mha_dims;

/* The Q, K and V views of the inputs' layouts, and the sizes. */
static int mha_views(cpu_ctx *ctx, mha_dims *d, ms_attn *a)
{
	const cpu_tensor *Q = cpu_input(ctx, 0), *K = cpu_input(ctx, 1), *V = cpu_input(ctx, 2);
	const float *q = Q->data;
	int64_t N = d->N;

	d->B = Q->dims[0];
	d->S = Q->dims[1];
	if (Q->rank == 5) {
		if (K || V || Q->dims[2] != N || Q->dims[3] != 3)
			return cpu_fail(ctx, CPU_E_INVALID, "MultiHeadAttention: packed QKV must be "
					"[B, S, %lld, 3, H] without key and value", (long long)N);
		d->hq = d->hv = Q->dims[4];
		d->L = d->S;
		a->q = (ms_view){q, d->S * N * 3 * d->hq, 3 * d->hq, N * 3 * d->hq};
		a->k = (ms_view){q + d->hq, a->q.bs, a->q.hs, a->q.ld};
		a->v = (ms_view){q + 2 * d->hq, a->q.bs, a->q.hs, a->q.ld};
		return 0;
	}
	if (Q->rank != 3 || Q->dims[2] % N || !K)
		return cpu_fail(ctx, CPU_E_INVALID, "MultiHeadAttention: query must be [B, S, D] "
				"(D a multiple of num_heads) with a key");
	d->hq = Q->dims[2] / N;
	a->q = (ms_view){q, d->S * Q->dims[2], d->hq, Q->dims[2]};
	if (K->rank == 5) {
		if (V || K->dims[0] != d->B || K->dims[2] != N || K->dims[3] != 2 || K->dims[4] != d->hq)
			return cpu_fail(ctx, CPU_E_INVALID, "MultiHeadAttention: packed KV must be "
					"[B, L, %lld, 2, %lld] without value", (long long)N,
					(long long)d->hq);
		d->L = K->dims[1];
		d->hv = d->hq;
		a->k = (ms_view){K->data, d->L * N * 2 * d->hq, 2 * d->hq, N * 2 * d->hq};
		a->v = (ms_view){(const float *)K->data + d->hq, a->k.bs, a->k.hs, a->k.ld};
		return 0;
	}
	if (!V || V->rank != K->rank || K->dims[0] != d->B || V->dims[0] != d->B)
		return cpu_fail(ctx, CPU_E_INVALID, "MultiHeadAttention: key and value must have one "
				"layout and the query's batch");
	if (K->rank == 4) {
		if (K->dims[1] != N || V->dims[1] != N || K->dims[3] != d->hq || V->dims[2] != K->dims[2])
			return cpu_fail(ctx, CPU_E_INVALID, "MultiHeadAttention: key/value [B, N, L, H] "
					"do not match");
		d->bnsh = 1;
		d->L = K->dims[2];
		d->hv = V->dims[3];
		a->k = (ms_view){K->data, N * d->L * d->hq, d->L * d->hq, d->hq};
		a->v = (ms_view){V->data, N * d->L * d->hv, d->L * d->hv, d->hv};
		return 0;
	}
	if (K->rank != 3 || K->dims[2] != Q->dims[2] || V->dims[1] != K->dims[1] || V->dims[2] % N)
		return cpu_fail(ctx, CPU_E_INVALID, "MultiHeadAttention: key/value [B, L, D] do not "
				"match the query");
	d->L = K->dims[1];
	d->hv = V->dims[2] / N;
	a->k = (ms_view){K->data, d->L * K->dims[2], d->hq, K->dims[2]};
	a->v = (ms_view){V->data, d->L * V->dims[2], d->hv, V->dims[2]};
	return 0;
}

/* present_key/present_value (or scratch when past is given without
 * them): the past rows, then the new ones. */
static int mha_cache(cpu_ctx *ctx, const mha_dims *d, ms_attn *a)
{
	const cpu_tensor *pk = cpu_input(ctx, 6), *pv = cpu_input(ctx, 7);
	int64_t T = d->P + d->L, dims[4] = {d->B, d->N, T, d->hq};
	float *kd, *vd;
	cpu_tensor *t;

	if (ctx->n_out > 1) {
		if (!(t = cpu_output(ctx, 1, CPU_FLOAT, 4, dims)))
			return CPU_E_NOMEM;
		kd = t->data;
	} else if (!(kd = cpu_scratch(ctx, (size_t)(d->B * d->N * T * d->hq) * sizeof(float) + 1))) {
		return CPU_E_NOMEM;
	}
	dims[3] = d->hv;
	if (ctx->n_out > 2) {
		if (!(t = cpu_output(ctx, 2, CPU_FLOAT, 4, dims)))
			return CPU_E_NOMEM;
		vd = t->data;
	} else if (!(vd = cpu_scratch(ctx, (size_t)(d->B * d->N * T * d->hv) * sizeof(float) + 1))) {
		return CPU_E_NOMEM;
	}
	ms_concat_kv(kd, d->B, d->N, T, d->hq, pk ? pk->data : NULL, d->P, d->P, &a->k, d->L);
	ms_concat_kv(vd, d->B, d->N, T, d->hv, pv ? pv->data : NULL, d->P, d->P, &a->v, d->L);
	a->k = (ms_view){kd, d->N * T * d->hq, T * d->hq, d->hq};
	a->v = (ms_view){vd, d->N * T * d->hv, T * d->hv, d->hv};
	return 0;
}

static int mha_compute(cpu_ctx *ctx)
{
	const Onnx__NodeProto *p = ctx->node->proto;
	const cpu_tensor *Bi = cpu_input(ctx, 3), *pk = cpu_input(ctx, 6), *pv = cpu_input(ctx, 7);
	mha_dims d;
	ms_attn a;
	float sc;
	int64_t dims[4];
	cpu_tensor *Y, *QK;
	int rc = 0;

	for (int i = 0; i < 8 && i < ctx->n_in; i++)
		if (cpu_input(ctx, i) && (rc = cpu_check_dtype(ctx, cpu_input(ctx, i), i,
							      i == 4 ? CPU_BIT(CPU_INT32) : CPU_TYPES_F32)))
			return rc;
	if (!cpu_require(ctx, 0, &rc))
		return rc;
	memset(&d, 0, sizeof(d));
	memset(&a, 0, sizeof(a));
	d.N = cpu_attr_int(p, "num_heads", 0);
	if (d.N <= 0)
		return cpu_fail(ctx, CPU_E_INVALID, "MultiHeadAttention: num_heads must be > 0");
	if ((rc = mha_views(ctx, &d, &a)))
		return rc;
	if (Bi) {
		int kv = !d.bnsh && cpu_input(ctx, 0)->rank == 3;

		if (cpu_numel(Bi) != d.N * (2 * d.hq + d.hv))
			return cpu_fail(ctx, CPU_E_INVALID, "MultiHeadAttention: bias must have %lld "
					"values", (long long)(d.N * (2 * d.hq + d.hv)));
		if ((rc = with_bias(ctx, &a.q, d.B, d.N, d.S, d.hq, Bi->data)) ||
		    (kv && (rc = with_bias(ctx, &a.k, d.B, d.N, d.L, d.hq,
					   (const float *)Bi->data + d.N * d.hq))) ||
		    (kv && (rc = with_bias(ctx, &a.v, d.B, d.N, d.L, d.hv,
					   (const float *)Bi->data + 2 * d.N * d.hq))))
			return rc;
	}
	if ((pk != NULL) != (pv != NULL))
		return cpu_fail(ctx, CPU_E_INVALID, "MultiHeadAttention: past_key and past_value go "
				"together");
	if (pk && !d.bnsh) {
		if (pk->rank != 4 || pk->dims[0] != d.B || pk->dims[1] != d.N || pk->dims[3] != d.hq ||
		    pv->rank != 4 || pv->dims[2] != pk->dims[2] || pv->dims[3] != d.hv)
			return cpu_fail(ctx, CPU_E_INVALID, "MultiHeadAttention: past_key/past_value "
					"must be [B, N, P, H]");
		d.P = pk->dims[2];
	}
	if (!d.bnsh && (pk || ctx->n_out > 1) && (rc = mha_cache(ctx, &d, &a)))
		return rc;
	if ((rc = ms_attn_begin(ctx, &a, d.B, d.N, d.S, d.P + d.L, d.P, d.hq, d.hv, 4)))
		return rc;
	sc = cpu_attr_float(p, "scale", 0.0f);
	a.scale = sc != 0.0f ? sc : 1.0f / sqrtf((float)d.hq);
	dims[0] = d.B;
	dims[1] = d.S;
	dims[2] = d.N * d.hv;
	if (!(Y = cpu_output(ctx, 0, CPU_FLOAT, 3, dims)))
		return CPU_E_NOMEM;
	if (ctx->n_out > 3) {
		int64_t qd[4] = {d.B, d.N, d.S, a.T};

		if (!(QK = cpu_output(ctx, 3, CPU_FLOAT, 4, qd)))
			return CPU_E_NOMEM;
		a.qk = QK->data;
	}
	a.out = Y->data;
	a.out_bs = d.S * d.N * d.hv;
	a.out_ld = d.N * d.hv;
	return ms_attn_run(ctx, &a);
}

const cpu_op cpu_op_ms_multi_head_attention = {
	"MultiHeadAttention", "com.microsoft", 1, 1, mha_supports, NULL, mha_compute, NULL,
};
