/*
 * api: the small parts of the public API (ortmk.h): the environment's life
 * (its private directory; destroying it stops its providers and frees what
 * every layer keeps in it), dtype names, session options.  The top of the
 * core: it may call every layer below, none calls it.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core.h"
#include "log.h"
#include "trace.h"

/* ---- the environment ---------------------------------------------------- */

const char *ortmk_version(void)
{
	return ORTMK_PROJECT_VERSION;
}

int ortmk_api_version(void)
{
	return ORTMK_API_VERSION;
}

/* The env's callback behind ipc_log's sink: ipc levels to ONNX Runtime's
 * severities. */
static void env_log(void *user, enum ipc_log_level level, const char *line)
{
	static const ortmk_log_severity sev[] = {ORTMK_LOG_ERROR, ORTMK_LOG_WARNING,
						 ORTMK_LOG_INFO, ORTMK_LOG_VERBOSE};
	ortmk_env *env = user;

	env->log_fn(env->log_user, sev[level], line);
}

static enum ipc_log_level ipc_level(ortmk_log_severity s)
{
	return s <= ORTMK_LOG_VERBOSE ? IPC_LOG_DEBUG : s == ORTMK_LOG_INFO ? IPC_LOG_INFO :
	       s == ORTMK_LOG_WARNING ? IPC_LOG_WARN : IPC_LOG_ERROR;
}

ortmk_status ortmk_env_create_with_options(const ortmk_env_options *opts, ortmk_env **out)
{
	ortmk_env_options o = {.struct_size = sizeof(o), .log_severity = ORTMK_LOG_WARNING};
	ortmk_status st;

	if (opts) {
		if (opts->struct_size < sizeof(size_t) + sizeof(ortmk_log_severity))
			return core_fail(ORTMK_ERR_INVALID_ARGUMENT,
					 "env options: struct_size %zu is too small", opts->struct_size);
		memcpy(&o, opts, opts->struct_size < sizeof(o) ? opts->struct_size : sizeof(o));
		if ((unsigned)o.log_severity > ORTMK_LOG_FATAL)
			return core_fail(ORTMK_ERR_INVALID_ARGUMENT, "env options: log severity %d is not 0..4",
					 (int)o.log_severity);
	}
	if ((st = ortmk_env_create(out)) || !opts)
		return st;
	(*out)->mem_limit = (uint64_t)o.memory_limit_mb << 20;
	(*out)->no_sandbox = o.disable_sandbox != 0;
	(*out)->log_fn = o.log_fn;
	(*out)->log_user = o.log_user;
	(*out)->log_token = ipc_log_set_sink(ipc_level(o.log_severity), o.log_fn ? env_log : NULL, *out);
	return ORTMK_OK;
}

ortmk_status ortmk_env_create(ortmk_env **out)
{
	const char *base = getenv("XDG_RUNTIME_DIR"), *sandbox = getenv("ORTMK_SANDBOX");
	ortmk_env *env;

	if (!out)
		return core_fail(ORTMK_ERR_INVALID_ARGUMENT, "env: NULL out");
	if (sandbox && strcmp(sandbox, "0") && strcmp(sandbox, "1") && strcmp(sandbox, "report"))
		return core_fail(ORTMK_ERR_INVALID_ARGUMENT,
				 "ORTMK_SANDBOX=%s: expected 0 (providers unconfined, for debugging), "
				 "1 (the default) or report", sandbox);
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
	if (env->log_token)
		ipc_log_reset_sink(env->log_token);
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
	o->opt_level = 2;
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
	if (strcmp(key, "max_concurrent_runs") == 0) {
		if (parse_int(value, 1, CORE_MAX_RUN_SLOTS, &o->max_concurrent_runs))
			return core_fail(ORTMK_ERR_INVALID_ARGUMENT, "max_concurrent_runs: '%s' is not 1..%d",
					 value, CORE_MAX_RUN_SLOTS);
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
	if (strcmp(key, "graph_optimization_level") == 0) {
		static const char *const names[][2] = {{"disable", "0"}, {"basic", "1"},
						       {"extended", "2"}, {"all", "99"}};

		for (int i = 0; i < 4; i++)
			if (strcmp(value, names[i][0]) == 0 || strcmp(value, names[i][1]) == 0) {
				o->opt_level = i < 2 ? i : 2;
				return ORTMK_OK;
			}
		return core_fail(ORTMK_ERR_INVALID_ARGUMENT, "graph_optimization_level: '%s' is not "
				 "disable, basic, extended or all (0, 1, 2, 99)", value);
	}
	if (strcmp(key, "strict_placement") == 0) {
		if (parse_int(value, 0, 1, &o->strict_placement))
			return core_fail(ORTMK_ERR_INVALID_ARGUMENT, "strict_placement: '%s' is not 0 or 1", value);
		return ORTMK_OK;
	}
	if (strcmp(key, "enable_profiling") == 0) {
		if (parse_int(value, 0, 1, &o->profile))
			return core_fail(ORTMK_ERR_INVALID_ARGUMENT, "enable_profiling: '%s' is not 0 or 1", value);
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
