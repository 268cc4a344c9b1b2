/*
 * rotary: com.microsoft RotaryEmbedding (float32) and the rotation it
 * shares with GroupQueryAttention's do_rotary (ms_rotary_row).
 *
 * The input is [B, S, N * H] (num_heads gives N when the rotary dim is
 * not the whole head) or [B, N, S, H]; position_ids is [B, S], or one
 * value: the position of the first token, the others following it.  The
 * first rotary_embedding_dim values of each head (default: all) are
 * rotated by the caches cos/sin [max_position, rot / 2], as pairs of
 * halves or, with interleaved=1, as adjacent pairs; the rest are copied.
 * is_packed_batching (ragged batches) is refused by name.
 */
#include <stdio.h>
#include <string.h>

#include "ms_ops.h"

void ms_rotary_row(float *x, int64_t rot, const float *cos, const float *sin, int64_t pos,
		   int interleaved)
{
	int64_t half = rot / 2;
	const float *c = cos + pos * half, *s = sin + pos * half;

	for (int64_t i = 0; i < half; i++) {
		int64_t i1 = interleaved ? 2 * i : i, i2 = interleaved ? 2 * i + 1 : i + half;
		float x1 = x[i1], x2 = x[i2];

		x[i1] = x1 * c[i] - x2 * s[i];
		x[i2] = x2 * c[i] + x1 * s[i];
	}
}

static int rotary_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt, int n_in,
			   char *why, size_t n)
{
	(void)opset;
	if (cpu_attr_int(p, "is_packed_batching", 0))
		return snprintf(why, n, "RotaryEmbedding: is_packed_batching is not supported"), 0;
	return cpu_supports_dtype(dt, n_in, 0, CPU_TYPES_F32, why, n) &&
	       cpu_supports_dtype(dt, n_in, 1, CPU_BIT(CPU_INT64), why, n) &&
	       cpu_supports_dtype(dt, n_in, 2, CPU_TYPES_F32, why, n) &&
	       cpu_supports_dtype(dt, n_in, 3, CPU_TYPES_F32, why, n);
}

static int rotary_compute(cpu_ctx *ctx)
{
	const Onnx__NodeProto *p = ctx->node->proto;
	const cpu_tensor *X, *P, *C, *Sn;
	int64_t B, S, N, H, rot, maxpos, nh = cpu_attr_int(p, "num_heads", 0);
	int interleaved = cpu_attr_int(p, "interleaved", 0) != 0, rc = 0, bnsh;
	const int64_t *pid;
	cpu_tensor *Y;

	if (!(X = cpu_require(ctx, 0, &rc)) || !(P = cpu_require(ctx, 1, &rc)) ||
	    !(C = cpu_require(ctx, 2, &rc)) || !(Sn = cpu_require(ctx, 3, &rc)))
		return rc;
	if ((rc = cpu_check_dtype(ctx, X, 0, CPU_TYPES_F32)) ||
	    (rc = cpu_check_dtype(ctx, P, 1, CPU_BIT(CPU_INT64))) ||
	    (rc = cpu_check_dtype(ctx, C, 2, CPU_TYPES_F32)) ||
	    (rc = cpu_check_dtype(ctx, Sn, 3, CPU_TYPES_F32)))
		return rc;
	if (cpu_attr_int(p, "is_packed_batching", 0))
		return cpu_fail(ctx, CPU_E_UNSUPPORTED, "RotaryEmbedding: is_packed_batching is not "
				"supported");
	if ((X->rank != 3 && X->rank != 4) || C->rank != 2 || Sn->rank != 2 ||
	    C->dims[0] != Sn->dims[0] || C->dims[1] != Sn->dims[1])
		return cpu_fail(ctx, CPU_E_INVALID, "RotaryEmbedding: input must be 3-D or 4-D and the "
				"caches 2-D of one shape");
	bnsh = X->rank == 4;
	B = X->dims[0];
	S = X->dims[bnsh ? 2 : 1];
	maxpos = C->dims[0];
	rot = cpu_attr_int(p, "rotary_embedding_dim", 0);
	if (bnsh)
		H = X->dims[3];
	else if (nh > 0)
		H = X->dims[2] / nh;
	else
		H = rot > 0 ? 0 : C->dims[1] * 2;
	if (H <= 0 || (!bnsh && X->dims[2] % H))
		return cpu_fail(ctx, CPU_E_INVALID, "RotaryEmbedding: cannot tell the head size "
				"(num_heads is needed with rotary_embedding_dim)");
	N = bnsh ? X->dims[1] : X->dims[2] / H;
	rot = rot > 0 ? rot : H;
	if (rot > H || rot % 2 || C->dims[1] != rot / 2)
		return cpu_fail(ctx, CPU_E_INVALID, "RotaryEmbedding: the caches must be [max, %lld] "
				"for a rotary dim of %lld", (long long)(rot / 2), (long long)rot);
	if (!(cpu_numel(P) == 1 || (P->rank == 2 && P->dims[0] == B && P->dims[1] == S)))
		return cpu_fail(ctx, CPU_E_INVALID, "RotaryEmbedding: position_ids must be [%lld,%lld] "
				"or one value", (long long)B, (long long)S);
	if (!(Y = cpu_output(ctx, 0, CPU_FLOAT, X->rank, X->dims)))
		return CPU_E_NOMEM;
	memcpy(Y->data, X->data, X->nbytes);
	pid = P->data;
	for (int64_t b = 0; b < B; b++)
		for (int64_t s = 0; s < S; s++) {
			int64_t pos = cpu_numel(P) == 1 ? pid[0] + s : pid[b * S + s];

			if (pos < 0 || pos >= maxpos)
				return cpu_fail(ctx, CPU_E_INVALID, "RotaryEmbedding: position %lld is "
						"outside the caches' %lld", (long long)pos,
						(long long)maxpos);
			for (int64_t n = 0; n < N; n++) {
				int64_t off = bnsh ? ((b * N + n) * S + s) * H : (b * S + s) * N * H + n * H;

				ms_rotary_row((float *)Y->data + off, rot, C->data, Sn->data, pos,
					      interleaved);
			}
		}
	return 0;
}

const cpu_op cpu_op_ms_rotary_embedding = {
	"RotaryEmbedding", "com.microsoft", 1, 1, rotary_supports, NULL, rotary_compute, NULL,
};
