/*
 * matmul: ONNX MatMul (numpy semantics: batch dims broadcast, 1-D operands
 * promoted and their unit dim dropped from the result) and Gemm (alpha,
 * beta, transA, transB, optional C broadcast onto [M, N]), float32, on the
 * packed GEMM and the provider's thread pool.  A constant B (weights, also
 * Gemm's transB=1 as nn.Linear exports it) is packed once at load through
 * the pre-pack cache; Gemm's constant row C becomes the GEMM's bias.  When
 * B has no batch, the batch of A folds into one tall GEMM.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_ops.h"
#include "fuse_tail.h"
#include "gemm.h"

static int f32_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt, int n_in,
			char *why, size_t n)
{
	(void)p;
	(void)opset;
	return cpu_supports_dtype(dt, n_in, 0, CPU_TYPES_F32, why, n) &&
	       cpu_supports_dtype(dt, n_in, 1, CPU_TYPES_F32, why, n);
}

typedef struct mm_run {
	const float *a, *b;
	float *y;
	int64_t M, N, K;
	float alpha;
	struct cpu_pool *pool;
	/* gemm_sgemm_batch's operands, filled by mm_collect; NULL: one
	 * GEMM per entry (mm_row) */
	const float **pa, **pb;
	float **py;
	int64_t n;
} mm_run;

/* One broadcast row of batch entries: a GEMM per entry. */
static int mm_row(void *arg, int64_t len, const int64_t *off, const int64_t *st)
{
	const mm_run *r = arg;
	for (int64_t j = 0; j < len; j++) {
		const float *a = r->a + (off[0] + j * st[0]) * r->M * r->K;
		const float *b = r->b + (off[1] + j * st[1]) * r->K * r->N;
		float *y = r->y + (off[2] + j) * r->M * r->N;
		cpu_sgemm_pool(r->pool, 0, 0, r->M, r->N, r->K, r->alpha, a, r->K, b, r->N, 0.0f,
			       y, r->N);
	}
	return 0;
}

/* One broadcast row of batch entries: their operands, for one batch. */
static int mm_collect(void *arg, int64_t len, const int64_t *off, const int64_t *st)
{
	mm_run *r = arg;
	for (int64_t j = 0; j < len; j++, r->n++) {
		r->pa[r->n] = r->a + (off[0] + j * st[0]) * r->M * r->K;
		r->pb[r->n] = r->b + (off[1] + j * st[1]) * r->K * r->N;
		r->py[r->n] = r->y + (off[2] + j) * r->M * r->N;
	}
	return 0;
}

/* Every batch entry's product as one job on the pool (attention's heads:
 * each whole on a thread rather than every head cut in slices, with a
 * pool wake-up per head).  1 when done, 0 to take the per-entry path
 * (thin products, no memory). */
static int mm_batch(cpu_ctx *ctx, mm_run *r, const cpu_bcast *bc, int64_t ysize)
{
	gemm_epilogue ep = GEMM_EPILOGUE_INIT;
	int64_t count;
	gemm_batch b;

	if (r->M < 2 || r->N < 2 || r->K < 1 || r->alpha == 0.0f ||
	    (count = ysize / (r->M * r->N)) < 2)
		return 0;
	r->pa = cpu_scratch(ctx, sizeof(*r->pa) * (size_t)count);
	r->pb = cpu_scratch(ctx, sizeof(*r->pb) * (size_t)count);
	r->py = cpu_scratch(ctx, sizeof(*r->py) * (size_t)count);
	if (!r->pa || !r->pb || !r->py)
		return 0;
	r->n = 0;
	cpu_bcast_each(bc, mm_collect, r);
	b = (gemm_batch){r->n, r->pa, r->pb, NULL, r->py, NULL};
	ep.alpha = r->alpha;
	return r->n == count && gemm_sgemm_batch(r->pool, GEMM_ISA_AUTO, 0, 0, r->M, r->N, r->K,
						   r->K, r->N, &ep, r->N, &b) == 0;
}

