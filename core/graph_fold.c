/*
 * graph_fold: load-time simplifications of the graph that need no kernel,
 * called by the loader once the nodes are sorted.
 *
 *  - A Constant node (its `value` tensor) becomes an initializer: the
 *    provider receives it with the weights instead of running a node per
 *    run (torch exports dozens of them for shape arithmetic).
 *  - An Identity of an initializer becomes an initializer sharing those
 *    bytes (torch writes one Identity per reuse of a deduplicated weight;
 *    each copied the weight on every run).
 *  - An Identity of an activation, a Dropout that passes its input
 *    through (inference, or a constant ratio of 0 in training mode, mask
 *    unused) and a Pad whose constant pads are all 0 (torch writes one
 *    before each of DenseNet's average pools) go: their readers read the
 *    input (NodeProto names rewritten), so nothing is copied and fusions
 *    see through them.
 *  - A Pad of zeros over the spatial dims whose only reader is a Conv, or
 *    an AveragePool that counts padding, becomes that reader's pads
 *    (fold_pad_into_window): torch writes one before each of Inception's
 *    average pools, a copy of the activation each.
 *
 * After the session's first type and shape inference, graph_fold_known
 * does the same for nodes whose outputs inference found to be known
 * integer data however the inputs' symbolic dims turn out (Shape of a
 * static dim, its Gather, the arithmetic on it: torch's head-size
 * computations), so what reads them sees constants; nodes that only they
 * read (the Shape) go with them.
 *
 * A node is left alone when its output is a graph output (the user asked
 * for a value the run produces) or when the constant is a string, sparse
 * or empty tensor.  (An initializer that is also a graph input is a weight
 * with a default for ortmk, not something the user feeds: loader.c.)  Everything else about the graph is unchanged: value
 * indexes stay, the folded nodes leave graph.nodes.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "graph.h"
#include "window.h"

static int fold_constant(graph *g, const graph_node *n, char *err, size_t errlen)
{
	const Onnx__AttributeProto *a = n->proto->n_attribute == 1 ? n->proto->attribute[0] : NULL;
	const Onnx__TensorProto *t = a && a->name && strcmp(a->name, "value") == 0 ? a->t : NULL;
	graph_value *v;
	int rc;

	if (!t || n->n_out != 1 || n->out[0] < 0 || t->data_type == ONNX__TENSOR_PROTO__DATA_TYPE__STRING ||
	    t->n_dims > GRAPH_MAX_RANK || graph_dtype_size(t->data_type) == 0)
		return 0;
	for (size_t k = 0; k < t->n_dims; k++)
		if (t->dims[k] <= 0)
			return 0;   /* empty: an initializer without bytes is not sent */
	v = &g->values[n->out[0]];
	if (v->is_graph_output)
		return 0;
	rc = graph_init_load(g, n->out[0], t, err, errlen);
	if (rc < 0)
		return rc;
	v->kind = GRAPH_VALUE_INITIALIZER;
	v->producer = -1;
	v->elem_type = t->data_type;
	v->is_tensor = 1;
	v->rank = (int)t->n_dims;
	for (size_t k = 0; k < t->n_dims; k++)
		v->dims[k] = t->dims[k];
	return 1;
}

static int fold_identity(graph *g, const graph_node *n)
{
	const graph_value *src;
	graph_value *v;

	if (n->n_in != 1 || n->n_out != 1 || n->in[0] < 0 || n->out[0] < 0)
		return 0;
	src = &g->values[n->in[0]];
	v = &g->values[n->out[0]];
	if (src->kind != GRAPH_VALUE_INITIALIZER || v->is_graph_output || (!src->init.external && !src->init.data))
		return 0;
	v->kind = GRAPH_VALUE_INITIALIZER;
	v->producer = -1;
	v->init = src->init;
	v->init.owned = NULL;          /* the source frees the bytes */
	v->init.alias = src->init.alias >= 0 ? src->init.alias : n->in[0];
	v->elem_type = src->elem_type;
	v->is_tensor = 1;
	v->rank = src->rank;
	memcpy(v->dims, src->dims, sizeof(v->dims));
	return 1;
}

/* Drops the nodes marked in gone, keeping the order of the others. */
static int compact(graph *g, const unsigned char *gone)
{
	int *map = malloc((g->n_nodes + 1) * sizeof(int));
	size_t k, m = 0;

	if (!map)
		return -ENOMEM;
	for (k = 0; k < g->n_nodes; k++) {
		if (gone[k]) {
			free(g->nodes[k].in);
			free(g->nodes[k].out);
			free(g->nodes[k].implicit);
			map[k] = -1;
			continue;
		}
		map[k] = (int)m;
		g->nodes[m++] = g->nodes[k];
	}
	for (k = 0; k < g->n_values; k++)
		if (g->values[k].producer >= 0)
			g->values[k].producer = map[g->values[k].producer];
	g->n_nodes = m;
	free(map);
	return 0;
}

