/*
 * vk_ops_reduce: ReduceSum, ReduceMean, ReduceMax and ReduceMin on float32
 * (shaders/reduce.comp): axes from the attribute (ReduceSum before opset
 * 13, the others before 18) or from the int64 input on the host, keepdims,
 * noop_with_empty_axes.  The dims are folded into alternating kept and
 * reduced groups (unit dims vanish, neighbours of one kind merge).
 */
#include <stdio.h>
#include <string.h>

#include "vk_ops.h"

static void copy_groups(uint32_t *dims, uint32_t *str, const int64_t *gd, const int64_t *gs, int n)
{
	for (int i = 0; i < n; i++) {
		dims[i] = (uint32_t)gd[i];
		str[i] = (uint32_t)gs[i];
	}
}

/* The groups (dk_reduce_out) as the shader's push constants. */
static int reduce_plan(dk_ctx *c)
{
	const dk_val *x = dk_in(c, 0), *y;
	vk_reduce_push p = {.op = (uint32_t)dk_reduce_code(c->node->proto->op_type)};
	dk_reduce g;
	int rc = dk_reduce_out(c, VKX_REDUCE_GROUPS, &g, &y);

	if (rc)
		return rc > 0 ? 0 : rc;
	p.nk = (uint32_t)g.nk;
	p.nr = (uint32_t)g.nr;
	copy_groups(p.kdims, p.kstr, g.kdims, g.kstr, g.nk);
	copy_groups(p.rdims, p.rstr, g.rdims, g.rstr, g.nr);
	p.count = (uint32_t)g.count;
	p.n = (uint32_t)g.nout;
	/* An empty reduction gives sum 0, mean NaN (0 / 0), max -inf, min inf. */
	if (!y->numel)
		return 0;
	return vk_emit_1d(c, VKP_REDUCE, (vk_buf[]){x->dev, y->dev}, 2, 2u, &p, sizeof(p),
			  (uint64_t)y->numel);
}

const dk_op vk_ops_reduce[] = {
	{.names = dk_reduce_ops, .supports = dk_reduce_supports, .run = reduce_plan,
	 .needs = VKX_PIPE(VKP_REDUCE)},
	{0},
};
