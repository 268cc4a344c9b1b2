/*
 * nms: ONNX NonMaxSuppression.  Per batch and class, the boxes scoring
 * above score_threshold are taken in descending score order (ties: lower
 * box index first, which the identical-boxes case expects), and a box is
 * kept when its IoU with every box kept before is at most iou_threshold,
 * until max_output_boxes_per_class are kept.  The output is
 * [selected, 3] int64 rows of (batch, class, box) in that order.  A
 * candidate is tested against the kept boxes four at a time (nms_overlaps).
 */
#include "tensor_ops.h"

typedef struct nms_args {
	int64_t max_out;
	double iou, score;
	int has_score, center;
} nms_args;

typedef struct nms_sort {
	const cpu_tensor *S;
	int64_t base;
} nms_sort;

static int by_score(const void *ctx, int64_t a, int64_t b)
{
	const nms_sort *s = ctx;
	double x = cpu_get_f64(s->S->dtype, s->S->data, s->base + a);
	double y = cpu_get_f64(s->S->dtype, s->S->data, s->base + b);
	return (x < y) - (x > y);
}

/* Box i of batch b as corners y1 <= y2, x1 <= x2. */
static void corners(const cpu_tensor *B, int center, int64_t at, double *c)
{
	double v[4];
	for (int k = 0; k < 4; k++)
		v[k] = cpu_get_f64(B->dtype, B->data, at + k);
	if (center) {   /* [x_center, y_center, width, height] */
		c[0] = v[1] - v[3] / 2;
		c[2] = v[1] + v[3] / 2;
		c[1] = v[0] - v[2] / 2;
		c[3] = v[0] + v[2] / 2;
		return;
	}
	/* [y1, x1, y2, x2], either diagonal */
	c[0] = v[0] < v[2] ? v[0] : v[2];
	c[2] = v[0] < v[2] ? v[2] : v[0];
	c[1] = v[1] < v[3] ? v[1] : v[3];
	c[3] = v[1] < v[3] ? v[3] : v[1];
}

static int suppressed(const double *a, const double *b, double threshold)
{
	double ih = (a[2] < b[2] ? a[2] : b[2]) - (a[0] > b[0] ? a[0] : b[0]);
	double iw = (a[3] < b[3] ? a[3] : b[3]) - (a[1] > b[1] ? a[1] : b[1]);
	double area_a = (a[2] - a[0]) * (a[3] - a[1]), area_b = (b[2] - b[0]) * (b[3] - b[1]);
	double inter, uni;
	if (ih <= 0 || iw <= 0 || area_a <= 0 || area_b <= 0)
		return 0;
	inter = ih * iw;
	uni = area_a + area_b - inter;
	return uni > 0 && inter / uni > threshold;
}

static int nms_read(cpu_ctx *ctx, nms_args *a)
{
	const cpu_tensor *M = cpu_input(ctx, 2), *I = cpu_input(ctx, 3), *S = cpu_input(ctx, 4);
	double v = 0;
	a->center = cpu_attr_int(ctx->node->proto, "center_point_box", 0) != 0;
	a->max_out = 0;
	a->iou = 0;
	a->score = 0;
	a->has_score = 0;
	if (M && cpu_numel(M) > 0) {
		if (M->dtype != CPU_INT64 || cpu_numel(M) != 1)
			return cpu_fail(ctx, CPU_E_INVALID, "max_output_boxes_per_class must be one int64");
		a->max_out = ((const int64_t *)M->data)[0];
	}
	if (I && cpu_numel(I) > 0) {
		if (!cpu_dtype_is_float(I->dtype) || cpu_read_scalar(I, &v))
			return cpu_fail(ctx, CPU_E_INVALID, "iou_threshold must be one float");
		a->iou = v;
	}
	if (S && cpu_numel(S) > 0) {
		if (!cpu_dtype_is_float(S->dtype) || cpu_read_scalar(S, &v))
			return cpu_fail(ctx, CPU_E_INVALID, "score_threshold must be one float");
		a->score = v;
		a->has_score = 1;
	}
	if (a->iou < 0 || a->iou > 1)
		return cpu_fail(ctx, CPU_E_INVALID, "iou_threshold %g is outside [0, 1]", a->iou);
	return 0;
}

typedef double vd4 __attribute__((vector_size(32)));
typedef int64_t vl4 __attribute__((vector_size(32)));

static inline __attribute__((always_inline)) vd4 vd_load(const double *p)
{
	vd4 v;

	memcpy(&v, p, sizeof(v));
	return v;
}

static inline __attribute__((always_inline)) vd4 vd_sel(vl4 m, vd4 a, vd4 b)
{
	return (vd4)((m & (vl4)a) | (~m & (vl4)b));
}

/* The boxes kept so far, a column per corner and their areas: the test of
 * a candidate against all of them runs four at a time (one at a time it
 * was 72% of SSDlite's run: torchvision's batched NMS puts every class's
 * boxes in one class). */
typedef struct nms_kept {
	double *c[4], *area;
} nms_kept;

/* Whether box (its corners, its area) overlaps one of the nk kept boxes by
 * more than the threshold: suppressed()'s arithmetic lane by lane, the
 * same selections and operations, so the same decisions, NaN included. */