static int int_type(int32_t et)
{
	return et == ONNX__TENSOR_PROTO__DATA_TYPE__INT64 || et == ONNX__TENSOR_PROTO__DATA_TYPE__INT32 ||
	       et == ONNX__TENSOR_PROTO__DATA_TYPE__INT16 || et == ONNX__TENSOR_PROTO__DATA_TYPE__INT8 ||
	       et == ONNX__TENSOR_PROTO__DATA_TYPE__UINT8 || et == ONNX__TENSOR_PROTO__DATA_TYPE__BOOL;
}

/* Writes the int64 view of known data as elem_type's bytes (an
 * int_type). */
static void store_ints(int32_t et, const int64_t *v, int64_t n, void *dst)
{
	for (int64_t i = 0; i < n; i++)
		switch (et) {
		case ONNX__TENSOR_PROTO__DATA_TYPE__INT64: ((int64_t *)dst)[i] = v[i]; break;
		case ONNX__TENSOR_PROTO__DATA_TYPE__INT32: ((int32_t *)dst)[i] = (int32_t)v[i]; break;
		case ONNX__TENSOR_PROTO__DATA_TYPE__INT16: ((int16_t *)dst)[i] = (int16_t)v[i]; break;
		case ONNX__TENSOR_PROTO__DATA_TYPE__INT8: ((int8_t *)dst)[i] = (int8_t)v[i]; break;
		case ONNX__TENSOR_PROTO__DATA_TYPE__UINT8:
		case ONNX__TENSOR_PROTO__DATA_TYPE__BOOL: ((uint8_t *)dst)[i] = (uint8_t)v[i]; break;
		default: break;
		}
}

/* Node n's outputs are all known (data in t) integer tensors that stay
 * inside the graph, and the node reads no subgraph. */
static int known_outputs(const graph *g, const graph_node *n, const graph_tinfo *t)
{
	int any = 0;

	if (n->n_implicit)
		return 0;
	for (int i = 0; i < n->n_out; i++) {
		int v = n->out[i];

		if (v < 0)
			continue;
		if (!t[v].has_data || g->values[v].is_graph_output || g->values[v].kind != GRAPH_VALUE_ACTIVATION ||
		    !graph_tinfo_static(&t[v]) || t[v].ndata != graph_tinfo_numel(&t[v]) || t[v].ndata < 1 ||
		    !int_type(t[v].elem_type))
			return 0;
		any = 1;
	}
	return any;
}

static int known_to_init(graph *g, const graph_node *n, const graph_tinfo *t)
{
	for (int i = 0; i < n->n_out; i++) {
		int v = n->out[i];
		graph_value *val;
		size_t es;
		void *buf;

		if (v < 0)
			continue;
		val = &g->values[v];
		es = graph_dtype_size(t[v].elem_type);
		buf = calloc((size_t)t[v].ndata, es);
		if (!buf)
			return -ENOMEM;
		store_ints(t[v].elem_type, t[v].data, t[v].ndata, buf);
		val->kind = GRAPH_VALUE_INITIALIZER;
		val->producer = -1;
		memset(&val->init, 0, sizeof(val->init));
		val->init.file = -1;
		val->init.alias = -1;
		val->init.owned = buf;
		val->init.data = buf;
		val->init.nbytes = (uint64_t)t[v].ndata * es;
		val->elem_type = t[v].elem_type;
		val->is_tensor = 1;
		val->rank = t[v].rank;
		memcpy(val->dims, t[v].dims, sizeof(int64_t) * (size_t)t[v].rank);
	}
	return 0;
}

/* Marks in gone the nodes nothing reads (no output read by a node that
 * stays, a subgraph or the user), last to first so chains go whole. */
