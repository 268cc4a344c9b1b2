/*
 * loader.c: turns an ONNX file (or bytes) into the graph IR of graph.h.
 * Parses the ModelProto with protobuf-c, then validates and indexes it:
 * opset imports, values (inputs, initializers, activations) with their
 * declared types and symbolic dims, nodes with resolved inputs and the
 * implicit inputs their subgraphs read, and a topological order.  A model is
 * untrusted input: every violation is a load error naming the node, tensor
 * or file, never a crash.  Called by the session and by tests.  This file
 * holds the entry points, the model header and the values; loader_nodes.c
 * the nodes, their implicit inputs and the topological order.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "external_path.h"
#include "loader.h"

int load_fail(load_ctx *c, int code, const char *fmt, ...)
{
	va_list ap;

	if (c->err && c->errlen) {
		va_start(ap, fmt);
		vsnprintf(c->err, c->errlen, fmt, ap);
		va_end(ap);
	}
	return code;
}

/* "node 'name' (Op)", or "node #i (Op)" for unnamed nodes; i is the index
 * in the model, which is what a user can find in a viewer. */
const char *load_node_label(const load_ctx *c, size_t i, char *buf, size_t n)
{
	const Onnx__NodeProto *np = c->gp->node[i];
	const char *op = np->op_type ? np->op_type : "?";

	if (!load_empty(np->name))
		snprintf(buf, n, "node '%s' (%s)", np->name, op);
	else
		snprintf(buf, n, "node #%zu (%s)", i, op);
	return buf;
}

/* ---- model header and opsets ------------------------------------------- */

static int add_opset(load_ctx *c, const char *domain, int64_t version)
{
	graph *g = c->g;
	graph_opset_import *o = &g->opsets[g->n_opsets];

	if (version < 1)
		return load_fail(c, -EINVAL, "%s: opset import for domain '%s' has no version", c->label, domain);
	if (graph_opset(g, domain) > 0)
		return load_fail(c, -EINVAL, "%s: domain '%s' is imported twice (opset_import)", c->label, domain);
	if (!domain[0] && version > GRAPH_ONNX_OPSET_MAX)
		return load_fail(c, -EINVAL, "%s: the model imports ai.onnx opset %lld, newer than ortmk "
				 "knows (up to opset %d); export it at opset %d or older", c->label,
				 (long long)version, GRAPH_ONNX_OPSET_MAX, GRAPH_ONNX_OPSET_MAX);
	o->domain = strdup(domain);
	if (!o->domain)
		return -ENOMEM;
	o->version = version;
	g->n_opsets++;
	return 0;
}

static int load_header(load_ctx *c)
{
	const Onnx__ModelProto *m = c->g->model;
	const Onnx__OperatorSetIdProto *op;
	size_t i;
	int rc = 0;

	if (!m->graph)
		return load_fail(c, -EINVAL, "%s: not an ONNX model (no graph)", c->label);
	if (!m->has_ir_version || m->ir_version < 1)
		return load_fail(c, -EINVAL, "%s: not an ONNX model (no ir_version)", c->label);
	c->gp = m->graph;
	c->g->opsets = calloc(m->n_opset_import + 1, sizeof(graph_opset_import));
	if (!c->g->opsets)
		return -ENOMEM;
	/* IR versions before 3 predate opset_import and mean opset 1. */
	if (m->n_opset_import == 0 && m->ir_version < 3)
		return add_opset(c, "", 1);
	if (m->n_opset_import == 0)
		return load_fail(c, -EINVAL, "%s: model imports no opset (opset_import is empty)", c->label);
	for (i = 0; i < m->n_opset_import && rc == 0; i++) {
		op = m->opset_import[i];
		rc = add_opset(c, load_norm_domain(op->domain), op->has_version ? op->version : 0);
	}
	return rc;
}

/* ---- values ------------------------------------------------------------ */

/* Adds a value whose name is known to be new; returns its index. */
static int add_value(load_ctx *c, const char *name, enum graph_value_kind kind, int producer)
{
	graph *g = c->g;
	int vi = (int)g->n_values;
	graph_value *v = &g->values[vi];
	int rc;

	memset(v, 0, sizeof(*v));
	v->name = strdup(name);
	if (!v->name)
		return -ENOMEM;
	v->kind = kind;
	v->is_tensor = 1;
	v->rank = -1;
	v->producer = producer;
	v->init.file = -1;
	v->init.alias = -1;
	g->n_values++;
	rc = graph_namemap_put(&g->index, v->name, vi);
	return rc < 0 ? rc : vi;
}

static const char *value_origin(const graph *g, int vi)
{
	switch (g->values[vi].kind) {
	case GRAPH_VALUE_INPUT:
		return "a graph input";
	case GRAPH_VALUE_INITIALIZER:
		return "an initializer";
	default:
		return "the output of another node";
	}
}

