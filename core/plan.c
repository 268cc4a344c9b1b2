/*
 * plan: shapes and memory for one input-shape signature.  Shape inference
 * runs with the concrete input shapes; every activation whose shape is then
 * static gets an offset in the session's arena, by liveness over the
 * execution order with best-fit reuse (shm/arena).  A node's outputs are
 * placed before its dead inputs are freed, so no kernel ever reads and
 * writes the same bytes, with two exceptions that move nothing: the output
 * of a view (Reshape, Flatten, Squeeze, Unsqueeze, Identity) whose data
 * input dies there takes that input's bytes (every provider's view leaves
 * bytes that are already in place alone; swin_t's 206 Reshapes copied 6-9
 * ms a run), and a Concat's parts that die there are planned inside its
 * output (concat_parts).  The other way round, the inputs of a chain a
 * provider may fuse live to the chain's end (chain_ends), and a residual
 * dying inside a chain gives its block to the chain's output
 * (residual_end).  Graph outputs
 * stay live to the end: the run copies them out after the last step.
 * Values with data-dependent shapes get no offset: the provider allocates
 * them at run time.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "log.h"
#include "node_attr.h"

void core_plan_free(core_plan *p)
{
	if (!p)
		return;
	free(p->sig);
	free(p->tinfo);
	free(p->offset);
	free(p->nbytes);
	free(p);
}

static int op_in(const graph_node *n, const char *const *ops, size_t n_ops)
{
	if (n->domain[0])   /* the loader writes the default domain as "" */
		return 0;
	for (size_t i = 0; i < n_ops; i++)
		if (strcmp(n->op_type, ops[i]) == 0)
			return 1;
	return 0;
}

/* Whether node j reads an output of a node in [h, j). */
static int reads_chain(const graph *g, size_t h, size_t j)
{
	const graph_node *t = &g->nodes[j];

	for (size_t k = h; k < j; k++)
		for (int o = 0; o < g->nodes[k].n_out; o++)
			for (int i = 0; i < t->n_in; i++)
				if (t->in[i] >= 0 && t->in[i] == g->nodes[k].out[o])
					return 1;
	return 0;
}

/* Chains a provider may fuse, as the CPU provider's cpu_fuse.c does: a
 * Conv, Gemm, MatMul, their integer forms or a BatchNormalization, then
 * the nodes right after it that read the chain (activations, a bias or
 * residual Add, scales, Gelu's Div / Erf / Add / Mul, Softmax and the
 * MatMul after it, the int8 chain's Cast and the Mul of its two scales).
 * The fused node writes the chain's last output while it still reads the
 * head's inputs, so the inputs that die at the head live to the chain's
 * end in the plan: that output never takes their bytes (the provider
 * would compute into scratch and copy it over: MobileNet's depthwise
 * layers, whose Clip output took the input's bytes, copied 1.6 MB a layer
 * on one thread).  end[k]: the chain's last node, k for a node that heads
 * none.  NULL when out of memory. */
enum { CHAIN_MAX = 8 };

static int *chain_ends(const graph *g)
{
	static const char *const heads[] = {"Conv", "ConvInteger", "Gemm", "MatMul",
					    "MatMulInteger", "BatchNormalization"};
	static const char *const tails[] = {"Relu", "Clip", "LeakyRelu", "HardSigmoid",
					    "HardSwish", "Sigmoid", "Tanh", "Mul", "Add", "Div",
					    "Erf", "BatchNormalization", "Gelu", "Softmax", "Cast"};
	static const char *const matmul[] = {"MatMul"}, *const softmax[] = {"Softmax"};
	int *end = malloc((g->n_nodes + 1) * sizeof(int));

	if (!end)
		return NULL;
	for (size_t h = 0; h < g->n_nodes; h++) {
		size_t j = h + 1;

		end[h] = (int)h;
		if (!op_in(&g->nodes[h], heads, sizeof(heads) / sizeof(heads[0])))
			continue;
		for (; j < g->n_nodes && j - h <= CHAIN_MAX; j++) {
			const graph_node *t = &g->nodes[j];
			int tail = op_in(t, tails, sizeof(tails) / sizeof(tails[0])) ||
				   (op_in(t, matmul, 1) && op_in(&g->nodes[j - 1], softmax, 1));

			if (!tail)
				break;
			/* a tail that reads none of the chain joins when the
			 * next node reads it and the chain (the int8 chain's
			 * product of its two scales) */
			if (!reads_chain(g, h, j) &&
			    !(j + 1 < g->n_nodes && reads_chain(g, j, j + 1) && reads_chain(g, h, j + 1)))
				break;
		}
		end[h] = (int)j - 1;
	}
	return end;
}