/* A constant 2-D B is packed once for the GEMM (through the pre-pack
 * cache, docs/PREPACK.md) and every run multiplies against the packed form. */
#define MM_PACK_MAX ((size_t)16 << 20)

typedef struct mm_packed {
	const void *b;
	const float *src;
	int64_t K, N;
	const float *bias;      /* a fused constant bias row of N, or NULL */
} mm_packed;

typedef struct pack_arg {
	const cpu_tensor *B;
	int transB;
} pack_arg;

static int pack_b(void *dst, size_t size, void *arg)
{
	const pack_arg *a = arg;
	const cpu_tensor *B = a->B;
	int64_t K = B->dims[a->transB ? 1 : 0], N = B->dims[a->transB ? 0 : 1];

	return gemm_pack_b(GEMM_ISA_AUTO, B->data, B->dims[1], a->transB, K, N, dst, size);
}

/* Packs op(B) of node input 1 when it is a constant 2-D float matrix of a
 * reasonable size; st->b stays NULL otherwise (the op then multiplies the
 * unpacked B).  0, or a cpu_status on out-of-memory. */
static int pack_const_b(cpu_node *node, int transB, mm_packed *st, char *err, size_t n)
{
	const cpu_tensor *B = node->n_in > 1 ? cpu_node_const(node, 1) : NULL;
	pack_arg arg = {B, transB};
	int64_t K, N;
	char fmt[48];
	size_t size;

	if (!B || B->dtype != CPU_FLOAT || B->rank != 2 || B->dims[0] <= 0 || B->dims[1] <= 0)
		return 0;
	K = B->dims[transB ? 1 : 0];
	N = B->dims[transB ? 0 : 1];
	size = gemm_pack_b_size(GEMM_ISA_AUTO, K, N);
	/* Very large weights stay where they are (mapped from external data,
	 * shared by every process) and are packed block by block per call:
	 * a second resident copy would double the provider's memory. */
	if (!size || size > MM_PACK_MAX)
		return 0;
	/* The format names the orientation: a cache written for MatMul's B
	 * is never read as Gemm's B^T. */
	snprintf(fmt, sizeof(fmt), "gemm-b%s-v%d-%s", transB ? "t" : "", GEMM_PACK_VERSION,
		 gemm_isa_name(gemm_isa_best()));
	st->b = cpu_prepack(node, 1, fmt, size, pack_b, &arg, err, n);
	if (!st->b)
		return CPU_E_NOMEM;
	/* A cached blob is checked once more by the GEMM's own validator. */
	if (gemm_pack_b_check(st->b, size, K, N)) {
		st->b = NULL;
		return 0;
	}
	st->src = B->data;
	st->K = K;
	st->N = N;
	/* A constant 2-D B always takes the packed path (only the fused
	 * attention reads B itself) */
	if (!(node->fuse && node->fuse->attention))
		node->packed_only |= 1u << 1;
	return 0;
}

/* The constant bias row cpu_fuse.c moved into this node (its Add): N
 * floats, N from the constant B. */
static int fused_bias(cpu_node *node, int transB, mm_packed *st, char *err, size_t n)
{
	const cpu_fusion *fu = node->fuse;
	const cpu_tensor *b = fu && fu->bias_input >= 0 ? cpu_node_const(node, fu->bias_input) : NULL;
	const cpu_tensor *B = cpu_node_const(node, 1);

	if (!fu || fu->bias_input < 0)
		return 0;
	if (!b || !B || b->dtype != CPU_FLOAT || b->rank < 1 || B->rank != 2 ||
	    cpu_numel(b) != B->dims[transB ? 0 : 1] || b->dims[b->rank - 1] != cpu_numel(b))
		return snprintf(err, n, "fused bias: not a constant float row of N"), CPU_E_INTERNAL;
	st->bias = b->data;
	return 0;
}

