/*
 * log: level-filtered logging to stderr (see log.h).  The level is read
 * from ORTMK_LOG once; a line is written with one fprintf so concurrent
 * writers do not interleave inside a line.
 */
#include "log.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int log_level = -1;
static const char *log_role = "ortmk";
static const char *const level_names[] = {"error", "warn", "info", "debug"};
/* The sink: guarded by sink_lock, held while a line is delivered so a
 * reset never races a callback in flight. */
static pthread_mutex_t sink_lock = PTHREAD_MUTEX_INITIALIZER;
static ipc_log_fn sink_fn;
static void *sink_user;
static unsigned sink_token;

static int level_from_env(void)
{
	const char *s = getenv("ORTMK_LOG");

	/* warnings by default: each says once that something degraded (a
	 * provider disabled, a cache ignored, no thread pool) */
	if (!s)
		return IPC_LOG_WARN;
	for (int i = 0; i < 4; i++)
		if (strcmp(s, level_names[i]) == 0)
			return i;
	return IPC_LOG_WARN;
}

void ipc_log_set_role(const char *role)
{
	log_role = role;
}

int ipc_log_enabled(enum ipc_log_level level)
{
	if (log_level < 0)
		log_level = level_from_env();
	return (int)level <= log_level;
}

const char *ipc_log_level_name(void)
{
	ipc_log_enabled(IPC_LOG_ERROR);
	return level_names[log_level];
}

unsigned ipc_log_set_sink(enum ipc_log_level level, ipc_log_fn fn, void *user)
{
	unsigned token;

	pthread_mutex_lock(&sink_lock);
	log_level = getenv("ORTMK_LOG") ? level_from_env() : (int)level;
	sink_fn = fn;
	sink_user = user;
	token = ++sink_token;
	pthread_mutex_unlock(&sink_lock);
	return token;
}

void ipc_log_reset_sink(unsigned token)
{
	pthread_mutex_lock(&sink_lock);
	if (token == sink_token) {
		sink_fn = NULL;
		sink_user = NULL;
		log_level = level_from_env();
	}
	pthread_mutex_unlock(&sink_lock);
}

void ipc_log(enum ipc_log_level level, const char *fmt, ...)
{
	char line[1024];
	va_list ap;

	if (!ipc_log_enabled(level))
		return;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	pthread_mutex_lock(&sink_lock);
	if (sink_fn)
		sink_fn(sink_user, level, line);
	else
		fprintf(stderr, "%s[%d] %s: %s\n", log_role, (int)getpid(), level_names[level], line);
	pthread_mutex_unlock(&sink_lock);
}
