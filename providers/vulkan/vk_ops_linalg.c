/*
 * vk_ops_linalg: MatMul (numpy semantics: 1-D operands promoted, batch
 * dims broadcast) and Gemm (transA/transB, alpha, beta, C broadcast one
 * way) on the tiled shaders/gemm.comp.  Transposes never move data: they
 * are the strides the shader reads A and B with.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dk_ops.h"
#include "vk_ops.h"

#define MAX_BATCH 4
#define TILE 32

typedef struct gemm_push {
	uint32_t M, N, K;
	uint32_t a_rs, a_cs, b_rs, b_cs;
	uint32_t c_rs, c_cs;
	uint32_t flags;
	float alpha, beta;
	uint32_t nb;
	uint32_t bdims[MAX_BATCH], a_bs[MAX_BATCH], b_bs[MAX_BATCH];
	uint32_t n;             /* gemm_direct: invocations */
} gemm_push;

_Static_assert(sizeof(gemm_push) <= VKX_PUSH_BYTES, "gemm push constants");

/* Folds the batch dims into push (drops 1s, merges neighbours). */
static int fold_batch(gemm_push *p, int nb, const int64_t *bd, const int64_t *sa,
		      const int64_t *sb)
{
	int64_t d[EP_MAX_RANK], a[EP_MAX_RANK], b[EP_MAX_RANK];
	int k;

	memcpy(a, sa, sizeof(int64_t) * (size_t)nb);
	memcpy(b, sb, sizeof(int64_t) * (size_t)nb);
	k = dk_fold_strides(nb, bd, a, b, d);
	if (k > MAX_BATCH)
		return -1;
	p->nb = (uint32_t)k;
	for (int i = 0; i < k; i++) {
		p->bdims[i] = (uint32_t)d[i];
		p->a_bs[i] = (uint32_t)a[i];
		p->b_bs[i] = (uint32_t)b[i];
	}
	return 0;
}

/* The tiled kernel (gemm.comp) on GPUs; the direct one (gemm_direct.comp)
 * on CPU implementations, whose barriers are expensive, and for products
 * too thin to fill a tile.  ORTMK_VULKAN_GEMM=tiled|direct forces one. */
static int use_tiled(const dk_ctx *c, const gemm_push *p)
{
	const char *e = getenv("ORTMK_VULKAN_GEMM");

	if (e && !strcmp(e, "tiled"))
		return 1;
	if ((e && !strcmp(e, "direct")) || vk_device_is_cpu(c))
		return 0;
	return p->M >= 16 && p->N >= 16 && p->K >= 16;
}

static int emit_gemm(dk_ctx *c, gemm_push *p, const vk_buf *a, const vk_buf *b,
		     const vk_buf *bias, const vk_buf *y, int64_t batches)
{
	int64_t gx = ((int64_t)p->N + TILE - 1) / TILE, gy = ((int64_t)p->M + TILE - 1) / TILE;
	int64_t threads = batches * (((int64_t)p->M + 3) / 4) * (((int64_t)p->N + 3) / 4);

	if (!use_tiled(c, p)) {
		if (threads >= VKX_MAX_ELEMS)
			return dk_fail(c, EP_E_UNSUPPORTED, "product too large for one dispatch");
		p->n = (uint32_t)threads;
		return vk_emit_1d(c, VKP_GEMM_DIRECT, (vk_buf[]){*a, *b, *bias, *y}, 4, 8u, p,
				  sizeof(*p), (uint64_t)threads);
	}
	if (gx > 65535 || gy > 65535 || batches > 65535)
		return dk_fail(c, EP_E_UNSUPPORTED, "matrix %ux%u x %lld batches is too large",
			       p->M, p->N, (long long)batches);
	return vk_emit(c, VKP_GEMM, (vk_buf[]){*a, *b, *bias, *y}, 4, 8u, p, sizeof(*p),
		       (uint32_t)gx, (uint32_t)gy, (uint32_t)batches);
}

