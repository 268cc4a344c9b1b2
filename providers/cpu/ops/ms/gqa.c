/*
 * gqa: com.microsoft GroupQueryAttention, float32, on attn_core.c: the
 * causal self-attention of decoder LLMs (Llama, Mistral, Phi-3, Gemma)
 * with fewer K/V heads than query heads and a BNSH key/value cache.
 *
 * query [B, S, N * H] with key and value [B, S, Nkv * H], or packed
 * query [B, S, (N + 2 Nkv) * H] with neither; past_key/past_value
 * [B, Nkv, P, H]; seqlens_k [B] (int32: each batch's total length - 1);
 * total_sequence_length (int32 scalar); cos_cache/sin_cache
 * [max, rot / 2] with do_rotary (rotary_interleaved) and position_ids
 * [B, S] (int64; the rotary positions, read only with do_rotary);
 * attention_bias [B or 1, N or 1, S, total_sequence_length]; head_sink [N]
 * (not with smooth_softmax).
 * Attributes num_heads, kv_num_heads, scale, softcap, local_window_size,
 * smooth_softmax.  Outputs output [B, S, N * H] and present_key/value
 * [B, Nkv, max(P, total_sequence_length), H].
 *
 * What ONNX Runtime's CPU kernel (contrib_ops/cpu/bert/gqa_attention_base.h)
 * does, and this file with it: batch b holds total_b = seqlens_k[b] + 1
 * tokens; on the first prompt (S == total_sequence_length) its past is 0
 * rows, otherwise (token generation, or a later prompt) total_b - S.  The
 * present cache is the first past_b rows of the past, the S new ones (K
 * rotated), then zeros.  Query row s sits at position past_b + s and sees
 * keys j <= past_b + s (causal), j < total_b, and with local_window_size
 * w > 0 j > past_b + s - w (the last w keys, as onnxruntime-node 1.30
 * computes it).  That key set is the additive mask attn_core.c takes; the
 * query heads of one K/V head read it in place from the present cache
 * through ms_attn's kv_group.  Scores are scaled, softcapped, then get
 * the bias.  Refused by name: the quantized cache (k_scale, v_scale,
 * k_quant_type...), qk_output / output_qk, attributes of later ONNX
 * Runtimes (sliding_window_cache).  float16 models run here in float32
 * between the provider's conversions, as the other ms ops do.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ms_ops.h"

/* What a masked key adds to its score: exp() of it is 0, and adding it
 * to a finite score cannot overflow to -inf. */
#define GQA_MASKED (-1.0e30f)

typedef struct gqa_dims {
	int64_t B, S, N, Nkv, H;
	int64_t P;      /* past_key's length (its buffer) */
	int64_t Tcap;   /* present's length */
	int64_t T;      /* keys the scores span: the longest total_b */
	int first;      /* first prompt: no past rows */
	const int32_t *seqlens;
	const int64_t *pid;     /* position_ids [B, S], or NULL */
} gqa_dims;

/* Inputs that change the result and are not implemented: refused. */
static const char *const gqa_refused_in[] = {
 [12] = "k_scale", [13] = "v_scale",
};

/* The attributes this kernel reads; a later ONNX Runtime's others
 * (sliding_window_cache...) are refused rather than ignored. */
static const char *const gqa_attrs[] = {
	"num_heads", "kv_num_heads", "scale", "softcap", "local_window_size", "do_rotary",
	"rotary_interleaved", "smooth_softmax", "qk_output", "k_quant_type", "v_quant_type",
	"kv_cache_bit_width",
};