static int mark_dead(const graph *g, unsigned char *gone)
{
	int *uses = calloc(g->n_values + 1, sizeof(int));

	if (!uses)
		return -ENOMEM;
	for (size_t v = 0; v < g->n_values; v++)
		uses[v] = g->values[v].is_graph_output;
	for (size_t k = 0; k < g->n_nodes; k++) {
		const graph_node *n = &g->nodes[k];

		for (int i = 0; !gone[k] && i < n->n_in + n->n_implicit; i++) {
			int v = i < n->n_in ? n->in[i] : n->implicit[i - n->n_in];

			if (v >= 0)
				uses[v]++;
		}
	}
	for (size_t k = g->n_nodes; k-- > 0;) {
		const graph_node *n = &g->nodes[k];
		int used = 0;

		for (int i = 0; !gone[k] && i < n->n_out; i++)
			used |= n->out[i] >= 0 && uses[n->out[i]] > 0;
		if (gone[k] || used)
			continue;
		gone[k] = 1;
		for (int i = 0; i < n->n_in + n->n_implicit; i++) {
			int v = i < n->n_in ? n->in[i] : n->implicit[i - n->n_in];

			if (v >= 0)
				uses[v]--;
		}
	}
	free(uses);
	return 0;
}

int graph_fold_known(graph *g, const graph_tinfo *t)
{
	unsigned char *gone = calloc(g->n_nodes + 1, 1);
	size_t folded = 0;
	int rc = 0;

	if (!gone)
		return -ENOMEM;
	for (size_t k = 0; rc == 0 && k < g->n_nodes; k++) {
		if (!known_outputs(g, &g->nodes[k], t))
			continue;
		rc = known_to_init(g, &g->nodes[k], t);
		gone[k] = rc == 0;
		folded += rc == 0;
	}
	/* What only the folded nodes read (Shape of an activation) goes too. */
	if (rc == 0 && folded)
		rc = mark_dead(g, gone);
	if (rc == 0 && folded)
		rc = compact(g, gone);
	free(gone);
	return rc;
}

/* The one-element value of initializer v as int64 (0 for a float 0),
 * or -1 when it is not a known scalar. */
static int init_is_zero(const graph *g, int v)
{
	const graph_value *val = v >= 0 ? &g->values[v] : NULL;
	const unsigned char *b;

	if (!val || val->kind != GRAPH_VALUE_INITIALIZER || !val->init.data || val->init.nbytes == 0 ||
	    val->init.nbytes > 8)
		return -1;
	b = val->init.data;
	for (uint64_t i = 0; i < val->init.nbytes; i++)
		if (b[i] & (i + 1 == val->init.nbytes ? 0x7f : 0xff))
			return 0;   /* a set bit other than a float's sign: not zero */
	return 1;
}

/* Dropout that passes its input through: inference (training_mode absent
 * or a constant false, always before opset 12), or a constant ratio of
 * 0; its mask unused. */
static int dropout_passes(const graph *g, const graph_node *n)
{
	if (n->n_out > 1 && n->out[1] >= 0 && g->values[n->out[1]].is_graph_output)
		return 0;
	for (size_t k = 0; n->n_out > 1 && n->out[1] >= 0 && k < g->n_nodes; k++)
		for (int i = 0; i < g->nodes[k].n_in; i++)
			if (g->nodes[k].in[i] == n->out[1])
				return 0;
	if (n->opset < 12 || n->n_in < 3 || n->in[2] < 0)
		return 1;
	if (init_is_zero(g, n->in[2]) == 1)
		return 1;
	return n->n_in >= 2 && init_is_zero(g, n->in[1]) == 1;
}

/* Node p's first attribute called name, or NULL. */
static Onnx__AttributeProto *find_attr(const Onnx__NodeProto *p, const char *name)
{
	for (size_t i = 0; i < p->n_attribute; i++)
		if (p->attribute[i]->name && strcmp(p->attribute[i]->name, name) == 0)
			return p->attribute[i];
	return NULL;
}

/* Pad that pads nothing: its pads (an attribute before opset 11, then a
 * constant input) all 0, whatever its mode and value. */
static int pad_passes(const graph *g, const graph_node *n)
{
	const graph_value *p;

	if (n->opset < 11) {
		const Onnx__AttributeProto *a = find_attr(n->proto, "pads");

		if (!a)
			return 0;
		for (size_t k = 0; k < a->n_ints; k++)
			if (a->ints[k])
				return 0;
		return a->n_ints > 0;
	}
	p = n->n_in >= 2 && n->in[1] >= 0 ? &g->values[n->in[1]] : NULL;
	if (!p || p->kind != GRAPH_VALUE_INITIALIZER || !p->init.data || p->init.nbytes == 0)
		return 0;
	for (uint64_t i = 0; i < p->init.nbytes; i++)
		if (((const unsigned char *)p->init.data)[i])
			return 0;
	return 1;
}