static int matmul_plan(dk_ctx *c)
{
	const dk_val *A = dk_in(c, 0), *B = dk_in(c, 1), *y;
	gemm_push p = {.alpha = 1.0f};
	dk_matmul m;

	if (dk_matmul_out(c, &m, &y))
		return c->status;
	p.M = (uint32_t)m.M;
	p.K = (uint32_t)m.K;
	p.N = (uint32_t)m.N;
	p.a_rs = p.K;
	p.a_cs = 1;
	p.b_rs = p.N;
	p.b_cs = 1;
	if (fold_batch(&p, m.nb, m.bd, m.sa, m.sb))
		return dk_fail(c, EP_E_UNSUPPORTED, "batch dims fold to more than %d", MAX_BATCH);
	if (!y->numel)
		return 0;
	return emit_gemm(c, &p, &A->dev, &B->dev, &A->dev, &y->dev, dk_numel(m.nb, m.bd));
}

/* Strides of Gemm's C broadcast to [M, N]; -1 when it does not. */
static int bias_strides(const dk_val *C, int64_t M, int64_t N, gemm_push *p)
{
	int64_t d0 = C->rank == 2 ? C->dims[0] : 1;
	int64_t d1 = C->rank >= 1 ? C->dims[C->rank - 1] : 1;

	if (C->rank > 2 || (d0 != M && d0 != 1) || (d1 != N && d1 != 1))
		return -1;
	p->c_cs = d1 == 1 ? 0 : 1;
	p->c_rs = d0 == 1 ? 0 : (uint32_t)d1;
	p->flags = 1;
	return 0;
}

static int gemm_plan(dk_ctx *c)
{
	const Onnx__NodeProto *pr = c->node->proto;
	const dk_val *A = dk_in(c, 0), *B = dk_in(c, 1), *C = dk_in(c, 2), *y;
	int ta = proto_attr_int(pr, "transA", 0) != 0, tb = proto_attr_int(pr, "transB", 0) != 0;
	gemm_push p = {.alpha = proto_attr_float(pr, "alpha", 1.0f), .beta = proto_attr_float(pr, "beta", 1.0f)};
	int64_t M, N, K, dims[2];
	char s1[128], s2[128];

	if (!A || !B || A->rank != 2 || B->rank != 2 || A->dtype != vk_node_dtype(c) || B->dtype != vk_node_dtype(c))
		return dk_fail(c, EP_E_INVALID, "A and B must be 2-D float32");
	M = A->dims[ta];
	K = A->dims[!ta];
	N = B->dims[!tb];
	if (B->dims[tb] != K)
		return dk_fail(c, EP_E_INVALID, "%s x %s do not multiply (transA=%d, transB=%d)",
			       dk_shape_str(2, A->dims, s1, sizeof(s1)),
			       dk_shape_str(2, B->dims, s2, sizeof(s2)), ta, tb);
	if (C && (C->dtype != vk_node_dtype(c) || bias_strides(C, M, N, &p)))
		return dk_fail(c, EP_E_INVALID, "C %s does not broadcast to [%lld,%lld]",
			       dk_shape_str(C->rank, C->dims, s1, sizeof(s1)), (long long)M,
			       (long long)N);
	dims[0] = M;
	dims[1] = N;
	y = dk_out(c, 0, vk_node_dtype(c), 2, dims);
	if (!y)
		return c->status;
	p.M = (uint32_t)M;
	p.N = (uint32_t)N;
	p.K = (uint32_t)K;
	p.a_rs = ta ? 1 : (uint32_t)K;
	p.a_cs = ta ? (uint32_t)M : 1;
	p.b_rs = tb ? 1 : (uint32_t)N;
	p.b_cs = tb ? (uint32_t)K : 1;
	if (!y->numel)
		return 0;
	return emit_gemm(c, &p, &A->dev, &B->dev, C ? &C->dev : &A->dev, &y->dev, 1);
}

const dk_op vk_ops_linalg[] = {
	{"MatMul", 1, 22, dk_binary_supports, NULL, matmul_plan, NULL,
	 VKX_PIPE(VKP_GEMM) | VKX_PIPE(VKP_GEMM_DIRECT), NULL, NULL},
	{"Gemm", 7, 22, dk_gemm_supports, NULL, gemm_plan, NULL,
	 VKX_PIPE(VKP_GEMM) | VKX_PIPE(VKP_GEMM_DIRECT), NULL, NULL},
	{0},
};
