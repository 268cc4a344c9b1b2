/*
 * ort_model_tensor.c: reading a model and its tensors for ort-model.
 *
 * Loads the ModelProto, walks every tensor it holds, turns inline tensors
 * into raw little-endian bytes (proto/tensor_bytes.c) and checks
 * external-data references.  The checks are the core loader's
 * (core/graph.c; the lexical ones shared through proto/external_path.c),
 * because the tool must refuse exactly what a session would refuse: a
 * location that is absolute, climbs out with "..", or resolves (through
 * symlinks) outside the model directory; a file that is not regular;
 * offset or length past the end of the file; a length that is not
 * dtype x shape.  A model is untrusted
 * input: every problem is a one-line error, never a crash.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "external_path.h"
#include "ort_model.h"
#include "tensor_bytes.h"

#define DT(x) ONNX__TENSOR_PROTO__DATA_TYPE__##x
#define MAX_DEPTH 64   /* subgraph nesting, as the core's loader */

int om_errf(char *err, size_t errlen, int code, const char *fmt, ...)
{
	va_list ap;

	if (err && errlen) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return code;
}

/* ---- model ------------------------------------------------------------- */

int om_model_load(const char *path, om_model *m, char *err, size_t errlen)
{
	struct stat st;
	void *map;
	int fd, rc = 0;

	memset(m, 0, sizeof(*m));
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return om_errf(err, errlen, -errno, "%s: %s", path, strerror(errno));
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		rc = om_errf(err, errlen, -EINVAL, "%s: not a regular file", path);
		goto out;
	}
	/* Protobuf messages are limited to 2 GiB; anything larger must keep its
	 * weights in external data, so this is not a valid model file. */
	if (st.st_size > INT32_MAX) {
		rc = om_errf(err, errlen, -EFBIG, "%s: %lld bytes: an ONNX model file cannot exceed 2 GiB (weights that large must be external data)",
			     path, (long long)st.st_size);
		goto out;
	}
	if (st.st_size == 0) {
		rc = om_errf(err, errlen, -EINVAL, "%s: empty file, not an ONNX model", path);
		goto out;
	}
	map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	if (map == MAP_FAILED) {
		rc = om_errf(err, errlen, -errno, "%s: %s", path, strerror(errno));
		goto out;
	}
	m->proto = onnx__model_proto__unpack(NULL, (size_t)st.st_size, map);
	munmap(map, (size_t)st.st_size);
	if (!m->proto)
		rc = om_errf(err, errlen, -EINVAL, "%s: not an ONNX model (protobuf parse failed)", path);
	else if (!m->proto->graph)
		rc = om_errf(err, errlen, -EINVAL, "%s: not an ONNX model (no graph)", path);
	else if (!m->proto->has_ir_version || m->proto->ir_version < 1)
		rc = om_errf(err, errlen, -EINVAL, "%s: not an ONNX model (no ir_version)", path);
	else if (!(m->path = strdup(path)) || !(m->dir = proto_path_dir(path)))
		rc = om_errf(err, errlen, -ENOMEM, "out of memory");
out:
	close(fd);
	if (rc < 0)
		om_model_free(m);
	return rc;
}

void om_model_free(om_model *m)
{
	if (m->proto)
		onnx__model_proto__free_unpacked(m->proto, NULL);
	free(m->path);
	free(m->dir);
	free(m->dir_real);
	memset(m, 0, sizeof(*m));
}

/* ---- dtypes and inline bytes ------------------------------------------- */

static const struct { const char *name; size_t size; } dtypes[] = {
	[DT(UNDEFINED)] = {"undefined", 0}, [DT(FLOAT)] = {"float", 4},
	[DT(UINT8)] = {"uint8", 1}, [DT(INT8)] = {"int8", 1},
	[DT(UINT16)] = {"uint16", 2}, [DT(INT16)] = {"int16", 2},
	[DT(INT32)] = {"int32", 4}, [DT(INT64)] = {"int64", 8},
	[DT(STRING)] = {"string", 0}, [DT(BOOL)] = {"bool", 1},
	[DT(FLOAT16)] = {"float16", 2}, [DT(DOUBLE)] = {"double", 8},
	[DT(UINT32)] = {"uint32", 4}, [DT(UINT64)] = {"uint64", 8},
	[DT(COMPLEX64)] = {"complex64", 8}, [DT(COMPLEX128)] = {"complex128", 16},
	[DT(BFLOAT16)] = {"bfloat16", 2},
};
#define N_DTYPES (sizeof(dtypes) / sizeof(dtypes[0]))

