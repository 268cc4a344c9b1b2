/*
 * api: the small parts of the public API (ortmk.h): the environment's life
 * (its private directory; destroying it stops its providers and frees what
 * every layer keeps in it), dtype names, session options and host values.
 * Values live in their own sealed memfd segment so a provider maps them
 * instead of copying.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core.h"
#include "trace.h"

/* ---- the environment ---------------------------------------------------- */

ortmk_status ortmk_env_create(ortmk_env **out)
{
	const char *base = getenv("XDG_RUNTIME_DIR");
	ortmk_env *env;

	if (!out)
		return core_fail(ORTMK_ERR_INVALID_ARGUMENT, "env: NULL out");
	env = calloc(1, sizeof(*env));
	if (!env)
		return core_fail(ORTMK_ERR_NO_MEMORY, "out of memory");
	if (!base || access(base, W_OK) != 0)
		base = "/tmp";
	snprintf(env->dir, sizeof(env->dir), "%s/ortmk-XXXXXX", base);
	/* mkdtemp makes the directory 0700: only this user reaches the sockets. */
	if (!mkdtemp(env->dir)) {
		int e = errno;

		free(env);
		return core_fail(ORTMK_ERR_IO, "env: cannot create a private directory in %s: %s",
				 base, strerror(e));
	}
	pthread_mutex_init(&env->lock, NULL);
	pthread_mutex_init(&env->dev_lock, NULL);
	ipc_trace_init_from_env();
	signal(SIGPIPE, SIG_IGN);
	*out = env;
	return ORTMK_OK;
}

void ortmk_env_destroy(ortmk_env *env)
{
	if (!env)
		return;
	core_env_stop_eps(env);
	core_dev_env_fini(env);
	pthread_mutex_destroy(&env->dev_lock);
	core_value_pool_drain(env);
	rmdir(env->dir);
	pthread_mutex_destroy(&env->lock);
	free(env);
}

/* ---- names ---------------------------------------------------------------- */

size_t ortmk_dtype_size(ortmk_dtype t)
{
	return graph_dtype_size((int32_t)t);
}

const char *ortmk_dtype_name(ortmk_dtype t)
{
	return graph_dtype_name((int32_t)t);
}

/* ---- session options --------------------------------------------------- */

ortmk_status ortmk_session_options_create(ortmk_session_options **out)
{
	ortmk_session_options *o;

	if (!out)
		return core_fail(ORTMK_ERR_INVALID_ARGUMENT, "session options: NULL out");
	o = calloc(1, sizeof(*o));
	if (!o)
		return core_fail(ORTMK_ERR_NO_MEMORY, "out of memory");
	snprintf(o->providers, sizeof(o->providers), "cpu");
	*out = o;
	return ORTMK_OK;
}

void ortmk_session_options_destroy(ortmk_session_options *o)
{
	free(o);
}

static int parse_int(const char *v, int lo, int hi, int *out)
{
	char *end;
	long x;

	errno = 0;
	x = strtol(v, &end, 10);
	if (errno || end == v || *end || x < lo || x > hi)
		return -1;
	*out = (int)x;
	return 0;
}

