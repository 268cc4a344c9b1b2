/*
 * qgemm: com.microsoft QGemm, Y = alpha * op(A) op(B) on 8-bit operands:
 *   acc = sum_k (A - a_zp)(B - b_zp) + C           int32 (C broadcast)
 *   Y   = (float)acc * (alpha * a_scale * b_scale)            no y_scale
 *   Y   = sat(round(acc * (alpha * a_scale * b_scale / y_scale)) + y_zp)
 * A, B uint8 or int8 (transA, transB), a_scale and a_zero_point per
 * tensor, b_scale and b_zero_point per tensor or per column, C int32
 * broadcastable to (M, N), the output uint8/int8 (y_zero_point's type) or
 * float32.  The multipliers are folded in ONNX Runtime's order and the
 * requantization rounds half to even after clamping, as MLAS does.  A
 * constant B is packed once (op(B) with its transpose) through the
 * pre-pack cache.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "igemm.h"
#include "msq.h"

/* A, a_scale, a_zero_point, B, b_scale, b_zero_point, C, y_scale, y_zero_point */
static int qg_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt, int n_in,
		       char *why, size_t n)
{
	static const uint32_t mask[9] = {MSQ_Q8, CPU_TYPES_F32, MSQ_Q8, MSQ_Q8, CPU_TYPES_F32,
					 MSQ_Q8, CPU_BIT(CPU_INT32), CPU_TYPES_F32, MSQ_Q8};

	(void)p;
	(void)opset;
	if (n_in > 9)
		return snprintf(why, n, "at most 9 inputs"), 0;
	for (int i = 0; i < n_in; i++)
		if (!cpu_supports_dtype(dt, n_in, i, mask[i], why, n))
			return 0;
	return 1;
}

static int qg_prepare(cpu_node *node, char *err, size_t n)
{
	msq_bpack *bp = calloc(1, sizeof(*bp));

	if (!bp)
		return CPU_E_NOMEM;
	node->state = bp;
	return msq_pack_b(node, 3, cpu_attr_int(node->proto, "transB", 0) != 0, bp, err, n);
}

static void qg_release(cpu_node *node)
{
	free(node->state);
	node->state = NULL;
}

/* A rows x cols matrix transposed into scratch. */
static const uint8_t *transpose(cpu_ctx *ctx, const uint8_t *x, int64_t rows, int64_t cols)
{
	uint8_t *t = cpu_scratch(ctx, (size_t)(rows * cols > 0 ? rows * cols : 1));

	if (t)
		for (int64_t r = 0; r < rows; r++)
			for (int64_t c = 0; c < cols; c++)
				t[c * rows + r] = x[r * cols + c];
	return t;
}

/* acc += C broadcast onto (M, N) (unidirectional). */
static int add_c(cpu_ctx *ctx, const cpu_tensor *C, int32_t *acc, int64_t M, int64_t N)
{
	int64_t cm, cn;

	if (C->rank > 2)
		return cpu_fail(ctx, CPU_E_INVALID, "C must have rank <= 2");
	cm = C->rank == 2 ? C->dims[0] : 1;
	cn = C->rank >= 1 ? C->dims[C->rank - 1] : 1;
	if ((cm != 1 && cm != M) || (cn != 1 && cn != N))
		return cpu_fail(ctx, CPU_E_INVALID, "C does not broadcast to (%lld, %lld)",
				(long long)M, (long long)N);
	for (int64_t i = 0; i < M; i++)
		for (int64_t j = 0; j < N; j++) {
			int32_t c = ((const int32_t *)C->data)[(cm == 1 ? 0 : i) * cn + (cn == 1 ? 0 : j)];
			acc[i * N + j] = (int32_t)((uint32_t)acc[i * N + j] + (uint32_t)c);
		}
	return 0;
}

