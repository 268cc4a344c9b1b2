/*
 * cuda_ops_reduce: ReduceSum, ReduceMean, ReduceMax and ReduceMin on
 * float32 and float16 (k_reduce.cu): axes from the attribute (ReduceSum
 * before opset 13, the others before 18) or from the int64 input on the
 * host, keepdims, noop_with_empty_axes.  The dims fold into kept and
 * reduced groups (unit dims vanish, neighbours of one kind merge).
 */
#include <stdio.h>
#include <string.h>

#include "cuda_ops.h"

/* The groups (dk_reduce_out) as the kernel's cuk_reduce. */
static int reduce_run(dk_ctx *c)
{
	const dk_val *x = dk_in(c, 0), *y;
	cuk_reduce p = {0};
	dk_reduce g;
	int rc = dk_reduce_out(c, CUK_MAX_DIMS, &g, &y);

	if (rc)
		return rc > 0 ? 0 : rc;
	p.nk = g.nk;
	p.nr = g.nr;
	memcpy(p.kdims, g.kdims, sizeof(int64_t) * (size_t)g.nk);
	memcpy(p.kstr, g.kstr, sizeof(int64_t) * (size_t)g.nk);
	memcpy(p.rdims, g.rdims, sizeof(int64_t) * (size_t)g.nr);
	memcpy(p.rstr, g.rstr, sizeof(int64_t) * (size_t)g.nr);
	p.count = g.count;
	p.nout = g.nout;
	/* An empty reduction gives sum 0, mean NaN (0 / 0), max -inf, min inf. */
	return cu_check(c, cuk_reduce_run(c->stream, x->dtype, dk_reduce_code(c->node->proto->op_type),
					  x->dev.ptr, y->dev.ptr, &p), "reduce kernel");
}

const dk_op cu_ops_reduce[] = {
	{.names = dk_reduce_ops, .supports = dk_reduce_supports, .run = reduce_run},
	{0},
};