static int *last_uses(const graph *g, const int *end)
{
	int *last = malloc((g->n_values + 1) * sizeof(int));

	if (!last)
		return NULL;
	for (size_t v = 0; v < g->n_values; v++)
		last[v] = g->values[v].is_graph_output ? (int)g->n_nodes : -1;
	for (size_t k = 0; k < g->n_nodes; k++) {
		const graph_node *n = &g->nodes[k];

		for (int i = 0; i < n->n_in; i++)
			if (n->in[i] >= 0 && last[n->in[i]] < end[k])
				last[n->in[i]] = end[k];
		for (int i = 0; i < n->n_implicit; i++)
			if (last[n->implicit[i]] < (int)k)
				last[n->implicit[i]] = (int)k;
	}
	return last;
}

static int plannable(const graph *g, const graph_tinfo *t, size_t v)
{
	return g->values[v].kind == GRAPH_VALUE_ACTIVATION && g->values[v].is_tensor &&
	       t[v].elem_type != 8 && graph_dtype_size(t[v].elem_type) && graph_tinfo_static(&t[v]);
}

/* Bytes of value v's static shape. */
static uint64_t value_bytes(const core_plan *p, int v)
{
	return (uint64_t)graph_tinfo_numel(&p->tinfo[v]) * graph_dtype_size(p->tinfo[v].elem_type);
}

static int is_view(const graph_node *n)
{
	static const char *const views[] = {"Reshape", "Flatten", "Squeeze", "Unsqueeze",
					    "Identity"};

	return op_in(n, views, sizeof(views) / sizeof(views[0]));
}

/* The value whose bytes node k's output 0 can take, or -1: k is a view of
 * the default domain, its data input is planned, dies at k and is no other
 * input of k, and the output is planned with the same size. */
static int view_source(const graph *g, const core_plan *p, const int *last, size_t k)
{
	const graph_node *n = &g->nodes[k];
	int x, y;

	if (!is_view(n) || n->n_in < 1 || n->n_out != 1 || n->n_implicit)
		return -1;
	x = n->in[0];
	y = n->out[0];
	if (x < 0 || y < 0 || p->offset[x] == PLAN_NONE || last[x] != (int)k ||
	    !plannable(g, p->tinfo, (size_t)y))
		return -1;
	for (int i = 1; i < n->n_in; i++)
		if (n->in[i] == x)
			return -1;
	if (value_bytes(p, y) != p->nbytes[x])
		return -1;
	return x;
}

/* Whether node k is a Concat on the CPU provider (whose kernel leaves a
 * part already in place alone) whose output is planned and whose parts,
 * planned, of its element type, none twice, are each a contiguous range
 * of it (every dim before the axis 1): its bytes are the parts' bytes
 * back to back. */
static int concat_flat(const ortmk_session *s, const graph *g, const core_plan *p, size_t k)
{
	static const char *const concat[] = {"Concat"};
	const graph_node *n = &g->nodes[k];
	const graph_tinfo *t;
	int64_t axis;
	uint64_t total = 0;
	int y, ok = 1;

	if (!op_in(n, concat, 1) || n->n_out != 1 || n->n_in < 1 ||
	    n->ep < 0 || n->ep >= s->n_eps || strcmp(s->eps[n->ep]->name, "cpu") ||
	    (y = n->out[0]) < 0 || !plannable(g, p->tinfo, (size_t)y))
		return 0;
	t = &p->tinfo[y];
	axis = proto_attr_int(n->proto, "axis", 1);
	axis = axis < 0 ? axis + t->rank : axis;
	if (axis < 0 || axis >= t->rank)
		return 0;
	for (int64_t d = 0; d < axis; d++)
		ok &= t->dims[d] == 1;
	for (int i = 0; ok && i < n->n_in; i++) {
		int v = n->in[i];

		ok = v >= 0 && plannable(g, p->tinfo, (size_t)v) &&
		     p->tinfo[v].elem_type == t->elem_type;
		for (int j = 0; ok && j < i; j++)
			ok = n->in[j] != v;
		if (ok)
			total += value_bytes(p, v);
	}
	return ok && total == value_bytes(p, y);
}

