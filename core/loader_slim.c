/*
 * loader_slim.c: large embedded weights as external data of the model file
 * itself, so that they never pass through the application's memory.
 *
 * A model that embeds its weights (every model under 2 GB PyTorch
 * exports) would otherwise be parsed whole by protobuf-c, which copies each
 * raw_data field into its own allocation, and then copied once more into
 * the shared-memory segment the provider maps: at the peak the application
 * holds the file's pages, the parsed copy and the segment (ViT-B/16: 670 MB
 * for 330 MB of weights).  Before parsing, graph_load walks the protobuf
 * wire format of the mapped file (ModelProto.graph -> GraphProto.initializer
 * -> TensorProto.raw_data) and writes a copy of the model in which each
 * initializer's raw_data of at least LOADER_SLIM_MIN bytes is replaced by
 * what ONNX's external data says: data_location EXTERNAL, location the
 * model's own file name, offset and length of the bytes inside it.  From
 * there the external-data path does the rest (resolved beneath the model
 * directory, opened without following symlinks, bounds-checked, handed to
 * the provider as a descriptor): the provider reads the bytes from the file
 * and the application never does.
 *
 * Anything unexpected in the walk (a truncated field, a group, a second
 * graph field, an initializer that already has external data) leaves the
 * model as it is: the parser then reports the problem, or loads it the
 * usual way.  Small initializers stay embedded: shape inference and
 * constant folding in the core read them.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loader.h"

typedef struct slim_buf {
	uint8_t *p;
	size_t n, cap;
	int failed;
} slim_buf;

static void put(slim_buf *b, const void *src, size_t n)
{
	if (b->failed || n == 0)
		return;   /* an empty graph has no buffer at all (src NULL) */
	if (b->n + n > b->cap) {
		size_t cap = b->cap ? b->cap : 4096;
		uint8_t *p;

		while (cap < b->n + n)
			cap *= 2;
		p = realloc(b->p, cap);
		if (!p) {
			b->failed = 1;
			return;
		}
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->n, src, n);
	b->n += n;
}