static int gqa_check_node(const Onnx__NodeProto *p, int n_out, char *why, size_t n)
{
	int64_t N = cpu_attr_int(p, "num_heads", 0), Nkv = cpu_attr_int(p, "kv_num_heads", 0);
	const char *qt = cpu_attr_string(p, "k_quant_type", "NONE");
	const char *vt = cpu_attr_string(p, "v_quant_type", "NONE");

	if (N <= 0 || Nkv <= 0 || N % Nkv)
		return snprintf(why, n, "GroupQueryAttention: num_heads (%lld) must be a positive "
				"multiple of kv_num_heads (%lld)", (long long)N, (long long)Nkv), 0;
	for (int i = 9; i < (int)p->n_input && i < 14; i++)
		if (p->input[i][0] && i < (int)(sizeof(gqa_refused_in) / sizeof(*gqa_refused_in)) &&
		    gqa_refused_in[i])
			return snprintf(why, n, "GroupQueryAttention: input %s is not supported",
					gqa_refused_in[i]), 0;
	if (p->n_input > 14)
		return snprintf(why, n, "GroupQueryAttention: more than 14 inputs"), 0;
	for (size_t i = 0; i < p->n_attribute; i++) {
		size_t j = 0;

		while (j < sizeof(gqa_attrs) / sizeof(*gqa_attrs) &&
		       strcmp(p->attribute[i]->name, gqa_attrs[j]))
			j++;
		if (j == sizeof(gqa_attrs) / sizeof(*gqa_attrs))
			return snprintf(why, n, "GroupQueryAttention: attribute %s is not supported",
					p->attribute[i]->name), 0;
	}
	if (strcmp(qt, "NONE") || strcmp(vt, "NONE") || cpu_attr_int(p, "kv_cache_bit_width", 0))
		return snprintf(why, n, "GroupQueryAttention: the quantized KV cache (k_quant_type, "
				"v_quant_type, kv_cache_bit_width) is not supported"), 0;
	if (cpu_attr_int(p, "qk_output", 0) || (n_out > 3 && p->output[3][0]))
		return snprintf(why, n, "GroupQueryAttention: qk_output (output_qk) is not "
				"supported"), 0;
	return 1;
}

static uint32_t gqa_dtypes(int i)
{
	return i == 5 || i == 6 ? CPU_BIT(CPU_INT32) : i == 9 ? CPU_BIT(CPU_INT64) : CPU_TYPES_F32;
}

static int gqa_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt, int n_in,
			char *why, size_t n)
{
	(void)opset;
	if (!gqa_check_node(p, (int)p->n_output, why, n))
		return 0;
	for (int i = 0; i < 12 && i < n_in; i++)
		if (!cpu_supports_dtype(dt, n_in, i, gqa_dtypes(i), why, n))
			return 0;
	return 1;
}

/* Q, K and V views of query/key/value (or packed query), and B, S, H. */
static int gqa_views(cpu_ctx *ctx, gqa_dims *d, ms_attn *a, ms_view *k, ms_view *v)
{
	const cpu_tensor *Q = cpu_input(ctx, 0), *K = cpu_input(ctx, 1), *V = cpu_input(ctx, 2);
	const float *q = Q->data;
	int64_t heads = K ? d->N : d->N + 2 * d->Nkv, D;

	if (Q->rank != 3 || Q->dims[2] % heads || (K == NULL) != (V == NULL))
		return cpu_fail(ctx, CPU_E_INVALID, "GroupQueryAttention: query must be [B, S, D] "
				"(D a multiple of %lld heads), key and value both given or both "
				"absent (packed QKV)", (long long)heads);
	d->B = Q->dims[0];
	d->S = Q->dims[1];
	d->H = Q->dims[2] / heads;
	D = Q->dims[2];
	a->q = (ms_view){q, d->S * D, d->H, D};
	if (!K) {
		*k = (ms_view){q + d->N * d->H, d->S * D, d->H, D};
		*v = (ms_view){q + (d->N + d->Nkv) * d->H, d->S * D, d->H, D};
		return 0;
	}
	D = d->Nkv * d->H;
	if (K->rank != 3 || V->rank != 3 || K->dims[0] != d->B || K->dims[1] != d->S ||
	    K->dims[2] != D || V->dims[0] != d->B || V->dims[1] != d->S || V->dims[2] != D)
		return cpu_fail(ctx, CPU_E_INVALID, "GroupQueryAttention: key and value must be "
				"[%lld, %lld, %lld]", (long long)d->B, (long long)d->S, (long long)D);
	*k = (ms_view){K->data, d->S * D, d->H, D};
	*v = (ms_view){V->data, d->S * D, d->H, D};
	return 0;
}

/* Past, total_sequence_length and seqlens_k: P, Tcap, T, first, and
 * each batch's lengths checked against the buffers. */
