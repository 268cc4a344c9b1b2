/*
 * graph.c: storage and look-ups for ortmk's model IR (graph.h).  Holds the
 * name index, the dtype and attribute helpers every layer uses, the decoding
 * of initializer bytes (typed fields converted to the raw little-endian
 * layout; external-data files resolved, opened and bounds-checked) and
 * graph_free.  loader.c builds a graph with these; the session, shape
 * inference and the providers read it.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "external_path.h"
#include "graph.h"
#include "tensor_bytes.h"

#define DT(x) ONNX__TENSOR_PROTO__DATA_TYPE__##x

static int errf(char *err, size_t errlen, int code, const char *fmt, ...)
{
	va_list ap;

	if (err && errlen) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return code;
}

/* ---- name map ---------------------------------------------------------- */

static uint64_t name_hash(const char *s)
{
	uint64_t h = 1469598103934665603ull;    /* FNV-1a */

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	return h;
}

/* Slot holding `key`, or the empty slot where it would go. */
static size_t namemap_slot(const graph_namemap *m, const char *key)
{
	size_t mask = m->cap - 1;
	size_t i = (size_t)name_hash(key) & mask;

	while (m->keys[i] && strcmp(m->keys[i], key) != 0)
		i = (i + 1) & mask;
	return i;
}

static int namemap_grow(graph_namemap *m)
{
	graph_namemap nm = { 0 };
	size_t i, s;

	nm.cap = m->cap ? m->cap * 2 : 16;
	nm.keys = calloc(nm.cap, sizeof(*nm.keys));
	nm.vals = malloc(nm.cap * sizeof(*nm.vals));
	if (!nm.keys || !nm.vals) {
		graph_namemap_free(&nm);
		return -ENOMEM;
	}
	for (i = 0; i < m->cap; i++) {
		if (!m->keys[i])
			continue;
		s = namemap_slot(&nm, m->keys[i]);
		nm.keys[s] = m->keys[i];
		nm.vals[s] = m->vals[i];
		nm.n++;
	}
	graph_namemap_free(m);
	*m = nm;
	return 0;
}

int graph_namemap_put(graph_namemap *m, const char *key, int val)
{
	size_t s;
	int rc;

	/* Half full at most, so probe runs stay short. */
	if ((m->n + 1) * 2 > m->cap) {
		rc = namemap_grow(m);
		if (rc < 0)
			return rc;
	}
	s = namemap_slot(m, key);
	if (m->keys[s])
		return 1;
	m->keys[s] = key;
	m->vals[s] = val;
	m->n++;
	return 0;
}

int graph_namemap_get(const graph_namemap *m, const char *key)
{
	size_t s;

	if (!m->cap || !key)
		return -1;
	s = namemap_slot(m, key);
	return m->keys[s] ? m->vals[s] : -1;
}

void graph_namemap_free(graph_namemap *m)
{
	free(m->keys);
	free(m->vals);
	memset(m, 0, sizeof(*m));
}

/* ---- look-ups ---------------------------------------------------------- */

int graph_find_value(const graph *g, const char *name)
{
	return g ? graph_namemap_get(&g->index, name) : -1;
}

int64_t graph_opset(const graph *g, const char *domain)
{
	size_t i;

	if (!domain || strcmp(domain, "ai.onnx") == 0)
		domain = "";
	for (i = 0; g && i < g->n_opsets; i++)
		if (strcmp(g->opsets[i].domain, domain) == 0)
			return g->opsets[i].version;
	return 0;
}

