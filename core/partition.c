/*
 * partition: decides which provider runs each node.  Each provider in the
 * session's list, in priority order, is asked (one CAPABILITY_QUERY with
 * every node still unclaimed) which nodes it takes; a node no provider
 * takes is a session-creation error naming it.  Consecutive nodes on one
 * provider then form a step: one subgraph loaded on that provider and run
 * with one RUN message.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"

static ortmk_status query_one(ortmk_session *s, int e, int *owner, char **reason)
{
	const graph *g = s->g;
	Ortmk__Envelope env = ORTMK__ENVELOPE__INIT, *rep = NULL;
	Ortmk__CapabilityQuery q = ORTMK__CAPABILITY_QUERY__INIT;
	Ortmk__NodeQuery *nq = calloc(g->n_nodes + 1, sizeof(*nq));
	Ortmk__NodeQuery **pq = calloc(g->n_nodes + 1, sizeof(*pq));
	int32_t *dt = calloc(g->n_nodes + 1, sizeof(int32_t) * 64);
	size_t *idx = calloc(g->n_nodes + 1, sizeof(size_t)), n = 0;
	ortmk_status st = ORTMK_ERR_NO_MEMORY;

	if (!nq || !pq || !dt || !idx)
		goto out;
	for (size_t k = 0; k < g->n_nodes; k++) {
		const graph_node *nd = &g->nodes[k];
		Ortmk__NodeQuery *x = &nq[n];
		size_t len = onnx__node_proto__get_packed_size(nd->proto);

		if (owner[k] >= 0)
			continue;
		ortmk__node_query__init(x);
		x->node.data = malloc(len ? len : 1);
		if (!x->node.data)
			goto out;
		x->node.len = onnx__node_proto__pack(nd->proto, x->node.data);
		x->opset = nd->opset;
		x->input_dtypes = dt + n * 64;
		for (int i = 0; i < nd->n_in && i < 64; i++)
			x->input_dtypes[i] = nd->in[i] >= 0 ? s->tinfo0[nd->in[i]].elem_type : 0;
		x->n_input_dtypes = (size_t)(nd->n_in < 64 ? nd->n_in : 64);
		idx[n] = k;
		pq[n++] = x;
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
	for (size_t i = 0; nq && i < n + 1 && i < g->n_nodes; i++)
		free(nq[i].node.data);
	ipc_envelope_free(rep);
	free(nq);
	free(pq);
	free(dt);
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

static ortmk_status make_steps(ortmk_session *s, const int *owner)
{
	size_t n = 0;

	s->steps = calloc(s->g->n_nodes + 1, sizeof(*s->steps));
	if (!s->steps)
		return core_fail(ORTMK_ERR_NO_MEMORY, "out of memory");
	for (size_t k = 0; k < s->g->n_nodes; k++) {
		s->g->nodes[k].ep = owner[k];
		s->nodes_per_ep[owner[k]]++;
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
	if (st == ORTMK_OK)
		st = make_steps(s, owner);
out:
	for (size_t k = 0; reason && k < nn; k++)
		free(reason[k]);
	free(reason);
	free(owner);
	return st;
}