ortmk_status ortmk_session_options_set(ortmk_session_options *o, const char *key,
				       const char *value)
{
	if (!o || !key || !value)
		return core_fail(ORTMK_ERR_INVALID_ARGUMENT, "session options: NULL argument");
	if (strcmp(key, "providers") == 0) {
		if (strlen(value) >= sizeof(o->providers) || !value[0])
			return core_fail(ORTMK_ERR_INVALID_ARGUMENT, "providers: bad list '%s'", value);
		snprintf(o->providers, sizeof(o->providers), "%s", value);
		return ORTMK_OK;
	}
	if (strcmp(key, "threads") == 0) {
		if (parse_int(value, 0, 1024, &o->threads))
			return core_fail(ORTMK_ERR_INVALID_ARGUMENT, "threads: '%s' is not 0..1024", value);
		return ORTMK_OK;
	}
	if (strcmp(key, "run_timeout_ms") == 0) {
		if (parse_int(value, 0, 86400000, &o->run_timeout_ms))
			return core_fail(ORTMK_ERR_INVALID_ARGUMENT, "run_timeout_ms: bad value '%s'", value);
		return ORTMK_OK;
	}
	if (strcmp(key, "save_prepacked") == 0) {
		if (parse_int(value, 0, 1, &o->save_prepacked))
			return core_fail(ORTMK_ERR_INVALID_ARGUMENT, "save_prepacked: '%s' is not 0 or 1", value);
		return ORTMK_OK;
	}
	if (strcmp(key, "retry") == 0) {
		if (parse_int(value, 0, 1, &o->retry))
			return core_fail(ORTMK_ERR_INVALID_ARGUMENT, "retry: '%s' is not 0 or 1", value);
		return ORTMK_OK;
	}
	if (strcmp(key, "crash_loop_n") == 0) {
		if (parse_int(value, 1, 1000, &o->crash_loop_n))
			return core_fail(ORTMK_ERR_INVALID_ARGUMENT, "crash_loop_n: '%s' is not 1..1000", value);
		return ORTMK_OK;
	}
	if (strcmp(key, "crash_loop_window_ms") == 0) {
		if (parse_int(value, 1, 86400000, &o->crash_loop_window_ms))
			return core_fail(ORTMK_ERR_INVALID_ARGUMENT, "crash_loop_window_ms: bad value '%s'", value);
		return ORTMK_OK;
	}
	return core_fail(ORTMK_ERR_INVALID_ARGUMENT, "unknown session option '%s'", key);
}

/* ---- values ------------------------------------------------------------- */

/* A pooled segment at least `n` bytes and not much larger; 1 if found. */
static int pool_take(ortmk_env *env, size_t n, shm_segment *out)
{
	int found = 0;

	pthread_mutex_lock(&env->lock);
	for (int i = 0; i < env->n_pool; i++) {
		size_t sz = env->pool[i].size;

		if (sz >= n && sz <= 2 * n + 4096) {
			*out = env->pool[i];
			env->pool[i] = env->pool[--env->n_pool];
			env->pool_bytes -= sz;
			found = 1;
			break;
		}
	}
	pthread_mutex_unlock(&env->lock);
	return found;
}

/* Keeps a destroyed value's segment for reuse; 1 if kept. */
static int pool_put(ortmk_env *env, shm_segment *seg)
{
	int kept = 0;

	pthread_mutex_lock(&env->lock);
	if (env->n_pool < CORE_VALUE_POOL && env->pool_bytes + seg->size <= CORE_VALUE_POOL_BYTES) {
		env->pool[env->n_pool++] = *seg;
		env->pool_bytes += seg->size;
		kept = 1;
	}
	pthread_mutex_unlock(&env->lock);
	return kept;
}

void core_value_pool_drain(ortmk_env *env)
{
	while (env->n_pool > 0)
		shm_segment_destroy(&env->pool[--env->n_pool]);
	env->pool_bytes = 0;
}

