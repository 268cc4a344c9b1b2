/*
 * vk_ops_shape: ops that move or re-label float32 data.  Reshape, Flatten,
 * Squeeze, Unsqueeze and Identity are metadata: the output is a view of
 * the input's device buffer, nothing is copied.  Transpose (shaders/
 * transpose.comp; a permutation that keeps the memory order is a view
 * too), Concat (one shaders/copy.comp dispatch per input) and Gather
 * (shaders/gather.comp) move data.  Shape-like int64 inputs (Reshape's
 * shape, axes, Gather's indices) are read on the host: they are weights or
 * come from shared memory, never from this device, as no Vulkan op makes
 * an int64 tensor.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dk_ops.h"
#include "vk_ops.h"

#define TR_MAX_RANK 8

typedef struct transpose_push {
	uint32_t n, rank;
	uint32_t dims[TR_MAX_RANK], istr[TR_MAX_RANK];
} transpose_push;

typedef struct copy_push {
	uint32_t n, blk, dst_blk, dst_off;
} copy_push;

typedef struct gather_push {
	uint32_t n, nidx, inner, axis_len;
} gather_push;

/* ---- Transpose ------------------------------------------------------------ */

static int transpose_plan(dk_ctx *c)
{
	const dk_val *x = dk_in(c, 0), *y;
	int64_t fd[EP_MAX_RANK], fs[EP_MAX_RANK];
	transpose_push p = {0};
	int k = dk_transpose_out(c, TR_MAX_RANK, fd, fs, &y);

	if (k <= 0)
		return k;
	p.n = (uint32_t)y->numel;
	p.rank = (uint32_t)k;
	for (int i = 0; i < k; i++) {
		p.dims[i] = (uint32_t)fd[i];
		p.istr[i] = (uint32_t)fs[i];
	}
	return vk_emit_1d(c, VKP_TRANSPOSE, (vk_buf[]){x->dev, y->dev}, 2, 2u, &p, sizeof(p),
			  (uint64_t)y->numel);
}

/* ---- Concat --------------------------------------------------------------- */

/* One copy dispatch per input into its slice of the output. */
static int concat_plan(dk_ctx *c)
{
	const dk_val *y;
	int64_t outer, inner, off = 0;
	int a, rc = dk_concat_out(c, &a, &outer, &inner, &y);

	for (int i = 0; rc == 0 && i < c->n_in; i++) {
		const dk_val *x = dk_in(c, i);
		copy_push p = {(uint32_t)x->numel, (uint32_t)(x->dims[a] * inner),
			       (uint32_t)(y->dims[a] * inner), (uint32_t)(off * inner)};

		off += x->dims[a];
		if (x->numel)
			rc = vk_emit_1d(c, VKP_COPY, (vk_buf[]){x->dev, y->dev}, 2, 2u, &p, sizeof(p),
					(uint64_t)x->numel);
	}
	return rc;
}

/* ---- Gather --------------------------------------------------------------- */

/* The indices go to the shader as int32. */
static int gather_plan(dk_ctx *c)
{
	const dk_val *x = dk_in(c, 0), *ix = dk_in(c, 1), *y;
	int64_t inner, outer, len;
	gather_push p;
	vk_buf ib;
	int rc = dk_gather_out(c, 4, &ib, &outer, &inner, &len, &y);

	if (rc)
		return rc > 0 ? 0 : rc;
	p = (gather_push){(uint32_t)y->numel, (uint32_t)ix->numel, (uint32_t)inner, (uint32_t)len};
	return vk_emit_1d(c, VKP_GATHER, (vk_buf[]){x->dev, ib, y->dev}, 3, 4u, &p, sizeof(p),
			  (uint64_t)y->numel);
}

#define VIEW(name, lo) {name, lo, 22, dk_view_supports, NULL, dk_view_run, NULL, 0, NULL, NULL}

const dk_op vk_ops_shape[] = {
	VIEW("Reshape", 5),
	VIEW("Flatten", 1),
	VIEW("Squeeze", 1),
	VIEW("Unsqueeze", 1),
	VIEW("Identity", 1),
	{"Transpose", 1, 22, dk_transpose_supports, NULL, transpose_plan, NULL,
	 VKX_PIPE(VKP_TRANSPOSE), NULL, NULL},
	{"Concat", 4, 22, dk_concat_supports, NULL, concat_plan, NULL,
	 VKX_PIPE(VKP_COPY), NULL, NULL},
	{"Gather", 1, 22, dk_gather_supports, dk_gather_prepare, gather_plan, NULL,
	 VKX_PIPE(VKP_GATHER), NULL, NULL},
	{0},
};
