/*
 * partition: decides which provider runs each node and in which order.
 * Each provider in the session's list, in priority order, is asked (one
 * CAPABILITY_QUERY with every node still unclaimed, with the dtypes and
 * load-time inferred shapes of its inputs and outputs) which nodes it
 * takes; a node no provider takes is a session-creation error naming it.
 * The nodes are then put in a topological order that keeps each
 * provider's nodes together (group_nodes), and each run of consecutive
 * nodes on one provider forms a step: one subgraph loaded on that provider
 * and run with one RUN message.  core_step_exported() tells a step which of
 * its values leave it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"

/* The ranks and dims of values vals[0..n) (-1 for a missing one) as
 * NodeQuery carries them; -1 when out of memory. */
static int fill_shapes(const graph_tinfo *t, const int *vals, int n, int32_t **ranks,
		       size_t *n_ranks, int64_t **dims, size_t *n_dims)
{
	size_t nd = 0;

	*ranks = malloc(((size_t)n + 1) * sizeof(int32_t));
	*dims = malloc(((size_t)n * GRAPH_MAX_RANK + 1) * sizeof(int64_t));
	if (!*ranks || !*dims)
		return -1;
	for (int i = 0; i < n; i++) {
		const graph_tinfo *x = vals[i] >= 0 ? &t[vals[i]] : NULL;
		int r = x && x->rank >= 0 && x->rank <= GRAPH_MAX_RANK ? x->rank : -1;

		(*ranks)[i] = r;
		for (int d = 0; d < r; d++)
			(*dims)[nd++] = x->dims[d] >= 0 ? x->dims[d] : -1;
	}
	*n_ranks = (size_t)n;
	*n_dims = nd;
	return 0;
}

static void free_query(Ortmk__NodeQuery *x)
{
	free(x->node.data);
	free(x->input_dtypes);
	free(x->output_dtypes);
	free(x->input_ranks);
	free(x->input_dims);
	free(x->output_ranks);
	free(x->output_dims);
}

static int fill_query(const ortmk_session *s, const graph_node *nd, Ortmk__NodeQuery *x)
{
	size_t len = onnx__node_proto__get_packed_size(nd->proto);

	ortmk__node_query__init(x);
	x->node.data = malloc(len ? len : 1);
	x->input_dtypes = malloc(((size_t)nd->n_in + 1) * sizeof(int32_t));
	x->output_dtypes = malloc(((size_t)nd->n_out + 1) * sizeof(int32_t));
	if (!x->node.data || !x->input_dtypes || !x->output_dtypes)
		return -1;
	x->node.len = onnx__node_proto__pack(nd->proto, x->node.data);
	x->opset = nd->opset;
	for (int i = 0; i < nd->n_in; i++)
		x->input_dtypes[i] = nd->in[i] >= 0 ? s->tinfo0[nd->in[i]].elem_type : 0;
	x->n_input_dtypes = (size_t)nd->n_in;
	for (int i = 0; i < nd->n_out; i++)
		x->output_dtypes[i] = nd->out[i] >= 0 ? s->tinfo0[nd->out[i]].elem_type : 0;
	x->n_output_dtypes = (size_t)nd->n_out;
	if (fill_shapes(s->tinfo0, nd->in, nd->n_in, &x->input_ranks, &x->n_input_ranks,
			&x->input_dims, &x->n_input_dims))
		return -1;
	return fill_shapes(s->tinfo0, nd->out, nd->n_out, &x->output_ranks, &x->n_output_ranks,
			   &x->output_dims, &x->n_output_dims);
}

