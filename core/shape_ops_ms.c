/*
 * shape_ops_ms.c: type and shape inference for the com.microsoft (ONNX Runtime's contrib ops)
 * domain, and its table.  The contract is shape_ops.h's; an op missing
 * here takes what the model declares (SHAPE_DECLARED), and its outputs are
 * sized at run time.  The CPU kernels (providers/cpu/ops/ms/) compute the
 * same shapes and check them against these; a dim these functions cannot
 * tell is left to the kernel (SHAPE_NEW).  SimplifiedLayerNormalization,
 * which ONNX Runtime registers in the default domain, is in shape_ops.c's
 * table with its function here.
 */
#include <string.h>

#include "shape_ops.h"
#include "shape_ops_fn.h"

/* Input 0's type and shape (the GELUs, RotaryEmbedding). */
/* A dim of t, or SHAPE_NEW when t's rank does not reach it. */
static int64_t dim_of(const graph_tinfo *t, int rank, int i)
{
	return t->rank == rank && i < rank ? t->dims[i] : SHAPE_NEW;
}

/* out has x's type and shape, with every dim from `from` on set to 1. */
static void stats_shape(graph_tinfo *o, const graph_tinfo *x, int from)
{
	shape_copy(o, x, 0);
	for (int i = from; i < o->rank; i++)
		o->dims[i] = 1;
}

/* SkipLayerNormalization, SkipSimplifiedLayerNormalization: output and
 * input_skip_bias_sum as the input; mean and inv_std_var with a last dim
 * of 1. */
static int fn_skip_norm(shape_ctx *c)
{
	const graph_tinfo *x = shape_in(c, 0);

	shape_copy(shape_out(c, 0), x, 0);
	if (x->rank >= 1) {
		stats_shape(shape_out(c, 1), x, x->rank - 1);
		stats_shape(shape_out(c, 2), x, x->rank - 1);
	}
	shape_copy(shape_out(c, 3), x, 0);
	return 0;
}

/* SimplifiedLayerNormalization: Y as X; inv_std_var 1 from axis on. */
int shape_fn_simplified_layernorm(shape_ctx *c)
{
	const graph_tinfo *x = shape_in(c, 0);
	int axis, rc;

	shape_copy(shape_out(c, 0), x, 0);
	if (x->rank < 0)
		return 0;
	if ((rc = shape_axis(c, shape_attr_int(c, "axis", -1), x->rank, &axis)))
		return rc;
	stats_shape(shape_out(c, 1), x, axis);
	return 0;
}

/* EmbedLayerNormalization: [B, S, H] (H from word_embedding), mask_index
 * int32 [B], embedding_sum as the output. */
static int fn_embed_norm(shape_ctx *c)
{
	const graph_tinfo *ids = shape_in(c, 0), *w = shape_in(c, 2);
	graph_tinfo *o = shape_out(c, 0), *m = shape_out(c, 1);
	int rc;

	if ((rc = shape_set_rank(c, o, w->elem_type, 3)) || (rc = shape_set_rank(c, m, 6, 1)))
		return rc;
	o->dims[0] = m->dims[0] = dim_of(ids, 2, 0);
	o->dims[1] = dim_of(ids, 2, 1);
	o->dims[2] = dim_of(w, 2, 1);
	shape_copy(shape_out(c, 2), o, 0);
	return 0;
}

/* FusedMatMul: numpy MatMul of op(A), op(B) when neither moves its batch
 * (transBatchA/B: the kernel sizes it). */
static int fn_fused_matmul(shape_ctx *c)
{
	const graph_tinfo *a = shape_in(c, 0), *b = shape_in(c, 1);
	graph_tinfo *o = shape_out(c, 0), ba, bb;
	int ta = shape_attr_int(c, "transA", 0) != 0, tb = shape_attr_int(c, "transB", 0) != 0;
	int rc;

	if (a->rank < 2 || b->rank < 2 || shape_attr_int(c, "transBatchA", 0) ||
	    shape_attr_int(c, "transBatchB", 0))
		return shape_set_rank(c, o, a->elem_type, -1);
	shape_copy(&ba, a, 0);
	shape_copy(&bb, b, 0);
	ba.rank -= 2;
	bb.rank -= 2;
	if ((rc = shape_bcast(c, &ba, &bb, o)))
		return rc;
	if (o->rank + 2 > GRAPH_MAX_RANK)
		return shape_set_rank(c, o, a->elem_type, -1);
	o->elem_type = a->elem_type;
	o->dims[o->rank] = a->dims[a->rank - (ta ? 1 : 2)];
	o->dims[o->rank + 1] = b->dims[b->rank - (tb ? 2 : 1)];
	o->rank += 2;
	return 0;
}

/* Attention: [B, S, Hv]; present [2, B, N, P + S, H] (with
 * past_present_share_buffer, the past's shape). */
static int fn_attention(shape_ctx *c)
{
	const graph_tinfo *x = shape_in(c, 0), *w = shape_in(c, 1), *past = shape_in(c, 4);
	graph_tinfo *o = shape_out(c, 0), *pr = shape_out(c, 1);
	const int64_t *q = NULL;
	int nq = shape_attr_ints(c, "qkv_hidden_sizes", &q), rc;
	int64_t n = shape_attr_int(c, "num_heads", 0), wn = dim_of(w, 2, 1);

	if ((rc = shape_set_rank(c, o, x->elem_type, 3)))
		return rc;
	o->dims[0] = dim_of(x, 3, 0);
	o->dims[1] = dim_of(x, 3, 1);
	o->dims[2] = nq == 3 ? q[2] : wn >= 0 ? wn / 3 : SHAPE_NEW;
	if (!shape_has_in(c, 4) && c->n->n_out < 2)
		return 0;
	if (shape_attr_int(c, "past_present_share_buffer", 0) && shape_has_in(c, 4)) {
		shape_copy(pr, past, 0);
		return 0;
	}
	if ((rc = shape_set_rank(c, pr, x->elem_type, 5)))
		return rc;
	pr->dims[0] = 2;
	pr->dims[1] = o->dims[0];
	pr->dims[2] = n > 0 ? n : SHAPE_NEW;
	if (o->dims[1] >= 0 && (!shape_has_in(c, 4) || dim_of(past, 5, 3) >= 0))
		pr->dims[3] = o->dims[1] + (shape_has_in(c, 4) ? past->dims[3] : 0);
	pr->dims[4] = n <= 0 ? SHAPE_NEW : nq == 3 ? q[0] / n : wn >= 0 ? wn / 3 / n : SHAPE_NEW;
	return 0;
}