/* The GEMM epilogue of a fused tail the kernel applies itself: bias,
 * the addend as C (beta 1; y already holds it), Relu, or Gelu on each
 * finished block. */
static void gelu_block(void *arg, float *c, int64_t ldc, int64_t row0, int64_t rows,
		       int64_t col0, int64_t cols)
{
	(void)arg;
	(void)row0;
	(void)col0;
	for (int64_t i = 0; i < rows; i++)
		cpu_gelu_inplace(c + i * ldc, cols);
}

static void fused_epilogue(const cpu_fuse_run *fr, const float *bias, gemm_epilogue *ep)
{
	if (bias) {
		ep->bias = bias;
		ep->bias_kind = GEMM_BIAS_COL;
	}
	if (fr->add_inline) {
		if (fr->add_inline->data != fr->y->data)
			memcpy(fr->y->data, fr->add_inline->data, fr->y->nbytes);
		ep->beta = 1.0f;
	}
	if (fr->act_inline == CPU_FUSE_ACT_RELU) {
		ep->act = GEMM_ACT_RELU;
	} else if (fr->act_inline == CPU_FUSE_ACT_CLIP) {
		ep->act = GEMM_ACT_CLIP;
		ep->clip_min = fr->fu->act_a;
		ep->clip_max = fr->fu->act_b;
	} else if (fr->act_inline == CPU_FUSE_ACT_GELU) {
		ep->post = gelu_block;
	} else if (fr->act_inline != CPU_FUSE_ACT_NONE) {
		ep->post = cpu_fuse_act_block;
		ep->post_ctx = (void *)fr->fu;
	}
}

/* After a product computed without the fused tail: the bias row, then the
 * rest (cpu_fuse_end). */
static int plain_tail(cpu_ctx *ctx, cpu_fuse_run *fr, const float *bias, int64_t N)
{
	float *y = fr->y->data;
	int64_t rows = N ? cpu_numel(fr->y) / N : 0;

	for (int64_t i = 0; bias && i < rows; i++)
		for (int64_t j = 0; j < N; j++)
			y[i * N + j] += bias[j];
	return cpu_fuse_end(ctx, fr, 0);
}

static int matmul_prepare(cpu_node *node, char *err, size_t n)
{
	mm_packed *st = calloc(1, sizeof(*st));
	int rc;

	if (!st)
		return snprintf(err, n, "out of memory"), CPU_E_NOMEM;
	node->state = st;
	rc = pack_const_b(node, 0, st, err, n);
	if (!rc)
		rc = fused_bias(node, 0, st, err, n);
	return rc;
}

static void matmul_release(cpu_node *node)
{
	free(node->state);
	node->state = NULL;
}

/* The packed B of this node, when the run's B is the one that was packed. */
static const void *packed_for(const cpu_ctx *ctx, const cpu_tensor *B, int64_t K, int64_t N)
{
	const mm_packed *st = ctx->node->state;

	return st && st->b && B->data == st->src && st->K == K && st->N == N ? st->b : NULL;
}

/* A x B's sizes into r (operands and alpha left to the caller), its
 * batch broadcast into bc, its dims into dims[*yr], B's batch entries into
 * *bbatch.  0 or a status. */
