/*
 * session: loading a model into providers.  ortmk_session_create() parses
 * and checks the model (graph_load), infers types with symbolic shapes,
 * starts the providers the options name, partitions the nodes, copies
 * inline initializers into one shm segment, hands external-data files to
 * the providers as descriptors (the core never reads those bytes), and
 * loads one subgraph per step.  Running is in run.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core.h"
#include "log.h"

/* A provider asked for that cannot run here (no binary, no device): an
 * error with strict placement, else a warning and its nodes go on. */
static ortmk_status unavailable(ortmk_session *s, const char *name, const char *why)
{
	if (s->strict_placement)
		return core_fail(ORTMK_ERR_UNAVAILABLE, "provider '%s' is unavailable: %s", name, why);
	ipc_log(IPC_LOG_WARN, "provider '%s' is unavailable (%s): its nodes go to the next provider",
		name, why);
	core_clear_error();
	return ORTMK_OK;
}

static ortmk_status start_providers(ortmk_session *s, const char *list)
{
	char buf[256], *save = NULL;
	int has_cpu = 0;

	snprintf(buf, sizeof(buf), "%s", list);
	for (char *t = strtok_r(buf, ", ", &save); t; t = strtok_r(NULL, ", ", &save)) {
		ortmk_status st;

		if (s->n_eps == CORE_MAX_EPS)
			return core_fail(ORTMK_ERR_INVALID_ARGUMENT, "providers: too many in '%s'", list);
		st = core_env_get_ep(s->env, t, &s->eps[s->n_eps]);
		if (st == ORTMK_ERR_UNAVAILABLE && strcmp(t, "cpu")) {
			char why[1024];

			snprintf(why, sizeof(why), "%s", ortmk_last_error());
			if ((st = unavailable(s, t, why)))
				return st;
			continue;
		}
		if (st)
			return st;
		if (s->eps[s->n_eps]->p.unavailable[0] && strcmp(t, "cpu")) {
			if ((st = unavailable(s, t, s->eps[s->n_eps]->p.unavailable)))
				return st;
			continue;
		}
		has_cpu |= strcmp(t, "cpu") == 0;
		s->n_eps++;
	}
	/* cpu is always the last fallback. */
	if (!has_cpu) {
		ortmk_status st = core_env_get_ep(s->env, "cpu", &s->eps[s->n_eps]);

		if (st)
			return st;
		s->n_eps++;
	}
	return ORTMK_OK;
}

static ortmk_status copy_weights(ortmk_session *s)
{
	const graph *g = s->g;
	uint64_t total = 0;
	int rc;

	s->weight_off = calloc(g->n_values + 1, sizeof(uint64_t));
	if (!s->weight_off)
		return core_fail(ORTMK_ERR_NO_MEMORY, "out of memory");
	for (size_t v = 0; v < g->n_values; v++) {
		const graph_value *val = &g->values[v];

		s->weight_off[v] = PLAN_NONE;
		if (val->kind != GRAPH_VALUE_INITIALIZER || val->init.external || !val->init.data)
			continue;
		if (val->init.alias >= 0 && s->weight_off[val->init.alias] != PLAN_NONE) {
			s->weight_off[v] = s->weight_off[val->init.alias];
			continue;   /* the same bytes, copied once */
		}
		s->weight_off[v] = total;
		total += (val->init.nbytes + SHM_ALIGN - 1) & ~(uint64_t)(SHM_ALIGN - 1);
	}
	if (core_mem_check(s->env, total, "the model's inline weights") != ORTMK_OK)
		return ORTMK_ERR_NO_MEMORY;
	rc = shm_segment_create("ortmk-weights", total ? total : 1, core_env_next_id(s->env),
				&s->weights);
	if (rc)
		return core_fail(ORTMK_ERR_NO_MEMORY, "cannot create %llu bytes of shared memory for weights: %s",
				 (unsigned long long)total, strerror(-rc));
	for (size_t v = 0; v < g->n_values; v++)
		if (s->weight_off[v] != PLAN_NONE && g->values[v].init.alias < 0)
			memcpy((uint8_t *)s->weights.base + s->weight_off[v], g->values[v].init.data,
			       g->values[v].init.nbytes);
	return ORTMK_OK;
}