/* A symbolic dim: one id per dim_param name, a fresh one for a dim with
 * neither value nor name (ONNX: an unknown, unrelated size). */
static int dim_symbol(load_ctx *c, const Onnx__TensorShapeProto__Dimension *d, int64_t *out)
{
	graph *g = c->g;
	const char *name = NULL;
	char **syms;
	int s;

	if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM && !load_empty(d->dim_param))
		name = d->dim_param;
	s = name ? graph_namemap_get(&c->symbols, name) : -1;
	if (s < 0) {
		if ((size_t)g->n_symbols == c->symbols_cap) {
			c->symbols_cap = c->symbols_cap ? c->symbols_cap * 2 : 16;
			syms = realloc(g->symbols, c->symbols_cap * sizeof(*syms));
			if (!syms)
				return -ENOMEM;
			g->symbols = syms;
		}
		s = g->n_symbols;
		g->symbols[s] = name ? strdup(name) : NULL;
		if (name && !g->symbols[s])
			return -ENOMEM;
		g->n_symbols++;
		if (name && graph_namemap_put(&c->symbols, g->symbols[s], s) < 0)
			return -ENOMEM;
	}
	*out = -(int64_t)s - 1;
	return 0;
}

static int set_type(load_ctx *c, int vi, const Onnx__TypeProto *tp)
{
	graph_value *v = &c->g->values[vi];
	const Onnx__TypeProto__Tensor *tt;
	const Onnx__TensorShapeProto__Dimension *d;
	size_t i;
	int rc;

	v->type = tp;
	if (!tp || tp->value_case == ONNX__TYPE_PROTO__VALUE__NOT_SET)
		return 0;
	if (tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE) {
		v->is_tensor = 0;
		return 0;
	}
	tt = tp->tensor_type;
	v->elem_type = tt->has_elem_type ? tt->elem_type : 0;
	if (!tt->shape)
		return 0;
	if (tt->shape->n_dim > GRAPH_MAX_RANK)
		return load_fail(c, -EINVAL, "value '%s': rank %zu exceeds the maximum of %d",
			    v->name, tt->shape->n_dim, GRAPH_MAX_RANK);
	for (i = 0; i < tt->shape->n_dim; i++) {
		d = tt->shape->dim[i];
		if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE && d->dim_value >= 0) {
			v->dims[i] = d->dim_value;
			continue;
		}
		rc = dim_symbol(c, d, &v->dims[i]);
		if (rc < 0)
			return rc;
	}
	v->rank = (int)tt->shape->n_dim;
	return 0;
}

static int add_initializers(load_ctx *c)
{
	const Onnx__TensorProto *t;
	graph_value *v;
	size_t i, k;
	int vi;

	if (c->gp->n_sparse_initializer)
		return load_fail(c, -EINVAL, "%s: sparse initializers are not supported", c->label);
	for (i = 0; i < c->gp->n_initializer; i++) {
		t = c->gp->initializer[i];
		if (load_empty(t->name))
			return load_fail(c, -EINVAL, "%s: initializer #%zu has no name", c->label, i);
		if (graph_find_value(c->g, t->name) >= 0)
			return load_fail(c, -EINVAL, "initializer '%s' is defined twice", t->name);
		if (t->n_dims > GRAPH_MAX_RANK)
			return load_fail(c, -EINVAL, "initializer '%s': rank %zu exceeds the maximum of %d",
				    t->name, t->n_dims, GRAPH_MAX_RANK);
		vi = add_value(c, t->name, GRAPH_VALUE_INITIALIZER, -1);
		if (vi < 0)
			return vi;
		v = &c->g->values[vi];
		v->elem_type = t->data_type;
		v->rank = (int)t->n_dims;
		for (k = 0; k < t->n_dims; k++)
			v->dims[k] = t->dims[k];
		vi = graph_init_load(c->g, vi, t, c->err, c->errlen);
		if (vi < 0)
			return vi;
	}
	return 0;
}

/* Graph inputs.  One that is also an initializer (every initializer, before
 * IR 4) is a weight with a default, not something the user feeds. */
static int add_inputs(load_ctx *c)
{
	const Onnx__ValueInfoProto *in;
	graph *g = c->g;
	size_t i;
	int vi, rc;

	for (i = 0; i < c->gp->n_input; i++) {
		in = c->gp->input[i];
		if (load_empty(in->name))
			return load_fail(c, -EINVAL, "%s: graph input #%zu has no name", c->label, i);
		vi = graph_find_value(g, in->name);
		if (vi >= 0 && g->values[vi].kind == GRAPH_VALUE_INITIALIZER) {
			g->values[vi].type = in->type;
			continue;
		}
		if (vi >= 0)
			return load_fail(c, -EINVAL, "graph input '%s' is declared twice", in->name);
		vi = add_value(c, in->name, GRAPH_VALUE_INPUT, -1);
		if (vi < 0)
			return vi;
		g->inputs[g->n_inputs++] = vi;
		rc = set_type(c, vi, in->type);
		if (rc < 0)
			return rc;
	}
	return 0;
}

