/*
 * ort_model.h: the pieces of the ort-model tool (tools/ort-model/).
 *
 * ort_model_tensor.c reads a model and its tensors: loading the
 * ModelProto, dtype sizes, an inline tensor's bytes in the raw little-endian
 * layout, and external-data references checked the way the core's loader
 * checks them (core/graph.c): relative location inside the model directory
 * after resolving symlinks, offset and length inside the file, length equal
 * to dtype x shape.  ort_model_ext.c rewrites a model's weights into one
 * aligned data file (externalize); ort_model.c is the command line and
 * `info`.  Internal names carry the prefix om_.
 */
#ifndef ORTMK_TOOLS_ORT_MODEL_H
#define ORTMK_TOOLS_ORT_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "onnx.pb-c.h"

#define OM_ERRLEN 1024

/* A parsed model and the directory its external data is relative to. */
typedef struct om_model {
	Onnx__ModelProto *proto;
	char *path;
	char *dir;
	char *dir_real;           /* realpath(dir), resolved on first use */
} om_model;

/* Loads and parses `path`; a file that is not an ONNX model is an error. */
int om_model_load(const char *path, om_model *m, char *err, size_t errlen);
void om_model_free(om_model *m);

/* Bytes per element of a fixed-size dtype; 0 for string and unknown. */
size_t om_dtype_size(int32_t dt);
const char *om_dtype_name(int32_t dt);

/* `kind` names the tensor in messages: "initializer" or "tensor".
 * dtype x shape in bytes; -EINVAL (with a message) when the dtype has no
 * fixed size or a dim is negative or the product overflows. */
int om_tensor_want(const Onnx__TensorProto *t, const char *kind, uint64_t *want,
		   char *err, size_t errlen);

int om_is_external(const Onnx__TensorProto *t);

/* An inline tensor's bytes in raw little-endian layout.  *data points into
 * raw_data (*owned NULL) or at a buffer built from the typed fields
 * (*owned, the caller frees).  The size must match dtype x shape. */
int om_tensor_bytes(const Onnx__TensorProto *t, const char *kind, const uint8_t **data,
		    void **owned, uint64_t *nbytes, char *err, size_t errlen);

/* External data files opened while checking references, by resolved path. */
typedef struct om_file {
	char *real;
	char *location;           /* as the first tensor spelled it */
	int fd;
	uint64_t size;
	uint64_t tensors, bytes;  /* statistics for `info` */
	uint64_t align;           /* largest power of two dividing every offset */
} om_file;

typedef struct om_files {
	om_file *v;
	size_t n, cap;
} om_files;

/* A checked external reference: the file (index into om_files), offset
 * and length of the tensor's bytes. */
typedef struct om_ext {
	size_t file;
	uint64_t offset, length;
} om_ext;

/* Parses and checks t's external_data against m's directory, opening the
 * file (once per resolved path).  `kind` names the tensor in messages
 * ("initializer", "tensor"). */
int om_ext_check(om_model *m, om_files *fs, const Onnx__TensorProto *t, const char *kind,
		 om_ext *out, char *err, size_t errlen);
void om_files_close(om_files *fs);

/* Every tensor of a model: graph initializers (main graph and subgraphs),
 * sparse initializers' parts, node attribute tensors (Constant values),
 * function and training-info graphs.  `main_init` is 1 for initializers of
 * the main graph, the only tensors externalize converts.  A callback that
 * returns < 0 stops the walk with that value. */
typedef int (*om_tensor_fn)(void *ctx, Onnx__TensorProto *t, const char *kind, int main_init);
int om_walk_tensors(Onnx__ModelProto *m, om_tensor_fn fn, void *ctx, char *err, size_t errlen);

/* snprintf into err and return code (negative errno), for one-line errors. */
int om_errf(char *err, size_t errlen, int code, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

typedef struct om_ext_opts {
	uint64_t align;           /* power of two */
	uint64_t threshold;       /* inline tensors of at least this many bytes move out */
	const char *data_name;    /* NULL: basename(out) + ".data" */
} om_ext_opts;

typedef struct om_ext_stats {
	uint64_t converted, converted_bytes;   /* inline -> external */
	uint64_t copied, copied_bytes;         /* external -> the new file */
	uint64_t data_size;                    /* of the new data file */
	char data_name[256];
} om_ext_stats;

/* Writes `out` (atomically) and its data file beside it. */
int om_externalize(const char *model, const char *out, const om_ext_opts *o,
		   om_ext_stats *st, char *err, size_t errlen);

#endif