size_t om_dtype_size(int32_t dt)
{
	return dt >= 0 && (size_t)dt < N_DTYPES ? dtypes[dt].size : 0;
}

const char *om_dtype_name(int32_t dt)
{
	return dt >= 0 && (size_t)dt < N_DTYPES && dtypes[dt].name ? dtypes[dt].name : "unknown";
}

static const char *tname(const Onnx__TensorProto *t)
{
	return t->name ? t->name : "";
}

int om_tensor_want(const Onnx__TensorProto *t, const char *kind, uint64_t *want,
		   char *err, size_t errlen)
{
	uint64_t n = om_dtype_size(t->data_type);
	size_t i;

	if (n == 0)
		return om_errf(err, errlen, -EINVAL, "%s '%s': data type %s (%d) has no fixed size",
			       kind, tname(t), om_dtype_name(t->data_type), (int)t->data_type);
	for (i = 0; i < t->n_dims; i++) {
		if (t->dims[i] < 0 || (t->dims[i] && n > UINT64_MAX / (uint64_t)t->dims[i]))
			return om_errf(err, errlen, -EINVAL, "%s '%s': invalid shape (negative or overflowing dims)",
				       kind, tname(t));
		n *= (uint64_t)t->dims[i];
	}
	*want = n;
	return 0;
}

int om_is_external(const Onnx__TensorProto *t)
{
	return t->has_data_location && t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
}

static int size_mismatch(const Onnx__TensorProto *t, const char *kind, const char *what,
			 uint64_t have, uint64_t want, char *err, size_t errlen)
{
	char shape[128];
	size_t i, at;

	at = (size_t)snprintf(shape, sizeof(shape), "[");
	for (i = 0; i < t->n_dims && at < sizeof(shape); i++)
		at += (size_t)snprintf(shape + at, sizeof(shape) - at, "%s%" PRId64, i ? "," : "", t->dims[i]);
	if (at < sizeof(shape))
		snprintf(shape + at, sizeof(shape) - at, "]");
	return om_errf(err, errlen, -EINVAL, "%s '%s': %" PRIu64 " bytes of %s for shape %s %s (%" PRIu64 " bytes)",
		       kind, tname(t), have, what, shape, om_dtype_name(t->data_type), want);
}

int om_tensor_bytes(const Onnx__TensorProto *t, const char *kind, const uint8_t **data,
		    void **owned, uint64_t *nbytes, char *err, size_t errlen)
{
	size_t count, unit;
	uint64_t want;
	uint8_t *out;
	int rc;

	*data = NULL;
	*owned = NULL;
	rc = om_tensor_want(t, kind, &want, err, errlen);
	if (rc < 0)
		return rc;
	if (t->segment)
		return om_errf(err, errlen, -EINVAL, "%s '%s': segmented tensors are not supported", kind, tname(t));
	*nbytes = want;
	if (t->has_raw_data) {
		if (t->raw_data.len != want)
			return size_mismatch(t, kind, "raw_data", t->raw_data.len, want, err, errlen);
		*data = t->raw_data.data;
		return 0;
	}
	if (proto_typed_field(t, &count, &unit) < 0)
		return om_errf(err, errlen, -EINVAL, "%s '%s': unsupported data type %d", kind, tname(t),
			       (int)t->data_type);
	if ((uint64_t)count * unit != want)
		return size_mismatch(t, kind, "data", (uint64_t)count * unit, want, err, errlen);
	if (want == 0)
		return 0;
	out = malloc(want);
	if (!out)
		return om_errf(err, errlen, -ENOMEM, "%s '%s': out of memory", kind, tname(t));
	proto_typed_copy(t, out);
	*data = out;
	*owned = out;
	return 0;
}