static int gqa_lengths(cpu_ctx *ctx, gqa_dims *d)
{
	const cpu_tensor *pk = cpu_input(ctx, 3), *pv = cpu_input(ctx, 4);
	const cpu_tensor *L = cpu_input(ctx, 5), *Ts = cpu_input(ctx, 6);
	int64_t total;

	if ((pk == NULL) != (pv == NULL))
		return cpu_fail(ctx, CPU_E_INVALID, "GroupQueryAttention: past_key and past_value go "
				"together");
	if (pk && (pk->rank != 4 || pk->dims[0] != d->B || pk->dims[1] != d->Nkv ||
		   pk->dims[3] != d->H || pv->rank != 4 || pv->dims[0] != d->B ||
		   pv->dims[1] != d->Nkv || pv->dims[2] != pk->dims[2] || pv->dims[3] != d->H))
		return cpu_fail(ctx, CPU_E_INVALID, "GroupQueryAttention: past_key/past_value must "
				"be [%lld, %lld, P, %lld]", (long long)d->B, (long long)d->Nkv,
				(long long)d->H);
	if (cpu_numel(Ts) != 1 || L->rank != 1 || L->dims[0] != d->B)
		return cpu_fail(ctx, CPU_E_INVALID, "GroupQueryAttention: total_sequence_length must "
				"be one value and seqlens_k [%lld]", (long long)d->B);
	d->P = pk ? pk->dims[2] : 0;
	total = ((const int32_t *)Ts->data)[0];
	d->Tcap = total > d->P ? total : d->P;
	d->first = d->S == total;
	d->seqlens = L->data;
	d->T = 0;
	for (int64_t b = 0; b < d->B; b++) {
		int64_t tb = (int64_t)d->seqlens[b] + 1, past = d->first ? 0 : tb - d->S;

		if (tb < 1 || tb > d->Tcap || past < 0 || past > d->P)
			return cpu_fail(ctx, CPU_E_INVALID, "GroupQueryAttention: seqlens_k[%lld] = "
					"%lld does not fit S = %lld, past %lld, total %lld",
					(long long)b, (long long)(tb - 1), (long long)d->S,
					(long long)d->P, (long long)total);
		d->T = tb > d->T ? tb : d->T;
	}
	/* attention_bias spans total_sequence_length keys */
	if (cpu_input(ctx, 10) && d->T > total)
		return cpu_fail(ctx, CPU_E_INVALID, "GroupQueryAttention: with attention_bias, "
				"seqlens_k must stay below total_sequence_length (%lld)",
				(long long)total);
	d->T = cpu_input(ctx, 10) ? total : d->T;
	return 0;
}

static int64_t gqa_past(const gqa_dims *d, int64_t b)
{
	return d->first ? 0 : (int64_t)d->seqlens[b] + 1 - d->S;
}

/* The rotary position of query row s of batch b: past_b + s, or from
 * position_ids: on the first prompt its first value + s (ONNX Runtime
 * reads it as one offset there), otherwise [b, s]. */
static int64_t gqa_pos(const gqa_dims *d, int64_t b, int64_t s)
{
	if (!d->pid)
		return gqa_past(d, b) + s;
	return d->first ? d->pid[0] + s : d->pid[b * d->S + s];
}

/* The rotary caches (do_rotary): *rot the rotated dims; every position
 * checked against them. */
static int gqa_rotary_caches(cpu_ctx *ctx, gqa_dims *d, const float **cs,
			     const float **sn, int64_t *rot)
{
	const cpu_tensor *C = cpu_input(ctx, 7), *Sn = cpu_input(ctx, 8), *Pi = cpu_input(ctx, 9);

	*rot = 0;
	if (!cpu_attr_int(ctx->node->proto, "do_rotary", 0))
		return 0;
	if (!C || !Sn || C->rank != 2 || Sn->rank != 2 || C->dims[0] != Sn->dims[0] ||
	    C->dims[1] != Sn->dims[1] || 2 * C->dims[1] > d->H || C->dims[1] == 0)
		return cpu_fail(ctx, CPU_E_INVALID, "GroupQueryAttention: do_rotary needs cos_cache "
				"and sin_cache of one shape [max, <= %lld]", (long long)(d->H / 2));
	if (Pi && (Pi->rank != 2 || Pi->dims[0] != d->B || Pi->dims[1] != d->S))
		return cpu_fail(ctx, CPU_E_INVALID, "GroupQueryAttention: position_ids must be "
				"[%lld, %lld]", (long long)d->B, (long long)d->S);
	d->pid = Pi ? Pi->data : NULL;
	for (int64_t b = 0; b < d->B; b++)
		for (int64_t s = 0; s < d->S; s++)
			if (gqa_pos(d, b, s) < 0 || gqa_pos(d, b, s) >= C->dims[0])
				return cpu_fail(ctx, CPU_E_INVALID, "GroupQueryAttention: position "
						"%lld is outside cos_cache's %lld",
						(long long)gqa_pos(d, b, s), (long long)C->dims[0]);
	*cs = C->data;
	*sn = Sn->data;
	*rot = 2 * C->dims[1];
	return 0;
}

