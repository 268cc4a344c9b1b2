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

/* What node k does with blocked values. */
enum {
	ROLE_NONE = 0,
	ROLE_CONV,      /* conv_blk_kind: reads X (not a first layer) and its addend, writes */
	ROLE_GAP,       /* GlobalAveragePool: reads (its [N, C, 1, 1] result is plain) */
	ROLE_UNARY,     /* element-wise on one input or a 2-D pooling: either layout, the
			 * output's the input's */
	ROLE_BINARY,    /* Add, Mul: blocked if either input is (binary.c) */
	ROLE_CONCAT,    /* Concat on the channels: blocked if every input is (blocked
			 * values have a multiple of 8 channels, so each input's part
			 * of an image is the same bytes in either order: concat.c's
			 * copies, and the core's in-place parts, are the same) */
};

static int is_onnx(const Onnx__NodeProto *p, const char *op)
{
	return p->op_type && strcmp(p->op_type, op) == 0 &&
	       (!p->domain || !p->domain[0] || strcmp(p->domain, "ai.onnx") == 0);
}

/* Element-wise ops of one tensor input whose kernels do not care about the
 * order of the elements (Clip's bounds are scalars). */
static const char *const unary_ops[] = {
	"Relu", "Sigmoid", "HardSigmoid", "HardSwish", "Clip", "LeakyRelu", "Tanh", "Elu",
};

/* float32, or float16 (Add and Mul then always run widened: cpu_f16.c's
 * slow_f16 list, so their float32 kernel sees the layout). */
static int is_float(int32_t dt)
{
	return dt == CPU_FLOAT || dt == CPU_FLOAT16;
}

/* BatchNormalization's scale, B, mean and var: constants of one dim, the
 * same length. */
static int bn_consts(const cpu_fuse_graph *fg, const run_node *r)
{
	for (int i = 1; i < 5; i++) {
		const cpu_tensor *t = r->in[i] >= 0 ? &fg->consts[r->in[i]] : NULL;

		if (!t || !t->data || t->dtype != CPU_FLOAT || t->rank != 1 ||
		    t->dims[0] != fg->consts[r->in[1]].dims[0])
			return 0;
	}
	return 1;
}

static int role(const cpu_fuse_graph *fg, size_t k, const run_node *r, const int32_t *dtype,
		int *kind)
{
	const Onnx__NodeProto *p = fg->g->node[k];
	const int64_t *ks;

	*kind = 0;
	if (r->n_in < 1 || r->in[0] < 0 || r->out < 0)
		return ROLE_NONE;
	if (is_onnx(p, "Conv"))
		return (*kind = conv_blk_kind(p, r->w)) != 0 ? ROLE_CONV : ROLE_NONE;
	if (is_onnx(p, "GlobalAveragePool"))
		return ROLE_GAP;
	/* (numpy broadcasting: opset 7 on) */
	if ((is_onnx(p, "Add") || is_onnx(p, "Mul")) && r->n_in == 2 && r->in[1] >= 0 &&
	    fg->opset >= 7 && dtype && is_float(dtype[r->in[0]]) && is_float(dtype[r->in[1]]) &&
	    is_float(dtype[r->out]))
		return ROLE_BINARY;
	/* (axis 1 alone: a blocked value is 4-D, but a negative axis would
	 * need the rank) */
	if (is_onnx(p, "Concat") && cpu_attr_int(p, "axis", 1) == 1 && dtype &&
	    dtype[r->out] == CPU_FLOAT)
		return ROLE_CONCAT;
	for (size_t i = 0; i < sizeof(unary_ops) / sizeof(unary_ops[0]); i++)
		if (is_onnx(p, unary_ops[i]))
			return ROLE_UNARY;
	/* inference BatchNormalization of per-channel constants without a
	 * fused addend: norm.c's blocked planes, the output in the input's
	 * layout (DenseNet's pre-activation layers after each Concat) */
	if (is_onnx(p, "BatchNormalization") && r->n_in == 5 && r->add < 0 && p->n_output == 1 &&
	    dtype && dtype[r->in[0]] == CPU_FLOAT && bn_consts(fg, r) &&
	    !(fg->opset >= 14 && cpu_attr_int(p, "training_mode", 0)))
		return ROLE_UNARY;
	/* 2-D MaxPool (without Indices) and AveragePool: pool.c's blocked
	 * kernel, the output in the input's layout */
	if ((is_onnx(p, "MaxPool") || is_onnx(p, "AveragePool")) &&
	    cpu_attr_ints(p, "kernel_shape", &ks) == 2 &&
	    (p->n_output == 1 || !p->output[1] || !p->output[1][0]) && dtype &&
	    is_float(dtype[r->in[0]]))
		return ROLE_UNARY;
	return ROLE_NONE;
}

