/*
 * error: the thread-local message behind every ortmk_status (ortmk.h's
 * one convention): core_fail() sets it and returns the status, public
 * calls clear it on entry, ortmk_last_error() reads it.  The bottom of the
 * core: every other file calls it, it calls none of them.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

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
		"IO", "INTERNAL", "UNAVAILABLE", "CANCELLED",
	};

	if ((unsigned)s >= sizeof(names) / sizeof(names[0]))
		return "UNKNOWN";
	return names[s];
}

/* Structs that grow (ortmk.h: struct_size): the caller's struct_size says
 * how much of `full` (sizeof full_size, struct_size first) it has room
 * for; the rest of a newer struct is not written. */
ortmk_status core_out_struct(void *out, const void *full, size_t full_size, const char *what)
{
	size_t have;

	memcpy(&have, out, sizeof(have));
	if (have < sizeof(size_t))
		return core_fail(ORTMK_ERR_INVALID_ARGUMENT,
				 "%s: struct_size %zu is too small (set it to sizeof the struct)", what, have);
	if (have > full_size)
		have = full_size;
	memcpy((char *)out + sizeof(size_t), (const char *)full + sizeof(size_t), have - sizeof(size_t));
	return ORTMK_OK;
}