static const struct {
	const char *name;
	size_t size;
} dtypes[] = {
	[DT(UNDEFINED)] = { "undefined", 0 }, [DT(FLOAT)] = { "float32", 4 },
	[DT(UINT8)] = { "uint8", 1 },         [DT(INT8)] = { "int8", 1 },
	[DT(UINT16)] = { "uint16", 2 },       [DT(INT16)] = { "int16", 2 },
	[DT(INT32)] = { "int32", 4 },         [DT(INT64)] = { "int64", 8 },
	[DT(STRING)] = { "string", 0 },       [DT(BOOL)] = { "bool", 1 },
	[DT(FLOAT16)] = { "float16", 2 },     [DT(DOUBLE)] = { "float64", 8 },
	[DT(UINT32)] = { "uint32", 4 },       [DT(UINT64)] = { "uint64", 8 },
	[DT(COMPLEX64)] = { "complex64", 8 }, [DT(COMPLEX128)] = { "complex128", 16 },
	[DT(BFLOAT16)] = { "bfloat16", 2 },
};

size_t graph_dtype_size(int32_t elem_type)
{
	if (elem_type < 0 || (size_t)elem_type >= sizeof(dtypes) / sizeof(dtypes[0]))
		return 0;
	return dtypes[elem_type].size;
}

const char *graph_dtype_name(int32_t elem_type)
{
	if (elem_type < 0 || (size_t)elem_type >= sizeof(dtypes) / sizeof(dtypes[0]))
		return "unknown";
	return dtypes[elem_type].name;
}

size_t graph_attr_ints(const Onnx__NodeProto *n, const char *name, const int64_t **v)
{
	const Onnx__AttributeProto *a = proto_attr(n, name);

	*v = a ? a->ints : NULL;
	return a ? a->n_ints : 0;
}

const char *graph_attr_string(const Onnx__NodeProto *n, const char *name, const char *dflt)
{
	const Onnx__AttributeProto *a = proto_attr(n, name);

	if (!a || !a->has_s)
		return dflt;
	return a->s.data ? (const char *)a->s.data : "";
}

/* ---- initializer data -------------------------------------------------- */

static void fmt_shape(char *buf, size_t n, const Onnx__TensorProto *t)
{
	size_t i, at = 0;

	at += (size_t)snprintf(buf, n, "[");
	for (i = 0; i < t->n_dims && at < n; i++)
		at += (size_t)snprintf(buf + at, n - at, "%s%" PRId64,
				       i ? "," : "", t->dims[i]);
	if (at < n)
		snprintf(buf + at, n - at, "]");
}

/* The message for every size mismatch, inline or external. */
static int size_mismatch(const Onnx__TensorProto *t, const char *what,
			 uint64_t have, uint64_t want, char *err, size_t errlen)
{
	char shape[128];

	fmt_shape(shape, sizeof(shape), t);
	return errf(err, errlen, -EINVAL,
		    "initializer '%s': %" PRIu64 " bytes of %s for shape %s %s (%" PRIu64 " bytes)",
		    t->name, have, what, shape, graph_dtype_name(t->data_type), want);
}

/* Bytes the dims and dtype call for; -EINVAL for a negative dim or overflow. */
static int shape_bytes(const Onnx__TensorProto *t, size_t esize, uint64_t *out)
{
	uint64_t n = esize;
	size_t i;

	for (i = 0; i < t->n_dims; i++) {
		if (t->dims[i] < 0)
			return -EINVAL;
		if (t->dims[i] && n > UINT64_MAX / (uint64_t)t->dims[i])
			return -EINVAL;
		n *= (uint64_t)t->dims[i];
	}
	*out = n;
	return 0;
}

static int decode_typed(graph_init *init, const Onnx__TensorProto *t,
			uint64_t want, char *err, size_t errlen)
{
	size_t count, unit;
	uint8_t *out;

	if (proto_typed_field(t, &count, &unit) < 0)
		return errf(err, errlen, -EINVAL, "initializer '%s': unsupported data type %d",
			    t->name, (int)t->data_type);
	if ((uint64_t)count * unit != want)
		return size_mismatch(t, "data", (uint64_t)count * unit, want, err, errlen);
	if (want == 0)
		return 0;
	out = malloc(want);
	if (!out)
		return errf(err, errlen, -ENOMEM, "initializer '%s': out of memory", t->name);
	proto_typed_copy(t, out);
	init->owned = out;
	init->data = out;
	init->nbytes = want;
	return 0;
}