static ortmk_status share_files(ortmk_session *s, core_ep *ep)
{
	for (size_t f = 0; f < s->g->n_files; f++) {
		ortmk_status st = core_ep_add_file(ep, s->file_ids[f], s->g->files[f].fd,
						   s->g->files[f].size);

		if (st)
			return st;
	}
	return ORTMK_OK;
}

/* The graph values a step's nodes name, each once. */
static ortmk_status step_values(ortmk_session *s, core_step *st)
{
	const graph *g = s->g;
	char *seen = calloc(g->n_values + 1, 1);

	st->values = malloc((g->n_values + 1) * sizeof(int));
	if (!seen || !st->values) {
		free(seen);
		return core_fail(ORTMK_ERR_NO_MEMORY, "out of memory");
	}
	for (size_t k = st->first; k < st->last; k++) {
		const graph_node *n = &g->nodes[k];

		for (int i = 0; i < n->n_in + n->n_out + n->n_implicit; i++) {
			int v = i < n->n_in ? n->in[i] :
				i < n->n_in + n->n_out ? n->out[i - n->n_in] :
				n->implicit[i - n->n_in - n->n_out];

			if (v >= 0 && !seen[v]) {
				seen[v] = 1;
				st->values[st->n_values++] = v;
			}
		}
	}
	free(seen);
	return ORTMK_OK;
}

static void fill_weight(ortmk_session *s, int v, uint32_t idx, Ortmk__Weight *w)
{
	const graph_value *val = &s->g->values[v];

	ortmk__weight__init(w);
	w->value = idx;
	w->dtype = val->elem_type;
	w->n_dims = (size_t)val->rank;
	w->dims = (int64_t *)val->dims;
	w->nbytes = val->init.nbytes;
	w->external = val->init.external;
	if (val->init.external) {
		w->source_id = s->file_ids[val->init.file];
		w->offset = val->init.offset;
	} else {
		w->source_id = s->weights.id;
		w->offset = s->weight_off[v] == PLAN_NONE ? 0 : s->weight_off[v];
	}
}

/* The pre-pack cache beside the model, one per step (docs/PREPACK.md). */
static void cache_path(const ortmk_session *s, const core_step *st, char *out, size_t n)
{
	snprintf(out, n, "%s.%s%zu.ortmk-prepack", s->model_path, s->eps[st->ep]->name,
		 (size_t)(st - s->steps));
}

/* Hands the provider the cache to read (if any) and, when saving, a fresh
 * file to write; the provider never opens a path. */
static void offer_cache(ortmk_session *s, core_step *st, Ortmk__LoadSubgraph *l,
			char *tmp, size_t n)
{
	core_ep *ep = s->eps[st->ep];
	char path[4200];
	struct stat sb;
	int fd;

	tmp[0] = 0;
	if (!s->model_path)
		return;    /* a model from memory has no place for a cache */
	cache_path(s, st, path, sizeof(path));
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd >= 0 && fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_size > 0 &&
	    core_ep_add_file(ep, st->cache_in_id = core_env_next_id(s->env), fd,
			     (uint64_t)sb.st_size) == ORTMK_OK) {
		l->has_prepack_in = 1;
		l->prepack_in = st->cache_in_id;
		st->cache_in_fd = fd;
	} else if (fd >= 0) {
		close(fd);
	}
	if (!s->save_prepacked)
		return;
	snprintf(tmp, n, "%s.tmp%d", path, (int)getpid());
	fd = open(tmp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
	if (fd < 0 || core_ep_add_file(ep, st->cache_out_id = core_env_next_id(s->env), fd, 0)) {
		ipc_log(IPC_LOG_WARN, "cannot write a pre-pack cache at %s", tmp);
		if (fd >= 0)
			close(fd);
		unlink(tmp);
		tmp[0] = 0;
		return;
	}
	l->has_prepack_out = 1;
	l->prepack_out = st->cache_out_id;
	st->cache_out_fd = fd;
}

