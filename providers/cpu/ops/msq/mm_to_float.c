/*
 * mm_to_float: com.microsoft MatMulIntegerToFloat and DynamicQuantizeMatMul,
 * an 8-bit matrix product (numpy matmul batching) written as float32:
 *   Y = (float)(sum_k (A - a_zp)(B - b_zp)) * (a_scale * b_scale) + bias
 * on the int8 GEMM (gemm/igemm.h), whose float epilogue rounds the
 * multiply and the add separately as ONNX Runtime's MLAS does.
 *
 * A is uint8 or int8 (MatMulIntegerToFloat) or float32 quantized per call
 * to uint8 exactly as DynamicQuantizeLinear does (DynamicQuantizeMatMul).
 * B is uint8 or int8; a constant 2-D B is packed once through the
 * pre-pack cache.  a_zero_point is per tensor; b_scale and b_zero_point
 * per tensor or per column of B; bias per column.  A scale of another
 * shape (a_scale per row, b_scale per batch and column) is applied as
 * ONNX Runtime does: the product is computed with that scale left out
 * (bias included), then multiplied by it with numpy broadcasting.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "igemm.h"
#include "msq.h"

typedef struct mif {
	int64_t M, N, K;
	int yr;
	int64_t ydims[CPU_MAX_RANK];
	cpu_bcast bc;
	const uint8_t *a;
	int a_signed;
	const cpu_tensor *B;
	int32_t za;
	const int32_t *zb;
	int64_t nzb;
	igemm_b bp;
	igemm_out out;
	cpu_pool *pool;
	int rc;
} mif;

static int mif_shapes(cpu_ctx *ctx, const cpu_tensor *A, const cpu_tensor *B, mif *q)
{
	int ranks[2];
	const int64_t *bd[2];

	if (A->rank < 1 || B->rank < 1)
		return cpu_fail(ctx, CPU_E_INVALID, "A and B must have rank >= 1");
	q->M = A->rank > 1 ? A->dims[A->rank - 2] : 1;
	q->K = A->dims[A->rank - 1];
	q->N = B->rank > 1 ? B->dims[B->rank - 1] : 1;
	if ((B->rank > 1 ? B->dims[B->rank - 2] : B->dims[0]) != q->K)
		return cpu_fail(ctx, CPU_E_INVALID, "inner dims differ (A has K=%lld)", (long long)q->K);
	ranks[0] = A->rank > 2 ? A->rank - 2 : 0;
	ranks[1] = B->rank > 2 ? B->rank - 2 : 0;
	bd[0] = A->dims;
	bd[1] = B->dims;
	if (cpu_bcast_init(&q->bc, 2, ranks, bd))
		return cpu_fail(ctx, CPU_E_INVALID, "batch dims of A and B do not broadcast");
	q->yr = q->bc.out_rank;
	memcpy(q->ydims, q->bc.out_dims, sizeof(int64_t) * (size_t)q->yr);
	if (A->rank > 1)
		q->ydims[q->yr++] = q->M;
	if (B->rank > 1)
		q->ydims[q->yr++] = q->N;
	return 0;
}

static int mif_product(mif *q, int64_t a_row0, int64_t rows, int64_t bb, int64_t y_row0)
{
	igemm_problem p;

	memset(&p, 0, sizeof(p));
	p.M = rows;
	p.N = q->N;
	p.K = q->K;
	p.a_raw = q->a + a_row0 * q->K;
	p.lda_raw = q->K;
	p.a_signed = q->a_signed;
	p.za = q->za;
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
	p.out.c = (float *)q->out.c + y_row0 * q->N;
	p.out.ldc = q->N;
	return igemm_compute(q->pool, IGEMM_ISA_AUTO, &p);
}

static int mif_row(void *arg, int64_t len, const int64_t *off, const int64_t *st)
{
	mif *q = arg;

	for (int64_t j = 0; j < len && !q->rc; j++)
		q->rc = mif_product(q, (off[0] + j * st[0]) * q->M, q->M, off[1] + j * st[1],
				    (off[2] + j) * q->M);
	return q->rc ? -1 : 0;
}

/* y *= s with s broadcast onto y (numpy rules). */
typedef struct scale_job {
	float *y;
	const float *s;
} scale_job;

static int scale_row(void *arg, int64_t len, const int64_t *off, const int64_t *st)
{
	scale_job *j = arg;

	for (int64_t k = 0; k < len; k++)
		j->y[off[1] + k] *= j->s[off[0] + k * st[0]];
	return 0;
}

