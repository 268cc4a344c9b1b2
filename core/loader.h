/*
 * loader.h: what the two halves of the ONNX loader share (loader.c: entry
 * points, model header, values; loader_nodes.c: nodes, implicit inputs,
 * topological order).  Internal to core/: graph.h is the loader's
 * interface for everyone else.
 */
#ifndef ORTMK_LOADER_H
#define ORTMK_LOADER_H

#include <stddef.h>
#include <string.h>

#include "graph.h"

/* Deep enough for real models (If inside Loop inside Scan), shallow enough
 * that a hostile model cannot exhaust the stack through our recursion. */
#define MAX_SUBGRAPH_DEPTH 64

typedef struct load_ctx {
	graph *g;
	const Onnx__GraphProto *gp;
	const char *label;        /* model path, or "model" for bytes */
	graph_namemap symbols;    /* dim_param -> symbol index */
	size_t symbols_cap;
	char *err;
	size_t errlen;
} load_ctx;

/* Formats the load error into c->err; returns code. */
int load_fail(load_ctx *c, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* "node 'name' (Op)", or "node #i (Op)" for unnamed nodes, into buf. */
const char *load_node_label(const load_ctx *c, size_t i, char *buf, size_t n);

/* Builds g->nodes from the GraphProto's nodes (inputs resolved, implicit
 * inputs found) and sorts them topologically; needs the values built. */
int load_nodes(load_ctx *c);

/* loader_slim.c: initializers whose raw_data has at least this many bytes
 * become external data of the model file itself (see there why). */
#define LOADER_SLIM_MIN ((size_t)64 << 10)

/* The ModelProto s[0..n) rewritten with each large embedded initializer
 * as external data at its offset in `file` (the model's own file name,
 * beside it), into *out (malloc'd, *out_n bytes).  Returns how many were
 * rewritten; 0 (and *out NULL) when none were, or when the walk met
 * anything it does not expect (the model is then parsed as it is). */
int loader_slim(const uint8_t *s, size_t n, const char *file, uint8_t **out, size_t *out_n);

/* "ai.onnx" and no domain are the default domain, "". */
static inline const char *load_norm_domain(const char *d)
{
	return (!d || strcmp(d, "ai.onnx") == 0) ? "" : d;
}

static inline int load_empty(const char *s)
{
	return !s || !*s;
}

#endif