/* ---- external references ----------------------------------------------- */

/* Resolves `loc` inside the model directory (proto_external_resolve). */
static int resolve(om_model *m, const char *who, const char *loc, char **real,
		   char *err, size_t errlen)
{
	return proto_external_resolve(m->dir, &m->dir_real, who, loc, real, err, errlen);
}

/* The index of the opened file for `loc`, opening it on first use. */
static int open_file(om_model *m, om_files *fs, const char *who, const char *loc,
		     size_t *index, char *err, size_t errlen)
{
	struct stat st;
	om_file *f;
	char *real;
	size_t i;
	int rc;

	rc = resolve(m, who, loc, &real, err, errlen);
	if (rc < 0)
		return rc;
	for (i = 0; i < fs->n; i++)
		if (strcmp(fs->v[i].real, real) == 0) {
			free(real);
			*index = i;
			return 0;
		}
	if (fs->n == fs->cap) {
		size_t cap = fs->cap ? fs->cap * 2 : 4;
		om_file *v = realloc(fs->v, cap * sizeof(*v));

		if (!v) {
			free(real);
			return om_errf(err, errlen, -ENOMEM, "out of memory");
		}
		fs->v = v;
		fs->cap = cap;
	}
	f = &fs->v[fs->n];
	memset(f, 0, sizeof(*f));
	f->fd = proto_external_open(m->dir_real, real);
	if (f->fd < 0) {
		rc = om_errf(err, errlen, f->fd, "%s: external data file '%s': %s", who, loc, strerror(-f->fd));
		free(real);
		return rc;
	}
	f->real = real;
	f->location = strdup(loc);
	*index = fs->n++;
	if (!f->location)
		return om_errf(err, errlen, -ENOMEM, "out of memory");
	if (fstat(f->fd, &st) < 0 || !S_ISREG(st.st_mode))
		return om_errf(err, errlen, -EINVAL, "%s: external data '%s' is not a regular file", who, loc);
	f->size = (uint64_t)st.st_size;
	return 0;
}

int om_ext_check(om_model *m, om_files *fs, const Onnx__TensorProto *t, const char *kind,
		 om_ext *out, char *err, size_t errlen)
{
	const Onnx__StringStringEntryProto *e;
	const char *loc = NULL;
	uint64_t want, low;
	int has_length = 0, rc;
	char who[320];
	om_file *f;
	size_t i;

	snprintf(who, sizeof(who), "%s '%s'", kind, tname(t));
	memset(out, 0, sizeof(*out));
	for (i = 0; i < t->n_external_data; i++) {
		e = t->external_data[i];
		if (!e->key || !e->value)
			continue;
		if (strcmp(e->key, "location") == 0)
			loc = e->value;
		else if (strcmp(e->key, "offset") == 0 && proto_parse_u64(e->value, &out->offset) < 0)
			return om_errf(err, errlen, -EINVAL, "%s: external data offset '%s' is not a number", who, e->value);
		else if (strcmp(e->key, "length") == 0) {
			if (proto_parse_u64(e->value, &out->length) < 0)
				return om_errf(err, errlen, -EINVAL, "%s: external data length '%s' is not a number", who, e->value);
			has_length = 1;
		}
	}
	if (!loc || !*loc)
		return om_errf(err, errlen, -EINVAL, "%s: external data has no location", who);
	rc = om_tensor_want(t, kind, &want, err, errlen);
	if (rc < 0)
		return rc;
	rc = open_file(m, fs, who, loc, &out->file, err, errlen);
	if (rc < 0)
		return rc;
	f = &fs->v[out->file];
	if (out->offset > f->size)
		return om_errf(err, errlen, -EINVAL, "%s: external data offset %" PRIu64 " is past the end of '%s' (%" PRIu64 " bytes)",
			       who, out->offset, loc, f->size);
	/* Compared against the room left, so offset + length cannot overflow. */
	if (has_length && out->length > f->size - out->offset)
		return om_errf(err, errlen, -EINVAL, "%s: external data at offset %" PRIu64 " length %" PRIu64 " runs past the end of '%s' (%" PRIu64 " bytes)",
			       who, out->offset, out->length, loc, f->size);
	if (!has_length)
		out->length = f->size - out->offset;
	if (out->length != want)
		return size_mismatch(t, kind, "external data", out->length, want, err, errlen);
	f->tensors++;
	f->bytes += out->length;
	low = out->offset ? out->offset & (~out->offset + 1) : 0;
	if (low && (!f->align || low < f->align))
		f->align = low;
	return 0;
}