static int add_node_outputs(load_ctx *c)
{
	const Onnx__NodeProto *np;
	char lbl[256];
	size_t j, k;
	int vi;

	for (j = 0; j < c->gp->n_node; j++) {
		np = c->gp->node[j];
		for (k = 0; k < np->n_output; k++) {
			if (load_empty(np->output[k]))
				continue;
			vi = graph_find_value(c->g, np->output[k]);
			if (vi >= 0)
				return load_fail(c, -EINVAL, "%s: output '%s' is already defined (%s)",
					    load_node_label(c, j, lbl, sizeof(lbl)), np->output[k],
					    value_origin(c->g, vi));
			vi = add_value(c, np->output[k], GRAPH_VALUE_ACTIVATION, (int)j);
			if (vi < 0)
				return vi;
		}
	}
	return 0;
}

/* Graph outputs, then value_info: declared types for activations, which
 * otherwise start unknown.  An output's own declaration wins. */
static int add_outputs(load_ctx *c)
{
	const Onnx__ValueInfoProto *vi;
	graph *g = c->g;
	size_t i;
	int idx, rc;

	for (i = 0; i < c->gp->n_output + c->gp->n_value_info; i++) {
		int is_out = i < c->gp->n_output;

		vi = is_out ? c->gp->output[i] : c->gp->value_info[i - c->gp->n_output];
		idx = graph_find_value(g, vi->name);
		if (is_out && idx < 0)
			return load_fail(c, -EINVAL, "%s: graph output '%s' is not produced by any node or input",
				    c->label, vi->name ? vi->name : "");
		if (idx < 0)
			continue;       /* value_info about a name no node uses */
		if (is_out) {
			g->values[idx].is_graph_output = 1;
			g->outputs[g->n_outputs++] = idx;
		}
		if (g->values[idx].kind != GRAPH_VALUE_ACTIVATION || g->values[idx].type)
			continue;
		rc = set_type(c, idx, vi->type);
		if (rc < 0)
			return rc;
	}
	return 0;
}

static int build_values(load_ctx *c)
{
	graph *g = c->g;
	size_t j, cap = c->gp->n_initializer + c->gp->n_input;
	int rc;

	for (j = 0; j < c->gp->n_node; j++)
		cap += c->gp->node[j]->n_output;
	/* Sized once so value pointers stay valid while the loader works. */
	g->values = calloc(cap + 1, sizeof(*g->values));
	g->inputs = calloc(c->gp->n_input + 1, sizeof(int));
	g->outputs = calloc(c->gp->n_output + 1, sizeof(int));
	if (!g->values || !g->inputs || !g->outputs)
		return -ENOMEM;
	rc = add_initializers(c);
	if (rc == 0)
		rc = add_inputs(c);
	if (rc == 0)
		rc = add_node_outputs(c);
	if (rc == 0)
		rc = add_outputs(c);
	return rc;
}

/* ---- entry points ------------------------------------------------------ */

/* protobuf bytes carry no terminator; graph_attr_string hands out C strings. */
static int terminate(ProtobufCBinaryData *s)
{
	uint8_t *p;

	if (!s->data)
		return 0;
	p = realloc(s->data, s->len + 1);
	if (!p)
		return -ENOMEM;
	p[s->len] = 0;
	s->data = p;
	return 0;
}

static int terminate_strings(Onnx__GraphProto *gp, int depth)
{
	Onnx__AttributeProto *a;
	size_t i, j, k;
	int rc = 0;

	if (depth > MAX_SUBGRAPH_DEPTH)
		return -EINVAL;
	for (i = 0; i < gp->n_node && rc == 0; i++) {
		for (j = 0; j < gp->node[i]->n_attribute && rc == 0; j++) {
			a = gp->node[i]->attribute[j];
			rc = a->has_s ? terminate(&a->s) : 0;
			for (k = 0; k < a->n_strings && rc == 0; k++)
				rc = terminate(&a->strings[k]);
			if (a->g && rc == 0)
				rc = terminate_strings(a->g, depth + 1);
			for (k = 0; k < a->n_graphs && rc == 0; k++)
				rc = terminate_strings(a->graphs[k], depth + 1);
		}
	}
	return rc;
}

