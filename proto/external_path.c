/*
 * external_path.c: lexical checks on external_data entries, shared by the
 * core's loader and ort-model (see external_path.h).
 */
#include <errno.h>
#include <string.h>

#include "external_path.h"

int proto_parse_u64(const char *s, uint64_t *out)
{
	uint64_t v = 0;

	if (!s || !*s)
		return -EINVAL;
	for (; *s; s++) {
		if (*s < '0' || *s > '9' || v > (UINT64_MAX - (uint64_t)(*s - '0')) / 10)
			return -EINVAL;
		v = v * 10 + (uint64_t)(*s - '0');
	}
	*out = v;
	return 0;
}

int proto_path_climbs_out(const char *loc)
{
	const char *p = loc;
	size_t n;
	int depth = 0;

	while (*p) {
		n = strcspn(p, "/");
		if (n == 2 && p[0] == '.' && p[1] == '.') {
			if (--depth < 0)
				return 1;
		} else if (n > 0 && !(n == 1 && p[0] == '.')) {
			depth++;
		}
		p += n;
		if (*p)
			p++;
	}
	return 0;
}

int proto_path_inside(const char *dir, const char *path)
{
	size_t n = strlen(dir);

	if (strcmp(dir, "/") == 0)
		return path[0] == '/';
	return strncmp(path, dir, n) == 0 && (path[n] == '/' || path[n] == '\0');
}