/* Whether node k (role ro, conv kind) reads input i blocked. */
static int reads_blocked(int ro, int kind, const run_node *r, int i)
{
	switch (ro) {
	case ROLE_CONV: return (i == 0 && kind != CONV_BLK_IN) || i == r->add;
	case ROLE_GAP:
	case ROLE_UNARY: return i == 0;
	case ROLE_BINARY: return i <= 1;
	case ROLE_CONCAT: return 1;
	default: return 0;
	}
}

int cpu_layout_plan(const cpu_fuse_graph *fg, const cpu_fuse_node *fuse, const int32_t *dtype,
		    unsigned char *node_layout)
{
	size_t nv = fg->n_values, nn = fg->g->n_node;
	unsigned char *blk = calloc(nv + 1, 1), *ro = calloc(nn + 1, 1), *kind = calloc(nn + 1, 1);
	int count = 0, changed = 1;
	run_node r;

	memset(node_layout, 0, nn);
	if (!blk || !ro || !kind || !conv_blk_enabled()) {
		count = blk && ro && kind ? 0 : CPU_E_NOMEM;
		goto out;
	}
	for (size_t k = 0; k < nn; k++) {
		int kd;

		if (!runs(fg, fuse, k, &r))
			continue;
		ro[k] = (unsigned char)role(fg, k, &r, dtype, &kd);
		kind[k] = (unsigned char)kd;
		if ((ro[k] == ROLE_CONV || ro[k] == ROLE_UNARY || ro[k] == ROLE_BINARY ||
		     ro[k] == ROLE_CONCAT) &&
		    !fg->exported[r.out] && !(fg->extra_reads && fg->extra_reads[r.out]) &&
		    !fg->consts[r.out].data)
			blk[r.out] = 1;
	}
	/* every reader must read it blocked */
	for (size_t k = 0; k < nn; k++) {
		if (!runs(fg, fuse, k, &r))
			continue;
		for (int i = 0; i < r.n_in; i++)
			if (r.in[i] >= 0 && !reads_blocked(ro[k], kind[k], &r, i))
				blk[r.in[i]] = 0;
	}
	/* A Conv's addend has its output's layout; a unary op's input and
	 * output have one layout; a binary op's output is blocked when an
	 * input is, and then only; a Concat's when every input is. */
	while (changed) {
		changed = 0;
		for (size_t k = 0; k < nn; k++) {
			unsigned char *o, *a, *b;

			if (!ro[k] || !runs(fg, fuse, k, &r))
				continue;
			o = &blk[r.out];
			a = &blk[r.in[0]];
			if (ro[k] == ROLE_CONCAT) {   /* all of them, or none */
				int all = *o, any = *o;

				for (int i = 0; i < r.n_in; i++) {
					all &= r.in[i] >= 0 && blk[r.in[i]];
					any |= r.in[i] >= 0 && blk[r.in[i]];
				}
				if (!all && any) {
					*o = 0;
					for (int i = 0; i < r.n_in; i++)
						if (r.in[i] >= 0)
							blk[r.in[i]] = 0;
					changed = 1;
				}
				continue;
			}
			if (ro[k] == ROLE_CONV && r.add >= 0 && r.add < r.n_in && r.in[r.add] >= 0)
				a = &blk[r.in[r.add]];
			else if (ro[k] != ROLE_UNARY && ro[k] != ROLE_BINARY)
				continue;
			if (ro[k] == ROLE_BINARY) {
				b = &blk[r.in[1]];
				if (*o != (*a || *b)) {
					*o = *a = *b = 0;
					changed = 1;
				}
			} else if (*a != *o) {
				*a = *o = 0;
				changed = 1;
			}
		}
	}
	for (size_t k = 0; k < nn; k++)
		if (ro[k] && runs(fg, fuse, k, &r))
			node_layout[k] = (blk[r.in[0]] ? CPU_LAYOUT_IN_BLK8 : 0) |
					 (r.n_in > 1 && r.in[1] >= 0 && blk[r.in[1]] ?
					  CPU_LAYOUT_IN1_BLK8 : 0) |
					 (blk[r.out] ? CPU_LAYOUT_OUT_BLK8 : 0);
	for (size_t v = 0; v < nv; v++)
		count += blk[v];
out:
	free(blk);
	free(ro);
	free(kind);
	return count;
}
