/*
 * external_path.c: lexical checks on external_data entries, shared by the
 * core's loader and ort-model (see external_path.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
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

char *proto_path_dir(const char *path)
{
	const char *slash = strrchr(path, '/');

	if (!slash)
		return strdup(".");
	if (slash == path)
		return strdup("/");
	return strndup(path, (size_t)(slash - path));
}

int proto_external_resolve(const char *dir, char **dir_real, const char *who, const char *loc,
			   char **real, char *err, size_t errlen)
{
	char *full = NULL;
	int rc = 0;

	*real = NULL;
	if (loc[0] == '/') {
		snprintf(err, errlen, "%s: external data location '%s' is an absolute path", who, loc);
		return -EINVAL;
	}
	if (proto_path_climbs_out(loc)) {
		snprintf(err, errlen, "%s: external data location '%s' escapes the model directory",
			 who, loc);
		return -EINVAL;
	}
	if (!*dir_real && !(*dir_real = realpath(dir, NULL))) {
		rc = -errno;
		snprintf(err, errlen, "%s: model directory '%s': %s", who, dir, strerror(errno));
		return rc;
	}
	if (asprintf(&full, "%s/%s", dir, loc) < 0) {
		snprintf(err, errlen, "%s: out of memory", who);
		return -ENOMEM;
	}
	*real = realpath(full, NULL);
	if (!*real) {
		rc = -errno;
		snprintf(err, errlen, "%s: external data file '%s': %s", who, loc, strerror(errno));
	} else if (!proto_path_inside(*dir_real, *real)) {
		rc = -EINVAL;
		snprintf(err, errlen, "%s: external data location '%s' escapes the model directory "
			 "(it resolves to '%s')", who, loc, *real);
		free(*real);
		*real = NULL;
	}
	free(full);
	return rc;
}

int proto_external_open(const char *dir_real, const char *real)
{
	struct open_how how = {.flags = O_RDONLY | O_CLOEXEC,
			       .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS};
	size_t n = strlen(dir_real);
	const char *rel = real + n;
	int dfd, fd, e;

	if (!proto_path_inside(dir_real, real))
		return -EINVAL;
	while (*rel == '/')
		rel++;
	if (!*rel)
		return -EISDIR;
	dfd = open(dir_real, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return -errno;
	fd = (int)syscall(SYS_openat2, dfd, rel, &how, sizeof(how));
	e = errno;
	close(dfd);
	if (fd >= 0)
		return fd;
	if (e != ENOSYS)
		return -e;
	fd = open(real, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	return fd >= 0 ? fd : -errno;
}