static int mm_shape(cpu_ctx *ctx, const cpu_tensor *A, const cpu_tensor *B, mm_run *r,
		    cpu_bcast *bc, int64_t *dims, int *yr, int64_t *bbatch)
{
	int ranks[2];
	const int64_t *bd[2] = {A->dims, B->dims};
	int64_t Kb;

	if (A->rank < 1 || B->rank < 1)
		return cpu_fail(ctx, CPU_E_INVALID, "MatMul operands must have rank >= 1");
	r->M = A->rank > 1 ? A->dims[A->rank - 2] : 1;
	r->K = A->dims[A->rank - 1];
	Kb = B->rank > 1 ? B->dims[B->rank - 2] : B->dims[0];
	r->N = B->rank > 1 ? B->dims[B->rank - 1] : 1;
	if (r->K != Kb)
		return cpu_fail(ctx, CPU_E_INVALID, "inner dims differ: A has K=%lld, B has K=%lld",
				(long long)r->K, (long long)Kb);
	ranks[0] = A->rank > 2 ? A->rank - 2 : 0;
	ranks[1] = B->rank > 2 ? B->rank - 2 : 0;
	if (cpu_bcast_init(bc, 2, ranks, bd) != 0)
		return cpu_fail(ctx, CPU_E_INVALID, "batch dims do not broadcast");
	*yr = bc->out_rank;
	memcpy(dims, bc->out_dims, sizeof(int64_t) * (size_t)*yr);
	if (A->rank > 1)
		dims[(*yr)++] = r->M;
	if (B->rank > 1)
		dims[(*yr)++] = r->N;
	*bbatch = 1;
	for (int d = 0; d < ranks[1]; d++)
		*bbatch *= B->dims[d];
	return 0;
}

/* r->y (ysize floats) = alpha * A x B, B not the packed weights. */
static int mm_generic(cpu_ctx *ctx, mm_run *r, const cpu_bcast *bc, int64_t bbatch,
		      int64_t ysize)
{
	if (bbatch == 1) {
		/* B is shared by every batch entry: one GEMM over the stacked rows */
		cpu_sgemm_pool(ctx->pool, 0, 0, ysize / (r->N ? r->N : 1), r->N, r->K, r->alpha,
			       r->a, r->K, r->b, r->N, 0.0f, r->y, r->N);
		return 0;
	}
	if (mm_batch(ctx, r, bc, ysize))
		return 0;
	return cpu_bcast_each(bc, mm_row, r);
}

/* P += the fused score addends (a mask, a position bias), broadcast; when
 * one widens P (a mask with a batch dim the scores lack), P moves to a
 * larger scratch tensor. */
static int add_scores(cpu_ctx *ctx, cpu_tensor *P)
{
	const cpu_fusion *fu = ctx->node->fuse;

	for (int i = 0; i < fu->n_score_add; i++) {
		const cpu_tensor *B = cpu_input(ctx, fu->score_add[i]);
		int ranks[2] = {P->rank, B ? B->rank : 0}, rc = 0;
		const int64_t *ds[2] = {P->dims, B ? B->dims : NULL};
		cpu_bcast bc;
		float *out = P->data;

		if (!B)
			return cpu_fail(ctx, CPU_E_INVALID, "attention: score addend %d is missing", i);
		if ((rc = cpu_check_dtype(ctx, B, fu->score_add[i], CPU_TYPES_F32)))
			return rc;
		if (cpu_bcast_init(&bc, 2, ranks, ds))
			return cpu_fail(ctx, CPU_E_INVALID, "attention: the score addend does not broadcast "
					"onto the scores");
		if (bc.out_rank != P->rank || memcmp(bc.out_dims, P->dims, sizeof(int64_t) * (size_t)P->rank)) {
			int64_t n = cpu_shape_numel(bc.out_rank, bc.out_dims);

			if (n < 0 || !(out = cpu_scratch(ctx, (size_t)n * sizeof(float) + 1)))
				return CPU_E_NOMEM;
			P->rank = bc.out_rank;
			memcpy(P->dims, bc.out_dims, sizeof(int64_t) * (size_t)bc.out_rank);
			P->nbytes = (size_t)n * sizeof(float);
		}
		cpu_bcast_add_f32(&bc, P->data, B->data, out);
		P->data = out;
	}
	return 0;
}

/* The fused attention (cpu_fuse.c): P = Softmax(scale * Q x Kt [+ masks])
 * over the last axis, in the node's scratch, then Y = P x V.  The two
 * products run as batches on the pool and the scores never become a graph
 * value. */
