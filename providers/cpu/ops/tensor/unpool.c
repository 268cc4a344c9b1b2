/*
 * unpool: ops that put values back into an image — MaxUnpool (the
 * inverse of MaxPool with its Indices) and Col2Im (sum the columns of an
 * unfolded image back into place).  Both move elements of any dtype for
 * MaxUnpool; Col2Im adds, so it takes numeric types.
 *
 * MaxUnpool's indices are flat positions in the tensor MaxPool was given,
 * i.e. the default output shape ((in - 1) * stride - pads + kernel).  With
 * an output_shape input, that default-shaped result is zero-padded to it
 * (the extra split with the smaller half first), as ONNX Runtime and the
 * conformance data do.
 */
#include <stdio.h>

#include "tensor_ops.h"

/* kernel/strides/pads of nsp spatial dims from the attributes. */
static int window_attrs(cpu_ctx *ctx, int nsp, int64_t *k, int64_t *s, int64_t *pads,
			int64_t *dil)
{
	const Onnx__NodeProto *p = ctx->node->proto;
	const int64_t *v;
	size_t n;
	for (int i = 0; i < nsp; i++) {
		s[i] = dil[i] = 1;
		pads[i] = pads[nsp + i] = 0;
	}
	n = cpu_attr_ints(p, "kernel_shape", &v);
	if (k && n != (size_t)nsp)
		return cpu_fail(ctx, CPU_E_INVALID, "kernel_shape must have %d values", nsp);
	for (size_t i = 0; k && i < n; i++)
		k[i] = v[i];
	if ((n = cpu_attr_ints(p, "strides", &v)) && n != (size_t)nsp)
		return cpu_fail(ctx, CPU_E_INVALID, "strides must have %d values", nsp);
	for (size_t i = 0; i < n; i++)
		s[i] = v[i];
	if ((n = cpu_attr_ints(p, "dilations", &v)) && n != (size_t)nsp)
		return cpu_fail(ctx, CPU_E_INVALID, "dilations must have %d values", nsp);
	for (size_t i = 0; i < n; i++)
		dil[i] = v[i];
	if ((n = cpu_attr_ints(p, "pads", &v)) && n != 2 * (size_t)nsp)
		return cpu_fail(ctx, CPU_E_INVALID, "pads must have %d values", 2 * nsp);
	for (size_t i = 0; i < n; i++)
		pads[i] = v[i];
	for (int i = 0; i < nsp; i++)
		if ((k && (k[i] < 1 || k[i] > INT32_MAX)) || s[i] < 1 || s[i] > INT32_MAX ||
		    dil[i] < 1 || dil[i] > INT32_MAX || pads[i] < 0 || pads[i] > INT32_MAX ||
		    pads[nsp + i] < 0 || pads[nsp + i] > INT32_MAX)
			return cpu_fail(ctx, CPU_E_INVALID, "kernel/strides/dilations/pads out of "
					"range on spatial dim %d", i);
	return 0;
}

/* The default-shaped output dims, then the requested ones (if any). */
static int unpool_shapes(cpu_ctx *ctx, const cpu_tensor *X, int64_t *def, int64_t *out)
{
	int64_t k[CPU_MAX_RANK], s[CPU_MAX_RANK], pads[2 * CPU_MAX_RANK], dil[CPU_MAX_RANK];
	int64_t req[CPU_MAX_RANK], n;
	int nsp = X->rank - 2, rc;
	if (nsp < 1)
		return cpu_fail(ctx, CPU_E_INVALID, "X must have spatial dims");
	if ((rc = window_attrs(ctx, nsp, k, s, pads, dil)) != 0)
		return rc;
	def[0] = out[0] = X->dims[0];
	def[1] = out[1] = X->dims[1];
	for (int i = 0; i < nsp; i++) {
		def[2 + i] = (X->dims[2 + i] - 1) * s[i] - pads[i] - pads[nsp + i] + k[i];
		if (def[2 + i] < 0)
			return cpu_fail(ctx, CPU_E_INVALID, "output dim %d would be negative", i);
		out[2 + i] = def[2 + i];
	}
	if (!cpu_input(ctx, 2))
		return 0;
	if ((n = tensor_input_ints(ctx, 2, req, CPU_MAX_RANK, 0)) < 0)
		return CPU_E_INVALID;
	if (n != X->rank || req[0] != X->dims[0] || req[1] != X->dims[1])
		return cpu_fail(ctx, CPU_E_INVALID, "output_shape must be [N, C, spatial...]");
	for (int i = 0; i < nsp; i++) {
		if (req[2 + i] < def[2 + i])
			return cpu_fail(ctx, CPU_E_INVALID, "output_shape dim %d is below %lld", 2 + i,
					(long long)def[2 + i]);
		out[2 + i] = req[2 + i];
	}
	return 0;
}