static int scale_output(cpu_ctx *ctx, const cpu_tensor *s, cpu_tensor *y)
{
	cpu_bcast bc;
	int ranks[2] = {s->rank, y->rank};
	const int64_t *dims[2] = {s->dims, y->dims};

	if (s->dtype != CPU_FLOAT)
		return cpu_fail(ctx, CPU_E_INVALID, "scales must be float32");
	scale_job j = {y->data, s->data};

	if (cpu_bcast_init(&bc, 2, ranks, dims) || bc.out_rank != y->rank ||
	    memcmp(bc.out_dims, y->dims, sizeof(int64_t) * (size_t)y->rank))
		return cpu_fail(ctx, CPU_E_INVALID, "a scale does not broadcast onto the output");
	cpu_bcast_each(&bc, scale_row, &j);
	return 0;
}

/* A zero point per tensor or per column as int32s. */
static int load_zp(cpu_ctx *ctx, const cpu_tensor *zp, const int32_t **v, int64_t *n)
{
	static const int32_t zero = 0;
	int32_t *buf;

	*v = &zero;
	*n = 1;
	if (!zp)
		return 0;
	*n = cpu_numel(zp);
	if (!(buf = cpu_scratch(ctx, (size_t)(*n ? *n : 1) * sizeof(int32_t))))
		return CPU_E_NOMEM;
	for (int64_t k = 0; k < *n; k++)
		buf[k] = (int32_t)cpu_get_i64(zp->dtype, zp->data, k);
	*v = buf;
	return 0;
}

static int is_per_column(const cpu_tensor *t, int64_t N)
{
	int64_t n = cpu_numel(t);

	if (n != N)
		return 0;
	for (int d = 0; d + 1 < t->rank; d++)
		if (t->dims[d] != 1)
			return 0;
	return 1;
}

/* The product of a (A's shape, dtype a_dt) by input 1 into output 0:
 * a_scale given (NULL: 1), b_scale (input bs_in), zero points, bias. */
static int mif_run(cpu_ctx *ctx, const cpu_tensor *A, const uint8_t *a, int32_t a_dt,
		   float a_scale, int32_t za, int bs_in, int bzp_in, int bias_in,
		   const cpu_tensor **post, cpu_tensor **Yout)
{
	const msq_bpack *bp = ctx->node->state;
	const cpu_tensor *B, *bs = cpu_input(ctx, bs_in), *bias = cpu_input(ctx, bias_in);
	const cpu_tensor *bzp = cpu_input(ctx, bzp_in);
	float *cols = NULL;
	cpu_tensor *Y;
	mif q;
	int rc = 0;

	memset(&q, 0, sizeof(q));
	*post = NULL;
	if (!(B = cpu_require(ctx, 1, &rc)))
		return rc;
	if ((rc = cpu_check_dtype(ctx, B, 1, MSQ_Q8)) || (rc = mif_shapes(ctx, A, B, &q)))
		return rc;
	if (!bs || bs->dtype != CPU_FLOAT)
		return cpu_fail(ctx, CPU_E_INVALID, "b_scale (input %d) must be float32", bs_in);
	if (bzp && (bzp->dtype != B->dtype || (cpu_numel(bzp) != 1 && !is_per_column(bzp, q.N))))
		return cpu_fail(ctx, CPU_E_INVALID, "b_zero_point must be %s, per tensor or per "
				"column", cpu_dtype_name(B->dtype));
	if (bias && (bias->dtype != CPU_FLOAT || cpu_numel(bias) != q.N))
		return cpu_fail(ctx, CPU_E_INVALID, "bias must be float32 with N = %lld values",
				(long long)q.N);
	if ((rc = load_zp(ctx, bzp, &q.zb, &q.nzb)))
		return rc;
	q.out.is_float = 1;
	if (cpu_numel(bs) == 1) {
		q.out.scale = a_scale * *(const float *)bs->data;
	} else if (is_per_column(bs, q.N)) {
		if (!(cols = cpu_scratch(ctx, (size_t)q.N * sizeof(float))))
			return CPU_E_NOMEM;
		for (int64_t j = 0; j < q.N; j++)
			cols[j] = a_scale * ((const float *)bs->data)[j];
		q.out.scale_col = cols;
	} else {
		q.out.scale = a_scale;
		*post = bs;
	}
	q.out.bias_col = bias ? bias->data : NULL;
	if (!(Y = *Yout = cpu_output(ctx, 0, CPU_FLOAT, q.yr, q.ydims)))
		return CPU_E_NOMEM;
	if (cpu_numel(Y) == 0)
		return 0;
	q.out.c = Y->data;
	q.a = a;
	q.a_signed = a_dt == CPU_INT8;
	q.B = B;
	q.za = za;
	q.pool = ctx->pool;
	if (bp && bp->packed && B->data == bp->src && B->rank == 2)
		igemm_pack_b_view(bp->packed, &q.bp);
	if (B->rank <= 2)
		q.rc = mif_product(&q, 0, cpu_numel(A) / (q.K ? q.K : 1), 0, 0);
	else
		cpu_bcast_each(&q.bc, mif_row, &q);
	if (q.rc)
		return cpu_fail(ctx, CPU_E_INTERNAL, "the int8 GEMM failed (%d)", q.rc);
	return 0;
}