static ortmk_status send_load(ortmk_session *s, core_step *st, Ortmk__LoadSubgraph *l)
{
	core_load_stats ls = {0};
	char tmp[4300], path[4200];
	ortmk_status rc;

	offer_cache(s, st, l, tmp, sizeof(tmp));
	rc = core_ep_load(s->eps[st->ep], s->id, l, &ls);
	if (tmp[0]) {
		/* The fresh cache replaces the old one atomically, or goes away. */
		cache_path(s, st, path, sizeof(path));
		if (rc == ORTMK_OK && ls.prepack_written)
			rename(tmp, path);
		else
			unlink(tmp);
		core_ep_forget_file(s->eps[st->ep], st->cache_out_id);
		close(st->cache_out_fd);
		st->cache_out_fd = -1;
	}
	s->load.prepack_ns += ls.prepack_ns;
	s->load.prepack_hits += ls.prepack_hits;
	s->load.prepack_misses += ls.prepack_misses;
	return rc;
}

static ortmk_status load_step(ortmk_session *s, core_step *st)
{
	const graph *g = s->g;
	Onnx__GraphProto gp = ONNX__GRAPH_PROTO__INIT;
	Ortmk__LoadSubgraph l = ORTMK__LOAD_SUBGRAPH__INIT;
	Ortmk__ValueDesc *vd = calloc(st->n_values + 1, sizeof(*vd));
	Ortmk__ValueDesc **pvd = calloc(st->n_values + 1, sizeof(*pvd));
	Ortmk__Weight *w = calloc(st->n_values + 1, sizeof(*w));
	Ortmk__Weight **pw = calloc(st->n_values + 1, sizeof(*pw));
	Ortmk__OpsetId *os = calloc(g->n_opsets + 1, sizeof(*os));
	Ortmk__OpsetId **pos = calloc(g->n_opsets + 1, sizeof(*pos));
	Onnx__NodeProto **nodes = calloc(st->last - st->first + 1, sizeof(*nodes));
	ortmk_status rc = ORTMK_ERR_NO_MEMORY;

	if (!vd || !pvd || !w || !pw || !os || !pos || !nodes) {
		rc = core_fail(ORTMK_ERR_NO_MEMORY, "out of memory");
		goto out;
	}
	for (size_t k = st->first; k < st->last; k++)
		nodes[k - st->first] = (Onnx__NodeProto *)g->nodes[k].proto;
	gp.n_node = st->last - st->first;
	gp.node = nodes;
	l.graph.len = onnx__graph_proto__get_packed_size(&gp);
	l.graph.data = malloc(l.graph.len + 1);
	if (!l.graph.data) {
		rc = core_fail(ORTMK_ERR_NO_MEMORY, "out of memory");
		goto out;
	}
	onnx__graph_proto__pack(&gp, l.graph.data);
	for (size_t i = 0; i < st->n_values; i++) {
		int v = st->values[i];

		ortmk__value_desc__init(&vd[i]);
		vd[i].name = g->values[v].name;
		vd[i].dtype = s->tinfo0[v].elem_type ? s->tinfo0[v].elem_type : g->values[v].elem_type;
		pvd[i] = &vd[i];
		if (g->values[v].kind == GRAPH_VALUE_INITIALIZER && (g->values[v].init.external ||
								     g->values[v].init.data)) {
			fill_weight(s, v, (uint32_t)i, &w[l.n_weights]);
			pw[l.n_weights] = &w[l.n_weights];
			l.n_weights++;
		}
	}
	for (size_t i = 0; i < g->n_opsets; i++) {
		ortmk__opset_id__init(&os[i]);
		os[i].domain = g->opsets[i].domain;
		os[i].version = g->opsets[i].version;
		pos[i] = &os[i];
	}
	st->subgraph_id = (uint32_t)core_env_next_id(s->env);
	l.subgraph_id = st->subgraph_id;
	l.n_values = st->n_values;
	l.values = pvd;
	l.weights = pw;
	l.n_opsets = g->n_opsets;
	l.opsets = pos;
	l.has_ir_version = 1;
	l.ir_version = s->g->model->ir_version;
	l.has_threads = 1;
	l.threads = (uint32_t)s->threads;
	l.has_opt_level = 1;
	l.opt_level = (uint32_t)s->opt_level;
	rc = core_step_exported(s, st, &l);
	if (rc == ORTMK_OK)
		rc = send_load(s, st, &l);
out:
	free(l.exported);
	free(l.graph.data);
	free(vd);
	free(pvd);
	free(w);
	free(pw);
	free(os);
	free(pos);
	free(nodes);
	return rc;
}