static int maxunpool_compute(cpu_ctx *ctx)
{
	const cpu_tensor *X, *I;
	int64_t def[CPU_MAX_RANK], out[CPU_MAX_RANK], ds[CPU_MAX_RANK], os[CPU_MAX_RANK];
	int64_t n, total;
	size_t es;
	cpu_tensor *Y;
	int rc = 0;

	if (!(X = cpu_require(ctx, 0, &rc)) || !(I = cpu_require(ctx, 1, &rc)))
		return rc;
	if ((rc = cpu_check_dtype(ctx, I, 1, CPU_BIT(CPU_INT64))) != 0)
		return rc;
	if (I->rank != X->rank || memcmp(I->dims, X->dims, sizeof(int64_t) * (size_t)X->rank))
		return cpu_fail(ctx, CPU_E_INVALID, "indices must have X's shape");
	if ((rc = unpool_shapes(ctx, X, def, out)) != 0)
		return rc;
	if (!(Y = cpu_output(ctx, 0, X->dtype, X->rank, out)))
		return CPU_E_NOMEM;
	es = cpu_dtype_size(X->dtype);
	memset(Y->data, 0, (size_t)cpu_numel(Y) * es);
	tensor_strides(X->rank, def, ds);
	tensor_strides(X->rank, out, os);
	total = cpu_shape_numel(X->rank, def);
	n = cpu_numel(X);
	for (int64_t i = 0; i < n; i++) {
		int64_t v = ((const int64_t *)I->data)[i], rest = v, off = 0;
		if (v < 0 || v >= total)
			return cpu_fail(ctx, CPU_E_INVALID, "index %lld out of range [0, %lld)",
					(long long)v, (long long)total);
		for (int d = 0; d < X->rank; d++) {
			int64_t c = rest / ds[d];
			rest %= ds[d];
			off += (c + (out[d] - def[d]) / 2) * os[d];
		}
		tensor_copy_elem((char *)Y->data + (size_t)off * es, (const char *)X->data + (size_t)i * es,
				 es);
	}
	return 0;
}

/* Col2Im geometry: block counts per dim; the total or -1 on error. */
static int64_t col2im_blocks(cpu_ctx *ctx, int nsp, const int64_t *img, const int64_t *blk,
			     const int64_t *s, const int64_t *pads, const int64_t *dil, int64_t *nb)
{
	int64_t total = 1;
	for (int i = 0; i < nsp; i++) {
		int64_t eff = dil[i] * (blk[i] - 1) + 1, span = img[i] + pads[i] + pads[nsp + i];
		if (img[i] < 0 || blk[i] < 1 || blk[i] > INT32_MAX || img[i] > INT32_MAX || span < eff) {
			cpu_fail(ctx, CPU_E_INVALID, "block %lld does not fit image dim %lld",
				 (long long)blk[i], (long long)img[i]);
			return -1;
		}
		nb[i] = (span - eff) / s[i] + 1;
		if (__builtin_mul_overflow(total, nb[i], &total)) {
			cpu_fail(ctx, CPU_E_INVALID, "block count overflows");
			return -1;
		}
	}
	return total;
}

