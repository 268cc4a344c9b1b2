/*
 * embed_norm: com.microsoft EmbedLayerNormalization, BERT's embedding
 * layer as ONNX Runtime fuses it: for every token, word_embedding[id] +
 * position_embedding[position] (+ segment_embedding[segment]), then
 * LayerNorm over the hidden size with gamma and beta, float32 tables,
 * int32 ids.  Outputs: the normalized embedding [B, S, H]; mask_index
 * [B], the count of ones in each row of the optional mask (zeros
 * without one); the optional embedding_sum before the norm.  Positions
 * are position_ids ([B, S] or [1, S]) when given, else 0..S-1.  An id
 * outside its table is an error naming it.
 */
#include <string.h>

#include "ms_ops.h"

static int embed_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt, int n_in,
			  char *why, size_t n)
{
	static const int ids[] = {0, 1, 7, 8};

	(void)p;
	(void)opset;
	for (size_t i = 0; i < sizeof(ids) / sizeof(ids[0]); i++)
		if (!cpu_supports_dtype(dt, n_in, ids[i], CPU_BIT(CPU_INT32), why, n))
			return 0;
	for (int i = 2; i < 7; i++)
		if (!cpu_supports_dtype(dt, n_in, i, CPU_TYPES_F32, why, n))
			return 0;
	return 1;
}

/* Input idx as an int32 [B, S] (bcast_ok: or [1, S]) tensor, or NULL. */
static const int32_t *ids_of(cpu_ctx *ctx, int idx, int64_t B, int64_t S, int bcast_ok,
			     int64_t *bstride, int *rc)
{
	const cpu_tensor *t = cpu_input(ctx, idx);

	if (!t)
		return NULL;
	if ((*rc = cpu_check_dtype(ctx, t, idx, CPU_BIT(CPU_INT32))))
		return NULL;
	if (t->rank != 2 || t->dims[1] != S || (t->dims[0] != B && !(bcast_ok && t->dims[0] == 1))) {
		*rc = cpu_fail(ctx, CPU_E_INVALID, "EmbedLayerNormalization: input %d must be [%lld,%lld]",
			       idx, (long long)B, (long long)S);
		return NULL;
	}
	*bstride = t->dims[0] == 1 ? 0 : S;
	return t->data;
}

/* Table idx: a float [rows, H] matrix (NULL when omitted). */
static const cpu_tensor *table_of(cpu_ctx *ctx, int idx, int64_t H, int *rc)
{
	const cpu_tensor *t = cpu_input(ctx, idx);

	if (!t)
		return NULL;
	if ((*rc = cpu_check_dtype(ctx, t, idx, CPU_TYPES_F32)))
		return NULL;
	if (t->rank != 2 || (H >= 0 && t->dims[1] != H)) {
		*rc = cpu_fail(ctx, CPU_E_INVALID, "EmbedLayerNormalization: input %d must be a "
			       "[rows, hidden] matrix", idx);
		return NULL;
	}
	return t;
}

static int lookup(cpu_ctx *ctx, const cpu_tensor *tab, int32_t id, const char *what,
		  const float **row)
{
	if (id < 0 || id >= tab->dims[0])
		return cpu_fail(ctx, CPU_E_INVALID, "EmbedLayerNormalization: %s %d is outside "
				"its table of %lld rows", what, id, (long long)tab->dims[0]);
	*row = (const float *)tab->data + (int64_t)id * tab->dims[1];
	return 0;
}

static int embed_compute(cpu_ctx *ctx)
{
	const cpu_tensor *Ids, *Wt, *Pt, *St, *G, *Be;
	const int32_t *seg, *mask, *pos;
	int64_t B, S, H, sb = 0, mb = 0, pb = 0, dims[3];
	cpu_tensor *Y, *Mi, *Sum = NULL;
	float eps = cpu_attr_float(ctx->node->proto, "epsilon", 1e-12f), *tmp;
	int rc = 0;

	if (!(Ids = cpu_require(ctx, 0, &rc)) || (rc = cpu_check_dtype(ctx, Ids, 0, CPU_BIT(CPU_INT32))))
		return rc;
	if (Ids->rank != 2)
		return cpu_fail(ctx, CPU_E_INVALID, "EmbedLayerNormalization: input_ids must be 2-D");
	B = Ids->dims[0];
	S = Ids->dims[1];
	if (!(Wt = cpu_require(ctx, 2, &rc)) || !(Wt = table_of(ctx, 2, -1, &rc)))
		return rc;
	H = Wt->dims[1];
	if (!cpu_require(ctx, 3, &rc) || !(Pt = table_of(ctx, 3, H, &rc)) ||
	    (!(St = table_of(ctx, 4, H, &rc)) && rc) || !(G = cpu_require(ctx, 5, &rc)) ||
	    !(Be = cpu_require(ctx, 6, &rc)))
		return rc;
	if (cpu_numel(G) != H || cpu_numel(Be) != H || G->dtype != CPU_FLOAT || Be->dtype != CPU_FLOAT)
		return cpu_fail(ctx, CPU_E_INVALID, "EmbedLayerNormalization: gamma and beta must "
				"be %lld floats", (long long)H);
	if ((!(seg = ids_of(ctx, 1, B, S, 0, &sb, &rc)) && rc) ||
	    (!(mask = ids_of(ctx, 7, B, S, 0, &mb, &rc)) && rc) ||
	    (!(pos = ids_of(ctx, 8, B, S, 1, &pb, &rc)) && rc))
		return rc;
	if (seg && !St)
		return cpu_fail(ctx, CPU_E_INVALID, "EmbedLayerNormalization: segment_ids without "
				"segment_embedding");
	dims[0] = B;
	dims[1] = S;
	dims[2] = H;
	if (!(Y = cpu_output(ctx, 0, CPU_FLOAT, 3, dims)) ||
	    !(Mi = cpu_output(ctx, 1, CPU_INT32, 1, dims)) ||
	    (ctx->n_out > 2 && !(Sum = cpu_output(ctx, 2, CPU_FLOAT, 3, dims))) ||
	    !(tmp = cpu_scratch(ctx, (size_t)H * sizeof(float) + 1)))
		return CPU_E_NOMEM;
	for (int64_t b = 0; b < B; b++) {
		int32_t ones = 0;

		for (int64_t s = 0; s < S; s++) {
			const float *w = NULL, *p = NULL, *g = NULL;
			float *x = Sum ? (float *)Sum->data + (b * S + s) * H : tmp;
			int32_t pid = pos ? pos[b * pb + s] : (int32_t)s;

			if ((rc = lookup(ctx, Wt, ((const int32_t *)Ids->data)[b * S + s], "word id", &w)) ||
			    (rc = lookup(ctx, Pt, pid, "position", &p)) ||
			    (seg && (rc = lookup(ctx, St, seg[b * sb + s], "segment id", &g))))
				return rc;
			for (int64_t i = 0; i < H; i++)
				x[i] = w[i] + p[i] + (g ? g[i] : 0.0f);
			ms_norm_row(x, (float *)Y->data + (b * S + s) * H, H, G->data, Be->data, eps, 0,
				    NULL, NULL);
			ones += mask && mask[b * mb + s] == 1;
		}
		((int32_t *)Mi->data)[b] = ones;
	}
	return 0;
}

const cpu_op cpu_op_ms_embed_layer_norm = {
	"EmbedLayerNormalization", "com.microsoft", 1, 1, embed_supports, NULL, embed_compute, NULL,
};
