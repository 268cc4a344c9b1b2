/*
 * onnx_dims: the names of the symbolic dimensions ("batch", "seq") of a
 * model's graph inputs, read straight from the .onnx file.  ort-run needs
 * them for --dim because the public API reports a dynamic dim as -1 without
 * its name.
 */
#ifndef ORTMK_ONNX_DIMS_H
#define ORTMK_ONNX_DIMS_H

#include <stdbool.h>
#include <stddef.h>

typedef struct onnx_dim {
	char *input;      /* graph input name */
	size_t index;     /* axis */
	char *param;      /* dim_param */
} onnx_dim;

typedef struct onnx_dims {
	onnx_dim *v;
	size_t n, cap;
} onnx_dims;

/* Best effort: an unreadable or malformed file leaves fewer (or no)
 * entries; the library reports such a model properly when it loads it. */
void onnx_dims_load(const char *path, onnx_dims *d);
/* The dim_param of axis `index` of `input`, or NULL. */
const char *onnx_dims_lookup(const onnx_dims *d, const char *input, size_t index);
/* Whether some input has a dimension named `param`. */
bool onnx_dims_has(const onnx_dims *d, const char *param);
void onnx_dims_free(onnx_dims *d);

#endif
