/*
 * matmul: ONNX MatMul (numpy semantics: batch dims broadcast, 1-D operands
 * promoted and their unit dim dropped from the result) and Gemm (alpha,
 * beta, transA, transB, optional C broadcast onto [M, N]), float32, both on
 * cpu_sgemm.  When B has no batch, the batch of A folds into one tall GEMM.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_ops.h"
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
} mm_run;

/* One broadcast row of batch entries: a GEMM per entry. */
static int mm_row(void *arg, int64_t len, const int64_t *off, const int64_t *st)
{
	const mm_run *r = arg;
	for (int64_t j = 0; j < len; j++) {
		const float *a = r->a + (off[0] + j * st[0]) * r->M * r->K;
		const float *b = r->b + (off[1] + j * st[1]) * r->K * r->N;
		float *y = r->y + (off[2] + j) * r->M * r->N;
		cpu_sgemm(0, 0, r->M, r->N, r->K, 1.0f, a, r->K, b, r->N, 0.0f, y, r->N);
	}
	return 0;
}

/* A constant 2-D B is packed once for the GEMM (through the pre-pack
 * cache, docs/PREPACK.md) and every run multiplies against the packed form. */
#define MM_PACK_MAX ((size_t)16 << 20)

typedef struct mm_packed {
	const void *b;
	const float *src;
	int64_t K, N;
} mm_packed;

typedef struct pack_arg {
	const cpu_tensor *B;
} pack_arg;

static int pack_b(void *dst, size_t size, void *arg)
{
	const cpu_tensor *B = ((pack_arg *)arg)->B;

	return gemm_pack_b(GEMM_ISA_AUTO, B->data, B->dims[1], 0, B->dims[0], B->dims[1], dst, size);
}

static int matmul_prepare(cpu_node *node, char *err, size_t n)
{
	const cpu_tensor *B = node->n_in > 1 ? cpu_node_const(node, 1) : NULL;
	mm_packed *st;
	pack_arg arg;
	char fmt[48];
	size_t size;

	if (!B || B->dtype != CPU_FLOAT || B->rank != 2 || B->dims[0] <= 0 || B->dims[1] <= 0)
		return 0;
	size = gemm_pack_b_size(GEMM_ISA_AUTO, B->dims[0], B->dims[1]);
	/* Very large weights stay where they are (mapped from external data,
	 * shared by every process) and are packed block by block per call:
	 * a second resident copy would double the provider's memory. */
	if (!size || size > MM_PACK_MAX)
		return 0;
	st = calloc(1, sizeof(*st));
	if (!st)
		return snprintf(err, n, "out of memory"), CPU_E_NOMEM;
	arg.B = B;
	snprintf(fmt, sizeof(fmt), "gemm-b-v%d-%s", GEMM_PACK_VERSION,
		 gemm_isa_name(gemm_isa_best()));
	st->b = cpu_prepack(node, 1, fmt, size, pack_b, &arg, err, n);
	/* A cached blob is checked once more by the GEMM's own validator. */
	if (!st->b || gemm_pack_b_check(st->b, size, B->dims[0], B->dims[1])) {
		int rc = st->b ? 0 : CPU_E_NOMEM;

		free(st);
		return rc;
	}
	st->src = B->data;
	st->K = B->dims[0];
	st->N = B->dims[1];
	node->state = st;
	return 0;
}

static void matmul_release(cpu_node *node)
{
	free(node->state);
	node->state = NULL;
}

