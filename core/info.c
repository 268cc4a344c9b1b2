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

/* The tensor type a declared type is or holds (sequence or optional of a
 * tensor, a map's values), NULL when none; *kind and *optional say what
 * wraps it. */
static const Onnx__TypeProto__Tensor *tensor_of(const Onnx__TypeProto *tp, ortmk_value_kind *kind,
						int *optional)
{
	*kind = ORTMK_VALUE_TENSOR;
	*optional = 0;
	for (int depth = 0; tp && depth < 4; depth++) {
		switch (tp->value_case) {
		case ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE:
			return tp->tensor_type;
		case ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE:
			*kind = ORTMK_VALUE_SEQUENCE;
			tp = tp->sequence_type ? tp->sequence_type->elem_type : NULL;
			break;
		case ONNX__TYPE_PROTO__VALUE_OPTIONAL_TYPE:
			*optional = 1;
			tp = tp->optional_type ? tp->optional_type->elem_type : NULL;
			break;
		case ONNX__TYPE_PROTO__VALUE_MAP_TYPE:
			if (*kind == ORTMK_VALUE_TENSOR)
				*kind = ORTMK_VALUE_MAP;
			tp = tp->map_type ? tp->map_type->value_type : NULL;
			break;
		default:
			return NULL;
		}
	}
	return NULL;
}

/* The key type of the map a declared type is or holds; 0 when none. */
static int32_t map_key_of(const Onnx__TypeProto *tp)
{
	for (int depth = 0; tp && depth < 3; depth++) {
		switch (tp->value_case) {
		case ONNX__TYPE_PROTO__VALUE_MAP_TYPE:
			return tp->map_type && tp->map_type->has_key_type ? tp->map_type->key_type : 0;
		case ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE:
			tp = tp->sequence_type ? tp->sequence_type->elem_type : NULL;
			break;
		case ONNX__TYPE_PROTO__VALUE_OPTIONAL_TYPE:
			tp = tp->optional_type ? tp->optional_type->elem_type : NULL;
			break;
		default:
			return 0;
		}
	}
	return 0;
}

/* The name of dim d of value v: the model's dim_param where it declares
 * one, else the name of the symbol inference carried there. */
static const char *dim_name(const ortmk_session *s, int v, int d)
{
	const graph_value *gv = &s->g->values[v];
	ortmk_value_kind kind;
	int opt;
	const Onnx__TypeProto__Tensor *tt = tensor_of(gv->type, &kind, &opt);
	int64_t sym = s->tinfo0[v].dims[d];

	if (tt && tt->shape && (size_t)d < tt->shape->n_dim && tt->shape->dim[d] &&
	    tt->shape->dim[d]->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM &&
	    tt->shape->dim[d]->dim_param && tt->shape->dim[d]->dim_param[0])
		return tt->shape->dim[d]->dim_param;
	if (sym < 0 && -sym <= s->g->n_symbols)
		return s->g->symbols[-sym - 1];
	return NULL;
}

/* An optional(tensor) input or output: inference tracks no shape through
 * the optional, so its dims are the declared ones. */
static void declared_dims(ortmk_session *s, int v, size_t io)
{
	ortmk_value_kind kind;
	int opt;
	const Onnx__TypeProto__Tensor *tt = tensor_of(s->g->values[v].type, &kind, &opt);

	if (!tt || !tt->shape || kind != ORTMK_VALUE_TENSOR)
		return;
	for (size_t d = 0; d < tt->shape->n_dim && d < GRAPH_MAX_RANK; d++) {
		const Onnx__TensorShapeProto__Dimension *dim = tt->shape->dim[d];
		int named = dim && dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM &&
			    dim->dim_param && dim->dim_param[0];

		s->io_dims[io][d] = dim && dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE ?
				    dim->dim_value : -1;
		s->io_dim_names[io][d] = named ? dim->dim_param : NULL;
	}
}

/* Copies of the inferred dims with symbols turned into -1 and the dims'
 * symbolic names, per input and output; the model's metadata_props as
 * arrays.  Made once at session creation. */
