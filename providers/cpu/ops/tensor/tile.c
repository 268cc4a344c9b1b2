/*
 * tile: ONNX Tile (opset 6+: the repeats input) for any dtype, and TopK
 * (the k largest or smallest along an axis, with their int64 indices;
 * equal values keep index order, as the reference's stable sort does).
 */
#include "tensor_ops.h"

static int tile_compute(cpu_ctx *ctx)
{
	const cpu_tensor *X;
	int64_t rep[CPU_MAX_RANK], dims[CPU_MAX_RANK], xs[CPU_MAX_RANK], pos[CPU_MAX_RANK] = {0};
	int64_t n, rows = 1, last;
	size_t es, row;
	cpu_tensor *Y;
	char *y;
	int rc = 0;

	if (!(X = cpu_require(ctx, 0, &rc)))
		return rc;
	if ((n = tensor_input_ints(ctx, 1, rep, CPU_MAX_RANK, 0)) < 0)
		return CPU_E_INVALID;
	if (n != X->rank)
		return cpu_fail(ctx, CPU_E_INVALID, "repeats has %lld values for rank %d",
				(long long)n, X->rank);
	for (int d = 0; d < X->rank; d++) {
		if (rep[d] < 0 || (X->dims[d] && rep[d] > INT64_MAX / X->dims[d]))
			return cpu_fail(ctx, CPU_E_INVALID, "repeats[%d] = %lld is invalid", d,
					(long long)rep[d]);
		dims[d] = X->dims[d] * rep[d];
	}
	if (!(Y = cpu_output(ctx, 0, X->dtype, X->rank, dims)))
		return CPU_E_NOMEM;
	es = cpu_dtype_size(X->dtype);
	if (X->rank == 0 || cpu_numel(Y) == 0) {
		if (X->rank == 0)
			tensor_copy_elem(Y->data, X->data, es);
		return 0;
	}
	last = X->rank - 1;
	tensor_strides(X->rank, X->dims, xs);
	for (int d = 0; d < last; d++)
		rows *= dims[d];
	row = (size_t)X->dims[last] * es;
	y = Y->data;
	for (int64_t r = 0; r < rows; r++) {
		int64_t off = 0;
		for (int d = 0; d < last; d++)
			off += (pos[d] % X->dims[d]) * xs[d];
		for (int64_t k = 0; k < rep[last]; k++, y += row)
			memcpy(y, (const char *)X->data + (size_t)off * es, row);
		for (int d = (int)last - 1; d >= 0 && ++pos[d] == dims[d]; d--)
			pos[d] = 0;
	}
	return 0;
}

typedef struct topk_sort {
	const cpu_tensor *X;
	int64_t base, stride;
	int sign;
} topk_sort;

static int topk_cmp(const void *ctx, int64_t a, int64_t b)
{
	const topk_sort *s = ctx;
	return s->sign * tensor_cmp_elem(s->X->dtype, s->X->data, s->base + a * s->stride,
					 s->X->data, s->base + b * s->stride);
}

/* float32 TopK without the generic sort: a binary heap of the k best so
 * far (its root the last of them in the output's order), then those k
 * sorted; the order is topk_cmp's (NaN after every number, equal values
 * by index).  SSDlite's 90 per-class TopKs over 3234 scores took 39 ms a
 * run through the merge sort of all n, a comparison through the generic
 * dtype reader each. */
typedef struct tk_item {
	float v;
	int64_t i;
} tk_item;

/* a before b in the output (largest: descending). */
static inline int tk_before(tk_item a, tk_item b, int largest)
{
	int an = a.v != a.v, bn = b.v != b.v;

	if (an || bn)
		return an && bn ? a.i < b.i : largest ? an : bn;
	if (a.v != b.v)
		return largest ? a.v > b.v : a.v < b.v;
	return a.i < b.i;
}

/* Heap order: the root is what every other item comes before. */
static void tk_sift(tk_item *h, int64_t n, int64_t r, int largest)
{
	for (;;) {
		int64_t c = 2 * r + 1, m = r;

		if (c < n && tk_before(h[m], h[c], largest))
			m = c;
		if (c + 1 < n && tk_before(h[m], h[c + 1], largest))
			m = c + 1;
		if (m == r)
			return;
		tk_item t = h[r];

		h[r] = h[m];
		h[m] = t;
		r = m;
	}
}

/* The k first of the n floats x[i * stride] into h[0 .. k), in order. */
static void topk_f32(const float *x, int64_t n, int64_t stride, int64_t k, int largest,
		     tk_item *h)
{
	int64_t m = 0;

	if (k == 0)
		return;
	for (int64_t i = 0; i < n; i++) {
		tk_item it = {x[i * stride], i};

		if (m < k) {
			/* sift up */
			int64_t c = m++;

			h[c] = it;
			while (c > 0 && tk_before(h[(c - 1) / 2], h[c], largest)) {
				tk_item t = h[c];

				h[c] = h[(c - 1) / 2];
				h[(c - 1) / 2] = t;
				c = (c - 1) / 2;
			}
		} else if (tk_before(it, h[0], largest)) {
			h[0] = it;
			tk_sift(h, k, 0, largest);
		}
	}
	/* heap sort: the root (the last in order) to the end, k times */
	for (int64_t e = k - 1; e > 0; e--) {
		tk_item t = h[0];

		h[0] = h[e];
		h[e] = t;
		tk_sift(h, e, 0, largest);
	}
}