/* Concat without copies: node k, a concat_flat Concat, takes the parts
 * that die there into its output's block: part v is planned at that
 * block's offset plus pos[v], the block from when the first of them is
 * written (Inception's and SqueezeNet's branches: SqueezeNet's fire
 * Concats copied 5% of its run).  A part may not be a graph output, appear
 * twice, or come from a view that keeps its input's bytes or from another
 * Concat.  And a concat_flat Concat whose parts are consecutive parts of
 * such a Concat L further on, read only before L, is planned as that range
 * of L's block, so it copies nothing either: DenseNet's layers each
 * concatenate the block's input and every earlier layer's features, a
 * prefix of the block's last Concat (densenet121: 2.3 ms of its 48 at one
 * thread copied those prefixes).  cat[v]: the Concat taking v (a part, or
 * such a prefix), -1 for none. */
static void concat_parts(const ortmk_session *s, const graph *g, const core_plan *p,
			 const int *last, int *cat, uint64_t *pos)
{
	int taken = 0, prefixes = 0;

	for (size_t v = 0; v < g->n_values; v++)
		cat[v] = -1;
	for (size_t k = 0; k < g->n_nodes; k++) {
		const graph_node *n = &g->nodes[k];
		uint64_t at = 0;

		if (n->n_in < 2 || !concat_flat(s, g, p, k))
			continue;
		for (int i = 0; i < n->n_in; i++) {
			int v = n->in[i], q = g->values[v].producer;

			if (q >= 0 && q < (int)k && last[v] == (int)k && !g->values[v].is_graph_output &&
			    strcmp(g->nodes[q].op_type, "Concat") && !is_view(&g->nodes[q])) {
				cat[v] = (int)k;
				pos[v] = at;
				taken++;
			}
			at += value_bytes(p, v);
		}
	}
	for (size_t k = 0; k < g->n_nodes; k++) {
		const graph_node *n = &g->nodes[k];
		int y = n->n_out ? n->out[0] : -1, ok;
		int L = n->n_in && n->in[0] >= 0 ? cat[n->in[0]] : -1;

		if (L < 0 || y < 0 || cat[y] >= 0 || g->values[y].is_graph_output ||
		    last[y] >= L || !concat_flat(s, g, p, k))
			continue;
		ok = 1;
		for (int i = 1; ok && i < n->n_in; i++) {
			int u = n->in[i - 1], v = n->in[i];

			ok = cat[v] == L && pos[v] == pos[u] + value_bytes(p, u);
		}
		if (ok) {
			cat[y] = L;
			pos[y] = pos[n->in[0]];
			prefixes++;
		}
	}
	if (taken)
		ipc_log(IPC_LOG_DEBUG, "memory plan: %d Concat parts written in place, %d Concats "
			"as ranges of a later one", taken, prefixes);
}

/* A residual for node k's output: value v, read by node t inside a chain
 * (h < t < end[h], the chain's last node after t), produced outside it and
 * no input of its head, whose last use is t and whose element type and
 * count are the chain output's.  Its block is then kept, not freed at t,
 * and the chain's output takes it at end[h]: the fused kernel adds the
 * residual in place, element by element (ResNet's Conv + Add + Relu, whose
 * output otherwise took another block and the CPU provider copied the
 * 3.2 MB residual into it on one thread before the GEMM: 0.6 ms of
 * ResNet-50's first downsample layer).  Unfused, the block is simply dead
 * from t to end[h].  Returns the chain's last node, or -1. */
static int residual_end(const graph *g, const core_plan *p, const int *end, const int *last,
			size_t t, int v)
{
	for (size_t h = t > CHAIN_MAX ? t - CHAIN_MAX : 0; h < t; h++) {
		int y, q;

		if (end[h] <= (int)t)
			continue;
		y = g->nodes[end[h]].n_out ? g->nodes[end[h]].out[0] : -1;
		q = g->values[v].producer;
		if (y < 0 || last[v] != (int)t || (q >= (int)h && q < (int)t) ||
		    !plannable(g, p->tinfo, (size_t)y) || g->values[y].is_graph_output ||
		    p->tinfo[y].elem_type != p->tinfo[v].elem_type ||
		    graph_tinfo_numel(&p->tinfo[y]) != graph_tinfo_numel(&p->tinfo[v]))
			return -1;
		for (int i = 0; i < g->nodes[h].n_in; i++)
			if (g->nodes[h].in[i] == v)
				return -1;
		return end[h];
	}
	return -1;
}