CPU_MULTIVERSION
static int nms_overlaps(const nms_kept *k, int64_t nk, const double *box, double area,
			double threshold)
{
	int64_t j = 0;
	vd4 zero = {0, 0, 0, 0}, a0 = zero + box[0], a1 = zero + box[1], a2 = zero + box[2];
	vd4 a3 = zero + box[3], aa = zero + area, thr = zero + threshold;

	for (; j + 4 <= nk; j += 4) {
		vd4 b0 = vd_load(k->c[0] + j), b1 = vd_load(k->c[1] + j);
		vd4 b2 = vd_load(k->c[2] + j), b3 = vd_load(k->c[3] + j), ba = vd_load(k->area + j);
		vd4 ih = vd_sel(a2 < b2, a2, b2) - vd_sel(a0 > b0, a0, b0);
		vd4 iw = vd_sel(a3 < b3, a3, b3) - vd_sel(a1 > b1, a1, b1);
		vd4 inter = ih * iw, uni = aa + ba - inter;
		vl4 hit = (ih > zero) & (iw > zero) & (aa > zero) & (ba > zero) & (uni > zero) &
			  (inter / uni > thr);

		if (hit[0] | hit[1] | hit[2] | hit[3])
			return 1;
	}
	for (; j < nk; j++) {
		double b[4] = {k->c[0][j], k->c[1][j], k->c[2][j], k->c[3][j]};

		if (suppressed(box, b, threshold))
			return 1;
	}
	return 0;
}

/* Runs one (batch, class); appends rows to sel, returns the new count. */
static int64_t nms_class(const cpu_tensor *B, const cpu_tensor *S, const nms_args *a,
			 int64_t b, int64_t c, int64_t *order, int64_t *tmp, const nms_kept *kept,
			 int64_t *sel, int64_t nsel)
{
	int64_t nbox = B->dims[1], ncls = S->dims[1], n = 0, nk = 0;
	nms_sort ctx = { S, (b * ncls + c) * nbox };

	for (int64_t i = 0; i < nbox; i++)
		if (!a->has_score || cpu_get_f64(S->dtype, S->data, ctx.base + i) > a->score)
			order[n++] = i;
	tensor_sort(order, n, by_score, &ctx, tmp);
	for (int64_t k = 0; k < n && nk < a->max_out; k++) {
		double box[4], area;

		corners(B, a->center, (b * nbox + order[k]) * 4, box);
		area = (box[2] - box[0]) * (box[3] - box[1]);
		if (nms_overlaps(kept, nk, box, area, a->iou))
			continue;
		for (int i = 0; i < 4; i++)
			kept->c[i][nk] = box[i];
		kept->area[nk++] = area;
		sel[3 * nsel] = b;
		sel[3 * nsel + 1] = c;
		sel[3 * nsel + 2] = order[k];
		nsel++;
	}
	return nsel;
}

static int nms_compute(cpu_ctx *ctx)
{
	const cpu_tensor *B, *S;
	int64_t *order, *tmp, *sel, nsel = 0, cap, dims[2];
	nms_kept kept;
	double *kb;
	size_t keep;   /* boxes kept per class at most */
	nms_args a;
	cpu_tensor *Y;
	int rc = 0;

	if (!(B = cpu_require(ctx, 0, &rc)) || !(S = cpu_require(ctx, 1, &rc)))
		return rc;
	if ((rc = cpu_check_dtype(ctx, B, 0, CPU_TYPES_FLOAT | CPU_BIT(CPU_FLOAT16))) ||
	    (rc = cpu_check_dtype(ctx, S, 1, CPU_TYPES_FLOAT | CPU_BIT(CPU_FLOAT16))) ||
	    (rc = nms_read(ctx, &a)))
		return rc;
	if (B->rank != 3 || B->dims[2] != 4 || S->rank != 3 || S->dims[0] != B->dims[0] ||
	    S->dims[2] != B->dims[1])
		return cpu_fail(ctx, CPU_E_INVALID, "boxes must be [B, N, 4] and scores [B, C, N]");
	if (a.max_out > B->dims[1])
		a.max_out = B->dims[1];
	cap = B->dims[0] * S->dims[1] * (a.max_out > 0 ? a.max_out : 0);
	order = cpu_scratch(ctx, sizeof(int64_t) * (size_t)B->dims[1] + 1);
	tmp = cpu_scratch(ctx, sizeof(int64_t) * (size_t)B->dims[1] + 1);
	keep = a.max_out > 0 ? (size_t)a.max_out : 0;
	kb = cpu_scratch(ctx, sizeof(double) * 5 * keep + 1);
	sel = cpu_scratch(ctx, sizeof(int64_t) * 3 * (size_t)cap + 1);
	if (!order || !tmp || !kb || !sel)
		return CPU_E_NOMEM;
	for (int i = 0; i < 4; i++)
		kept.c[i] = kb + (size_t)i * keep;
	kept.area = kb + 4 * keep;
	for (int64_t b = 0; b < B->dims[0] && a.max_out > 0; b++)
		for (int64_t c = 0; c < S->dims[1]; c++)
			nsel = nms_class(B, S, &a, b, c, order, tmp, &kept, sel, nsel);
	dims[0] = nsel;
	dims[1] = 3;
	if (!(Y = cpu_output(ctx, 0, CPU_INT64, 2, dims)))
		return CPU_E_NOMEM;
	if (nsel)
		memcpy(Y->data, sel, sizeof(int64_t) * 3 * (size_t)nsel);
	return 0;
}

static int nms_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt,
			int n_in, char *why, size_t n)
{
	uint32_t f = CPU_TYPES_FLOAT | CPU_BIT(CPU_FLOAT16);
	(void)p;
	(void)opset;
	return cpu_supports_dtype(dt, n_in, 0, f, why, n) &&
	       cpu_supports_dtype(dt, n_in, 1, f, why, n);
}

const cpu_op cpu_op_nonmaxsuppression = {
	"NonMaxSuppression", "", 10, CPU_OPSET_MAX, nms_supports, NULL, nms_compute, NULL,
};
