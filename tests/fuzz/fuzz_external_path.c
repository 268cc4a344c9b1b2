/*
 * fuzz_external_path: external-data location checks and resolution
 * (proto/external_path.c) against a real model directory holding a file, a
 * subdirectory and symlinks in and out.  The input is "location\0offset\0
 * length"; a location that resolves must stay inside the directory and
 * open beneath it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "external_path.h"

static char dir[64], dir_real[4096];

static void setup(void)
{
	char p[128];
	FILE *f;

	snprintf(dir, sizeof(dir), "/tmp/ortmk-fuzz-ext-XXXXXX");
	if (!mkdtemp(dir))
		abort();
	snprintf(p, sizeof(p), "%s/m", dir);
	mkdir(p, 0700);
	snprintf(p, sizeof(p), "%s/m/sub", dir);
	mkdir(p, 0700);
	snprintf(p, sizeof(p), "%s/m/w.bin", dir);
	if ((f = fopen(p, "w")))
		fputs("weights", f), fclose(f);
	snprintf(p, sizeof(p), "%s/secret", dir);
	if ((f = fopen(p, "w")))
		fputs("secret", f), fclose(f);
	snprintf(p, sizeof(p), "%s/m/out", dir);
	symlink("../secret", p);
	snprintf(p, sizeof(p), "%s/m/sub/in", dir);
	symlink("../w.bin", p);
	snprintf(p, sizeof(p), "%s/m", dir);
	if (!realpath(p, dir_real))
		abort();
	snprintf(dir, sizeof(dir), "%s", p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *buf = malloc(size + 3), *loc, *off, *len, *real = NULL, *dr = NULL, err[512];
	uint64_t v;

	if (!dir[0])
		setup();
	if (!buf)
		return 0;
	memcpy(buf, data, size);
	buf[size] = buf[size + 1] = buf[size + 2] = 0;
	loc = buf;
	off = loc + strlen(loc) + 1;
	len = off + strlen(off) + 1;
	(void)proto_parse_u64(off, &v);
	(void)proto_parse_u64(len, &v);
	(void)proto_path_climbs_out(loc);
	if (proto_external_resolve(dir, &dr, "fuzz", loc, &real, err, sizeof(err)) == 0) {
		int fd;

		if (!proto_path_inside(dir_real, real))
			abort();   /* resolved outside the directory */
		fd = proto_external_open(dir_real, real);
		if (fd >= 0)
			close(fd);
	}
	free(real);
	free(dr);
	free(buf);
	return 0;
}