/* Identity of an activation, or a Dropout that passes it through: every
 * reader reads the input instead (its NodeProto's input name too, which
 * the providers resolve), unless the output is the user's or a subgraph
 * reads it. */
static int fold_passthrough(graph *g, const graph_node *n)
{
	int src = n->n_in > 0 ? n->in[0] : -1, out = n->n_out > 0 ? n->out[0] : -1;

	if (src < 0 || out < 0 || g->values[out].is_graph_output ||
	    g->values[src].kind == GRAPH_VALUE_INITIALIZER)
		return 0;
	for (size_t k = 0; k < g->n_nodes; k++)
		for (int i = 0; i < g->nodes[k].n_implicit; i++)
			if (g->nodes[k].implicit[i] == out)
				return 0;
	for (size_t k = 0; k < g->n_nodes; k++) {
		graph_node *m = &g->nodes[k];
		Onnx__NodeProto *p = (Onnx__NodeProto *)m->proto;

		for (int i = 0; i < m->n_in; i++) {
			char *name;

			if (m->in[i] != out)
				continue;
			if (!(name = strdup(g->values[src].name)))
				return -ENOMEM;
			free(p->input[i]);
			p->input[i] = name;
			m->in[i] = src;
		}
	}
	g->values[out].producer = -1;
	return 1;
}

/* Attribute `name` of p as an empty one of `type`, added when absent;
 * NULL without memory. */
static Onnx__AttributeProto *put_attr(Onnx__NodeProto *p, const char *name,
				      Onnx__AttributeProto__AttributeType type)
{
	Onnx__AttributeProto *a = find_attr(p, name), **grown;

	if (a) {
		a->type = type;
		return a;
	}
	if (!(a = malloc(sizeof(*a))))
		return NULL;
	onnx__attribute_proto__init(a);
	grown = realloc(p->attribute, (p->n_attribute + 1) * sizeof(*grown));
	if (!grown || !(a->name = strdup(name))) {
		if (grown)
			p->attribute = grown;
		free(a);
		return NULL;
	}
	a->has_type = 1;
	a->type = type;
	p->attribute = grown;
	p->attribute[p->n_attribute++] = a;
	return a;
}

/* A constant-mode Pad of zeros over the spatial dims only (rank 3 to 5):
 * its pads in ONNX's order (all begins, then all ends) and the rank, or 0. */
static int pad_of_zeros(const graph *g, const graph_node *n, int64_t *pads, int *rank)
{
	const Onnx__AttributeProto *mode = find_attr(n->proto, "mode");
	const Onnx__AttributeProto *a;
	int64_t cnt;

	if (mode && mode->s.len && (mode->s.len != 8 || memcmp(mode->s.data, "constant", 8) != 0))
		return 0;
	if (n->opset < 11) {
		a = find_attr(n->proto, "pads");
		if (!a || a->n_ints % 2 || a->n_ints > 2 * GRAPH_MAX_RANK)
			return 0;
		cnt = (int64_t)a->n_ints;
		for (int64_t i = 0; i < cnt; i++)
			pads[i] = a->ints[i];
		a = find_attr(n->proto, "value");
		if (a && a->f != 0.0f)
			return 0;
	} else {
		const graph_value *p = n->n_in >= 2 && n->in[1] >= 0 ? &g->values[n->in[1]] : NULL;

		if (!p || p->kind != GRAPH_VALUE_INITIALIZER || !p->init.data ||
		    p->elem_type != ONNX__TENSOR_PROTO__DATA_TYPE__INT64 || p->init.nbytes % 16 ||
		    p->init.nbytes > 16 * GRAPH_MAX_RANK)
			return 0;
		if (n->n_in >= 3 && n->in[2] >= 0 && init_is_zero(g, n->in[2]) != 1)
			return 0;
		if (n->n_in >= 4 && n->in[3] >= 0)
			return 0;   /* axes (opset 18) */
		cnt = (int64_t)(p->init.nbytes / 8);
		memcpy(pads, p->init.data, (size_t)p->init.nbytes);
	}
	*rank = (int)(cnt / 2);
	if (*rank < 3 || *rank > 5 || pads[0] || pads[1] || pads[*rank] || pads[*rank + 1])
		return 0;
	for (int64_t i = 0; i < cnt; i++)
		if (pads[i] < 0 || pads[i] > INT32_MAX / 4)
			return 0;
	return 1;
}

/* A zero Pad whose only reader is a Conv, or an AveragePool that counts
 * padding (count_include_pad, or no pads of its own) without ceil_mode,
 * both with explicit pads (auto_pad NOTSET): the reader takes the padding
 * as its own pads (an AveragePool then counting it) and reads Pad's
 * input.  torch writes one before each of Inception's average pools
 * (avg_pool2d's padding counted): a copy of the activation per pool. */