/* Parses `bytes` and builds the graph; takes ownership of model_dir. */
static int load_common(const void *bytes, size_t n, char *model_dir, const char *label,
		       graph **out, char *err, size_t errlen)
{
	load_ctx c = { .label = label, .err = err, .errlen = errlen };
	int rc = -ENOMEM;

	c.g = calloc(1, sizeof(*c.g));
	if (!c.g) {
		free(model_dir);
		goto out;
	}
	c.g->model_dir = model_dir;
	/* protobuf-c copies every field, so the caller's bytes (or the file
	 * mapping) are not needed once this returns. */
	c.g->model = onnx__model_proto__unpack(NULL, n, bytes);
	rc = c.g->model ? 0 : load_fail(&c, -EINVAL, "%s: not an ONNX model (protobuf parse failed)", label);
	if (rc == 0)
		rc = load_header(&c);
	if (rc == 0)
		rc = build_values(&c);
	if (rc == 0)
		rc = load_nodes(&c);
	if (rc == 0)
		rc = terminate_strings(c.g->model->graph, 0);
	if (rc == 0)
		rc = graph_fold(c.g, err, errlen);
out:
	if (rc == -ENOMEM)
		load_fail(&c, rc, "%s: out of memory", label);
	graph_namemap_free(&c.symbols);
	if (rc < 0) {
		graph_free(c.g);
		c.g = NULL;
	}
	*out = c.g;
	return rc;
}

int graph_load_bytes(const void *bytes, size_t n, const char *model_dir,
		     graph **out, char *err, size_t errlen)
{
	char *dir = NULL;
	load_ctx c = { .err = err, .errlen = errlen };

	*out = NULL;
	if (model_dir && !(dir = strdup(model_dir)))
		return load_fail(&c, -ENOMEM, "model: out of memory");
	if (n == 0) {
		free(dir);
		return load_fail(&c, -EINVAL, "model: not an ONNX model (empty)");
	}
	return load_common(bytes, n, dir, "model", out, err, errlen);
}

/* Loads the model with its large embedded weights as external data of
 * the file itself (loader_slim.c): 0 or an error when that was done, 1
 * when the model is to be loaded as it is (none to rewrite, the file is a
 * symlink the external-data open would refuse, ORTMK_SLIM=0, or the
 * rewritten model failed where the original may not: its own error then
 * comes from the usual load).  *dir is consumed on 0 and errors, and
 * replaced by a fresh copy on 1. */
static int load_slim(const void *map, size_t n, const char *path, char **dir, graph **out,
		     char *err, size_t errlen)
{
	const char *base = strrchr(path, '/');
	const char *env = getenv("ORTMK_SLIM");
	uint8_t *slim = NULL;
	size_t slim_n = 0;
	struct stat ls;
	char *again;
	int rc;

	base = base ? base + 1 : path;
	if (n < LOADER_SLIM_MIN || (env && strcmp(env, "0") == 0) || lstat(path, &ls) != 0 ||
	    S_ISLNK(ls.st_mode) || !*base || loader_slim(map, n, base, &slim, &slim_n) == 0)
		return 1;
	if (!(again = strdup(*dir))) {
		free(slim);
		return 1;
	}
	rc = load_common(slim, slim_n, *dir, path, out, err, errlen);
	free(slim);
	if (rc == 0) {
		free(again);
		return 0;
	}
	*dir = again;
	return 1;
}

int graph_load(const char *path, graph **out, char *err, size_t errlen)
{
	load_ctx c = { .err = err, .errlen = errlen };
	void *map = MAP_FAILED;
	struct stat st;
	char *dir = NULL;
	int fd, rc;

	*out = NULL;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return load_fail(&c, -errno, "%s: %s", path, strerror(errno));
	if (fstat(fd, &st) < 0) {
		rc = load_fail(&c, -errno, "%s: %s", path, strerror(errno));
		goto out;
	}
	if (!S_ISREG(st.st_mode) || st.st_size == 0) {
		rc = load_fail(&c, -EINVAL, "%s: not an ONNX model (%s)", path,
			  S_ISREG(st.st_mode) ? "empty file" : "not a regular file");
		goto out;
	}
	map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	if (map == MAP_FAILED) {
		rc = load_fail(&c, -errno, "%s: %s", path, strerror(errno));
		goto out;
	}
	dir = proto_path_dir(path);
	if (!dir) {
		rc = load_fail(&c, -ENOMEM, "%s: out of memory", path);
		goto out;
	}
	rc = load_slim(map, (size_t)st.st_size, path, &dir, out, err, errlen);
	if (rc > 0)
		rc = load_common(map, (size_t)st.st_size, dir, path, out, err, errlen);
out:
	if (map != MAP_FAILED)
		munmap(map, (size_t)st.st_size);
	close(fd);
	return rc;
}
