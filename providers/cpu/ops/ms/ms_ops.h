/*
 * ms_ops: what the files of the com.microsoft family (ONNX Runtime's
 * contrib ops, ops/ms/) share: the fused activations of FusedConv and
 * FusedGemm, the attention core that Attention and MultiHeadAttention run
 * on (attn_core.c; its GQA fields, kv_group, softcap, smooth and sink,
 * are GroupQueryAttention's, gqa.c), and the rotary embedding (rotary.c).
 *
 * The ops reuse the provider's kernels: FusedConv and FusedGemm are the
 * Conv and Gemm ops with a fused tail (node->fuse, cpu_kernel.h) that the
 * op sets at prepare; the attention products run on the packed GEMM's
 * batches and Softmax on cpu_softmax_rows (ONNX Runtime's MLAS bits).
 */
#ifndef ORTMK_CPU_MS_OPS_H
#define ORTMK_CPU_MS_OPS_H

#include "cpu_ops.h"
#include "fuse_tail.h"

/* The ai.onnx kernels the fused ops delegate to (ops/nn/). */
extern const cpu_op cpu_op_conv, cpu_op_gemm;

/* ---- fused.c ---- */

/* An activation named by a string attribute, as ONNX Runtime's fused ops
 * take it.  kind: a cpu_fuse_act, or one of the MS_ACT_* below that no
 * fused tail has (FusedGemm computes those itself). */
enum {
	MS_ACT_ELU = 100, MS_ACT_SELU, MS_ACT_SOFTPLUS, MS_ACT_SOFTSIGN, MS_ACT_THRESHOLDED_RELU,
	MS_ACT_SCALED_TANH, MS_ACT_PARAMETRIC_SOFTPLUS,
};

typedef struct ms_act {
	int kind;
	float a, b, g;
} ms_act;

/* y = act(x) over n floats in place. */
void ms_act_apply(const ms_act *act, float *x, int64_t n);

/* ---- attn_core.c ---- */

/* One head's operand in memory: element (b, n, t, d) lies at
 * base + b * bs + n * hs + t * ld + d. */
typedef struct ms_view {
	const float *base;
	int64_t bs, hs, ld;
} ms_view;

typedef struct ms_attn {
	int64_t B, N, S, T;     /* batch, query heads, query length, key length */
	int64_t hq, hv;         /* head sizes of Q/K and of V */
	int64_t kv_group;       /* query heads per K/V head (GQA), >= 1 */
	ms_view q, k, v;
	float scale;
	float softcap;          /* 0: none; else softcap * tanh(score / softcap) */
	/* Added to the scaled scores: mask [B, S, T] (NULL: none) and a bias
	 * [B or 1, N or 1, S, T] (NULL: none) whose batch and head strides
	 * are 0 where they broadcast. */
	const float *mask;
	const float *bias;
	int64_t bias_bs, bias_hs;
	int smooth;             /* softmax with an extra 0 logit (smooth_softmax) */
	const float *sink;      /* per head: an extra logit of that value, or NULL */
	/* Output: element (b, s, n, d) at out + b * out_bs + s * out_ld + n * hv + d */
	float *out;
	int64_t out_bs, out_ld;
	float *qk;              /* [B, N, S, T] scaled scores before Softmax, or NULL */
} ms_attn;

/* Softmax(scale * Q K^T + mask + bias) V for every (batch, head), on the
 * pool.  0 or a status. */
int ms_attn_run(cpu_ctx *ctx, const ms_attn *a);

/* The additive mask [B, S, T] of an int32 key mask in one of the formats
 * ONNX Runtime's CPU provider takes ([B] lengths, [2B] ends and starts,
 * [B, T], [B, S, T]; Attention's mask_index, MultiHeadAttention's
 * key_padding_mask): filter where masked, merged with the causal mask
 * (filter added where key j > past + query i) when causal is set.  M may be NULL (causal only).
 * *out is NULL when nothing is masked.  0 or a status. */
int ms_attn_mask(cpu_ctx *ctx, const cpu_tensor *M, int idx, int64_t B, int64_t S, int64_t T,
		 int64_t past, int causal, float filter, float **out);

/* What Attention and MultiHeadAttention set up alike: a's geometry (one
 * K/V head per query head), its mask from input mask_in (P past rows before
 * the S new ones; the node's unidirectional and mask_filter_value) and its
 * attention bias from input 5. */
int ms_attn_begin(cpu_ctx *ctx, ms_attn *a, int64_t B, int64_t N, int64_t S, int64_t T,
		  int64_t P, int64_t hq, int64_t hv, int mask_in);

/* The attention bias input idx as ms_attn's bias, checked against
 * [B or 1, N or 1, S, T]. */
int ms_attn_bias(cpu_ctx *ctx, int idx, ms_attn *a);

/* dst[b, n, t, :] for t < past from past (its own length P), then the new
 * rows from src (L rows): the present K or V cache [B, N, cap, h]. */
void ms_concat_kv(float *dst, int64_t B, int64_t N, int64_t cap, int64_t h, const float *past,
		  int64_t P, int64_t past_cap, const ms_view *src, int64_t L);

/* ---- rotary.c ---- */

/* Rotates the first rot dims of x (one row of a head) for position pos by
 * the caches cos/sin [max_pos, rot / 2], in place; interleaved pairs
 * (x[2i], x[2i+1]) or halves (x[i], x[i + rot/2]). */
void ms_rotary_row(float *x, int64_t rot, const float *cos, const float *sin, int64_t pos,
		   int interleaved);

/* ---- norm.c ---- */

/* LayerNormalization (simplified: RMS, no mean) of one row of n floats:
 * y = (x - mean) * inv * gamma + beta.  *mean_out and *inv_out as ONNX
 * Runtime's optional outputs give them. */
void ms_norm_row(const float *x, float *y, int64_t n, const float *gamma, const float *beta,
		 float eps, int simplified, float *mean_out, float *inv_out);

#endif