static int topk_k(cpu_ctx *ctx, int64_t *k)
{
	const cpu_tensor *K;
	if (ctx->node->opset < 10) {
		*k = cpu_attr_int(ctx->node->proto, "k", -1);
		return 0;
	}
	if (!(K = cpu_input(ctx, 1)) || K->dtype != CPU_INT64 || cpu_numel(K) != 1 || K->rank > 1)
		return cpu_fail(ctx, CPU_E_INVALID, "K must be a 1-element int64 tensor");
	*k = ((const int64_t *)K->data)[0];
	return 0;
}

static int topk_compute(cpu_ctx *ctx)
{
	const cpu_tensor *X;
	int64_t raw = cpu_attr_int(ctx->node->proto, "axis", -1), k = 0, dims[CPU_MAX_RANK];
	int64_t outer = 1, inner = 1, n, *idx, *tmp;
	topk_sort s;
	size_t es;
	cpu_tensor *V, *I;
	int axis, rc = 0;

	if (!(X = cpu_require(ctx, 0, &rc)) || (rc = topk_k(ctx, &k)) != 0)
		return rc;
	if ((rc = cpu_check_dtype(ctx, X, 0, CPU_TYPES_NUMERIC | CPU_BIT(CPU_UINT64) |
				  CPU_BIT(CPU_BFLOAT16))))
		return rc;
	if ((axis = cpu_norm_axis(raw, X->rank)) < 0)
		return cpu_fail(ctx, CPU_E_INVALID, "axis %lld out of range for rank %d",
				(long long)raw, X->rank);
	n = X->dims[axis];
	if (k < 0 || k > n)
		return cpu_fail(ctx, CPU_E_INVALID, "k = %lld is outside [0, %lld]", (long long)k,
				(long long)n);
	for (int d = 0; d < X->rank; d++) {
		dims[d] = d == axis ? k : X->dims[d];
		outer *= d < axis ? X->dims[d] : 1;
		inner *= d > axis ? X->dims[d] : 1;
	}
	if (!(V = cpu_output(ctx, 0, X->dtype, X->rank, dims)) ||
	    !(I = cpu_output(ctx, 1, CPU_INT64, X->rank, dims)))
		return CPU_E_NOMEM;
	es = cpu_dtype_size(X->dtype);
	s.X = X;
	s.stride = inner;
	s.sign = cpu_attr_int(ctx->node->proto, "largest", 1) ? -1 : 1;
	if (X->dtype == CPU_FLOAT) {
		tk_item *h = cpu_scratch(ctx, sizeof(tk_item) * (size_t)k + 1);

		if (!h)
			return CPU_E_NOMEM;
		for (int64_t o = 0; o < outer; o++)
			for (int64_t in = 0; in < inner; in++) {
				topk_f32((const float *)X->data + o * n * inner + in, n, inner, k,
					 s.sign < 0, h);
				for (int64_t j = 0; j < k; j++) {
					int64_t at = (o * k + j) * inner + in;

					((int64_t *)I->data)[at] = h[j].i;
					((float *)V->data)[at] = h[j].v;
				}
			}
		return 0;
	}
	if (!(idx = cpu_scratch(ctx, sizeof(int64_t) * (size_t)n + 1)) ||
	    !(tmp = cpu_scratch(ctx, sizeof(int64_t) * (size_t)n + 1)))
		return CPU_E_NOMEM;
	for (int64_t o = 0; o < outer; o++)
		for (int64_t in = 0; in < inner; in++) {
			s.base = o * n * inner + in;
			for (int64_t i = 0; i < n; i++)
				idx[i] = i;
			tensor_sort(idx, n, topk_cmp, &s, tmp);
			for (int64_t j = 0; j < k; j++) {
				int64_t at = (o * k + j) * inner + in;
				((int64_t *)I->data)[at] = idx[j];
				tensor_copy_elem((char *)V->data + (size_t)at * es,
						 (const char *)X->data + (size_t)(s.base + idx[j] * inner) * es,
						 es);
			}
		}
	return 0;
}

const cpu_op cpu_op_tile = {
	"Tile", "", 6, CPU_OPSET_MAX, tensor_supports_any, NULL, tile_compute, NULL,
};
const cpu_op cpu_op_topk = {
	"TopK", "", 1, CPU_OPSET_MAX, NULL, NULL, topk_compute, NULL,
};