static ortmk_status infer_types(ortmk_session *s)
{
	int next_sym = -s->g->n_symbols - 1;
	char err[512];

	s->tinfo0 = calloc(s->g->n_values + 1, sizeof(graph_tinfo));
	if (!s->tinfo0)
		return core_fail(ORTMK_ERR_NO_MEMORY, "out of memory");
	shape_seed(s->g, s->tinfo0);
	if (shape_infer(s->g, s->tinfo0, 0, &next_sym, err, sizeof(err)))
		return core_fail(ORTMK_ERR_MODEL, "%s", err);
	/* What inference knows whatever the inputs' symbolic dims are need
	 * not run (graph_optimization_level "disable" or ORTMK_FOLD=0: keep
	 * every node, for comparisons). */
	if (s->opt_level > 0 && !(getenv("ORTMK_FOLD") && strcmp(getenv("ORTMK_FOLD"), "0") == 0) &&
	    graph_fold_known(s->g, s->tinfo0))
		return core_fail(ORTMK_ERR_NO_MEMORY, "out of memory");
	return ORTMK_OK;
}

static ortmk_status load_all(ortmk_session *s)
{
	ortmk_status st = ORTMK_OK;

	/* A re-partition keeps the ids: providers that have a file keep it. */
	if (!s->file_ids) {
		s->file_ids = calloc(s->g->n_files + 1, sizeof(uint64_t));
		if (!s->file_ids)
			return core_fail(ORTMK_ERR_NO_MEMORY, "out of memory");
		for (size_t f = 0; f < s->g->n_files; f++)
			s->file_ids[f] = core_env_next_id(s->env);
	}
	for (int e = 0; e < s->n_eps && st == ORTMK_OK; e++) {
		if (!s->nodes_per_ep[e])
			continue;
		pthread_mutex_lock(&s->eps[e]->lock);
		st = core_ep_add_segment(s->eps[e], &s->weights);
		if (st == ORTMK_OK)
			st = share_files(s, s->eps[e]);
		pthread_mutex_unlock(&s->eps[e]->lock);
	}
	free(s->last_step);
	s->last_step = malloc((s->g->n_values + 1) * sizeof(int));
	if (!s->last_step)
		return core_fail(ORTMK_ERR_NO_MEMORY, "out of memory");
	for (size_t v = 0; v < s->g->n_values; v++)
		s->last_step[v] = -1;
	for (size_t i = 0; i < s->n_steps && st == ORTMK_OK; i++) {
		core_ep *ep = s->eps[s->steps[i].ep];

		st = step_values(s, &s->steps[i]);
		if (st)
			break;
		for (size_t j = 0; j < s->steps[i].n_values; j++)
			s->last_step[s->steps[i].values[j]] = (int)i;
		pthread_mutex_lock(&ep->lock);
		st = load_step(s, &s->steps[i]);
		pthread_mutex_unlock(&ep->lock);
	}
	return st;
}