static int attention_compute(cpu_ctx *ctx, const cpu_tensor *Q, const cpu_tensor *Kt)
{
	const cpu_fusion *fu = ctx->node->fuse;
	const cpu_tensor *V;
	int64_t dims[CPU_MAX_RANK], bbatch, n;
	cpu_tensor P;
	cpu_fuse_run fr;
	cpu_bcast bc;
	int rank, rc = 0;
	mm_run r = {0};

	if (!(V = cpu_require(ctx, fu->v_input, &rc)) ||
	    (rc = cpu_check_dtype(ctx, V, fu->v_input, CPU_TYPES_F32)) ||
	    (rc = mm_shape(ctx, Q, Kt, &r, &bc, dims, &rank, &bbatch)))
		return rc;
	if (rank < 1)
		return cpu_fail(ctx, CPU_E_INVALID, "attention scores have rank 0: no axis for Softmax");
	memset(&P, 0, sizeof(P));
	P.dtype = CPU_FLOAT;
	P.rank = rank;
	memcpy(P.dims, dims, sizeof(int64_t) * (size_t)rank);
	P.nbytes = (size_t)cpu_numel(&P) * sizeof(float);
	if (!(P.data = cpu_scratch(ctx, P.nbytes ? P.nbytes : 1)))
		return CPU_E_NOMEM;
	r.a = Q->data;
	r.b = Kt->data;
	r.y = P.data;
	r.pool = ctx->pool;
	r.alpha = fu->scale != 0.0f ? fu->scale : 1.0f;
	if ((rc = mm_generic(ctx, &r, &bc, bbatch, cpu_numel(&P))) != 0)
		return rc;
	if (fu->n_score_add && (rc = add_scores(ctx, &P)) != 0)
		return rc;
	rank = P.rank;
	n = P.dims[rank - 1];
	if (n > 0)
		cpu_softmax_rows(ctx, P.data, cpu_numel(&P) / n, n);
	memset(&r, 0, sizeof(r));
	if ((rc = mm_shape(ctx, &P, V, &r, &bc, dims, &rank, &bbatch)) ||
	    (rc = cpu_fuse_begin(ctx, rank, dims, &fr)))
		return rc;
	r.a = P.data;
	r.b = V->data;
	r.y = fr.y->data;
	r.pool = ctx->pool;
	r.alpha = 1.0f;
	if ((rc = mm_generic(ctx, &r, &bc, bbatch, cpu_numel(fr.y))) != 0)
		return rc;
	return cpu_fuse_end(ctx, &fr, 0);
}

static int matmul_compute(cpu_ctx *ctx)
{
	const cpu_tensor *A, *B;
	const mm_packed *st = ctx->node->state;
	const void *packed;
	cpu_fuse_run fr;
	int64_t dims[CPU_MAX_RANK], bbatch;
	int yr, rc = 0;
	cpu_bcast bc;
	mm_run r = {0};

	if (!(A = cpu_require(ctx, 0, &rc)) || !(B = cpu_require(ctx, 1, &rc)))
		return rc;
	if ((rc = cpu_check_dtype(ctx, A, 0, CPU_TYPES_F32)) ||
	    (rc = cpu_check_dtype(ctx, B, 1, CPU_TYPES_F32)))
		return rc;
	if (ctx->node->fuse && ctx->node->fuse->attention)
		return attention_compute(ctx, A, B);
	if ((rc = mm_shape(ctx, A, B, &r, &bc, dims, &yr, &bbatch)) ||
	    (rc = cpu_fuse_begin(ctx, yr, dims, &fr)))
		return rc;
	r.a = A->data;
	r.b = B->data;
	r.y = fr.y->data;
	r.pool = ctx->pool;
	r.alpha = ctx->node->fuse && ctx->node->fuse->scale != 0.0f ? ctx->node->fuse->scale : 1.0f;
	if (bbatch == 1 && B->rank == 2 && (packed = packed_for(ctx, B, r.K, r.N))) {
		gemm_epilogue ep = GEMM_EPILOGUE_INIT;

		ep.alpha = r.alpha;
		fused_epilogue(&fr, st->bias, &ep);
		/* Every batch entry of A against the same packed weights: one
		 * tall GEMM; a single row streams the panels once. */
		if (gemm_compute(ctx->pool, cpu_numel(fr.y) / (r.N ? r.N : 1), r.N, r.K, r.a, r.K,
				 0, packed, &ep, r.y, r.N))
			return cpu_fail(ctx, CPU_E_INTERNAL, "packed GEMM failed");
		return cpu_fuse_end(ctx, &fr, 1);
	}
	if ((rc = mm_generic(ctx, &r, &bc, bbatch, cpu_numel(fr.y))) != 0)
		return rc;
	return plain_tail(ctx, &fr, st ? st->bias : NULL, r.N);
}