static ortmk_status assign_offsets(const ortmk_session *s, const graph *g, core_plan *p)
{
	int *end = chain_ends(g), *last = end ? last_uses(g, end) : NULL;
	int *cat = malloc((g->n_values + 1) * sizeof(int));
	int *keep = malloc((g->n_nodes + 1) * sizeof(int));   /* residual_end's blocks */
	uint64_t *pos = malloc((g->n_values + 1) * sizeof(uint64_t));
	shm_arena a;
	ortmk_status st = ORTMK_OK;
	int kept = 0;

	if (!last || !cat || !keep || !pos || shm_arena_init(&a, UINT64_MAX / 4)) {
		free(end);
		free(last);
		free(cat);
		free(keep);
		free(pos);
		return core_fail(ORTMK_ERR_NO_MEMORY, "out of memory");
	}
	for (size_t k = 0; k < g->n_nodes; k++)
		keep[k] = -1;
	concat_parts(s, g, p, last, cat, pos);
	for (size_t k = 0; k < g->n_nodes && st == ORTMK_OK; k++) {
		const graph_node *n = &g->nodes[k];
		int src = view_source(g, p, last, k);

		if (src >= 0) {
			/* The output owns the block from here; the input is not freed. */
			p->offset[n->out[0]] = p->offset[src];
			p->nbytes[n->out[0]] = p->nbytes[src];
			last[src] = (int)g->n_nodes + 1;
		}
		for (int i = 0; i < n->n_out; i++) {
			int v = n->out[i];

			if (v < 0 || !plannable(g, p->tinfo, (size_t)v) || (src >= 0 && i == 0) ||
			    p->offset[v] != PLAN_NONE)   /* a Concat's block, from its first part */
				continue;
			p->nbytes[v] = value_bytes(p, v);
			if (cat[v] >= 0) {
				/* a part of a Concat's output: in its block, never freed */
				int y = g->nodes[cat[v]].out[0];

				if (p->offset[y] == PLAN_NONE) {
					p->nbytes[y] = value_bytes(p, y);
					if (shm_arena_alloc(&a, p->nbytes[y], &p->offset[y]))
						st = core_fail(ORTMK_ERR_NO_MEMORY,
							       "memory plan: arena exhausted");
				}
				p->offset[v] = p->offset[y] + pos[v];
				last[v] = (int)g->n_nodes + 1;
				continue;
			}
			if (i == 0 && keep[k] >= 0) {
				/* the chain's output over its residual's block */
				p->offset[v] = p->offset[keep[k]];
				keep[k] = -1;
				kept++;
				continue;
			}
			if (shm_arena_alloc(&a, p->nbytes[v], &p->offset[v]))
				st = core_fail(ORTMK_ERR_NO_MEMORY, "memory plan: arena exhausted");
		}
		if (keep[k] >= 0)   /* not taken (a view's output, a Concat's part, unplanned) */
			shm_arena_free(&a, p->offset[keep[k]]);
		for (int i = 0; i < n->n_in + n->n_out; i++) {
			int v = i < n->n_in ? n->in[i] : n->out[i - n->n_in];
			int e;

			/* Freed once, when k is its last use (or it is never used),
			 * unless a chain's output takes its block further on. */
			if (v >= 0 && p->offset[v] != PLAN_NONE && i < n->n_in && last[v] == (int)k &&
			    (e = residual_end(g, p, end, last, k, v)) > (int)k && keep[e] < 0) {
				keep[e] = v;
				last[v] = (int)g->n_nodes + 1;
			} else if (v >= 0 && p->offset[v] != PLAN_NONE &&
				   (last[v] == (int)k || (last[v] < (int)k && i >= n->n_in))) {
				shm_arena_free(&a, p->offset[v]);
				last[v] = (int)g->n_nodes + 1;  /* never free twice */
			}
		}
		for (int i = 0; i < n->n_implicit; i++) {
			int v = n->implicit[i];

			if (p->offset[v] != PLAN_NONE && last[v] == (int)k) {
				shm_arena_free(&a, p->offset[v]);
				last[v] = (int)g->n_nodes + 1;
			}
		}
		/* the inputs of the chain that ends here, kept to its end */
		for (size_t h = k > CHAIN_MAX ? k - CHAIN_MAX : 0; h < k; h++)
			for (int i = 0; end[h] == (int)k && i < g->nodes[h].n_in; i++) {
				int v = g->nodes[h].in[i];

				if (v >= 0 && p->offset[v] != PLAN_NONE && last[v] == (int)k) {
					shm_arena_free(&a, p->offset[v]);
					last[v] = (int)g->n_nodes + 1;
				}
			}
	}
	if (kept)
		ipc_log(IPC_LOG_DEBUG, "memory plan: %d chain outputs over their residuals", kept);
	p->arena_size = a.high_water;
	shm_arena_fini(&a);
	free(end);
	free(last);
	free(cat);
	free(keep);
	free(pos);
	return st;
}