/* Output idx (present_key or present_value) [B, Nkv, Tcap, H], or
 * scratch without it: the past rows, the new ones from src (rotated when
 * rot > 0), zeros after.  The past is moved first, the rest written over
 * it, so a present that is the past's buffer keeps its rows. */
static float *gqa_present(cpu_ctx *ctx, const gqa_dims *d, int idx, const ms_view *src,
			  int64_t rot, const float *cs, const float *sn)
{
	const cpu_tensor *past = cpu_input(ctx, 2 + idx);
	int64_t dims[4] = {d->B, d->Nkv, d->Tcap, d->H}, H = d->H;
	float *dst;

	if (ctx->n_out > idx && ctx->node->proto->output[idx][0]) {
		cpu_tensor *t = cpu_output(ctx, idx, CPU_FLOAT, 4, dims);

		dst = t ? t->data : NULL;
	} else {
		dst = cpu_scratch(ctx, (size_t)(d->B * d->Nkv * d->Tcap * H) * sizeof(float) + 1);
	}
	if (!dst)
		return NULL;
	for (int64_t b = 0; b < d->B; b++) {
		int64_t pb = gqa_past(d, b), rot_int = cpu_attr_int(ctx->node->proto,
								     "rotary_interleaved", 0) != 0;

		for (int64_t n = 0; n < d->Nkv; n++) {
			float *o = dst + (b * d->Nkv + n) * d->Tcap * H;
			const float *pr = past ? (const float *)past->data + (b * d->Nkv + n) * d->P * H
					       : NULL;

			if (pb > 0 && pr != o)
				memmove(o, pr, (size_t)(pb * H) * sizeof(float));
			for (int64_t s = 0; s < d->S; s++) {
				memcpy(o + (pb + s) * H, src->base + b * src->bs + n * src->hs + s * src->ld,
				       (size_t)H * sizeof(float));
				if (rot > 0)
					ms_rotary_row(o + (pb + s) * H, rot, cs, sn, gqa_pos(d, b, s),
						      (int)rot_int);
			}
			memset(o + (pb + d->S) * H, 0, (size_t)((d->Tcap - pb - d->S) * H) * sizeof(float));
		}
	}
	return dst;
}

/* With rotary: a's query copied dense [B, S, N, H] and rotated. */
static int gqa_rotate_q(cpu_ctx *ctx, const gqa_dims *d, ms_attn *a, int64_t rot,
			const float *cs, const float *sn)
{
	int inter = cpu_attr_int(ctx->node->proto, "rotary_interleaved", 0) != 0;
	int64_t H = d->H, D = d->N * H;
	float *q;

	if (rot == 0)
		return 0;
	if (!(q = cpu_scratch(ctx, (size_t)(d->B * d->S * D) * sizeof(float) + 1)))
		return CPU_E_NOMEM;
	for (int64_t b = 0; b < d->B; b++)
		for (int64_t s = 0; s < d->S; s++)
			for (int64_t n = 0; n < d->N; n++) {
				float *o = q + (b * d->S + s) * D + n * H;

				memcpy(o, a->q.base + b * a->q.bs + n * a->q.hs + s * a->q.ld,
				       (size_t)H * sizeof(float));
				ms_rotary_row(o, rot, cs, sn, gqa_pos(d, b, s), inter);
			}
	a->q = (ms_view){q, d->S * D, H, D};
	return 0;
}

/* The additive mask [B, S, T]: causal from each batch's past, its
 * total_b, the local window. */
static float *gqa_mask(cpu_ctx *ctx, const gqa_dims *d)
{
	int64_t w = cpu_attr_int(ctx->node->proto, "local_window_size", -1);
	float *m = cpu_scratch(ctx, (size_t)(d->B * d->S * d->T) * sizeof(float) + 1);

	if (!m)
		return NULL;
	for (int64_t b = 0; b < d->B; b++) {
		int64_t pb = gqa_past(d, b), tb = (int64_t)d->seqlens[b] + 1;

		for (int64_t s = 0; s < d->S; s++) {
			float *row = m + (b * d->S + s) * d->T;

			for (int64_t j = 0; j < d->T; j++) {
				int keep = j <= pb + s && j < tb && (w <= 0 || j > pb + s - w);

				row[j] = keep ? 0.0f : GQA_MASKED;
			}
		}
	}
	return m;
}

