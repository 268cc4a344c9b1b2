/*
 * graph: ortmk's in-memory model.  The loader (loader.c) parses a ModelProto
 * with protobuf-c and builds this IR: values (inputs, initializers,
 * activations), nodes in topological order with their implicit inputs (outer
 * values that a subgraph attribute reads), and the external-data files the
 * initializers live in, opened and bounds-checked.  Subgraph attributes stay
 * inside the NodeProtos: the provider that runs an If/Loop/Scan executes them.
 *
 * Shape inference (shape.c) works on a separate per-value table
 * (graph_tinfo) so one graph can be inferred for many input-shape signatures.
 *
 * Called by the session (session.c) and by tests.
 */
#ifndef ORTMK_GRAPH_H
#define ORTMK_GRAPH_H

#include <stddef.h>
#include <stdint.h>

#include "node_attr.h"
#include "onnx.pb-c.h"

#define GRAPH_MAX_RANK 16
/* The newest ai.onnx opset whose semantics the providers' kernels follow
 * (CPU_OPSET_MAX in providers/cpu): a model importing a newer one is
 * refused at load, saying so, rather than node by node. */
#define GRAPH_ONNX_OPSET_MAX 24

enum graph_value_kind {
	GRAPH_VALUE_INPUT,        /* graph input fed by the user */
	GRAPH_VALUE_INITIALIZER,  /* constant weight (may also be a graph input) */
	GRAPH_VALUE_ACTIVATION,   /* produced by a node */
};

/* Where an initializer's bytes are.  Inline data points into the parsed
 * model (raw_data) or into `owned` (typed *_data fields converted to the
 * little-endian raw layout).  External data names a file of graph.files. */
typedef struct graph_init {
	int external;
	const void *data;       /* inline: bytes; NULL for external */
	void *owned;            /* inline: buffer the loader allocated, or NULL */
	uint64_t nbytes;
	int file;               /* external: index into graph.files */
	uint64_t offset;        /* external: offset inside the file */
	int alias;              /* these are the bytes of initializer `alias`
				 * (graph_fold), or -1 */
} graph_init;

typedef struct graph_value {
	char *name;
	enum graph_value_kind kind;
	int32_t elem_type;        /* onnx TensorProto.DataType; 0 = unknown */
	int is_tensor;            /* 0 for sequence/optional/map types */
	/* Declared shape (graph input/output value_info or initializer dims):
	 * rank -1 = unknown; dims[i] >= 0 known, < 0 a symbol (same symbol name,
	 * same negative id). */
	int rank;
	int64_t dims[GRAPH_MAX_RANK];
	int producer;             /* node index, -1 for inputs/initializers */
	int is_graph_output;
	graph_init init;          /* valid when kind == GRAPH_VALUE_INITIALIZER */
	const Onnx__TypeProto *type;  /* declared type, may be NULL */
} graph_value;

typedef struct graph_node {
	const Onnx__NodeProto *proto;
	const char *op_type;
	const char *domain;       /* "" for the default domain */
	int64_t opset;            /* version of `domain` the model imports */
	int n_in, n_out, n_implicit;
	int *in;                  /* value index, -1 for an omitted optional input */
	int *out;                 /* value index, -1 for an omitted optional output */
	int *implicit;            /* outer values read by subgraph attributes */
	int ep;                   /* provider index chosen by the partitioner */
} graph_node;

typedef struct graph_file {
	char *location;           /* as written in the model, validated */
	char *path;               /* realpath of the file: the dedup key */
	int fd;                   /* opened O_RDONLY|O_CLOEXEC by the loader */
	uint64_t size;
} graph_file;

/* Open-addressing map from a name to a non-negative int: the value index,
 * the external-file index and the loader's scopes.  Keys are borrowed: they
 * must outlive the map.  A zeroed struct is an empty map. */
typedef struct graph_namemap {
	const char **keys;
	int *vals;
	size_t cap;               /* power of two, 0 before the first put */
	size_t n;
} graph_namemap;

/* Named _import because graph_opset() is the look-up function: a typedef
 * and a function cannot share a name in C. */
typedef struct graph_opset_import {
	char *domain;             /* "" for the default domain (and "ai.onnx") */
	int64_t version;
} graph_opset_import;

typedef struct graph {
	Onnx__ModelProto *model;  /* owns every proto pointer above */
	void *map;                /* mapping of the model file */
	size_t map_size;
	char *model_dir;
	graph_value *values;
	size_t n_values;
	graph_node *nodes;        /* stored in topological order */
	size_t n_nodes;
	int *inputs;              /* user-fed inputs (initializers excluded) */
	size_t n_inputs;
	int *outputs;
	size_t n_outputs;
	graph_file *files;
	size_t n_files;
	graph_opset_import *opsets;
	size_t n_opsets;
	int n_symbols;            /* symbolic dims are -1 .. -n_symbols */
	char **symbols;           /* name of symbol -(i+1), NULL when anonymous */
	graph_namemap index;      /* value name -> index into values */
	graph_namemap file_index; /* graph_file.path -> index into files */
	size_t files_cap;
	char *model_dir_real;     /* realpath(model_dir), set on first external */
} graph;