/* Everything after the graph is loaded: types, providers, partition,
 * weights, subgraphs.  Frees s on failure. */
static ortmk_status session_finish(ortmk_session *s, ortmk_session **out)
{
	ortmk_status st = infer_types(s);

	if (st == ORTMK_OK)
		st = core_session_fill_info(s);
	if (st == ORTMK_OK)
		st = start_providers(s, s->providers);
	if (st == ORTMK_OK)
		st = core_partition(s);
	if (st == ORTMK_OK)
		st = copy_weights(s);
	if (st == ORTMK_OK)
		st = load_all(s);
	if (st) {
		char keep[1024];

		snprintf(keep, sizeof(keep), "%s", ortmk_last_error());
		ortmk_session_destroy(s);
		return core_fail(st, "%s", keep);
	}
	*out = s;
	return ORTMK_OK;
}

static ortmk_session *session_new(ortmk_env *env, const ortmk_session_options *opts)
{
	ortmk_session *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	s->env = env;
	s->id = core_env_next_id(env);
	s->weights.fd = -1;
	pthread_mutex_init(&s->lock, NULL);
	pthread_cond_init(&s->slot_cv, NULL);
	pthread_rwlock_init(&s->steps_lock, NULL);
	s->n_slots = opts && opts->max_concurrent_runs ? opts->max_concurrent_runs : CORE_RUN_SLOTS;
	s->cpus = (int)sysconf(_SC_NPROCESSORS_ONLN);
	s->threads = opts && opts->threads > 0 ? opts->threads : s->cpus;
	s->run_timeout_ms = opts ? opts->run_timeout_ms : 0;
	s->retry = opts ? opts->retry : 0;
	s->crash_loop_n = opts && opts->crash_loop_n ? opts->crash_loop_n : 5;
	s->crash_loop_window_ms = opts && opts->crash_loop_window_ms ? opts->crash_loop_window_ms : 10000;
	s->save_prepacked = opts ? opts->save_prepacked : 0;
	s->opt_level = opts ? opts->opt_level : 2;
	s->strict_placement = opts ? opts->strict_placement : 0;
	s->profile = opts ? opts->profile : 0;
	snprintf(s->providers, sizeof(s->providers), "%s", opts ? opts->providers : "cpu");
	return s;
}

ortmk_status ortmk_session_create(ortmk_env *env, const char *model_path,
				  const ortmk_session_options *opts, ortmk_session **out)
{
	ortmk_session *s;
	char err[1024];
	int rc;

	core_clear_error();
	if (!env || !model_path || !out)
		return core_fail(ORTMK_ERR_INVALID_ARGUMENT, "session: NULL argument");
	*out = NULL;
	if (!(s = session_new(env, opts)))
		return core_fail(ORTMK_ERR_NO_MEMORY, "out of memory");
	s->model_path = strdup(model_path);
	if (!s->model_path) {
		ortmk_session_destroy(s);
		return core_fail(ORTMK_ERR_NO_MEMORY, "out of memory");
	}
	rc = graph_load(model_path, &s->g, err, sizeof(err));
	if (rc) {
		ortmk_session_destroy(s);
		return core_fail(rc == -ENOENT || rc == -EACCES ? ORTMK_ERR_IO : ORTMK_ERR_MODEL, "%s", err);
	}
	return session_finish(s, out);
}

ortmk_status ortmk_session_create_from_buffer(ortmk_env *env, const void *data, size_t size,
					      const char *external_data_dir,
					      const ortmk_session_options *opts,
					      ortmk_session **out)
{
	ortmk_session *s;
	char err[1024];
	int rc;

	core_clear_error();
	if (!env || !data || !out)
		return core_fail(ORTMK_ERR_INVALID_ARGUMENT, "session: NULL argument");
	*out = NULL;
	if (opts && opts->save_prepacked)
		return core_fail(ORTMK_ERR_INVALID_ARGUMENT,
				 "save_prepacked: a model from memory has no path to keep a cache beside");
	if (!(s = session_new(env, opts)))
		return core_fail(ORTMK_ERR_NO_MEMORY, "out of memory");
	rc = graph_load_bytes(data, size, external_data_dir, &s->g, err, sizeof(err));
	if (rc) {
		ortmk_session_destroy(s);
		return core_fail(rc == -ENOENT || rc == -EACCES ? ORTMK_ERR_IO : ORTMK_ERR_MODEL, "%s", err);
	}
	return session_finish(s, out);
}