ortmk_status core_session_fill_info(ortmk_session *s)
{
	size_t n = s->g->n_inputs + s->g->n_outputs, np = s->g->model->n_metadata_props;

	s->io_dims = calloc(n + 1, sizeof(*s->io_dims));
	s->io_dim_names = calloc(n + 1, sizeof(*s->io_dim_names));
	s->meta_keys = calloc(np + 1, sizeof(char *));
	s->meta_values = calloc(np + 1, sizeof(char *));
	if (!s->io_dims || !s->io_dim_names || !s->meta_keys || !s->meta_values)
		return core_fail(ORTMK_ERR_NO_MEMORY, "out of memory");
	for (size_t i = 0; i < n; i++) {
		int v = i < s->g->n_inputs ? s->g->inputs[i] : s->g->outputs[i - s->g->n_inputs];
		const graph_tinfo *t = &s->tinfo0[v];

		for (int d = 0; d < t->rank && d < GRAPH_MAX_RANK; d++) {
			s->io_dims[i][d] = t->dims[d] >= 0 ? t->dims[d] : -1;
			s->io_dim_names[i][d] = t->dims[d] >= 0 ? NULL : dim_name(s, v, d);
		}
		if (t->rank < 0)
			declared_dims(s, v, i);
	}
	for (size_t i = 0; i < np; i++) {
		const Onnx__StringStringEntryProto *e = s->g->model->metadata_props[i];

		s->meta_keys[i] = e && e->key ? e->key : "";
		s->meta_values[i] = e && e->value ? e->value : "";
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

static ortmk_status io_meta(const ortmk_session *s, int v, size_t io, ortmk_io_info *out)
{
	const graph_value *gv = &s->g->values[v];
	const graph_tinfo *t = &s->tinfo0[v];
	ortmk_io_info full = {.struct_size = sizeof(full), .name = gv->name};
	const Onnx__TypeProto__Tensor *tt = tensor_of(gv->type, &full.kind, &full.optional);

	if (!out)
		return core_fail(ORTMK_ERR_INVALID_ARGUMENT, "io info: NULL out");
	if (full.kind == ORTMK_VALUE_TENSOR) {
		int declared = t->rank < 0 && tt && tt->shape;  /* declared_dims() */

		full.dtype = (ortmk_dtype)(t->elem_type ? t->elem_type : gv->elem_type);
		if (!full.dtype && tt && tt->has_elem_type)
			full.dtype = (ortmk_dtype)tt->elem_type;
		full.rank_known = t->rank >= 0 || declared;
		full.rank = t->rank > 0 ? (size_t)t->rank :
			    declared && tt->shape->n_dim <= GRAPH_MAX_RANK ? tt->shape->n_dim : 0;
		full.dims = full.rank_known ? s->io_dims[io] : NULL;
		full.dim_names = full.rank_known ? s->io_dim_names[io] : NULL;
	} else {
		/* A sequence or map: its tensors' type as declared (inference
		 * tracks no shape through them). */
		full.dtype = tt && tt->has_elem_type ? (ortmk_dtype)tt->elem_type : ORTMK_UNDEFINED;
		full.map_key_dtype = (ortmk_dtype)map_key_of(gv->type);
	}
	return core_out_struct(out, &full, sizeof(full), "io info");
}

ortmk_status ortmk_session_input_meta(const ortmk_session *s, size_t i, ortmk_io_info *out)
{
	if (!s || i >= s->g->n_inputs)
		return core_fail(ORTMK_ERR_INVALID_ARGUMENT, "input index %zu out of range", i);
	return io_meta(s, s->g->inputs[i], i, out);
}

ortmk_status ortmk_session_output_meta(const ortmk_session *s, size_t i, ortmk_io_info *out)
{
	if (!s || i >= s->g->n_outputs)
		return core_fail(ORTMK_ERR_INVALID_ARGUMENT, "output index %zu out of range", i);
	return io_meta(s, s->g->outputs[i], s->g->n_inputs + i, out);
}

static const char *or_empty(const char *x)
{
	return x ? x : "";
}

ortmk_status ortmk_session_model_metadata(const ortmk_session *s, ortmk_model_metadata *out)
{
	const Onnx__ModelProto *m;
	ortmk_model_metadata full = {.struct_size = sizeof(full)};

	if (!s || !out)
		return core_fail(ORTMK_ERR_INVALID_ARGUMENT, "model metadata: NULL argument");
	m = s->g->model;
	full.producer_name = or_empty(m->producer_name);
	full.producer_version = or_empty(m->producer_version);
	full.domain = or_empty(m->domain);
	full.description = or_empty(m->doc_string);
	full.graph_name = or_empty(m->graph ? m->graph->name : NULL);
	full.graph_description = or_empty(m->graph ? m->graph->doc_string : NULL);
	full.version = m->has_model_version ? m->model_version : 0;
	full.n_props = m->n_metadata_props;
	full.prop_keys = s->meta_keys;
	full.prop_values = s->meta_values;
	return core_out_struct(out, &full, sizeof(full), "model metadata");
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
	ortmk_session_stats full = {.struct_size = sizeof(full)};

	if (!s || !out)
		return core_fail(ORTMK_ERR_INVALID_ARGUMENT, "stats: NULL argument");
	full.runs = s->runs;
	full.failed_runs = s->failed_runs;
	full.retried_runs = s->retried_runs;
	full.prepack_ms = (double)s->load.prepack_ns / 1e6;
	full.prepack_hits = s->load.prepack_hits;
	full.prepack_misses = s->load.prepack_misses;
	pthread_mutex_lock((pthread_mutex_t *)&s->lock);
	for (size_t i = 0; i < s->n_plans; i++)
		if (s->plans[i]->arena_size > full.arena_bytes)
			full.arena_bytes = s->plans[i]->arena_size;
	pthread_mutex_unlock((pthread_mutex_t *)&s->lock);
	return core_out_struct(out, &full, sizeof(full), "stats");
}
