/*
 * qmatmul: ONNX MatMulInteger (opset 10) and QLinearMatMul (opsets 10 and
 * 21) on uint8/int8 operands with numpy matmul semantics (batch dims
 * broadcast, 1-D operands promoted), on the int8 GEMM (gemm/igemm.h).
 *
 * A constant 2-D B (the weights of a quantized Linear) is packed once at
 * load through the pre-pack cache, with its column sums; then A's batch
 * dims fold into its rows and one product covers the whole call.  Other
 * B (attention's products of two activations) are packed per product by
 * the GEMM's tasks.
 *
 * Zero points are per tensor, per row of A (M values, or one row set per
 * A batch entry for MatMulInteger) and per column of B (N values);
 * QLinearMatMul's y_scale and y_zero_point are per tensor or per column.
 * MatMulInteger writes int32, or float32 when the provider fused the
 * Cast, Mul by the scales and Add of a bias after it (node->fuse->quant,
 * see qmm_fused_out).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuse_tail.h"
#include "igemm.h"
#include "nn_ops.h"

/* B above this many packed bytes is packed per call. */
#define QMM_PACK_MAX ((size_t)64 << 20)

typedef struct qmm_state {
	const void *bpack;      /* constant 2-D B packed (igemm_pack_b), or NULL */
	const void *b_src;
} qmm_state;

typedef struct qmm {
	int64_t M, N, K, batch_a;
	int yr;
	int64_t ydims[CPU_MAX_RANK];
	cpu_bcast bc;
	const cpu_tensor *A, *B;
	const int32_t *za, *zb;
	int64_t nza, nzb;
	igemm_b bp;             /* B packed at load (bp.panels), or not */
	igemm_out out;          /* the whole output; c is the first product's */
	cpu_pool *pool;
	int rc;
} qmm;

static int pack_b(void *dst, size_t size, void *arg)
{
	const cpu_tensor *B = arg;

	return igemm_pack_b(B->data, B->dims[1], 0, B->dtype == CPU_INT8, B->dims[0], B->dims[1],
			    dst, size) ? CPU_E_INTERNAL : 0;
}

static int qmm_prepare(cpu_node *node, char *err, size_t n, int ib)
{
	qmm_state *st = calloc(1, sizeof(*st));
	const cpu_tensor *B = node->n_in > ib ? cpu_node_const(node, ib) : NULL;
	char fmt[48];
	size_t size;

	if (!st)
		return CPU_E_NOMEM;
	node->state = st;
	if (!B || (B->dtype != CPU_UINT8 && B->dtype != CPU_INT8) || B->rank != 2 ||
	    B->dims[0] <= 0 || B->dims[1] <= 0)
		return 0;
	size = igemm_pack_b_size(B->dims[0], B->dims[1]);
	if (!size || size > QMM_PACK_MAX)
		return 0;
	snprintf(fmt, sizeof(fmt), "igemm-b-v%d", IGEMM_PACK_VERSION);
	st->bpack = cpu_prepack(node, ib, fmt, size, pack_b, (void *)B, err, n);
	if (!st->bpack)
		return CPU_E_NOMEM;
	if (igemm_pack_b_check(st->bpack, size, B->dims[0], B->dims[1]))
		st->bpack = NULL;
	st->b_src = B->data;
	return 0;
}

static int mmi_prepare(cpu_node *node, char *err, size_t n)
{
	return qmm_prepare(node, err, n, 1);
}

static int qlmm_prepare(cpu_node *node, char *err, size_t n)
{
	return qmm_prepare(node, err, n, 3);
}

static void qmm_release(cpu_node *node)
{
	free(node->state);
	node->state = NULL;
}

static int qmm_shapes(cpu_ctx *ctx, const cpu_tensor *A, int ia, const cpu_tensor *B, int ib,
		      qmm *q)
{
	int ranks[2], rc;
	const int64_t *bd[2];

	if ((rc = cpu_check_dtype(ctx, A, ia, NN_Q8_TYPES)) ||
	    (rc = cpu_check_dtype(ctx, B, ib, NN_Q8_TYPES)))
		return rc;
	if (A->rank < 1 || B->rank < 1)
		return cpu_fail(ctx, CPU_E_INVALID, "operands must have rank >= 1");
	q->A = A;
	q->B = B;
	q->M = A->rank > 1 ? A->dims[A->rank - 2] : 1;
	q->K = A->dims[A->rank - 1];
	q->N = B->rank > 1 ? B->dims[B->rank - 1] : 1;
	if ((B->rank > 1 ? B->dims[B->rank - 2] : B->dims[0]) != q->K)
		return cpu_fail(ctx, CPU_E_INVALID, "inner dims differ (A has K=%lld)", (long long)q->K);
	ranks[0] = A->rank > 2 ? A->rank - 2 : 0;
	ranks[1] = B->rank > 2 ? B->rank - 2 : 0;
	bd[0] = A->dims;
	bd[1] = B->dims;
	if (cpu_bcast_init(&q->bc, 2, ranks, bd) != 0)
		return cpu_fail(ctx, CPU_E_INVALID, "batch dims do not broadcast");
	q->batch_a = 1;
	for (int d = 0; d < ranks[0]; d++)
		q->batch_a *= A->dims[d];
	q->yr = q->bc.out_rank;
	memcpy(q->ydims, q->bc.out_dims, sizeof(int64_t) * (size_t)q->yr);
	if (A->rank > 1)
		q->ydims[q->yr++] = q->M;
	if (B->rank > 1)
		q->ydims[q->yr++] = q->N;
	return 0;
}

