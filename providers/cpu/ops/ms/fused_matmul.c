/*
 * fused_matmul: com.microsoft FusedMatMul, float32: MatMul with numpy
 * batch broadcasting of alpha * op(A) op(B), where op transposes the last
 * two dims (transA, transB) and, first, transBatchA/transBatchB move the
 * leading dim of a rank >= 3 operand behind its other batch dims
 * ([d0, d1.., m, k] -> [d1.., d0, k]), as ONNX Runtime's optimizer writes
 * a MatMul that absorbed Transposes and a scale.
 *
 * transA/transB cost nothing: they are the GEMM's own flags.  A constant
 * 2-D B is packed once at load (the pre-pack cache) and every batch entry
 * runs against it; other products run as one GEMM batch on the pool.
 * transBatch operands are gathered into a dense copy first.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gemm.h"
#include "ms_ops.h"

#define FMM_PACK_MAX ((size_t)32 << 20)

typedef struct fmm_state {
	const void *packed;
	const float *src;
	int64_t K, N;
} fmm_state;

static int fmm_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt, int n_in,
			char *why, size_t n)
{
	(void)p;
	(void)opset;
	return cpu_supports_dtype(dt, n_in, 0, CPU_TYPES_F32, why, n) &&
	       cpu_supports_dtype(dt, n_in, 1, CPU_TYPES_F32, why, n);
}

typedef struct pack_arg {
	const cpu_tensor *B;
	int transB;
} pack_arg;

static int pack_b(void *dst, size_t size, void *arg)
{
	const pack_arg *a = arg;
	int64_t K = a->B->dims[a->transB ? 1 : 0], N = a->B->dims[a->transB ? 0 : 1];

	return gemm_pack_b(GEMM_ISA_AUTO, a->B->data, a->B->dims[1], a->transB, K, N, dst, size);
}

static int fmm_prepare(cpu_node *node, char *err, size_t n)
{
	const cpu_tensor *B = node->n_in > 1 ? cpu_node_const(node, 1) : NULL;
	int tb = cpu_attr_int(node->proto, "transB", 0) != 0;
	fmm_state *st = calloc(1, sizeof(*st));
	pack_arg arg = {B, tb};
	char fmt[48];
	size_t size;

	if (!st)
		return snprintf(err, n, "out of memory"), CPU_E_NOMEM;
	node->state = st;
	if (!B || B->dtype != CPU_FLOAT || B->rank != 2 || B->dims[0] <= 0 || B->dims[1] <= 0)
		return 0;
	st->K = B->dims[tb ? 1 : 0];
	st->N = B->dims[tb ? 0 : 1];
	size = gemm_pack_b_size(GEMM_ISA_AUTO, st->K, st->N);
	if (!size || size > FMM_PACK_MAX)
		return 0;
	snprintf(fmt, sizeof(fmt), "gemm-b%s-v%d-%s", tb ? "t" : "", GEMM_PACK_VERSION,
		 gemm_isa_name(gemm_isa_best()));
	if (!(st->packed = cpu_prepack(node, 1, fmt, size, pack_b, &arg, err, n)))
		return CPU_E_NOMEM;
	if (gemm_pack_b_check(st->packed, size, st->K, st->N))
		st->packed = NULL;
	st->src = B->data;
	return 0;
}

static void fmm_release(cpu_node *node)
{
	free(node->state);
	node->state = NULL;
}

/* An operand as a dense [batch..., rows, cols] in its stored order (the
 * transBatch permutation applied, the last-two transpose left to the GEMM). */
typedef struct operand {
	const float *data;
	int rank;
	int64_t dims[CPU_MAX_RANK];
} operand;

static int gather(cpu_ctx *ctx, const cpu_tensor *t, int trans_batch, operand *o)
{
	int64_t strides[CPU_MAX_RANK], st = 1;
	float *dst;
	int r = t->rank;

	o->rank = r;
	memcpy(o->dims, t->dims, sizeof(int64_t) * (size_t)r);
	o->data = t->data;
	if (!trans_batch || r < 3)
		return 0;
	/* [d0, d1 .. d(r-2), d(r-1)] read as [d1 .. d(r-2), d0, d(r-1)] */
	for (int d = r - 1; d >= 0; d--) {
		strides[d] = st;
		st *= t->dims[d];
	}
	for (int d = 0; d < r - 2; d++)
		o->dims[d] = t->dims[d + 1];
	o->dims[r - 2] = t->dims[0];
	{
		int64_t s2[CPU_MAX_RANK];

		for (int d = 0; d < r - 2; d++)
			s2[d] = strides[d + 1];
		s2[r - 2] = strides[0];
		s2[r - 1] = 1;
		if (!(dst = cpu_scratch(ctx, t->nbytes + 1)))
			return CPU_E_NOMEM;
		cpu_copy_strided_par(ctx, dst, t->data, sizeof(float), r, o->dims, s2);
	}
	o->data = dst;
	return 0;
}

typedef struct fmm_run {
	const float *a, *b;
	float *y;
	int64_t M, N, K, sa, sb;
	const float **pa, **pb;
	float **py;
	int64_t n;
} fmm_run;

static int collect(void *arg, int64_t len, const int64_t *off, const int64_t *st)
{
	fmm_run *r = arg;

	for (int64_t j = 0; j < len; j++, r->n++) {
		r->pa[r->n] = r->a + (off[0] + j * st[0]) * r->sa;
		r->pb[r->n] = r->b + (off[1] + j * st[1]) * r->sb;
		r->py[r->n] = r->y + (off[2] + j) * r->M * r->N;
	}
	return 0;
}

