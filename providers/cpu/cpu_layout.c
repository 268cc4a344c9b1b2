/*
 * cpu_layout: the channel-blocked values of a step (cpu_layout.h).
 */
#include <stdlib.h>
#include <string.h>

#include "conv_impl.h"
#include "cpu_layout.h"

/* Node k as it will run: its inputs (the fused head's, with the chain's
 * addend) and the value its output 0 writes. */
typedef struct run_node {
	const int *in;
	int n_in, out, add;            /* add: the fused addend's input index, or -1 */
	const cpu_tensor *w;           /* its constant filter, when a Conv */
} run_node;

static int runs(const cpu_fuse_graph *fg, const cpu_fuse_node *fuse, size_t k, run_node *r)
{
	const Onnx__NodeProto *p = fg->g->node[k];
	const cpu_fuse_node *f = fuse && fuse[k].head ? &fuse[k] : NULL;

	if ((fg->gone && fg->gone[k]) || (fuse && fuse[k].skip))
		return 0;
	r->in = f ? f->in : fg->node_in[k];
	r->n_in = f ? f->n_in : (int)p->n_input;
	r->out = f ? f->out0 : p->n_output ? fg->node_out[k][0] : -1;
	r->add = f ? f->fuse.add_input : -1;
	r->w = NULL;
	if (r->n_in > 1 && f && f->folded[1])
		r->w = f->folded[1];
	else if (r->n_in > 1 && r->in[1] >= 0 && fg->consts[r->in[1]].data)
		r->w = &fg->consts[r->in[1]];
	return 1;
}

/* Node k's conv_blk_kind, or 0. */
static int blk_conv(const cpu_fuse_graph *fg, size_t k, const run_node *r)
{
	const Onnx__NodeProto *p = fg->g->node[k];

	return p->op_type && strcmp(p->op_type, "Conv") == 0 &&
	       (!p->domain || !p->domain[0] || strcmp(p->domain, "ai.onnx") == 0) &&
	       r->in[0] >= 0 ? conv_blk_kind(p, r->w) : 0;
}

int cpu_layout_plan(const cpu_fuse_graph *fg, const cpu_fuse_node *fuse,
		    unsigned char *node_layout)
{
	size_t nv = fg->n_values, nn = fg->g->n_node;
	unsigned char *blk = calloc(nv + 1, 1), *cap = calloc(nn + 1, 1);
	int count = 0, changed = 1;
	run_node r;

	memset(node_layout, 0, nn);
	if (!conv_blk_enabled()) {
		free(blk);
		free(cap);
		return 0;
	}
	if (!blk || !cap) {
		free(blk);
		free(cap);
		return CPU_E_NOMEM;
	}
	for (size_t k = 0; k < nn; k++)
		if (runs(fg, fuse, k, &r) && (cap[k] = (unsigned char)blk_conv(fg, k, &r)) != 0) {
			if (r.out >= 0 && !fg->exported[r.out] &&
			    !(fg->extra_reads && fg->extra_reads[r.out]) && !fg->consts[r.out].data)
				blk[r.out] = 1;
		}
	/* every reader must be a blocked Conv reading it as X (a first layer's
	 * kernel reads NCHW) or as its addend */
	for (size_t k = 0; k < nn; k++) {
		if (!runs(fg, fuse, k, &r))
			continue;
		for (int i = 0; i < r.n_in; i++)
			if (r.in[i] >= 0 && !(cap[k] && ((i == 0 && cap[k] != CONV_BLK_IN) ||
						       i == r.add)))
				blk[r.in[i]] = 0;
	}
	/* an addend has its head's output layout */
	while (changed) {
		changed = 0;
		for (size_t k = 0; k < nn; k++) {
			if (!cap[k] || !runs(fg, fuse, k, &r) || r.add < 0 || r.add >= r.n_in ||
			    r.in[r.add] < 0 || r.out < 0)
				continue;
			if (blk[r.in[r.add]] != blk[r.out]) {
				blk[r.in[r.add]] = blk[r.out] = 0;
				changed = 1;
			}
		}
	}
	for (size_t k = 0; k < nn; k++)
		if (cap[k] && runs(fg, fuse, k, &r))
			node_layout[k] = (blk[r.in[0]] ? CPU_LAYOUT_IN_BLK8 : 0) |
					 (r.out >= 0 && blk[r.out] ? CPU_LAYOUT_OUT_BLK8 : 0);
	for (size_t v = 0; v < nv; v++)
		count += blk[v];
	free(blk);
	free(cap);
	return count;
}