/* MultiHeadAttention: [B, S, Dv], the present caches [B, N, P + L, H]
 * and qk [B, N, S, T] when the layout is the plain [B, S, D] one;
 * otherwise the kernel sizes them. */
static int fn_mha(shape_ctx *c)
{
	const graph_tinfo *q = shape_in(c, 0), *k = shape_in(c, 1), *v = shape_in(c, 2);
	const graph_tinfo *pk = shape_in(c, 6);
	int64_t n = shape_attr_int(c, "num_heads", 0), T = SHAPE_NEW;
	graph_tinfo *o = shape_out(c, 0);
	int rc;

	if ((rc = shape_set_rank(c, o, q->elem_type, 3)))
		return rc;
	if (q->rank != 3 || k->rank != 3 || v->rank != 3 || n <= 0)
		return 0;
	o->dims[0] = q->dims[0];
	o->dims[1] = q->dims[1];
	o->dims[2] = v->dims[2];
	if (k->dims[1] >= 0 && (!shape_has_in(c, 6) || dim_of(pk, 4, 2) >= 0))
		T = k->dims[1] + (shape_has_in(c, 6) ? pk->dims[2] : 0);
	for (int i = 1; i <= 2; i++) {
		const graph_tinfo *src = i == 1 ? k : v;
		graph_tinfo *p = shape_out(c, i);

		if ((rc = shape_set_rank(c, p, q->elem_type, 4)))
			return rc;
		p->dims[0] = q->dims[0];
		p->dims[1] = n;
		p->dims[2] = T;
		p->dims[3] = src->dims[2] >= 0 ? src->dims[2] / n : SHAPE_NEW;
	}
	if ((rc = shape_set_rank(c, shape_out(c, 3), q->elem_type, 4)))
		return rc;
	shape_out(c, 3)->dims[0] = q->dims[0];
	shape_out(c, 3)->dims[1] = n;
	shape_out(c, 3)->dims[2] = q->dims[1];
	shape_out(c, 3)->dims[3] = T;
	return 0;
}

/* GroupQueryAttention: [B, S, N * H] (query's D, or its share of a packed
 * QKV); present_key/value [B, Nkv, T, H] with T = max(past length,
 * total_sequence_length), a value the kernel reads: left to it. */
static int fn_gqa(shape_ctx *c)
{
	const graph_tinfo *q = shape_in(c, 0);
	int64_t n = shape_attr_int(c, "num_heads", 0), nkv = shape_attr_int(c, "kv_num_heads", 0);
	int packed = !shape_has_in(c, 1), rc;
	int64_t D = dim_of(q, 3, 2), H = SHAPE_NEW;
	graph_tinfo *o = shape_out(c, 0);

	if ((rc = shape_set_rank(c, o, q->elem_type, 3)))
		return rc;
	o->dims[0] = dim_of(q, 3, 0);
	o->dims[1] = dim_of(q, 3, 1);
	if (D >= 0 && n > 0 && nkv > 0)
		H = D / (packed ? n + 2 * nkv : n);
	o->dims[2] = H >= 0 ? H * n : SHAPE_NEW;
	for (int i = 1; i <= 2; i++) {
		graph_tinfo *p = shape_out(c, i);

		if ((rc = shape_set_rank(c, p, q->elem_type, 4)))
			return rc;
		p->dims[0] = o->dims[0];
		p->dims[1] = nkv > 0 ? nkv : SHAPE_NEW;
		p->dims[2] = SHAPE_NEW;
		p->dims[3] = H;
	}
	return 0;
}

static const shape_op_entry op_table[] = {
	{ "Gelu", shape_fn_unary, OP_NONE }, { "BiasGelu", shape_fn_unary, OP_NONE }, { "FastGelu", shape_fn_unary, OP_NONE },
	{ "QuickGelu", shape_fn_unary, OP_NONE }, { "RotaryEmbedding", shape_fn_unary, OP_NONE },
	{ "FusedConv", shape_fn_conv, SHAPE_CONV_FLOAT }, { "FusedGemm", shape_fn_gemm, 0 },
	{ "FusedMatMul", fn_fused_matmul, 0 },
	{ "SkipLayerNormalization", fn_skip_norm, 0 },
	{ "SkipSimplifiedLayerNormalization", fn_skip_norm, 0 },
	{ "EmbedLayerNormalization", fn_embed_norm, 0 },
	{ "Attention", fn_attention, 0 }, { "MultiHeadAttention", fn_mha, 0 },
	{ "GroupQueryAttention", fn_gqa, 0 },
	{ NULL, NULL, 0 },
};

shape_fn shape_op_find_ms(const char *op_type, int *arg)
{
	shape_fn fn = shape_table_find(op_table, sizeof(op_table) / sizeof(op_table[0]), op_type, arg);

	return fn ? fn : shape_op_find_msq(op_type, arg);
}