static int fmm_compute(cpu_ctx *ctx)
{
	const Onnx__NodeProto *p = ctx->node->proto;
	const fmm_state *st = ctx->node->state;
	const cpu_tensor *At, *Bt;
	int ta = cpu_attr_int(p, "transA", 0) != 0, tb = cpu_attr_int(p, "transB", 0) != 0;
	float alpha = cpu_attr_float(p, "alpha", 1.0f);
	int64_t dims[CPU_MAX_RANK], Kb, count;
	int ranks[2], yr, rc = 0;
	const int64_t *bd[2];
	gemm_epilogue ep = GEMM_EPILOGUE_INIT;
	operand A, B;
	cpu_bcast bc;
	cpu_tensor *Y;
	fmm_run r;

	if (!(At = cpu_require(ctx, 0, &rc)) || !(Bt = cpu_require(ctx, 1, &rc)))
		return rc;
	if ((rc = cpu_check_dtype(ctx, At, 0, CPU_TYPES_F32)) ||
	    (rc = cpu_check_dtype(ctx, Bt, 1, CPU_TYPES_F32)))
		return rc;
	if (At->rank < 1 || Bt->rank < 1)
		return cpu_fail(ctx, CPU_E_INVALID, "FusedMatMul operands must have rank >= 1");
	if ((rc = gather(ctx, At, cpu_attr_int(p, "transBatchA", 0) != 0, &A)) ||
	    (rc = gather(ctx, Bt, cpu_attr_int(p, "transBatchB", 0) != 0, &B)))
		return rc;
	ta = A.rank > 1 && ta;
	tb = B.rank > 1 && tb;
	memset(&r, 0, sizeof(r));
	r.M = A.rank > 1 ? A.dims[A.rank - (ta ? 1 : 2)] : 1;
	r.K = A.dims[A.rank - (ta && A.rank > 1 ? 2 : 1)];
	Kb = B.rank > 1 ? B.dims[B.rank - (tb ? 1 : 2)] : B.dims[0];
	r.N = B.rank > 1 ? B.dims[B.rank - (tb ? 2 : 1)] : 1;
	if (r.K != Kb)
		return cpu_fail(ctx, CPU_E_INVALID, "FusedMatMul: inner dims differ (%lld vs %lld)",
				(long long)r.K, (long long)Kb);
	ranks[0] = A.rank > 2 ? A.rank - 2 : 0;
	ranks[1] = B.rank > 2 ? B.rank - 2 : 0;
	bd[0] = A.dims;
	bd[1] = B.dims;
	if (cpu_bcast_init(&bc, 2, ranks, bd))
		return cpu_fail(ctx, CPU_E_INVALID, "FusedMatMul: batch dims do not broadcast");
	yr = bc.out_rank;
	memcpy(dims, bc.out_dims, sizeof(int64_t) * (size_t)yr);
	if (A.rank > 1)
		dims[yr++] = r.M;
	if (B.rank > 1)
		dims[yr++] = r.N;
	if (!(Y = cpu_output(ctx, 0, CPU_FLOAT, yr, dims)))
		return CPU_E_NOMEM;
	if (cpu_numel(Y) == 0)
		return 0;
	count = cpu_numel(Y) / (r.M * r.N);
	ep.alpha = alpha;
	if (st && st->packed && Bt->data == st->src && B.rank == 2 && st->K == r.K && st->N == r.N) {
		/* every batch entry of A against the packed weights */
		int64_t rows = ta ? r.M : count * r.M;

		for (int64_t i = 0; i < (ta ? count : 1); i++)
			if (gemm_compute(ctx->pool, rows, r.N, r.K, A.data + i * r.M * r.K,
					 ta ? r.M : r.K, ta, st->packed, &ep,
					 (float *)Y->data + i * r.M * r.N, r.N))
				return cpu_fail(ctx, CPU_E_INTERNAL, "FusedMatMul: packed GEMM failed");
		return 0;
	}
	r.a = A.data;
	r.b = B.data;
	r.y = Y->data;
	r.sa = r.M * r.K;
	r.sb = r.K * r.N;
	r.pa = cpu_scratch(ctx, sizeof(*r.pa) * (size_t)count);
	r.pb = cpu_scratch(ctx, sizeof(*r.pb) * (size_t)count);
	r.py = cpu_scratch(ctx, sizeof(*r.py) * (size_t)count);
	if (!r.pa || !r.pb || !r.py)
		return CPU_E_NOMEM;
	cpu_bcast_each(&bc, collect, &r);
	if (r.n != count)
		return cpu_fail(ctx, CPU_E_INTERNAL, "FusedMatMul: batch count mismatch");
	if (count > 1 && r.M > 1 && r.N > 1) {
		gemm_batch b = {count, r.pa, r.pb, NULL, r.py, NULL};

		if (gemm_sgemm_batch(ctx->pool, GEMM_ISA_AUTO, ta, tb, r.M, r.N, r.K,
				     ta ? r.M : r.K, tb ? r.K : r.N, &ep, r.N, &b) == 0)
			return 0;
	}
	for (int64_t i = 0; i < count; i++)
		cpu_sgemm_pool(ctx->pool, ta, tb, r.M, r.N, r.K, alpha, r.pa[i], ta ? r.M : r.K,
			       r.pb[i], tb ? r.K : r.N, 0.0f, r.py[i], r.N);
	return 0;
}

const cpu_op cpu_op_ms_fused_matmul = {
	"FusedMatMul", "com.microsoft", 1, 1, fmm_supports, fmm_prepare, fmm_compute, fmm_release,
};