static void release_provider_state(ortmk_session *s)
{
	for (size_t i = 0; i < s->n_steps; i++) {
		core_ep *ep = s->eps[s->steps[i].ep];

		if (!s->steps[i].subgraph_id)
			continue;
		pthread_mutex_lock(&ep->lock);
		core_ep_forget_subgraph(ep, s->steps[i].subgraph_id);
		pthread_mutex_unlock(&ep->lock);
	}
	for (int e = 0; e < s->n_eps; e++) {
		core_ep *ep = s->eps[e];

		pthread_mutex_lock(&ep->lock);
		for (int i = -1; i < 2 * s->n_slots; i++) {
			core_slot *sl = &s->slots[i < 0 ? 0 : i / 2];
			shm_segment *seg = i < 0 ? &s->weights : i % 2 ? sl->dyn : sl->arena;

			if (seg && seg->fd >= 0 && ipc_segtab_find(&ep->p.segs, seg->id))
				core_ep_release_segment(ep, seg->id);
		}
		for (size_t f = 0; s->file_ids && f < s->g->n_files; f++)
			core_ep_forget_file(ep, s->file_ids[f]);
		pthread_mutex_unlock(&ep->lock);
	}
}

static void free_steps(ortmk_session *s)
{
	for (size_t i = 0; i < s->n_steps; i++) {
		core_step *st = &s->steps[i];

		if (st->cache_in_fd > 0) {
			pthread_mutex_lock(&s->eps[st->ep]->lock);
			core_ep_forget_file(s->eps[st->ep], st->cache_in_id);
			pthread_mutex_unlock(&s->eps[st->ep]->lock);
			close(st->cache_in_fd);
		}
		free(st->values);
	}
	free(s->steps);
	s->steps = NULL;
	s->n_steps = 0;
}

ortmk_status core_session_repartition(ortmk_session *s)
{
	ortmk_status st;

	for (size_t i = 0; i < s->n_steps; i++) {
		core_ep *ep = s->eps[s->steps[i].ep];

		pthread_mutex_lock(&ep->lock);
		core_ep_forget_subgraph(ep, s->steps[i].subgraph_id);
		pthread_mutex_unlock(&ep->lock);
	}
	free_steps(s);
	st = core_partition(s);
	if (st == ORTMK_OK)
		st = load_all(s);
	return st;
}

void ortmk_session_destroy(ortmk_session *s)
{
	if (!s)
		return;
	release_provider_state(s);
	for (size_t i = 0; i < s->n_plans; i++)
		core_plan_free(s->plans[i]);
	free(s->plans);
	free_steps(s);
	for (int i = 0; i < s->n_slots; i++) {
		shm_segment *segs[2] = {s->slots[i].arena, s->slots[i].dyn};

		for (int k = 0; k < 2; k++) {
			if (segs[k])
				shm_segment_destroy(segs[k]);
			free(segs[k]);
		}
	}
	if (s->weights.fd >= 0)
		shm_segment_destroy(&s->weights);
	free(s->weight_off);
	free(s->file_ids);
	free(s->last_step);
	free(s->io_dims);
	free(s->io_dim_names);
	free(s->meta_keys);
	free(s->meta_values);
	free(s->model_path);
	free(s->tinfo0);
	graph_free(s->g);
	pthread_mutex_destroy(&s->lock);
	pthread_cond_destroy(&s->slot_cv);
	pthread_rwlock_destroy(&s->steps_lock);
	free(s);
}