static ortmk_status query_one(ortmk_session *s, int e, int *owner, char **reason)
{
	const graph *g = s->g;
	Ortmk__Envelope env = ORTMK__ENVELOPE__INIT, *rep = NULL;
	Ortmk__CapabilityQuery q = ORTMK__CAPABILITY_QUERY__INIT;
	Ortmk__NodeQuery *nq = calloc(g->n_nodes + 1, sizeof(*nq));
	Ortmk__NodeQuery **pq = calloc(g->n_nodes + 1, sizeof(*pq));
	size_t *idx = calloc(g->n_nodes + 1, sizeof(size_t)), n = 0;
	ortmk_status st = ORTMK_ERR_NO_MEMORY;

	if (!nq || !pq || !idx) {
		st = core_fail(ORTMK_ERR_NO_MEMORY, "out of memory asking provider '%s' for its nodes",
			       s->eps[e]->name);
		goto out;
	}
	for (size_t k = 0; k < g->n_nodes; k++) {
		if (owner[k] >= 0)
			continue;
		idx[n] = k;
		pq[n] = &nq[n];
		if (fill_query(s, &g->nodes[k], &nq[n++])) {
			st = core_fail(ORTMK_ERR_NO_MEMORY, "out of memory");
			goto out;
		}
	}
	q.n_nodes = n;
	q.nodes = pq;
	env.kind = ORTMK__KIND__CAPABILITY_QUERY;
	env.body_case = ORTMK__ENVELOPE__BODY_CAPABILITY_QUERY;
	env.capability_query = &q;
	pthread_mutex_lock(&s->eps[e]->lock);
	st = core_ep_request(s->eps[e], &env, CORE_CONTROL_MS, &rep);
	pthread_mutex_unlock(&s->eps[e]->lock);
	if (st)
		goto out;
	if (rep->kind != ORTMK__KIND__CAPABILITY_REPLY || rep->capability_reply->n_supported != n) {
		st = core_fail(ORTMK_ERR_PROTOCOL, "provider '%s': capability reply does not match the query",
			       s->eps[e]->name);
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		if (rep->capability_reply->supported[i]) {
			owner[idx[i]] = e;
		} else {
			free(reason[idx[i]]);
			reason[idx[i]] = strdup(rep->capability_reply->reason[i]);
		}
	}
out:
	for (size_t i = 0; nq && i < n; i++)
		free_query(&nq[i]);
	ipc_envelope_free(rep);
	free(nq);
	free(pq);
	free(idx);
	return st;
}

static ortmk_status unclaimed(ortmk_session *s, const int *owner, char **reason)
{
	for (size_t k = 0; k < s->g->n_nodes; k++) {
		const graph_node *nd = &s->g->nodes[k];

		if (owner[k] >= 0)
			continue;
		return core_fail(ORTMK_ERR_NOT_IMPLEMENTED,
				 "node '%s': op %s (domain '%s', opset %lld) is not implemented by any provider%s%s",
				 nd->proto->name && nd->proto->name[0] ? nd->proto->name : "(unnamed)",
				 nd->op_type, nd->domain, (long long)nd->opset,
				 reason[k] && reason[k][0] ? ": " : "", reason[k] ? reason[k] : "");
	}
	return ORTMK_OK;
}

/* ---- grouping ----------------------------------------------------------- */

/* A binary min-heap of node indexes: the ready nodes of one provider. */
typedef struct heap {
	int *v;
	size_t n;
} heap;

static void heap_push(heap *h, int x)
{
	size_t i = h->n++;

	while (i > 0 && h->v[(i - 1) / 2] > x) {
		h->v[i] = h->v[(i - 1) / 2];
		i = (i - 1) / 2;
	}
	h->v[i] = x;
}

static int heap_pop(heap *h)
{
	int top = h->v[0], x = h->v[--h->n];
	size_t i = 0;

	for (;;) {
		size_t c = 2 * i + 1;

		if (c >= h->n)
			break;
		if (c + 1 < h->n && h->v[c + 1] < h->v[c])
			c++;
		if (h->v[c] >= x)
			break;
		h->v[i] = h->v[c];
		i = c;
	}
	if (h->n)
		h->v[i] = x;
	return top;
}

/* Dependency edges: node k's successors are succ[start[k] .. start[k+1]). */
typedef struct deps {
	int *start, *succ, *indeg;
} deps;

static int node_dep(const graph_node *n, int i)
{
	return i < n->n_in ? n->in[i] : n->implicit[i - n->n_in];
}

static int build_deps(const graph *g, deps *d)
{
	size_t nn = g->n_nodes, ne = 0;
	int *fill;

	d->start = calloc(nn + 2, sizeof(int));
	d->indeg = calloc(nn + 1, sizeof(int));
	if (!d->start || !d->indeg)
		return -1;
	for (size_t k = 0; k < nn; k++) {
		const graph_node *n = &g->nodes[k];

		for (int i = 0; i < n->n_in + n->n_implicit; i++) {
			int v = node_dep(n, i), p = v >= 0 ? g->values[v].producer : -1;

			if (p >= 0) {
				d->start[p + 1]++;
				d->indeg[k]++;
				ne++;
			}
		}
	}
	for (size_t k = 0; k < nn; k++)
		d->start[k + 1] += d->start[k];
	d->succ = malloc((ne + 1) * sizeof(int));
	fill = malloc((nn + 1) * sizeof(int));
	if (!d->succ || !fill) {
		free(fill);
		return -1;
	}
	memcpy(fill, d->start, nn * sizeof(int));
	for (size_t k = 0; k < nn; k++) {
		const graph_node *n = &g->nodes[k];

		for (int i = 0; i < n->n_in + n->n_implicit; i++) {
			int v = node_dep(n, i), p = v >= 0 ? g->values[v].producer : -1;

			if (p >= 0)
				d->succ[fill[p]++] = (int)k;
		}
	}
	free(fill);
	return 0;
}