static void put_varint(slim_buf *b, uint64_t v)
{
	uint8_t t[10];
	size_t n = 0;

	do {
		t[n++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
		v >>= 7;
	} while (v);
	put(b, t, n);
}

/* A varint at *pos (< end), or -1 when it runs past end or over 10 bytes. */
static int get_varint(const uint8_t *s, size_t *pos, size_t end, uint64_t *v)
{
	*v = 0;
	for (int shift = 0; shift < 64 && *pos < end; shift += 7) {
		uint8_t c = s[(*pos)++];

		*v |= (uint64_t)(c & 0x7f) << shift;
		if (!(c & 0x80))
			return 0;
	}
	return -1;
}

/* One field at *pos: its number, wire type and the range of its payload
 * (for LEN fields the bytes after the length).  -1 when malformed or a
 * group. */
typedef struct slim_field {
	uint32_t number, wire;
	size_t start, body, end;   /* tag start, payload start, field end */
} slim_field;

static int next_field(const uint8_t *s, size_t *pos, size_t end, slim_field *f)
{
	uint64_t tag, len;

	f->start = *pos;
	if (get_varint(s, pos, end, &tag) || (tag >> 3) == 0 || (tag >> 3) > UINT32_MAX)
		return -1;
	f->number = (uint32_t)(tag >> 3);
	f->wire = (uint32_t)(tag & 7);
	switch (f->wire) {
	case 0:
		f->body = *pos;
		if (get_varint(s, pos, end, &len))
			return -1;
		break;
	case 1:
	case 5:
		f->body = *pos;
		len = f->wire == 1 ? 8 : 4;
		if (len > end - *pos)
			return -1;
		*pos += len;
		break;
	case 2:
		if (get_varint(s, pos, end, &len) || len > end - *pos)
			return -1;
		f->body = *pos;
		*pos += len;
		break;
	default:
		return -1;   /* groups (3, 4) and reserved types */
	}
	f->end = *pos;
	return 0;
}

static void put_len_field(slim_buf *b, uint32_t number, const void *p, size_t n)
{
	put_varint(b, (uint64_t)number << 3 | 2);
	put_varint(b, n);
	put(b, p, n);
}

/* StringStringEntryProto {key, value} as TensorProto.external_data (13). */
static void put_entry(slim_buf *b, const char *key, const char *value)
{
	slim_buf e = {0};

	put_len_field(&e, 1, key, strlen(key));
	put_len_field(&e, 2, value, strlen(value));
	if (e.failed)
		b->failed = 1;
	else
		put_len_field(b, 13, e.p, e.n);
	free(e.p);
}

/* The TensorProto at [body, end) of the file, rewritten into b when its
 * raw_data is large: 1 when rewritten, 0 when it is to be copied as is,
 * -1 when malformed. */
static int slim_tensor(const uint8_t *s, size_t body, size_t end, const char *file,
		       slim_buf *b)
{
	slim_field f, raw = {0};
	size_t pos = body;
	char num[32];

	while (pos < end) {
		if (next_field(s, &pos, end, &f))
			return -1;
		if (f.number == 13 || f.number == 14)
			return 0;   /* already external (or says where its data is) */
		if (f.number == 9 && f.wire == 2)
			raw = f;
	}
	if (!raw.number || raw.end - raw.body < LOADER_SLIM_MIN)
		return 0;
	pos = body;
	while (pos < end) {
		next_field(s, &pos, end, &f);
		if (f.start != raw.start)
			put(b, s + f.start, f.end - f.start);
	}
	put_entry(b, "location", file);
	snprintf(num, sizeof(num), "%zu", raw.body);
	put_entry(b, "offset", num);
	snprintf(num, sizeof(num), "%zu", raw.end - raw.body);
	put_entry(b, "length", num);
	put_varint(b, 14 << 3 | 0);
	put_varint(b, 1);   /* TensorProto.DataLocation.EXTERNAL */
	return 1;
}

/* The GraphProto at [body, end) into g, initializers (5) slimmed; the
 * number rewritten, or -1. */
static long slim_graph(const uint8_t *s, size_t body, size_t end, const char *file, slim_buf *g)
{
	size_t pos = body;
	long count = 0;
	slim_field f;

	while (pos < end) {
		slim_buf t = {0};
		int r = 0;

		if (next_field(s, &pos, end, &f))
			return -1;
		if (f.number == 5 && f.wire == 2)
			r = slim_tensor(s, f.body, f.end, file, &t);
		if (r < 0 || t.failed) {
			free(t.p);
			return -1;
		}
		if (r == 1)
			put_len_field(g, 5, t.p, t.n);
		else
			put(g, s + f.start, f.end - f.start);
		count += r;
		free(t.p);
	}
	return g->failed ? -1 : count;
}

int loader_slim(const uint8_t *s, size_t n, const char *file, uint8_t **out, size_t *out_n)
{
	slim_buf m = {0}, g = {0};
	size_t pos = 0;
	long count = 0;
	int graphs = 0;
	slim_field f;

	*out = NULL;
	*out_n = 0;
	while (pos < n) {
		if (next_field(s, &pos, n, &f))
			goto keep;
		if (f.number != 7 || f.wire != 2) {
			put(&m, s + f.start, f.end - f.start);
			continue;
		}
		if (graphs++)
			goto keep;   /* a second graph field merges with the first */
		g.n = 0;
		if ((count = slim_graph(s, f.body, f.end, file, &g)) < 0)
			goto keep;
		put_len_field(&m, 7, g.p, g.n);
	}
	if (m.failed || count == 0)
		goto keep;
	free(g.p);
	*out = m.p;
	*out_n = m.n;
	return (int)(count > INT32_MAX ? INT32_MAX : count);
keep:
	free(g.p);
	free(m.p);
	return 0;
}
