/*
 * cuda_ops_shape: ops that move or re-label float data.  Reshape, Flatten,
 * Squeeze, Unsqueeze and Identity are metadata: the output is a view of
 * the input's device memory, nothing is copied.  Transpose (a permutation
 * that keeps the memory order is a view too), Concat (one copy kernel per
 * input) and Gather move data (k_shape.cu).  Shape-like int64 inputs
 * (Reshape's shape, axes, Gather's indices) are read on the host: they are
 * weights, come from shared memory, or are read back from a device buffer
 * at bind time; no CUDA op makes an int64 tensor.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_ops.h"
#include "dk_ops.h"

/* ---- Transpose ------------------------------------------------------------ */

static int transpose_run(dk_ctx *c)
{
	const dk_val *x = dk_in(c, 0), *y;
	int64_t fd[EP_MAX_RANK], fs[EP_MAX_RANK];
	cuk_perm p = {0};
	int k = dk_transpose_out(c, CUK_MAX_DIMS, fd, fs, &y);

	if (k <= 0)
		return k;
	p.rank = k;
	for (int i = 0; i < k; i++) {
		p.dims[i] = fd[i];
		p.istr[i] = fs[i];
	}
	return cu_check(c, cuk_transpose(c->stream, x->dtype, x->dev.ptr, y->dev.ptr, y->numel, &p),
			"transpose kernel");
}

/* ---- Concat --------------------------------------------------------------- */

/* One copy kernel per input into its slice of the output. */
static int concat_run(dk_ctx *c)
{
	const dk_val *y;
	int64_t outer, inner, off = 0;
	int a, rc = dk_concat_out(c, &a, &outer, &inner, &y);

	for (int i = 0; rc == 0 && i < c->n_in; i++) {
		const dk_val *x = dk_in(c, i);

		rc = cu_check(c, cuk_concat_copy(c->stream, x->dtype, x->dev.ptr, y->dev.ptr, outer,
						 x->dims[a] * inner, y->dims[a] * inner, off * inner),
			      "concat kernel");
		off += x->dims[a];
	}
	return rc;
}

/* ---- Gather --------------------------------------------------------------- */

/* The indices go to the kernel as int64. */
static int gather_run(dk_ctx *c)
{
	const dk_val *x = dk_in(c, 0), *ix = dk_in(c, 1), *y;
	int64_t inner, outer, len;
	dk_buf ib = {0};
	int rc = dk_gather_out(c, 8, &ib, &outer, &inner, &len, &y);

	if (rc)
		return rc > 0 ? 0 : rc;
	return cu_check(c, cuk_gather(c->stream, x->dtype, x->dev.ptr, ib.ptr, y->dev.ptr, outer,
				      ix->numel, inner, len), "gather kernel");
}

#define VIEW(name, lo) {name, lo, 22, dk_view_supports, NULL, dk_view_run, NULL, 0, NULL, NULL}

const dk_op cu_ops_shape[] = {
	VIEW("Reshape", 5),
	VIEW("Flatten", 1),
	VIEW("Squeeze", 1),
	VIEW("Unsqueeze", 1),
	VIEW("Identity", 1),
	{"Transpose", 1, 22, dk_transpose_supports, NULL, transpose_run, NULL, 0, NULL, NULL},
	{"Concat", 4, 22, dk_concat_supports, NULL, concat_run, NULL, 0, NULL, NULL},
	{"Gather", 1, 22, dk_gather_supports, dk_gather_prepare, gather_run, NULL, 0, NULL, NULL},
	{0},
};
