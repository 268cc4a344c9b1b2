/*
 * external_path.h: the lexical checks on a TensorProto's external_data
 * entries that every reader must make the same way (the core's loader in
 * core/graph.c and ort-model in tools/ort-model/ort_model_tensor.c): offset
 * and length as decimal numbers, a location that must not climb out of the
 * model directory, a resolved path that must stay inside it.
 */
#ifndef ORTMK_PROTO_EXTERNAL_PATH_H
#define ORTMK_PROTO_EXTERNAL_PATH_H

#include <stdint.h>

/* A plain decimal uint64 (no sign, no spaces, no overflow); -EINVAL else. */
int proto_parse_u64(const char *s, uint64_t *out);

/* 1 when a ".." component of the relative path loc climbs above the
 * directory it starts in. */
int proto_path_climbs_out(const char *loc);

/* 1 when the absolute path is dir itself or below it (both resolved). */
int proto_path_inside(const char *dir, const char *path);

/* The directory part of a model path (malloc'd): "." for a bare name,
 * "/" for a file in the root; NULL when out of memory. */
char *proto_path_dir(const char *path);

/* Resolves external data location loc against the model directory dir:
 * loc must be relative and not climb out, and its realpath must stay
 * inside dir's (which also catches symlinks that point out).  *dir_real
 * is dir's realpath, computed on first use and kept for the caller to
 * free.  0 and *real (malloc'd), or -errno with err saying why, prefixed
 * by who ("initializer 'w'"). */
int proto_external_resolve(const char *dir, char **dir_real, const char *who, const char *loc,
			   char **real, char *err, size_t errlen);

/* Opens `real` (proto_external_resolve's result, inside dir_real) for
 * reading so that nothing swapped in since the resolve can lead outside:
 * openat2 beneath dir_real with no symlink followed (real is canonical, so
 * a symlink there now was put there after the check), or, on a kernel
 * without openat2, open with O_NOFOLLOW.  A descriptor or -errno. */
int proto_external_open(const char *dir_real, const char *real);

#endif
