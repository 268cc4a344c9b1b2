/*
 * onnx_dims: collect ModelProto.graph.input[*].type.tensor_type.shape
 * .dim[*].dim_param from an .onnx file, for ort-run's --dim.
 *
 * Just enough protobuf for that path; every other field is skipped by its
 * wire type, so the (possibly huge) initializers cost nothing but a jump.
 * The file is mapped, not read.
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "onnx_dims.h"

/* Field numbers in onnx.proto. */
enum {
	MODEL_GRAPH = 7, GRAPH_INPUT = 11, VALUE_INFO_NAME = 1, VALUE_INFO_TYPE = 2,
	TYPE_TENSOR = 1, TENSOR_SHAPE = 2, SHAPE_DIM = 1, DIM_PARAM = 2,
};

typedef struct pb {
	const uint8_t *p, *end;
} pb;

static int pb_varint(pb *b, uint64_t *v)
{
	*v = 0;
	for (int s = 0; s < 64 && b->p < b->end; s += 7) {
		uint8_t c = *b->p++;
		*v |= (uint64_t)(c & 0x7f) << s;
		if (!(c & 0x80))
			return 1;
	}
	return 0;
}

/* Reads the next field: 1 with its number (and payload in *sub when
 * length-delimited, else sub->p == NULL), 0 at the end, -1 when malformed. */
static int pb_next(pb *b, uint64_t *field, pb *sub)
{
	uint64_t key, len;

	if (b->p >= b->end)
		return 0;
	if (!pb_varint(b, &key))
		return -1;
	*field = key >> 3;
	sub->p = sub->end = NULL;
	switch (key & 7) {
	case 0: return pb_varint(b, &len) ? 1 : -1;
	case 1: len = 8; break;
	case 5: len = 4; break;
	case 2:
		if (!pb_varint(b, &len))
			return -1;
		break;
	default: return -1; /* groups: not in onnx.proto */
	}
	if (len > (uint64_t)(b->end - b->p))
		return -1;
	if ((key & 7) == 2)
		*sub = (pb){ b->p, b->p + len };
	b->p += len;
	return 1;
}

/* The first length-delimited field `want` of b. */
static int pb_find(pb b, uint64_t want, pb *out)
{
	uint64_t f;
	pb sub;

	while (pb_next(&b, &f, &sub) == 1)
		if (f == want && sub.p) {
			*out = sub;
			return 1;
		}
	return 0;
}

static int add(onnx_dims *d, pb name, size_t index, pb param)
{
	if (d->n == d->cap) {
		size_t cap = d->cap ? 2 * d->cap : 16;
		onnx_dim *v = realloc(d->v, cap * sizeof *v);
		if (!v)
			return 0;
		d->v = v;
		d->cap = cap;
	}
	onnx_dim *s = &d->v[d->n];
	s->input = strndup((const char *)name.p, (size_t)(name.end - name.p));
	s->param = strndup((const char *)param.p, (size_t)(param.end - param.p));
	s->index = index;
	if (!s->input || !s->param) {
		free(s->input);
		free(s->param);
		return 0;
	}
	d->n++;
	return 1;
}

static int scan_input(onnx_dims *d, pb vi)
{
	pb name, type, tensor, shape, dim, param;
	uint64_t f;
	size_t index = 0;

	if (!pb_find(vi, VALUE_INFO_NAME, &name) || !pb_find(vi, VALUE_INFO_TYPE, &type) ||
	    !pb_find(type, TYPE_TENSOR, &tensor) || !pb_find(tensor, TENSOR_SHAPE, &shape))
		return 1; /* no shape: nothing symbolic */
	while (pb_next(&shape, &f, &dim) == 1) {
		if (f != SHAPE_DIM || !dim.p)
			continue;
		if (pb_find(dim, DIM_PARAM, &param) && param.end > param.p &&
		    !add(d, name, index, param))
			return 0;
		index++;
	}
	return 1;
}

void onnx_dims_load(const char *path, onnx_dims *d)
{
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	*d = (onnx_dims){ 0 };
	if (fd < 0)
		return;
	if (fstat(fd, &st) || st.st_size <= 0) {
		close(fd);
		return;
	}
	void *map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (map == MAP_FAILED)
		return;
	pb model = { map, (const uint8_t *)map + st.st_size }, graph, vi;
	uint64_t f;
	if (pb_find(model, MODEL_GRAPH, &graph))
		while (pb_next(&graph, &f, &vi) == 1)
			if (f == GRAPH_INPUT && vi.p && !scan_input(d, vi))
				break;
	munmap(map, (size_t)st.st_size);
}

const char *onnx_dims_lookup(const onnx_dims *d, const char *input, size_t index)
{
	for (size_t i = 0; i < d->n; i++)
		if (d->v[i].index == index && !strcmp(d->v[i].input, input))
			return d->v[i].param;
	return NULL;
}

bool onnx_dims_has(const onnx_dims *d, const char *param)
{
	for (size_t i = 0; i < d->n; i++)
		if (!strcmp(d->v[i].param, param))
			return true;
	return false;
}

void onnx_dims_free(onnx_dims *d)
{
	for (size_t i = 0; i < d->n; i++) {
		free(d->v[i].input);
		free(d->v[i].param);
	}
	free(d->v);
	*d = (onnx_dims){ 0 };
}