/* Product of A rows [a_row0, a_row0 + rows) (batch entry ba for a per-row
 * zero point) by B's batch entry bb into output rows from y_row0. */
static int qmm_product(qmm *q, int64_t a_row0, int64_t rows, int64_t ba, int64_t bb,
		       int64_t y_row0)
{
	size_t esz = 1;
	igemm_problem p;

	memset(&p, 0, sizeof(p));
	p.M = rows;
	p.N = q->N;
	p.K = q->K;
	p.a_raw = (const uint8_t *)q->A->data + a_row0 * q->K * esz;
	p.lda_raw = q->K;
	p.a_signed = q->A->dtype == CPU_INT8;
	p.za = q->za[0];
	p.za_row = q->nza == 1 ? NULL : q->nza == q->M ? q->za : q->za + ba * q->M;
	if (q->bp.panels) {
		p.B = q->bp;
	} else {
		p.b_raw = (const uint8_t *)q->B->data + bb * q->K * q->N;
		p.ldb_raw = q->N;
		p.b_signed = q->B->dtype == CPU_INT8;
	}
	p.zb = q->zb[0];
	p.zb_col = q->nzb > 1 ? q->zb : NULL;
	p.out = q->out;
	p.out.c = (int32_t *)q->out.c + y_row0 * q->N;
	p.out.ldc = q->N;
	p.out.add = q->out.add ? q->out.add + y_row0 * q->N : NULL;
	return igemm_compute(q->pool, IGEMM_ISA_AUTO, &p);
}

static int qmm_row(void *arg, int64_t len, const int64_t *off, const int64_t *st)
{
	qmm *q = arg;

	for (int64_t j = 0; j < len && !q->rc; j++) {
		int64_t ba = off[0] + j * st[0], bb = off[1] + j * st[1];
		q->rc = qmm_product(q, ba * q->M, q->M, ba, bb, (off[2] + j) * q->M);
	}
	return q->rc ? -1 : 0;
}

/* Loads the zero points (inputs za, zb) and multiplies into q->out. */
static int qmm_run(cpu_ctx *ctx, qmm *q, int za, int zb)
{
	const qmm_state *st = ctx->node->state;
	int rc;

	if ((rc = nn_load_zp(ctx, cpu_input(ctx, za), za, q->A->dtype, &q->za, &q->nza)) ||
	    (rc = nn_load_zp(ctx, cpu_input(ctx, zb), zb, q->B->dtype, &q->zb, &q->nzb)))
		return rc;
	if (q->nza != 1 && q->nza != q->M && (!q->M || q->nza % q->M || q->nza / q->M != q->batch_a))
		return cpu_fail(ctx, CPU_E_INVALID, "A's zero point has %lld values (1 or %lld rows)",
				(long long)q->nza, (long long)q->M);
	if (q->nzb != 1 && q->nzb != q->N)
		return cpu_fail(ctx, CPU_E_INVALID, "B's zero point has %lld values (1 or %lld "
				"columns)", (long long)q->nzb, (long long)q->N);
	memset(&q->bp, 0, sizeof(q->bp));
	if (st && st->bpack && q->B->data == st->b_src && q->B->rank == 2)
		igemm_pack_b_view(st->bpack, &q->bp);
	q->pool = ctx->pool;
	q->rc = 0;
	/* One product for all of A's rows when B has no batch and A's zero
	 * point is not per row. */
	if (q->B->rank <= 2 && q->nza == 1)
		q->rc = qmm_product(q, 0, q->batch_a * q->M, 0, 0, 0);
	else
		cpu_bcast_each(&q->bc, qmm_row, q);
	if (q->rc)
		return nn_igemm_fail(ctx, q->rc, "int8 GEMM");
	return 0;
}

static int mmi_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt, int n_in,
			char *why, size_t n)
{
	(void)p;
	(void)opset;
	for (int i = 0; i < n_in; i++)
		if (!cpu_supports_dtype(dt, n_in, i, NN_Q8_TYPES, why, n))
			return 0;
	return 1;
}

/* a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale, y_zero_point */
static int qlmm_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt, int n_in,
			 char *why, size_t n)
{
	(void)p;
	(void)opset;
	for (int i = 0; i < n_in; i++)
		if (!cpu_supports_dtype(dt, n_in, i, i == 1 || i == 4 || i == 6 ? CPU_TYPES_F32 :
					NN_Q8_TYPES, why, n))
			return 0;
	return 1;
}

