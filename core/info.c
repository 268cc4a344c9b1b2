/*
 * info: what a session tells about itself through the public API: its
 * inputs and outputs, which provider runs how many nodes, its counters.
 */
#include <stdlib.h>
#include <string.h>

#include "core.h"

size_t ortmk_session_input_count(const ortmk_session *s)
{
	return s ? s->g->n_inputs : 0;
}

size_t ortmk_session_output_count(const ortmk_session *s)
{
	return s ? s->g->n_outputs : 0;
}

/* Copies of the inferred dims with symbols turned into -1, per input and
 * output, made once at session creation. */
ortmk_status core_session_fill_info(ortmk_session *s)
{
	size_t n = s->g->n_inputs + s->g->n_outputs;

	s->io_dims = calloc(n + 1, sizeof(*s->io_dims));
	if (!s->io_dims)
		return core_fail(ORTMK_ERR_NO_MEMORY, "out of memory");
	for (size_t i = 0; i < n; i++) {
		int v = i < s->g->n_inputs ? s->g->inputs[i] : s->g->outputs[i - s->g->n_inputs];
		const graph_tinfo *t = &s->tinfo0[v];

		for (int d = 0; d < t->rank && d < GRAPH_MAX_RANK; d++)
			s->io_dims[i][d] = t->dims[d] >= 0 ? t->dims[d] : -1;
	}
	return ORTMK_OK;
}

static ortmk_status value_info(const ortmk_session *s, int v, const int64_t *io_dims,
			       const char **name, ortmk_dtype *dtype, const int64_t **dims,
			       size_t *rank)
{
	const graph_value *gv = &s->g->values[v];
	const graph_tinfo *t = &s->tinfo0[v];

	if (name)
		*name = gv->name;
	if (dtype)
		*dtype = (ortmk_dtype)(t->elem_type ? t->elem_type : gv->elem_type);
	if (dims)
		*dims = io_dims;
	/* An unknown rank reads as 0 dims. */
	if (rank)
		*rank = t->rank > 0 ? (size_t)t->rank : 0;
	return ORTMK_OK;
}

ortmk_status ortmk_session_input_info(const ortmk_session *s, size_t i, const char **name,
				      ortmk_dtype *dtype, const int64_t **dims, size_t *rank)
{
	if (!s || i >= s->g->n_inputs)
		return core_fail(ORTMK_ERR_INVALID_ARGUMENT, "input index %zu out of range", i);
	return value_info(s, s->g->inputs[i], s->io_dims[i], name, dtype, dims, rank);
}

ortmk_status ortmk_session_output_info(const ortmk_session *s, size_t i, const char **name,
				       ortmk_dtype *dtype, const int64_t **dims, size_t *rank)
{
	if (!s || i >= s->g->n_outputs)
		return core_fail(ORTMK_ERR_INVALID_ARGUMENT, "output index %zu out of range", i);
	return value_info(s, s->g->outputs[i], s->io_dims[s->g->n_inputs + i], name, dtype, dims, rank);
}

size_t ortmk_session_provider_count(const ortmk_session *s)
{
	return s ? (size_t)s->n_eps : 0;
}

ortmk_status ortmk_session_provider_nodes(const ortmk_session *s, size_t i,
					  const char **provider, size_t *nodes)
{
	if (!s || i >= (size_t)s->n_eps)
		return core_fail(ORTMK_ERR_INVALID_ARGUMENT, "provider index %zu out of range", i);
	if (provider)
		*provider = s->eps[i]->name;
	if (nodes)
		*nodes = s->nodes_per_ep[i];
	return ORTMK_OK;
}

ortmk_status ortmk_session_provider_pid(const ortmk_session *s, size_t i, int *pid)
{
	if (!s || i >= (size_t)s->n_eps || !pid)
		return core_fail(ORTMK_ERR_INVALID_ARGUMENT, "provider index %zu out of range", i);
	*pid = s->eps[i]->p.alive ? (int)s->eps[i]->p.pid : -1;
	return ORTMK_OK;
}

ortmk_status ortmk_session_get_stats(const ortmk_session *s, ortmk_session_stats *out)
{
	if (!s || !out)
		return core_fail(ORTMK_ERR_INVALID_ARGUMENT, "stats: NULL argument");
	out->runs = s->runs;
	out->failed_runs = s->failed_runs;
	out->retried_runs = s->retried_runs;
	out->prepack_ms = (double)s->load.prepack_ns / 1e6;
	out->prepack_hits = s->load.prepack_hits;
	out->prepack_misses = s->load.prepack_misses;
	return ORTMK_OK;
}