static int fold_pad_into_window(graph *g, const graph_node *n)
{
	int src = n->n_in > 0 ? n->in[0] : -1, out = n->n_out > 0 ? n->out[0] : -1, rank, nsp;
	int64_t pads[2 * GRAPH_MAX_RANK], merged[2 * GRAPH_MAX_RANK];
	graph_node *m = NULL;
	Onnx__NodeProto *p;
	Onnx__AttributeProto *a;
	int avg;
	char *name;

	if (src < 0 || out < 0 || g->values[out].is_graph_output || !pad_of_zeros(g, n, pads, &rank))
		return 0;
	for (size_t k = 0; k < g->n_nodes; k++) {
		graph_node *r = &g->nodes[k];

		for (int i = 0; i < r->n_implicit; i++)
			if (r->implicit[i] == out)
				return 0;
		for (int i = 0; i < r->n_in; i++)
			if (r->in[i] == out) {
				if (m || i != 0)
					return 0;
				m = r;
			}
	}
	if (!m || m->domain[0] || onnx_auto_pad(m->proto) != ONNX_PAD_NOTSET)
		return 0;
	avg = strcmp(m->op_type, "AveragePool") == 0;
	if (!avg && strcmp(m->op_type, "Conv") != 0)
		return 0;
	p = (Onnx__NodeProto *)m->proto;
	nsp = rank - 2;
	a = find_attr(p, "pads");
	if (a && a->n_ints && a->n_ints != (size_t)(2 * nsp))
		return 0;
	for (int i = 0; i < 2 * nsp; i++)
		merged[i] = (a && a->n_ints ? a->ints[i] : 0);
	if (avg) {
		const Onnx__AttributeProto *ceil = find_attr(p, "ceil_mode");
		const Onnx__AttributeProto *cip = find_attr(p, "count_include_pad");
		int own = 0;

		for (int i = 0; i < 2 * nsp; i++)
			own |= merged[i] != 0;
		if ((ceil && ceil->i) || (own && !(cip && cip->i)))
			return 0;
	}
	for (int i = 0; i < nsp; i++) {
		merged[i] += pads[2 + i];
		merged[nsp + i] += pads[rank + 2 + i];
	}
	if (!(a = put_attr(p, "pads", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS)))
		return -ENOMEM;
	if (a->n_ints != (size_t)(2 * nsp)) {
		int64_t *ints = malloc(2 * (size_t)nsp * sizeof(int64_t));

		if (!ints)
			return -ENOMEM;
		free(a->ints);
		a->ints = ints;
		a->n_ints = 2 * (size_t)nsp;
	}
	memcpy(a->ints, merged, 2 * (size_t)nsp * sizeof(int64_t));
	if (avg) {
		if (!(a = put_attr(p, "count_include_pad", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT)))
			return -ENOMEM;
		a->has_i = 1;
		a->i = 1;
	}
	if (!(name = strdup(g->values[src].name)))
		return -ENOMEM;
	free(p->input[0]);
	p->input[0] = name;
	m->in[0] = src;
	g->values[out].producer = -1;
	return 1;
}

int graph_fold(graph *g, char *err, size_t errlen)
{
	unsigned char *gone = calloc(g->n_nodes + 1, 1);
	size_t folded = 0;
	int rc = 0;

	if (!gone)
		return -ENOMEM;
	for (size_t k = 0; rc >= 0 && k < g->n_nodes; k++) {
		const graph_node *n = &g->nodes[k];

		if (n->domain[0])
			continue;
		if (strcmp(n->op_type, "Constant") == 0)
			rc = fold_constant(g, n, err, errlen);
		else if (strcmp(n->op_type, "Identity") == 0)
			rc = fold_identity(g, n) ? 1 : fold_passthrough(g, n);
		else if (strcmp(n->op_type, "Dropout") == 0 && dropout_passes(g, n))
			rc = fold_passthrough(g, n);
		else if (strcmp(n->op_type, "Pad") == 0 && pad_passes(g, n))
			rc = fold_passthrough(g, n);
		else if (strcmp(n->op_type, "Pad") == 0)
			rc = fold_pad_into_window(g, n);
		else
			rc = 0;
		if (rc > 0) {
			gone[k] = 1;
			folded++;
		}
	}
	if (rc >= 0 && folded)
		rc = compact(g, gone);
	free(gone);
	return rc < 0 ? rc : 0;
}