/* One greedy topological order: keep taking the current provider's ready
 * node of lowest index; when it has none, switch to the provider of the
 * lowest-index ready node (`first` for the very first).  Returns the
 * number of steps, or -1 when out of memory. */
static int greedy(const graph *g, const deps *d, const int *owner, int n_eps, int first,
		  int *order)
{
	size_t nn = g->n_nodes, done = 0;
	int *indeg = malloc((nn + 1) * sizeof(int)), *slab = malloc((nn + 1) * sizeof(int));
	heap h[CORE_MAX_EPS];
	int cur = first, steps = 0;

	if (!indeg || !slab) {
		free(indeg);
		free(slab);
		return -1;
	}
	memcpy(indeg, d->indeg, nn * sizeof(int));
	/* Each provider's heap gets a slice of the slab as big as its nodes. */
	for (int e = 0, at = 0; e < n_eps; e++) {
		h[e].v = slab + at;
		h[e].n = 0;
		for (size_t k = 0; k < nn; k++)
			at += owner[k] == e;
	}
	for (size_t k = 0; k < nn; k++)
		if (!indeg[k])
			heap_push(&h[owner[k]], (int)k);
	while (done < nn) {
		int k;

		if (!h[cur].n) {
			int best = -1;

			for (int e = 0; e < n_eps; e++)
				if (h[e].n && (best < 0 || h[e].v[0] < h[best].v[0]))
					best = e;
			if (best < 0)
				break;          /* cannot happen: the graph is acyclic */
			cur = best;
		}
		if (done == 0 || owner[order[done - 1]] != cur)
			steps++;
		k = heap_pop(&h[cur]);
		order[done++] = k;
		for (int j = d->start[k]; j < d->start[k + 1]; j++)
			if (--indeg[d->succ[j]] == 0)
				heap_push(&h[owner[d->succ[j]]], d->succ[j]);
	}
	free(indeg);
	free(slab);
	return done == nn ? steps : -1;
}

/* Puts the nodes in `order` (old index per new position): the graph's
 * node array, owner[] and each value's producer follow. */
static int apply_order(ortmk_session *s, int *owner, const int *order)
{
	graph *g = s->g;
	size_t nn = g->n_nodes;
	graph_node *nodes = malloc((nn + 1) * sizeof(*nodes));
	int *pos = malloc((nn + 1) * sizeof(int)), *own = malloc((nn + 1) * sizeof(int));

	if (!nodes || !pos || !own) {
		free(nodes);
		free(pos);
		free(own);
		return -1;
	}
	for (size_t k = 0; k < nn; k++) {
		nodes[k] = g->nodes[order[k]];
		own[k] = owner[order[k]];
		pos[order[k]] = (int)k;
	}
	for (size_t v = 0; v < g->n_values; v++)
		if (g->values[v].producer >= 0)
			g->values[v].producer = pos[g->values[v].producer];
	memcpy(g->nodes, nodes, nn * sizeof(*nodes));
	memcpy(owner, own, nn * sizeof(int));
	free(nodes);
	free(pos);
	free(own);
	/* Memory plans place values by liveness in node order: a new order
	 * needs new plans (runs fetch theirs afresh after a re-partition). */
	for (size_t i = 0; i < s->n_plans; i++)
		core_plan_free(s->plans[i]);
	s->n_plans = 0;
	return 0;
}

/* Reorders the nodes (any topological order is valid) so that each
 * provider's nodes are as contiguous as the dependencies allow: the
 * fewest steps of the greedy orders, one per starting provider (ties: the
 * provider of the first node, then by priority).  Deterministic; with one
 * provider the order does not change. */
