/*
 * error: the thread-local message behind every ortmk_status (ortmk.h's
 * one convention): core_fail() sets it and returns the status, public
 * calls clear it on entry, ortmk_last_error() reads it.  The bottom of the
 * core: every other file calls it, it calls none of them.
 */
#include <stdarg.h>
#include <stdio.h>

#include "core.h"

static _Thread_local char last_error[1024];

ortmk_status core_fail(ortmk_status st, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(last_error, sizeof(last_error), fmt, ap);
	va_end(ap);
	return st;
}

void core_clear_error(void)
{
	last_error[0] = 0;
}

const char *ortmk_last_error(void)
{
	return last_error;
}

const char *ortmk_status_name(ortmk_status s)
{
	static const char *names[] = {
		"OK", "INVALID_ARGUMENT", "MODEL", "NOT_IMPLEMENTED", "INPUT",
		"PROVIDER_DIED", "PROVIDER", "PROTOCOL", "TIMEOUT", "NO_MEMORY",
		"IO", "INTERNAL",
	};

	if ((unsigned)s >= sizeof(names) / sizeof(names[0]))
		return "UNKNOWN";
	return names[s];
}