ortmk_status core_value_new(ortmk_env *env, int32_t dtype, const int64_t *dims,
			    size_t rank, ortmk_value **out)
{
	size_t esz = graph_dtype_size(dtype), n = esz;
	ortmk_value *v;
	int rc;

	if (!env || !out || (rank && !dims) || rank > GRAPH_MAX_RANK)
		return core_fail(ORTMK_ERR_INVALID_ARGUMENT, "value: bad arguments");
	if (!esz)
		return core_fail(ORTMK_ERR_INVALID_ARGUMENT, "value: unsupported dtype %d", dtype);
	for (size_t i = 0; i < rank; i++) {
		if (dims[i] < 0 || (dims[i] && n > (SIZE_MAX >> 2) / (size_t)dims[i]))
			return core_fail(ORTMK_ERR_INVALID_ARGUMENT, "value: bad dim %lld",
					 (long long)dims[i]);
		n *= (size_t)dims[i];
	}
	v = calloc(1, sizeof(*v));
	if (!v)
		return core_fail(ORTMK_ERR_NO_MEMORY, "out of memory");
	rc = pool_take(env, n ? n : 1, &v->seg) ? 0 :
		shm_segment_create("ortmk-value", n ? n : 1, core_env_next_id(env), &v->seg);
	if (rc) {
		free(v);
		return core_fail(ORTMK_ERR_NO_MEMORY, "value: cannot create %zu bytes of shared memory: %s",
				 n, strerror(-rc));
	}
	v->env = env;
	v->pend.slot = -1;
	v->dtype = dtype;
	v->rank = rank;
	if (rank)
		memcpy(v->dims, dims, rank * sizeof(int64_t));
	v->nbytes = n;
	*out = v;
	return ORTMK_OK;
}

ortmk_status ortmk_value_create(ortmk_env *env, ortmk_dtype dtype, const int64_t *dims,
				size_t rank, ortmk_value **out)
{
	return core_value_new(env, (int32_t)dtype, dims, rank, out);
}

ortmk_status ortmk_value_create_copy(ortmk_env *env, ortmk_dtype dtype, const int64_t *dims,
				     size_t rank, const void *data, size_t nbytes,
				     ortmk_value **out)
{
	ortmk_status st = core_value_new(env, (int32_t)dtype, dims, rank, out);

	if (st)
		return st;
	if (nbytes != (*out)->nbytes || (nbytes && !data)) {
		size_t want = (*out)->nbytes;

		ortmk_value_destroy(*out);
		*out = NULL;
		return core_fail(ORTMK_ERR_INVALID_ARGUMENT,
				 "value: %zu bytes given for a shape of %zu bytes", nbytes, want);
	}
	if (nbytes)
		memcpy((*out)->seg.base, data, nbytes);
	return ORTMK_OK;
}

void ortmk_value_destroy(ortmk_value *v)
{
	if (!v)
		return;
	if (v->dev) {
		core_dev_value_free(v);
		return;
	}
	/* A copy into it may still be running. */
	if (v->pend.slot >= 0) {
		core_dev_pend_wait(v->env, &v->pend, shm_now_ns() + (uint64_t)CORE_CONTROL_MS * 1000000u);
		core_dev_slot_put(v->env, v->pend.slot);
	}
	/* A pooled segment stays mapped in the providers; its next value
	 * overwrites every byte it uses before a provider reads it. */
	if (v->env && pool_put(v->env, &v->seg)) {
		free(v);
		return;
	}
	/* Providers that mapped the segment are told to drop it. */
	for (int i = 0; v->env && i < v->env->n_eps; i++) {
		core_ep *ep = v->env->eps[i];

		pthread_mutex_lock(&ep->lock);
		if (ipc_segtab_find(&ep->p.segs, v->seg.id))
			core_ep_release_segment(ep, v->seg.id);
		pthread_mutex_unlock(&ep->lock);
	}
	shm_segment_destroy(&v->seg);
	free(v);
}

void *ortmk_value_data(ortmk_value *v)
{
	return v ? v->seg.base : NULL;
}

const void *ortmk_value_data_const(const ortmk_value *v)
{
	return v ? v->seg.base : NULL;
}

size_t ortmk_value_nbytes(const ortmk_value *v)
{
	return v ? v->nbytes : 0;
}

ortmk_dtype ortmk_value_dtype(const ortmk_value *v)
{
	return v ? (ortmk_dtype)v->dtype : ORTMK_UNDEFINED;
}

size_t ortmk_value_rank(const ortmk_value *v)
{
	return v ? v->rank : 0;
}

const int64_t *ortmk_value_dims(const ortmk_value *v)
{
	return v ? v->dims : NULL;
}