/* MatMulInteger with its dequantizing tail fused: float32 out, the bias
 * per column, then the tail's Add and activation (fuse_tail.c). */
static int mmi_compute_fused(cpu_ctx *ctx, qmm *q)
{
	const cpu_fusion *fu = ctx->node->fuse;
	const cpu_tensor *b = fu->bias_input >= 0 ? cpu_input(ctx, fu->bias_input) : NULL;
	cpu_fuse_run fr;
	cpu_tensor tmp;
	int rc;

	q->out.is_float = 1;
	if ((rc = nn_quant_scale(ctx, &q->out.scale)))
		return rc;
	if (b && (b->dtype != CPU_FLOAT || cpu_numel(b) != q->N))
		return cpu_fail(ctx, CPU_E_INVALID, "fused bias must be float32 [%lld]",
				(long long)q->N);
	q->out.bias_col = b ? b->data : NULL;
	if ((rc = cpu_fuse_begin(ctx, q->yr, q->ydims, &fr)) ||
	    (rc = nn_quant_out(ctx, &fr, &q->out, q->K, &tmp)))
		return rc;
	if ((rc = qmm_run(ctx, q, 2, 3)))
		return rc;
	return cpu_fuse_end(ctx, &fr, 1);
}

static int mmi_compute(cpu_ctx *ctx)
{
	const cpu_tensor *A, *B;
	cpu_tensor *Y;
	qmm q;
	int rc = 0;

	memset(&q, 0, sizeof(q));
	if (!(A = cpu_require(ctx, 0, &rc)) || !(B = cpu_require(ctx, 1, &rc)))
		return rc;
	if ((rc = qmm_shapes(ctx, A, 0, B, 1, &q)))
		return rc;
	if (ctx->node->fuse && ctx->node->fuse->quant)
		return mmi_compute_fused(ctx, &q);
	if (!(Y = cpu_output(ctx, 0, CPU_INT32, q.yr, q.ydims)))
		return CPU_E_NOMEM;
	q.out.c = Y->data;
	return qmm_run(ctx, &q, 2, 3);
}

static int qlmm_compute(cpu_ctx *ctx)
{
	const cpu_tensor *A, *B, *yz = cpu_input(ctx, 7);
	const float *as, *bs, *ys;
	const int32_t *zy;
	int64_t nas, nbs, nys, nzy, n;
	int32_t odt = yz ? yz->dtype : CPU_UINT8, *acc;
	cpu_tensor *Y;
	qmm q;
	int rc = 0;

	memset(&q, 0, sizeof(q));
	if (!(A = cpu_require(ctx, 0, &rc)) || !(B = cpu_require(ctx, 3, &rc)))
		return rc;
	if ((rc = qmm_shapes(ctx, A, 0, B, 3, &q)) || (rc = nn_load_scale(ctx, 1, &as, &nas)) ||
	    (rc = nn_load_scale(ctx, 4, &bs, &nbs)) || (rc = nn_load_scale(ctx, 6, &ys, &nys)))
		return rc;
	if (yz && (rc = cpu_check_dtype(ctx, yz, 7, NN_Q8_TYPES)))
		return rc;
	if ((rc = nn_load_zp(ctx, yz, 7, odt, &zy, &nzy)))
		return rc;
	if ((nas != 1 && nas != q.M) || (nbs != 1 && nbs != q.N) || (nys != 1 && nys != q.N) ||
	    (nzy != 1 && nzy != q.N))
		return cpu_fail(ctx, CPU_E_INVALID, "scales/zero points must be per tensor, per row "
				"of a or per column of b");
	if (!(Y = cpu_output(ctx, 0, odt, q.yr, q.ydims)))
		return CPU_E_NOMEM;
	n = cpu_numel(Y);
	if (!(acc = cpu_scratch(ctx, (size_t)(n ? n : 1) * sizeof(int32_t))))
		return CPU_E_NOMEM;
	q.out.c = acc;
	if ((rc = qmm_run(ctx, &q, 2, 5)))
		return rc;
	for (int64_t e = 0; e < n; e++) {
		int64_t i = (e / (q.N ? q.N : 1)) % (q.M ? q.M : 1), j = e % (q.N ? q.N : 1);
		float mult = as[nas > 1 ? i : 0] * bs[nbs > 1 ? j : 0] / ys[nys > 1 ? j : 0];
		nn_requant(odt, Y->data, e, acc[e], mult, zy[nzy > 1 ? j : 0]);
	}
	return 0;
}

const cpu_op cpu_op_matmulinteger = {
	"MatMulInteger", "", 10, CPU_OPSET_MAX, mmi_supports, mmi_prepare, mmi_compute,
	qmm_release,
};
const cpu_op cpu_op_qlinearmatmul = {
	"QLinearMatMul", "", 10, CPU_OPSET_MAX, qlmm_supports, qlmm_prepare, qlmm_compute,
	qmm_release,
};