/* Y = C spread onto [M, N] (the GEMM then adds beta * Y). */
static int gemm_init_c(cpu_ctx *ctx, const cpu_tensor *C, cpu_tensor *Y)
{
	int ranks[2] = {C->rank, 2};
	const int64_t *ds[2] = {C->dims, Y->dims};
	cpu_bcast bc;
	int rc = cpu_check_dtype(ctx, C, 2, CPU_TYPES_F32);
	if (rc)
		return rc;
	if (cpu_bcast_init(&bc, 2, ranks, ds) != 0 || bc.out_rank != 2 ||
	    bc.out_dims[0] != Y->dims[0] || bc.out_dims[1] != Y->dims[1])
		return cpu_fail(ctx, CPU_E_INVALID, "C does not broadcast onto [%lld,%lld]",
				(long long)Y->dims[0], (long long)Y->dims[1]);
	cpu_copy_strided(Y->data, C->data, sizeof(float), bc.rank, bc.dims, bc.strides[0]);
	return 0;
}

/* Gemm's state: the packed op(B) and, when C is absent or a constant row
 * ([N] or [1, N]), beta * C plus a fused bias row as the GEMM's per-column
 * bias (c_folded: C is in it). */
typedef struct gemm_state {
	mm_packed pk;
	float *bias;
	const void *c_src;
	int c_folded;
} gemm_state;

static void gemm_release(cpu_node *node)
{
	gemm_state *st = node->state;

	if (st)
		free(st->bias);
	free(st);
	node->state = NULL;
}

static int gemm_prepare(cpu_node *node, char *err, size_t n)
{
	const Onnx__NodeProto *p = node->proto;
	const cpu_tensor *C = node->n_in > 2 ? cpu_node_const(node, 2) : NULL;
	float beta = cpu_attr_float(p, "beta", 1.0f);
	int tb = cpu_attr_int(p, "transB", 0) != 0, has_c = node->n_in > 2 && p->n_input > 2 &&
		p->input[2][0];
	gemm_state *st = calloc(1, sizeof(*st));
	int64_t N;
	int rc;

	if (!st)
		return snprintf(err, n, "out of memory"), CPU_E_NOMEM;
	node->state = st;
	rc = pack_const_b(node, tb, &st->pk, err, n);
	if (!rc)
		rc = fused_bias(node, tb, &st->pk, err, n);
	if (rc || !st->pk.b)
		return rc;
	N = st->pk.N;
	if (has_c && !(C && C->dtype == CPU_FLOAT && cpu_numel(C) == N &&
		       (C->rank == 1 || (C->rank == 2 && C->dims[0] == 1))))
		return 0;   /* C is added as the GEMM's C */
	if (!has_c && !st->pk.bias)
		return 0;
	st->bias = calloc((size_t)N + 1, sizeof(float));
	if (!st->bias)
		return snprintf(err, n, "out of memory"), CPU_E_NOMEM;
	for (int64_t j = 0; j < N; j++)
		st->bias[j] = (has_c ? beta * ((const float *)C->data)[j] : 0.0f) +
			      (st->pk.bias ? st->pk.bias[j] : 0.0f);
	st->c_src = has_c ? C->data : NULL;
	st->c_folded = has_c;
	return 0;
}

