/*
 * log: level-filtered logging to stderr (see log.h).  The level is read
 * from ORTMK_LOG once; a line is written with one fprintf so concurrent
 * writers do not interleave inside a line.
 */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int log_level = -1;
static const char *log_role = "ortmk";

static int level_from_env(void)
{
	const char *s = getenv("ORTMK_LOG");
	static const char *names[] = {"error", "warn", "info", "debug"};

	/* warnings by default: each says once that something degraded (a
	 * provider disabled, a cache ignored, no thread pool) */
	if (!s)
		return IPC_LOG_WARN;
	for (int i = 0; i < 4; i++)
		if (strcmp(s, names[i]) == 0)
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

void ipc_log(enum ipc_log_level level, const char *fmt, ...)
{
	static const char *tags[] = {"error", "warn", "info", "debug"};
	char line[1024];
	va_list ap;

	if (!ipc_log_enabled(level))
		return;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	fprintf(stderr, "%s[%d] %s: %s\n", log_role, (int)getpid(), tags[level], line);
}