/* a's sizes, the present caches' strides and the attributes. */
static void gqa_geometry(const Onnx__NodeProto *p, const gqa_dims *d, ms_attn *a,
			 const cpu_tensor *sink)
{
	a->k.bs = a->v.bs = d->Nkv * d->Tcap * d->H;
	a->k.hs = a->v.hs = d->Tcap * d->H;
	a->k.ld = a->v.ld = d->H;
	a->B = d->B;
	a->N = d->N;
	a->S = d->S;
	a->T = d->T;
	a->hq = a->hv = d->H;
	a->kv_group = d->N / d->Nkv;
	a->scale = cpu_attr_float(p, "scale", 0.0f);
	a->scale = a->scale != 0.0f ? a->scale : 1.0f / sqrtf((float)d->H);
	a->softcap = cpu_attr_float(p, "softcap", 0.0f);
	a->smooth = cpu_attr_int(p, "smooth_softmax", 0) != 0;
	a->sink = sink ? sink->data : NULL;
	a->out_bs = d->S * d->N * d->H;
	a->out_ld = d->N * d->H;
}

static int gqa_compute(cpu_ctx *ctx)
{
	const Onnx__NodeProto *p = ctx->node->proto;
	const cpu_tensor *sink = ctx->n_in > 11 ? cpu_input(ctx, 11) : NULL;
	const float *cs = NULL, *sn = NULL;
	char why[200];
	gqa_dims d;
	ms_attn a;
	ms_view k, v;
	int64_t rot, dims[3];
	cpu_tensor *Y;
	int rc = 0;

	if (!gqa_check_node(p, ctx->n_out, why, sizeof(why)))
		return cpu_fail(ctx, CPU_E_UNSUPPORTED, "%s", why);
	for (int i = 0; i < 12 && i < ctx->n_in; i++)
		if (cpu_input(ctx, i) && (rc = cpu_check_dtype(ctx, cpu_input(ctx, i), i,
							      gqa_dtypes(i))))
			return rc;
	if (!cpu_require(ctx, 0, &rc) || !cpu_require(ctx, 5, &rc) || !cpu_require(ctx, 6, &rc))
		return rc;
	memset(&d, 0, sizeof(d));
	memset(&a, 0, sizeof(a));
	d.N = cpu_attr_int(p, "num_heads", 0);
	d.Nkv = cpu_attr_int(p, "kv_num_heads", 0);
	if ((rc = gqa_views(ctx, &d, &a, &k, &v)) || (rc = gqa_lengths(ctx, &d)) ||
	    (rc = gqa_rotary_caches(ctx, &d, &cs, &sn, &rot)))
		return rc;
	if (sink && (cpu_numel(sink) != d.N || cpu_attr_int(p, "smooth_softmax", 0)))
		return cpu_fail(ctx, CPU_E_INVALID, "GroupQueryAttention: head_sink must have %lld "
				"values, and not with smooth_softmax", (long long)d.N);
	dims[0] = d.B;
	dims[1] = d.S;
	dims[2] = d.N * d.H;
	if (!(Y = cpu_output(ctx, 0, CPU_FLOAT, 3, dims)) ||
	    !(a.k.base = gqa_present(ctx, &d, 1, &k, rot, cs, sn)) ||
	    !(a.v.base = gqa_present(ctx, &d, 2, &v, 0, NULL, NULL)) ||
	    !(a.mask = gqa_mask(ctx, &d)))
		return CPU_E_NOMEM;
	if ((rc = gqa_rotate_q(ctx, &d, &a, rot, cs, sn)))
		return rc;
	gqa_geometry(p, &d, &a, sink);
	if ((rc = ms_attn_bias(ctx, 10, &a)))
		return rc;
	a.out = Y->data;
	return ms_attn_run(ctx, &a);
}

const cpu_op cpu_op_ms_group_query_attention = {
	"GroupQueryAttention", "com.microsoft", 1, 1, gqa_supports, NULL, gqa_compute, NULL,
};