static int matmul_compute(cpu_ctx *ctx)
{
	const cpu_tensor *A, *B;
	cpu_tensor *Y;
	int64_t dims[CPU_MAX_RANK], Kb, bbatch = 1;
	int ranks[2], yr, rc = 0;
	const int64_t *bd[2];
	cpu_bcast bc;
	mm_run r;

	if (!(A = cpu_require(ctx, 0, &rc)) || !(B = cpu_require(ctx, 1, &rc)))
		return rc;
	if ((rc = cpu_check_dtype(ctx, A, 0, CPU_TYPES_F32)) ||
	    (rc = cpu_check_dtype(ctx, B, 1, CPU_TYPES_F32)))
		return rc;
	if (A->rank < 1 || B->rank < 1)
		return cpu_fail(ctx, CPU_E_INVALID, "MatMul operands must have rank >= 1");
	r.M = A->rank > 1 ? A->dims[A->rank - 2] : 1;
	r.K = A->dims[A->rank - 1];
	Kb = B->rank > 1 ? B->dims[B->rank - 2] : B->dims[0];
	r.N = B->rank > 1 ? B->dims[B->rank - 1] : 1;
	if (r.K != Kb)
		return cpu_fail(ctx, CPU_E_INVALID, "inner dims differ: A has K=%lld, B has K=%lld",
				(long long)r.K, (long long)Kb);
	ranks[0] = A->rank > 2 ? A->rank - 2 : 0;
	ranks[1] = B->rank > 2 ? B->rank - 2 : 0;
	bd[0] = A->dims;
	bd[1] = B->dims;
	if (cpu_bcast_init(&bc, 2, ranks, bd) != 0)
		return cpu_fail(ctx, CPU_E_INVALID, "batch dims do not broadcast");
	yr = bc.out_rank;
	memcpy(dims, bc.out_dims, sizeof(int64_t) * (size_t)yr);
	if (A->rank > 1)
		dims[yr++] = r.M;
	if (B->rank > 1)
		dims[yr++] = r.N;
	if (!(Y = cpu_output(ctx, 0, CPU_FLOAT, yr, dims)))
		return CPU_E_NOMEM;
	r.a = A->data;
	r.b = B->data;
	r.y = Y->data;
	for (int d = 0; d < ranks[1]; d++)
		bbatch *= B->dims[d];
	if (bbatch == 1 && ctx->node->state && r.b == ((mm_packed *)ctx->node->state)->src &&
	    r.K == ((mm_packed *)ctx->node->state)->K && r.N == ((mm_packed *)ctx->node->state)->N) {
		gemm_epilogue ep = GEMM_EPILOGUE_INIT;

		if (gemm_compute(NULL, cpu_numel(Y) / (r.N ? r.N : 1), r.N, r.K, r.a, r.K, 0,
				 ((mm_packed *)ctx->node->state)->b, &ep, r.y, r.N))
			return cpu_fail(ctx, CPU_E_INTERNAL, "packed GEMM failed");
		return 0;
	}
	if (bbatch == 1) {
		/* B is shared by every batch entry: one GEMM over the stacked rows */
		cpu_sgemm(0, 0, cpu_numel(Y) / (r.N ? r.N : 1), r.N, r.K, 1.0f, r.a, r.K, r.b, r.N,
			  0.0f, r.y, r.N);
		return 0;
	}
	return cpu_bcast_each(&bc, mm_row, &r);
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

static int gemm_op_compute(cpu_ctx *ctx)
{
	const Onnx__NodeProto *p = ctx->node->proto;
	const cpu_tensor *A, *B, *C = cpu_input(ctx, 2);
	int ta = cpu_attr_int(p, "transA", 0) != 0, tb = cpu_attr_int(p, "transB", 0) != 0;
	float alpha = cpu_attr_float(p, "alpha", 1.0f), beta = cpu_attr_float(p, "beta", 1.0f);
	int64_t dims[2], M, N, K, Kb;
	cpu_tensor *Y;
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
	if (!(Y = cpu_output(ctx, 0, CPU_FLOAT, 2, dims)))
		return CPU_E_NOMEM;
	if (C && beta != 0.0f && (rc = gemm_init_c(ctx, C, Y)) != 0)
		return rc;
	cpu_sgemm(ta, tb, M, N, K, alpha, A->data, A->dims[1], B->data, B->dims[1],
		  C ? beta : 0.0f, Y->data, N);
	return 0;
}

const cpu_op cpu_op_matmul = {
	"MatMul", "", 1, CPU_OPSET_MAX, f32_supports, matmul_prepare, matmul_compute, matmul_release,
};
const cpu_op cpu_op_gemm = {
	"Gemm", "", 1, CPU_OPSET_MAX, f32_supports, NULL, gemm_op_compute, NULL,
};