typedef struct ext_ref {
	const char *location;
	uint64_t offset, length;
	int has_length;
} ext_ref;

static int ext_parse(const Onnx__TensorProto *t, ext_ref *r, char *err, size_t errlen)
{
	const Onnx__StringStringEntryProto *e;
	size_t i;

	memset(r, 0, sizeof(*r));
	for (i = 0; i < t->n_external_data; i++) {
		e = t->external_data[i];
		if (!e->key || !e->value)
			continue;
		if (strcmp(e->key, "location") == 0)
			r->location = e->value;
		else if (strcmp(e->key, "offset") == 0 && proto_parse_u64(e->value, &r->offset) < 0)
			return errf(err, errlen, -EINVAL, "initializer '%s': external data offset '%s' is not a number",
				    t->name, e->value);
		else if (strcmp(e->key, "length") == 0) {
			if (proto_parse_u64(e->value, &r->length) < 0)
				return errf(err, errlen, -EINVAL, "initializer '%s': external data length '%s' is not a number",
					    t->name, e->value);
			r->has_length = 1;
		}
	}
	if (!r->location || !*r->location)
		return errf(err, errlen, -EINVAL, "initializer '%s': external data has no location", t->name);
	return 0;
}

/* Resolves `loc` inside the model directory (proto_external_resolve). */
static int ext_resolve(graph *g, const char *name, const char *loc, char **real,
		       char *err, size_t errlen)
{
	char who[320];

	*real = NULL;
	if (!g->model_dir)
		return errf(err, errlen, -EINVAL, "initializer '%s': external data '%s' needs a model directory (model loaded from memory)",
			    name, loc);
	snprintf(who, sizeof(who), "initializer '%s'", name);
	return proto_external_resolve(g->model_dir, &g->model_dir_real, who, loc, real, err,
				      errlen);
}

static int files_reserve(graph *g)
{
	size_t cap = g->files_cap ? g->files_cap * 2 : 4;
	graph_file *f;

	if (g->n_files < g->files_cap)
		return 0;
	f = realloc(g->files, cap * sizeof(*f));
	if (!f)
		return -ENOMEM;
	g->files = f;
	g->files_cap = cap;
	return 0;
}