static int qg_compute(cpu_ctx *ctx)
{
	const Onnx__NodeProto *pr = ctx->node->proto;
	const msq_bpack *bp = ctx->node->state;
	int ta = cpu_attr_int(pr, "transA", 0) != 0, tb = cpu_attr_int(pr, "transB", 0) != 0;
	float alpha = cpu_attr_float(pr, "alpha", 1.0f), as, ys = 0.0f, *mult;
	const cpu_tensor *A, *B, *bs = cpu_input(ctx, 4), *bz = cpu_input(ctx, 5);
	const cpu_tensor *C = cpu_input(ctx, 6), *yst = cpu_input(ctx, 7), *yz = cpu_input(ctx, 8);
	int32_t za, yzp = 0, ydt = yz ? yz->dtype : CPU_UINT8, *acc, *zb = NULL;
	int64_t M, N, K, dims[2], nbs, nbz;
	igemm_problem p;
	cpu_tensor *Y;
	int rc = 0;

	if (!(A = cpu_require(ctx, 0, &rc)) || !(B = cpu_require(ctx, 3, &rc)))
		return rc;
	if ((rc = cpu_check_dtype(ctx, A, 0, MSQ_Q8)) || (rc = cpu_check_dtype(ctx, B, 3, MSQ_Q8)))
		return rc;
	if (A->rank != 2 || B->rank != 2)
		return cpu_fail(ctx, CPU_E_INVALID, "A and B must be 2-D");
	M = A->dims[ta ? 1 : 0];
	K = A->dims[ta ? 0 : 1];
	N = B->dims[tb ? 0 : 1];
	if (B->dims[tb ? 1 : 0] != K)
		return cpu_fail(ctx, CPU_E_INVALID, "op(A) is %lldx%lld but op(B) has %lld rows",
				(long long)M, (long long)K, (long long)B->dims[tb ? 1 : 0]);
	if ((rc = msq_scale(ctx, 1, "a_scale", &as)) ||
	    (rc = msq_zero_point(ctx, 2, "a_zero_point", A->dtype, &za)))
		return rc;
	if (!bs || bs->dtype != CPU_FLOAT || ((nbs = cpu_numel(bs)) != 1 && nbs != N))
		return cpu_fail(ctx, CPU_E_INVALID, "b_scale must be float32, per tensor or per column");
	nbz = bz ? cpu_numel(bz) : 1;
	if (bz && (bz->dtype != B->dtype || (nbz != 1 && nbz != N)))
		return cpu_fail(ctx, CPU_E_INVALID, "b_zero_point must be %s, per tensor or per column",
				cpu_dtype_name(B->dtype));
	if (yst && (rc = msq_scale(ctx, 7, "y_scale", &ys)))
		return rc;
	if (yst && yz && (rc = msq_zero_point(ctx, 8, "y_zero_point", ydt, &yzp)))
		return rc;
	dims[0] = M;
	dims[1] = N;
	if (!(Y = cpu_output(ctx, 0, yst ? ydt : CPU_FLOAT, 2, dims)))
		return CPU_E_NOMEM;
	if (M * N == 0)
		return 0;
	if (!(acc = cpu_scratch(ctx, (size_t)(M * N) * sizeof(int32_t))) ||
	    !(mult = cpu_scratch(ctx, (size_t)N * sizeof(float))) ||
	    !(zb = cpu_scratch(ctx, (size_t)nbz * sizeof(int32_t))))
		return CPU_E_NOMEM;
	for (int64_t k = 0; k < nbz; k++)
		zb[k] = bz ? (int32_t)cpu_get_i64(bz->dtype, bz->data, k) : 0;
	memset(&p, 0, sizeof(p));
	p.M = M;
	p.N = N;
	p.K = K;
	p.a_raw = ta ? transpose(ctx, A->data, K, M) : A->data;
	p.lda_raw = K;
	p.a_signed = A->dtype == CPU_INT8;
	p.za = za;
	if (bp && bp->packed && bp->src == B->data) {
		igemm_pack_b_view(bp->packed, &p.B);
	} else {
		p.b_raw = tb ? transpose(ctx, B->data, N, K) : B->data;
		p.ldb_raw = N;
		p.b_signed = B->dtype == CPU_INT8;
	}
	if (!p.a_raw || (!p.B.panels && !p.b_raw))
		return CPU_E_NOMEM;
	p.zb = zb[0];
	p.zb_col = nbz > 1 ? zb : NULL;
	p.out.c = acc;
	p.out.ldc = N;
	if ((rc = igemm_compute(ctx->pool, IGEMM_ISA_AUTO, &p)))
		return cpu_fail(ctx, CPU_E_INTERNAL, "the int8 GEMM failed (%d)", rc);
	if (C && (rc = add_c(ctx, C, acc, M, N)))
		return rc;
	for (int64_t j = 0; j < N; j++) {
		mult[j] = alpha * as * ((const float *)bs->data)[nbs > 1 ? j : 0];
		if (yst)
			mult[j] /= ys;
	}
	for (int64_t i = 0; i < M * N; i++) {
		float v = (float)acc[i] * mult[i % N];

		if (!yst)
			((float *)Y->data)[i] = v;
		else
			((uint8_t *)Y->data)[i] = (uint8_t)msq_quantize(v, 1.0f, yzp, ydt);
	}
	return 0;
}

const cpu_op cpu_op_msq_qgemm = {
	"QGemm", "com.microsoft", 1, CPU_OPSET_MAX, qg_supports, qg_prepare, qg_compute,
	qg_release,
};