/* Adds column (kernel position kk, all blocks) of one plane into y. */
static void col2im_add(const cpu_tensor *X, int64_t xbase, cpu_tensor *Y, int64_t ybase, int nsp,
		       const int64_t *img, const int64_t *kk, const int64_t *nb, const int64_t *s,
		       const int64_t *pads, const int64_t *dil, int64_t L)
{
	int64_t l[CPU_MAX_RANK] = {0}, ys[CPU_MAX_RANK];
	tensor_strides(nsp, img, ys);
	for (int64_t b = 0; b < L; b++) {
		int64_t off = 0;
		int inside = 1;
		for (int i = 0; i < nsp; i++) {
			int64_t c = l[i] * s[i] - pads[i] + kk[i] * dil[i];
			inside &= c >= 0 && c < img[i];
			off += c * ys[i];
		}
		if (inside)
			cpu_set_f64(Y->dtype, Y->data, ybase + off,
				    cpu_get_f64(Y->dtype, Y->data, ybase + off) +
				    cpu_get_f64(X->dtype, X->data, xbase + b));
		for (int i = nsp - 1; i >= 0 && ++l[i] == nb[i]; i--)
			l[i] = 0;
	}
}

static int col2im_compute(cpu_ctx *ctx)
{
	const cpu_tensor *X;
	int64_t img[CPU_MAX_RANK], blk[CPU_MAX_RANK], s[CPU_MAX_RANK], dil[CPU_MAX_RANK];
	int64_t pads[2 * CPU_MAX_RANK], nb[CPU_MAX_RANK], dims[CPU_MAX_RANK], kk[CPU_MAX_RANK];
	int64_t nsp, nblk, L, K = 1, C, plane;
	cpu_tensor *Y;
	int rc = 0;

	if (!(X = cpu_require(ctx, 0, &rc)))
		return rc;
	if ((rc = cpu_check_dtype(ctx, X, 0, CPU_TYPES_NUMERIC | CPU_BIT(CPU_BFLOAT16))))
		return rc;
	if ((nsp = tensor_input_ints(ctx, 1, img, CPU_MAX_RANK - 2, 0)) < 0 ||
	    (nblk = tensor_input_ints(ctx, 2, blk, CPU_MAX_RANK - 2, 0)) < 0)
		return CPU_E_INVALID;
	if (nsp < 1 || nblk != nsp || X->rank != 3)
		return cpu_fail(ctx, CPU_E_INVALID, "need X [N, C*prod(block), L] and image_shape, "
				"block_shape of one length");
	if ((rc = window_attrs(ctx, (int)nsp, NULL, s, pads, dil)) != 0)
		return rc;
	if ((L = col2im_blocks(ctx, (int)nsp, img, blk, s, pads, dil, nb)) < 0)
		return CPU_E_INVALID;
	for (int i = 0; i < nsp; i++)
		if (__builtin_mul_overflow(K, blk[i], &K))
			return cpu_fail(ctx, CPU_E_INVALID, "block size overflows");
	if (X->dims[1] % K || X->dims[2] != L)
		return cpu_fail(ctx, CPU_E_INVALID, "X is [%lld, %lld, %lld]; expected C*%lld "
				"columns of %lld blocks", (long long)X->dims[0],
				(long long)X->dims[1], (long long)X->dims[2], (long long)K,
				(long long)L);
	C = X->dims[1] / K;
	dims[0] = X->dims[0];
	dims[1] = C;
	memcpy(dims + 2, img, sizeof(int64_t) * (size_t)nsp);
	if (!(Y = cpu_output(ctx, 0, X->dtype, (int)nsp + 2, dims)))
		return CPU_E_NOMEM;
	memset(Y->data, 0, (size_t)cpu_numel(Y) * cpu_dtype_size(Y->dtype));
	plane = cpu_shape_numel((int)nsp, img);
	for (int64_t nc = 0; nc < X->dims[0] * C; nc++)
		for (int64_t k = 0; k < K; k++) {
			int64_t rest = k;
			for (int i = (int)nsp - 1; i >= 0; i--) {
				kk[i] = rest % blk[i];
				rest /= blk[i];
			}
			col2im_add(X, (nc * K + k) * L, Y, nc * plane, (int)nsp, img, kk, nb, s, pads,
				   dil, L);
		}
	return 0;
}

const cpu_op cpu_op_maxunpool = {
	"MaxUnpool", "", 9, CPU_OPSET_MAX, tensor_supports_any, NULL, maxunpool_compute, NULL,
};
const cpu_op cpu_op_col2im = {
	"Col2Im", "", 18, CPU_OPSET_MAX, NULL, NULL, col2im_compute, NULL,
};