static ortmk_status group_nodes(ortmk_session *s, int *owner)
{
	const graph *g = s->g;
	size_t nn = g->n_nodes;
	deps d = {0};
	int *order = malloc((nn + 1) * sizeof(int)), *best = malloc((nn + 1) * sizeof(int));
	int best_steps = -1, changed = 0;
	ortmk_status st = ORTMK_OK;

	if (!order || !best || build_deps(g, &d)) {
		st = core_fail(ORTMK_ERR_NO_MEMORY, "out of memory");
		goto out;
	}
	for (int c = -1; c < s->n_eps; c++) {
		int first = c < 0 ? owner[0] : c, n;

		if (c == owner[0] || !s->nodes_per_ep[first])
			continue;
		n = greedy(g, &d, owner, s->n_eps, first, order);
		if (n < 0) {
			st = core_fail(ORTMK_ERR_INTERNAL, "partition: cannot order the nodes");
			goto out;
		}
		if (best_steps < 0 || n < best_steps) {
			best_steps = n;
			memcpy(best, order, nn * sizeof(int));
		}
	}
	for (size_t k = 0; k < nn && !changed; k++)
		changed = best[k] != (int)k;
	if (changed && apply_order(s, owner, best))
		st = core_fail(ORTMK_ERR_NO_MEMORY, "out of memory");
out:
	free(d.start);
	free(d.succ);
	free(d.indeg);
	free(order);
	free(best);
	return st;
}

static ortmk_status make_steps(ortmk_session *s, const int *owner)
{
	size_t n = 0;

	s->steps = calloc(s->g->n_nodes + 1, sizeof(*s->steps));
	if (!s->steps)
		return core_fail(ORTMK_ERR_NO_MEMORY, "out of memory");
	for (size_t k = 0; k < s->g->n_nodes; k++) {
		s->g->nodes[k].ep = owner[k];
		if (n == 0 || s->steps[n - 1].ep != owner[k]) {
			s->steps[n].ep = owner[k];
			s->steps[n].first = k;
			n++;
		}
		s->steps[n - 1].last = k + 1;
	}
	s->n_steps = n;
	return ORTMK_OK;
}

ortmk_status core_step_exported(const ortmk_session *s, const core_step *st,
				Ortmk__LoadSubgraph *l)
{
	const graph *g = s->g;
	char *later = calloc(g->n_values + 1, 1);

	l->exported = malloc((st->n_values + 1) * sizeof(uint32_t));
	if (!later || !l->exported) {
		free(later);
		return core_fail(ORTMK_ERR_NO_MEMORY, "out of memory");
	}
	for (size_t k = st->last; k < g->n_nodes; k++) {
		const graph_node *n = &g->nodes[k];

		for (int i = 0; i < n->n_in + n->n_implicit; i++)
			if (node_dep(n, i) >= 0)
				later[node_dep(n, i)] = 1;
	}
	l->n_exported = 0;
	for (size_t i = 0; i < st->n_values; i++) {
		int v = st->values[i];

		if (later[v] || g->values[v].is_graph_output)
			l->exported[l->n_exported++] = (uint32_t)i;
	}
	l->has_exported_known = 1;
	l->exported_known = 1;
	free(later);
	return ORTMK_OK;
}

ortmk_status core_partition(ortmk_session *s)
{
	size_t nn = s->g->n_nodes;
	int *owner = malloc((nn + 1) * sizeof(int));
	char **reason = calloc(nn + 1, sizeof(char *));
	ortmk_status st = ORTMK_OK;

	if (!owner || !reason) {
		st = core_fail(ORTMK_ERR_NO_MEMORY, "out of memory");
		goto out;
	}
	for (size_t k = 0; k < nn; k++)
		owner[k] = -1;
	memset(s->nodes_per_ep, 0, sizeof(s->nodes_per_ep));
	for (int e = 0; e < s->n_eps && st == ORTMK_OK && nn; e++)
		if (!s->disabled[e])
			st = query_one(s, e, owner, reason);
	if (st == ORTMK_OK)
		st = unclaimed(s, owner, reason);
	for (size_t k = 0; st == ORTMK_OK && k < nn; k++)
		s->nodes_per_ep[owner[k]]++;
	if (st == ORTMK_OK && nn)
		st = group_nodes(s, owner);
	if (st == ORTMK_OK)
		st = make_steps(s, owner);
out:
	for (size_t k = 0; reason && k < nn; k++)
		free(reason[k]);
	free(reason);
	free(owner);
	return st;
}
