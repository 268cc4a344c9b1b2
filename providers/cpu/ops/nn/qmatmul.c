/*
 * qmatmul: ONNX MatMulInteger (opset 10) and QLinearMatMul (opsets 10 and
 * 21) on uint8/int8 operands with numpy matmul semantics (batch dims
 * broadcast, 1-D operands promoted).  Operands are centred on their zero
 * points into int32 copies and multiplied with nn_igemm.
 *
 * Zero points and scales are per tensor, per row of A (M values, or one
 * row set per A batch entry for MatMulInteger) and per column of B (N
 * values); QLinearMatMul's y_scale and y_zero_point are per tensor or per
 * column.
 */
#include <string.h>

#include "nn_ops.h"

typedef struct qmm {
	int64_t M, N, K, batch_a;
	int yr;
	int64_t ydims[CPU_MAX_RANK];
	cpu_bcast bc;
	const int32_t *a, *b;
	int32_t *y;
} qmm;

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

static int qmm_row(void *arg, int64_t len, const int64_t *off, const int64_t *st)
{
	const qmm *q = arg;

	for (int64_t j = 0; j < len; j++)
		nn_igemm(q->M, q->N, q->K, q->a + (off[0] + j * st[0]) * q->M * q->K, q->K,
			 q->b + (off[1] + j * st[1]) * q->K * q->N, q->N,
			 q->y + (off[2] + j) * q->M * q->N, q->N);
	return 0;
}

/* Centres A and B on their zero points (inputs za, zb) and multiplies into y. */
static int qmm_run(cpu_ctx *ctx, qmm *q, const cpu_tensor *A, int za, const cpu_tensor *B,
		   int zb, int32_t *y)
{
	const int32_t *zpa, *zpb;
	int64_t na, nb;
	int rc;

	if ((rc = nn_load_zp(ctx, cpu_input(ctx, za), za, A->dtype, &zpa, &na)) ||
	    (rc = nn_load_zp(ctx, cpu_input(ctx, zb), zb, B->dtype, &zpb, &nb)))
		return rc;
	if (na != 1 && na != q->M && (!q->M || na % q->M || na / q->M != q->batch_a))
		return cpu_fail(ctx, CPU_E_INVALID, "A's zero point has %lld values (1 or %lld rows)",
				(long long)na, (long long)q->M);
	if (nb != 1 && nb != q->N)
		return cpu_fail(ctx, CPU_E_INVALID, "B's zero point has %lld values (1 or %lld "
				"columns)", (long long)nb, (long long)q->N);
	if (!(q->a = nn_centered(ctx, A, zpa, na, q->K)) || !(q->b = nn_centered(ctx, B, zpb, nb, 1)))
		return CPU_E_NOMEM;
	q->y = y;
	return cpu_bcast_each(&q->bc, qmm_row, q);
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

static int mmi_compute(cpu_ctx *ctx)
{
	const cpu_tensor *A, *B;
	cpu_tensor *Y;
	qmm q;
	int rc = 0;

	if (!(A = cpu_require(ctx, 0, &rc)) || !(B = cpu_require(ctx, 1, &rc)))
		return rc;
	if ((rc = qmm_shapes(ctx, A, 0, B, 1, &q)))
		return rc;
	if (!(Y = cpu_output(ctx, 0, CPU_INT32, q.yr, q.ydims)))
		return CPU_E_NOMEM;
	return qmm_run(ctx, &q, A, 2, B, 3, Y->data);
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
	if ((rc = qmm_run(ctx, &q, A, 2, B, 5, acc)))
		return rc;
	for (int64_t e = 0; e < n; e++) {
		int64_t i = (e / (q.N ? q.N : 1)) % (q.M ? q.M : 1), j = e % (q.N ? q.N : 1);
		float mult = as[nas > 1 ? i : 0] * bs[nbs > 1 ? j : 0] / ys[nys > 1 ? j : 0];
		nn_requant(odt, Y->data, e, acc[e], mult, zy[nzy > 1 ? j : 0]);
	}
	return 0;
}

const cpu_op cpu_op_matmulinteger = {
	"MatMulInteger", "", 10, CPU_OPSET_MAX, mmi_supports, NULL, mmi_compute, NULL,
};
const cpu_op cpu_op_qlinearmatmul = {
	"QLinearMatMul", "", 10, CPU_OPSET_MAX, qlmm_supports, NULL, qlmm_compute, NULL,
};