/* Parses and validates the model at `path`.  On failure returns a negative
 * errno-style code and writes a one-line message naming the culprit (node,
 * tensor, file) into err. */
int graph_load(const char *path, graph **out, char *err, size_t errlen);
/* Same from bytes in memory; external data resolves against `model_dir`
 * (NULL: external data refused).  Copies `bytes`. */
int graph_load_bytes(const void *bytes, size_t n, const char *model_dir,
		     graph **out, char *err, size_t errlen);
void graph_free(graph *g);

/* Index of the value named `name`, -1 when there is none. */
int graph_find_value(const graph *g, const char *name);
/* Opset version the model imports for `domain` ("" and "ai.onnx" are the
 * same domain); 0 when the model does not import it. */
int64_t graph_opset(const graph *g, const char *domain);

/* Element size in bytes of an ONNX data type; 0 for unknown or string. */
size_t graph_dtype_size(int32_t elem_type);
const char *graph_dtype_name(int32_t elem_type);

/* Attribute look-ups on a node: proto/node_attr.h (proto_attr, ...); two
 * more for what the loader guarantees. */
/* Returns the number of ints (0 when absent) and points *v at them. */
size_t graph_attr_ints(const Onnx__NodeProto *n, const char *name, const int64_t **v);
/* The loader NUL-terminates STRING and STRINGS attributes of every node,
 * subgraphs included, so their bytes read as C strings. */
const char *graph_attr_string(const Onnx__NodeProto *n, const char *name, const char *dflt);

/* Loader internals (graph.c, used by loader.c). */
/* 0 when added, 1 when `key` is already there (left unchanged), -ENOMEM. */
int graph_namemap_put(graph_namemap *m, const char *key, int val);
int graph_namemap_get(const graph_namemap *m, const char *key);  /* -1 absent */
void graph_namemap_free(graph_namemap *m);
/* Fills values[vi].init from initializer `t` (dims already copied into the
 * value): inline bytes, typed fields converted to the raw layout, or an
 * external-data file opened once and bounds-checked.  Never reads external
 * bytes.  Returns 0 or a negative code with a message naming the tensor. */
/* graph_fold.c: Constant nodes and Identity nodes of initializers become
 * initializers and leave graph.nodes (see the file).  0 or -errno. */
int graph_fold(graph *g, char *err, size_t errlen);
struct graph_tinfo;
/* Nodes whose outputs t (an inference with the model's own, possibly
 * symbolic, input shapes) knows as integer data become initializers of
 * that data and leave graph.nodes, with the nodes then read by nothing.
 * 0 or -ENOMEM. */
int graph_fold_known(graph *g, const struct graph_tinfo *t);

int graph_init_load(graph *g, int vi, const Onnx__TensorProto *t,
		    char *err, size_t errlen);

/*
 * Per-value type/shape facts for one inference pass.  Known data is kept for
 * small integer tensors (shape arithmetic: Shape, Gather, Concat, ...) so
 * Reshape targets computed in the graph resolve to static shapes.
 */
#define GRAPH_TINFO_MAX_DATA 64

typedef struct graph_tinfo {
	int32_t elem_type;        /* 0 unknown */
	int rank;                 /* -1 unknown */
	int64_t dims[GRAPH_MAX_RANK];   /* >= 0 known; < 0 symbolic/unknown */
	int has_data;             /* data[] holds the whole tensor (int64 view) */
	int64_t ndata;
	int64_t data[GRAPH_TINFO_MAX_DATA];
} graph_tinfo;

/* Fills tinfo[] for every value: inputs/initializers from the model (callers
 * may overwrite input entries with concrete shapes first and pass
 * inputs_set = 1).  Unknown dims get fresh negative ids starting below
 * *next_sym (updated).  Returns 0, or a negative code with a message naming
 * the node when types or shapes are inconsistent. */
int shape_infer(const graph *g, graph_tinfo *tinfo, int inputs_set,
		int *next_sym, char *err, size_t errlen);
/* Initial facts for inputs and initializers only. */
void shape_seed(const graph *g, graph_tinfo *tinfo);
/* 1 when every dim is known (>= 0). */
int graph_tinfo_static(const graph_tinfo *t);
int64_t graph_tinfo_numel(const graph_tinfo *t);  /* -1 when not static */

#endif