/* At debug level: how many activations stay unplanned (their shapes
 * depend on data the inference could not fold), and the first of them with
 * the node that made it, where a model loses its static plan. */
static void log_dynamic(const graph *g, const core_plan *p)
{
	int n = 0, first = -1;

	for (size_t k = 0; k < g->n_nodes; k++)
		for (int i = 0; i < g->nodes[k].n_out; i++) {
			int v = g->nodes[k].out[i];

			if (v >= 0 && g->values[v].kind == GRAPH_VALUE_ACTIVATION &&
			    g->values[v].is_tensor && !graph_tinfo_static(&p->tinfo[v])) {
				n++;
				first = first < 0 ? (int)k : first;
			}
		}
	if (n)
		ipc_log(IPC_LOG_DEBUG, "memory plan: %d activations with data-dependent shapes, "
			"the first '%s' (%s)", n, g->values[g->nodes[first].out[0]].name,
			g->nodes[first].op_type);
}

ortmk_status core_plan_build(const ortmk_session *s, const int64_t *const *in_dims,
			     const size_t *in_rank, core_plan **out)
{
	const graph *g = s->g;
	core_plan *p = calloc(1, sizeof(*p));
	size_t nsig = 0;
	int next_sym = -g->n_symbols - 1;
	char err[512];
	ortmk_status st;

	for (size_t i = 0; i < g->n_inputs; i++)
		nsig += 1 + in_rank[i];
	if (!p)
		return core_fail(ORTMK_ERR_NO_MEMORY, "out of memory");
	p->sig = malloc((nsig + 1) * sizeof(int64_t));
	p->tinfo = calloc(g->n_values + 1, sizeof(graph_tinfo));
	p->offset = malloc((g->n_values + 1) * sizeof(uint64_t));
	p->nbytes = calloc(g->n_values + 1, sizeof(uint64_t));
	if (!p->sig || !p->tinfo || !p->offset || !p->nbytes) {
		core_plan_free(p);
		return core_fail(ORTMK_ERR_NO_MEMORY, "out of memory");
	}
	for (size_t i = 0; i < g->n_inputs; i++) {
		p->sig[p->n_sig++] = (int64_t)in_rank[i];
		for (size_t d = 0; d < in_rank[i]; d++)
			p->sig[p->n_sig++] = in_dims[i][d];
	}
	shape_seed(g, p->tinfo);
	for (size_t i = 0; i < g->n_inputs; i++) {
		graph_tinfo *t = &p->tinfo[g->inputs[i]];

		t->rank = (int)in_rank[i];
		if (in_rank[i])
			memcpy(t->dims, in_dims[i], in_rank[i] * sizeof(int64_t));
	}
	if (shape_infer(g, p->tinfo, 1, &next_sym, err, sizeof(err))) {
		core_plan_free(p);
		return core_fail(ORTMK_ERR_INPUT, "%s", err);
	}
	for (size_t v = 0; v < g->n_values; v++)
		p->offset[v] = PLAN_NONE;
	log_dynamic(g, p);
	st = assign_offsets(s, g, p);
	if (st) {
		core_plan_free(p);
		return st;
	}
	ipc_log(IPC_LOG_DEBUG, "memory plan: %llu bytes of activations for a new input signature",
		(unsigned long long)p->arena_size);
	*out = p;
	return ORTMK_OK;
}