void om_files_close(om_files *fs)
{
	size_t i;

	for (i = 0; i < fs->n; i++) {
		if (fs->v[i].fd >= 0)
			close(fs->v[i].fd);
		free(fs->v[i].real);
		free(fs->v[i].location);
	}
	free(fs->v);
	memset(fs, 0, sizeof(*fs));
}

/* ---- walking every tensor ---------------------------------------------- */

typedef struct walk {
	om_tensor_fn fn;
	void *ctx;
	char *err;
	size_t errlen;
} walk;

static int walk_graph(walk *w, Onnx__GraphProto *g, int main_graph, int depth);

static int walk_sparse(walk *w, Onnx__SparseTensorProto *s, const char *kind)
{
	int rc = 0;

	if (s && s->values)
		rc = w->fn(w->ctx, s->values, kind, 0);
	if (rc == 0 && s && s->indices)
		rc = w->fn(w->ctx, s->indices, kind, 0);
	return rc;
}

static int walk_nodes(walk *w, Onnx__NodeProto **nodes, size_t n, int depth)
{
	Onnx__AttributeProto *a;
	size_t i, j, k;
	int rc = 0;

	if (depth > MAX_DEPTH)
		return om_errf(w->err, w->errlen, -EINVAL, "subgraphs nested deeper than %d", MAX_DEPTH);
	for (i = 0; i < n && rc == 0; i++) {
		for (j = 0; j < nodes[i]->n_attribute && rc == 0; j++) {
			a = nodes[i]->attribute[j];
			if (a->t)
				rc = w->fn(w->ctx, a->t, "tensor", 0);
			for (k = 0; k < a->n_tensors && rc == 0; k++)
				rc = w->fn(w->ctx, a->tensors[k], "tensor", 0);
			if (rc == 0 && a->sparse_tensor)
				rc = walk_sparse(w, a->sparse_tensor, "tensor");
			for (k = 0; k < a->n_sparse_tensors && rc == 0; k++)
				rc = walk_sparse(w, a->sparse_tensors[k], "tensor");
			if (rc == 0 && a->g)
				rc = walk_graph(w, a->g, 0, depth + 1);
			for (k = 0; k < a->n_graphs && rc == 0; k++)
				rc = walk_graph(w, a->graphs[k], 0, depth + 1);
		}
	}
	return rc;
}

static int walk_graph(walk *w, Onnx__GraphProto *g, int main_graph, int depth)
{
	size_t i;
	int rc = 0;

	if (!g)
		return 0;
	for (i = 0; i < g->n_initializer && rc == 0; i++)
		rc = w->fn(w->ctx, g->initializer[i], "initializer", main_graph);
	for (i = 0; i < g->n_sparse_initializer && rc == 0; i++)
		rc = walk_sparse(w, g->sparse_initializer[i], "initializer");
	return rc ? rc : walk_nodes(w, g->node, g->n_node, depth);
}

int om_walk_tensors(Onnx__ModelProto *m, om_tensor_fn fn, void *ctx, char *err, size_t errlen)
{
	walk w = {fn, ctx, err, errlen};
	size_t i;
	int rc;

	rc = walk_graph(&w, m->graph, 1, 0);
	for (i = 0; i < m->n_functions && rc == 0; i++)
		rc = walk_nodes(&w, m->functions[i]->node, m->functions[i]->n_node, 1);
	for (i = 0; i < m->n_training_info && rc == 0; i++) {
		rc = walk_graph(&w, m->training_info[i]->initialization, 0, 1);
		if (rc == 0)
			rc = walk_graph(&w, m->training_info[i]->algorithm, 0, 1);
	}
	return rc;
}