static int mif_prepare(cpu_node *node, char *err, size_t n)
{
	msq_bpack *bp = calloc(1, sizeof(*bp));

	if (!bp)
		return CPU_E_NOMEM;
	node->state = bp;
	return msq_pack_b(node, 1, 0, bp, err, n);
}

static void mif_release(cpu_node *node)
{
	free(node->state);
	node->state = NULL;
}

/* A, B, a_scale, b_scale, a_zero_point, b_zero_point, bias */
static int mitf_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt, int n_in,
			 char *why, size_t n)
{
	static const uint32_t mask[7] = {MSQ_Q8, MSQ_Q8, CPU_TYPES_F32, CPU_TYPES_F32, MSQ_Q8,
					 MSQ_Q8, CPU_TYPES_F32};

	(void)p;
	(void)opset;
	for (int i = 0; i < n_in && i < 7; i++)
		if (!cpu_supports_dtype(dt, n_in, i, mask[i], why, n))
			return 0;
	return n_in <= 7 ? 1 : (snprintf(why, n, "at most 7 inputs"), 0);
}

static int mitf_compute(cpu_ctx *ctx)
{
	const cpu_tensor *A, *as = cpu_input(ctx, 2), *post;
	cpu_tensor *Y;
	int32_t za;
	float a_scale = 1.0f;
	int rc = 0;

	if (!(A = cpu_require(ctx, 0, &rc)))
		return rc;
	if ((rc = cpu_check_dtype(ctx, A, 0, MSQ_Q8)))
		return rc;
	if (!as || as->dtype != CPU_FLOAT)
		return cpu_fail(ctx, CPU_E_INVALID, "a_scale (input 2) must be float32");
	if (cpu_numel(as) == 1)
		a_scale = *(const float *)as->data;
	if ((rc = msq_zero_point(ctx, 4, "a_zero_point", A->dtype, &za)) ||
	    (rc = mif_run(ctx, A, A->data, A->dtype, a_scale, za, 3, 5, 6, &post, &Y)))
		return rc;
	if (cpu_numel(as) != 1 && (rc = scale_output(ctx, as, Y)))
		return rc;
	return post ? scale_output(ctx, post, Y) : 0;
}

/* A, B, b_scale, b_zero_point, bias */
static int dqmm_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt, int n_in,
			 char *why, size_t n)
{
	static const uint32_t mask[5] = {CPU_TYPES_F32, MSQ_Q8, CPU_TYPES_F32, MSQ_Q8,
					 CPU_TYPES_F32};

	(void)p;
	(void)opset;
	for (int i = 0; i < n_in && i < 5; i++)
		if (!cpu_supports_dtype(dt, n_in, i, mask[i], why, n))
			return 0;
	return n_in <= 5 ? 1 : (snprintf(why, n, "at most 5 inputs"), 0);
}

static int dqmm_compute(cpu_ctx *ctx)
{
	const cpu_tensor *A, *post;
	cpu_tensor *Y;
	int64_t n;
	uint8_t *aq;
	float a_scale;
	int32_t za;
	int rc = 0;

	if (!(A = cpu_require(ctx, 0, &rc)))
		return rc;
	if ((rc = cpu_check_dtype(ctx, A, 0, CPU_TYPES_F32)))
		return rc;
	n = cpu_numel(A);
	if (!(aq = cpu_scratch(ctx, (size_t)(n ? n : 1))))
		return CPU_E_NOMEM;
	msq_dynamic_quantize(A->data, n, aq, &a_scale, &za);
	if ((rc = mif_run(ctx, A, aq, CPU_UINT8, a_scale, za, 2, 3, 4, &post, &Y)))
		return rc;
	return post ? scale_output(ctx, post, Y) : 0;
}

const cpu_op cpu_op_msq_matmulintegertofloat = {
	"MatMulIntegerToFloat", "com.microsoft", 1, CPU_OPSET_MAX, mitf_supports, mif_prepare,
	mitf_compute, mif_release,
};
const cpu_op cpu_op_msq_dynamicquantizematmul = {
	"DynamicQuantizeMatMul", "com.microsoft", 1, CPU_OPSET_MAX, dqmm_supports, mif_prepare,
	dqmm_compute, mif_release,
};