static int gemm_op_compute(cpu_ctx *ctx)
{
	const Onnx__NodeProto *p = ctx->node->proto;
	const gemm_state *st = ctx->node->state;
	const cpu_tensor *A, *B, *C = cpu_input(ctx, 2);
	int ta = cpu_attr_int(p, "transA", 0) != 0, tb = cpu_attr_int(p, "transB", 0) != 0;
	float alpha = cpu_attr_float(p, "alpha", 1.0f), beta = cpu_attr_float(p, "beta", 1.0f);
	gemm_epilogue ep = GEMM_EPILOGUE_INIT;
	int64_t dims[2], M, N, K, Kb;
	const void *packed = NULL;
	cpu_fuse_run fr;
	int rc = 0;

	if (!(A = cpu_require(ctx, 0, &rc)) || !(B = cpu_require(ctx, 1, &rc)))
		return rc;
	if ((rc = cpu_check_dtype(ctx, A, 0, CPU_TYPES_F32)) ||
	    (rc = cpu_check_dtype(ctx, B, 1, CPU_TYPES_F32)))
		return rc;
	if (A->rank != 2 || B->rank != 2)
		return cpu_fail(ctx, CPU_E_INVALID, "Gemm needs 2-D A and B (got rank %d and %d)",
				A->rank, B->rank);
	M = A->dims[ta ? 1 : 0];
	K = A->dims[ta ? 0 : 1];
	Kb = B->dims[tb ? 1 : 0];
	N = B->dims[tb ? 0 : 1];
	if (K != Kb)
		return cpu_fail(ctx, CPU_E_INVALID, "inner dims differ: op(A) is [%lld,%lld], "
				"op(B) [%lld,%lld]", (long long)M, (long long)K, (long long)Kb,
				(long long)N);
	dims[0] = M;
	dims[1] = N;
	if ((rc = cpu_fuse_begin(ctx, 2, dims, &fr)) != 0)
		return rc;
	if (st && st->pk.b && B->data == st->pk.src && st->pk.K == K && st->pk.N == N)
		packed = st->pk.b;
	ep.alpha = alpha;
	if (packed && st->bias && (C ? st->c_folded && C->data == st->c_src : !st->c_folded)) {
		/* C and the fused bias are the GEMM's bias: the tail fuses. */
		fused_epilogue(&fr, st->bias, &ep);
		if (gemm_compute(ctx->pool, M, N, K, A->data, A->dims[1], ta, packed, &ep,
				 fr.y->data, N))
			return cpu_fail(ctx, CPU_E_INTERNAL, "packed GEMM failed");
		return cpu_fuse_end(ctx, &fr, 1);
	}
	if (C && beta != 0.0f && (rc = gemm_init_c(ctx, C, fr.y)) != 0)
		return rc;
	if (packed) {
		ep.beta = C ? beta : 0.0f;
		if (gemm_compute(ctx->pool, M, N, K, A->data, A->dims[1], ta, packed, &ep,
				 fr.y->data, N))
			return cpu_fail(ctx, CPU_E_INTERNAL, "packed GEMM failed");
	} else {
		cpu_sgemm_pool(ctx->pool, ta, tb, M, N, K, alpha, A->data, A->dims[1], B->data,
			       B->dims[1], C ? beta : 0.0f, fr.y->data, N);
	}
	return plain_tail(ctx, &fr, st ? st->pk.bias : NULL, N);
}

const cpu_op cpu_op_matmul = {
	"MatMul", "", 1, CPU_OPSET_MAX, f32_supports, matmul_prepare, matmul_compute, matmul_release,
};
const cpu_op cpu_op_gemm = {
	"Gemm", "", 1, CPU_OPSET_MAX, f32_supports, gemm_prepare, gemm_op_compute, gemm_release,
};