/* Opens the resolved file unless an earlier initializer already did. */
static int ext_open(graph *g, const char *name, const char *loc, int *file,
		    char *err, size_t errlen)
{
	graph_file *f;
	struct stat st;
	char *real;
	int rc;

	rc = ext_resolve(g, name, loc, &real, err, errlen);
	if (rc < 0)
		return rc;
	*file = graph_namemap_get(&g->file_index, real);
	if (*file >= 0)
		goto out;
	if (files_reserve(g) < 0) {
		rc = errf(err, errlen, -ENOMEM, "initializer '%s': out of memory", name);
		goto out;
	}
	f = &g->files[g->n_files];
	f->fd = proto_external_open(g->model_dir_real, real);
	if (f->fd < 0) {
		rc = errf(err, errlen, f->fd, "initializer '%s': external data file '%s': %s",
			  name, loc, strerror(-f->fd));
		goto out;
	}
	f->path = real;
	f->location = strdup(loc);
	real = NULL;
	*file = (int)g->n_files++;
	if (!f->location || graph_namemap_put(&g->file_index, f->path, *file) < 0) {
		rc = errf(err, errlen, -ENOMEM, "initializer '%s': out of memory", name);
		goto out;
	}
	if (fstat(f->fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		rc = errf(err, errlen, -EINVAL, "initializer '%s': external data '%s' is not a regular file",
			  name, loc);
		goto out;
	}
	f->size = (uint64_t)st.st_size;
out:
	free(real);
	return rc;
}

static int load_external(graph *g, graph_init *init, const Onnx__TensorProto *t,
			 uint64_t want, char *err, size_t errlen)
{
	const graph_file *f;
	ext_ref r;
	int rc;

	rc = ext_parse(t, &r, err, errlen);
	if (rc < 0)
		return rc;
	rc = ext_open(g, t->name, r.location, &init->file, err, errlen);
	if (rc < 0)
		return rc;
	f = &g->files[init->file];
	if (r.offset > f->size)
		return errf(err, errlen, -EINVAL, "initializer '%s': external data offset %" PRIu64 " is past the end of '%s' (%" PRIu64 " bytes)",
			    t->name, r.offset, r.location, f->size);
	/* Compared against the room left, so offset + length cannot overflow. */
	if (r.has_length && r.length > f->size - r.offset)
		return errf(err, errlen, -EINVAL, "initializer '%s': external data at offset %" PRIu64 " length %" PRIu64 " runs past the end of '%s' (%" PRIu64 " bytes)",
			    t->name, r.offset, r.length, r.location, f->size);
	if (!r.has_length)
		r.length = f->size - r.offset;
	if (r.length != want)
		return size_mismatch(t, "external data", r.length, want, err, errlen);
	init->external = 1;
	init->offset = r.offset;
	init->nbytes = r.length;
	return 0;
}

/* What an empty initializer's data points at. */
static const uint8_t empty_data[1];

int graph_init_load(graph *g, int vi, const Onnx__TensorProto *t,
		    char *err, size_t errlen)
{
	graph_init *init = &g->values[vi].init;
	size_t esize = graph_dtype_size(t->data_type);
	uint64_t want;

	memset(init, 0, sizeof(*init));
	init->file = -1;
	init->alias = -1;
	/* String tensors have no fixed-size layout; their consumers read the
	 * proto's string_data directly. */
	if (t->data_type == DT(STRING))
		return 0;
	if (esize == 0)
		return errf(err, errlen, -EINVAL, "initializer '%s': unsupported data type %d",
			    t->name, (int)t->data_type);
	if (t->segment)
		return errf(err, errlen, -EINVAL, "initializer '%s': segmented tensors are not supported", t->name);
	if (shape_bytes(t, esize, &want) < 0)
		return errf(err, errlen, -EINVAL, "initializer '%s': invalid shape (negative or overflowing dims)", t->name);
	if (t->has_data_location && t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL)
		return load_external(g, init, t, want, err, errlen);
	if (!t->has_raw_data) {
		int rc = decode_typed(init, t, want, err, errlen);

		/* An empty tensor (a [0] shape ONNX Runtime's folding leaves) is
		 * still a value: data must not read as "none". */
		if (rc == 0 && !init->data && want == 0)
			init->data = empty_data;
		return rc;
	}
	if (t->raw_data.len != want)
		return size_mismatch(t, "data", t->raw_data.len, want, err, errlen);
	init->data = want ? t->raw_data.data : empty_data;
	init->nbytes = want;
	return 0;
}

/* ---- teardown ---------------------------------------------------------- */

void graph_free(graph *g)
{
	size_t i;

	if (!g)
		return;
	for (i = 0; i < g->n_nodes; i++) {
		free(g->nodes[i].in);
		free(g->nodes[i].out);
		free(g->nodes[i].implicit);
	}
	free(g->nodes);
	for (i = 0; i < g->n_values; i++) {
		free(g->values[i].name);
		free(g->values[i].init.owned);
	}
	free(g->values);
	for (i = 0; i < g->n_files; i++) {
		if (g->files[i].fd >= 0)
			close(g->files[i].fd);
		free(g->files[i].location);
		free(g->files[i].path);
	}
	free(g->files);
	for (i = 0; i < g->n_opsets; i++)
		free(g->opsets[i].domain);
	free(g->opsets);
	for (i = 0; i < (size_t)g->n_symbols; i++)
		free(g->symbols[i]);
	free(g->symbols);
	free(g->inputs);
	free(g->outputs);
	graph_namemap_free(&g->index);
	graph_namemap_free(&g->file_index);
	if (g->model)
		onnx__model_proto__free_unpacked(g->model, NULL);
	if (g->map)
		munmap(g->map, g->map_size);
	free(g->model_dir_real);
	free(g->model_dir);
	free(g);
}
