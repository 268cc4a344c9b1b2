/*
 * tree_build: compiles a tree ensemble's attributes (nodes_* and the
 * class_* or target_* weights) into tree.h's layout, once at prepare.
 *
 * A tree starts at the first node listed with its tree id, and a tree's
 * nodes must be listed together (ONNX Runtime reads them so too; a split
 * list is refused rather than read differently).  Children are found by
 * (tree id, node id) through a hash table.  A node that two parents share
 * (LightGBM's converted set membership does that) is laid out once; a
 * cycle is refused.  Weights on a node that is not a leaf are ignored, as
 * ONNX Runtime ignores them (old onnxmltools wrote some).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tree.h"

/* The node attributes, read. */
typedef struct tb_nodes {
	int64_t n;
	const int64_t *tree, *node, *feat, *tid, *fid, *mvt;
	size_t n_mvt;
	double *val;                  /* nodes_values(_as_tensor) */
	uint8_t *mode;
	int64_t *slot;                /* hash table of attribute indices, -1 empty */
	uint64_t mask;
	int64_t *pos;                 /* attribute index -> position, -1 */
} tb_nodes;

static void tb_free(tb_nodes *b)
{
	free(b->val);
	free(b->mode);
	free(b->slot);
	free(b->pos);
}

static uint64_t tb_hash(int64_t tree, int64_t node)
{
	uint64_t h = (uint64_t)tree * 0x9E3779B97F4A7C15ull ^ (uint64_t)node * 0xC2B2AE3D27D4EB4Full;

	return h ^ (h >> 31);
}

/* The slot of (tree, node): holding its attribute index, or -1 (empty). */
static int64_t *tb_slot(const tb_nodes *b, int64_t tree, int64_t node)
{
	uint64_t i = tb_hash(tree, node) & b->mask;

	for (;; i = (i + 1) & b->mask) {
		int64_t k = b->slot[i];

		if (k < 0 || (b->tree[k] == tree && b->node[k] == node))
			return &b->slot[i];
	}
}

static int tb_parse_modes(const Onnx__NodeProto *p, tb_nodes *b, char *err, size_t n)
{
	static const char *const names[] = {"BRANCH_LEQ", "BRANCH_LT", "BRANCH_GTE", "BRANCH_GT",
					    "BRANCH_EQ", "BRANCH_NEQ", "LEAF"};
	const Onnx__AttributeProto *a = cpu_attr(p, "nodes_modes");

	if (!a || (int64_t)a->n_strings != b->n)
		return snprintf(err, n, "nodes_modes has %zu entries for %lld nodes",
				a ? a->n_strings : 0, (long long)b->n), CPU_E_INVALID;
	if (!(b->mode = malloc((size_t)b->n + 1)))
		return CPU_E_NOMEM;
	for (int64_t i = 0; i < b->n; i++) {
		const ProtobufCBinaryData *s = &a->strings[i];
		int m = -1;

		for (int k = 0; k < 7 && m < 0; k++)
			if (s->len == strlen(names[k]) && memcmp(s->data, names[k], s->len) == 0)
				m = k;
		if (m < 0)
			return snprintf(err, n, "node %lld: mode '%.*s' is not supported", (long long)i,
					(int)(s->len > 32 ? 32 : s->len), (const char *)s->data),
				CPU_E_UNSUPPORTED;
		b->mode[i] = (uint8_t)m;
	}
	return 0;
}

/* Reads the node attributes and hashes (tree, node) -> attribute index. */
static int tb_read(const Onnx__NodeProto *p, tb_nodes *b, char *err, size_t n)
{
	size_t nt = cpu_attr_ints(p, "nodes_treeids", &b->tree);
	size_t slots = 2;
	int64_t nv;
	int rc;

	b->n = (int64_t)nt;
	if (nt == 0)
		return snprintf(err, n, "the ensemble has no nodes"), CPU_E_INVALID;
	if (cpu_attr_ints(p, "nodes_nodeids", &b->node) != nt ||
	    cpu_attr_ints(p, "nodes_featureids", &b->feat) != nt ||
	    cpu_attr_ints(p, "nodes_truenodeids", &b->tid) != nt ||
	    cpu_attr_ints(p, "nodes_falsenodeids", &b->fid) != nt)
		return snprintf(err, n, "nodes_nodeids, _featureids, _truenodeids and "
				"_falsenodeids need %zu entries each", nt), CPU_E_INVALID;
	b->n_mvt = cpu_attr_ints(p, "nodes_missing_value_tracks_true", &b->mvt);
	if ((rc = tb_parse_modes(p, b, err, n)))
		return rc;
	nv = ml_attr_reals(p, "nodes_values", &b->val, err, n);
	if (nv != b->n)
		return nv < 0 ? CPU_E_INVALID : (snprintf(err, n, "nodes_values has %lld entries "
					"for %lld nodes", (long long)nv, (long long)b->n),
					CPU_E_INVALID);
	while (slots < 2 * nt)
		slots *= 2;
	b->slot = malloc(slots * sizeof(int64_t));
	b->pos = malloc(nt * sizeof(int64_t));
	if (!b->slot || !b->pos)
		return CPU_E_NOMEM;
	memset(b->slot, 0xff, slots * sizeof(int64_t));
	memset(b->pos, 0xff, nt * sizeof(int64_t));
	b->mask = slots - 1;
	for (int64_t i = 0; i < b->n; i++) {
		int64_t *s = tb_slot(b, b->tree[i], b->node[i]);

		if (*s >= 0)
			return snprintf(err, n, "node %lld of tree %lld is listed twice",
					(long long)b->node[i], (long long)b->tree[i]), CPU_E_INVALID;
		*s = i;
	}
	return 0;
}

static int tb_alloc(tree_ens *e, int64_t n_nodes, int64_t n_trees)
{
	e->nodes = calloc((size_t)n_nodes, sizeof(tree_node));
	e->thr64 = calloc((size_t)n_nodes, sizeof(double));
	e->flags = calloc((size_t)n_nodes, 1);
	e->wfirst = calloc((size_t)n_nodes, sizeof(int32_t));
	e->wcount = calloc((size_t)n_nodes, sizeof(int32_t));
	e->roots = calloc((size_t)n_trees + 1, sizeof(int32_t));
	e->depth = calloc((size_t)n_trees + 1, sizeof(int32_t));
	return e->nodes && e->thr64 && e->flags && e->wfirst && e->wcount && e->roots &&
		e->depth ? 0 : CPU_E_NOMEM;
}

/* Sets node `pos`'s fields from attribute index i. */
static int tb_place(tree_ens *e, const tb_nodes *b, int64_t i, int64_t pos, char *err, size_t n)
{
	tree_node *nd = &e->nodes[pos];
	int m = b->mode[i];

	e->flags[pos] = (uint8_t)m;
	if ((size_t)i < b->n_mvt && b->mvt[i] == 1)
		e->flags[pos] |= TREE_MISSING_TRUE;
	nd->thr = (float)b->val[i];
	e->thr64[pos] = b->val[i];
	if (m == TREE_LEAF)
		return 0;
	if (b->feat[i] < 0 || b->feat[i] > INT32_MAX)
		return snprintf(err, n, "node %lld of tree %lld: feature id %lld out of range",
				(long long)b->node[i], (long long)b->tree[i], (long long)b->feat[i]),
			CPU_E_INVALID;
	nd->feature = (int32_t)b->feat[i];
	return 0;
}

/* Child `child` (a node id) of attribute index i, as an attribute index. */
static int64_t tb_child(const tb_nodes *b, int64_t i, int64_t child, char *err, size_t n)
{
	int64_t k = *tb_slot(b, b->tree[i], child);

	if (k < 0 || k == i)
		snprintf(err, n, "node %lld of tree %lld: child %lld %s", (long long)b->node[i],
			 (long long)b->tree[i], (long long)child,
			 k < 0 ? "does not exist" : "is the node itself");
	return k == i ? -1 : k;
}

/* Lays out the tree rooted at attribute index root from position *count
 * on; stack has room for 2 * b->n + 2 entries of three int64s. */
static int tb_tree(tree_ens *e, tb_nodes *b, int64_t root, int64_t *count, int64_t *stack,
		   char *err, size_t n)
{
	int64_t sp = 0;
	int rc;

	stack[sp++] = root, stack[sp++] = -1, stack[sp++] = 0;
	while (sp) {
		int64_t which = stack[--sp], parent = stack[--sp], i = stack[--sp], pos = b->pos[i];
		int64_t t, f;

		if (pos < 0) {
			pos = b->pos[i] = (*count)++;
			if ((rc = tb_place(e, b, i, pos, err, n)))
				return rc;
			if (b->mode[i] != TREE_LEAF) {
				if ((t = tb_child(b, i, b->tid[i], err, n)) < 0 ||
				    (f = tb_child(b, i, b->fid[i], err, n)) < 0)
					return CPU_E_INVALID;
				/* false pushed last: laid out right after its parent */
				stack[sp++] = t, stack[sp++] = pos, stack[sp++] = 1;
				stack[sp++] = f, stack[sp++] = pos, stack[sp++] = 2;
			}
		}
		if (parent < 0)
			continue;
		if (pos - parent > INT32_MAX || pos - parent < INT32_MIN)
			return snprintf(err, n, "tree too large"), CPU_E_UNSUPPORTED;
		if (which == 1)
			e->nodes[parent].inc[1] = (int32_t)(pos - parent);
		else
			e->nodes[parent].inc[0] = (int32_t)(pos - parent);
	}
	return 0;
}

/* Depth (longest walk to a leaf) of the tree at position root; refuses a
 * cycle.  d: per position, -1 unvisited, -2 on the walk, else the depth. */
static int tb_depth(tree_ens *e, int32_t root, int32_t *d, int32_t *stack, int *out, char *err,
		    size_t n)
{
	int64_t sp = 0;

	stack[sp++] = root;
	while (sp) {
		int32_t p = stack[sp - 1], kids[2];
		const tree_node *nd = &e->nodes[p];
		int pending = 0;

		if (nd->inc[1] == 0 && nd->inc[0] == 0) {
			d[p] = 0;
			sp--;
			continue;
		}
		if (d[p] == -1)
			d[p] = -2;
		kids[0] = p + nd->inc[0];
		kids[1] = p + nd->inc[1];
		for (int k = 0; k < 2; k++) {
			if (d[kids[k]] == -2 && d[p] == -2 && kids[k] != p) {
				/* a child on the current walk is an ancestor */
				return snprintf(err, n, "a tree has a cycle"), CPU_E_INVALID;
			}
			if (d[kids[k]] == -1) {
				stack[sp++] = kids[k];
				pending = 1;
			}
		}
		if (pending)
			continue;
		d[p] = 1 + (d[kids[0]] > d[kids[1]] ? d[kids[0]] : d[kids[1]]);
		*out = d[p] > *out ? d[p] : *out;
		sp--;
	}
	return 0;
}

/* Lays out every tree: a tree starts where the tree id changes. */
static int tb_layout(tree_ens *e, tb_nodes *b, char *err, size_t n)
{
	int64_t count = 0, t = 0, *stack = malloc((size_t)(2 * b->n + 2) * 3 * sizeof(int64_t));
	int32_t *d = malloc((size_t)b->n * sizeof(int32_t));
	int32_t *dstack = malloc((size_t)(2 * b->n + 2) * sizeof(int32_t));
	int rc = stack && d && dstack ? 0 : CPU_E_NOMEM;

	for (int64_t i = 0; i < b->n && rc == 0; i++) {
		if (i > 0 && b->tree[i] == b->tree[i - 1])
			continue;
		e->roots[t++] = (int32_t)count;
		rc = tb_tree(e, b, i, &count, stack, err, n);
	}
	e->n_trees = t;
	e->n_nodes = count;
	for (int64_t k = 0; k < count && rc == 0; k++)
		d[k] = -1;
	for (int64_t k = 0; k < t && rc == 0; k++) {
		int depth = 0;

		rc = tb_depth(e, e->roots[k], d, dstack, &depth, err, n);
		e->depth[k] = depth;
		e->max_depth = depth > e->max_depth ? depth : e->max_depth;
	}
	free(stack);
	free(d);
	free(dstack);
	return rc;
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return (x > y) - (x < y);
}

/* Every tree id must make one run of consecutive nodes. */
static int tb_check_runs(const tb_nodes *b, char *err, size_t n)
{
	int64_t runs = 0, *ids = malloc((size_t)b->n * sizeof(int64_t));

	if (!ids)
		return CPU_E_NOMEM;
	for (int64_t i = 0; i < b->n; i++)
		if (i == 0 || b->tree[i] != b->tree[i - 1])
			ids[runs++] = b->tree[i];
	qsort(ids, (size_t)runs, sizeof(int64_t), cmp_i64);
	for (int64_t i = 1; i < runs; i++) {
		if (ids[i] == ids[i - 1]) {
			snprintf(err, n, "the nodes of tree %lld are not listed together",
				 (long long)ids[i]);
			free(ids);
			return CPU_E_INVALID;
		}
	}
	free(ids);
	return 0;
}

/* The weight attributes: `prefix`_ids, _nodeids, _treeids and
 * _weights(_as_tensor). */
typedef struct tb_weights_in {
	size_t n;
	const int64_t *ids, *nodes, *trees;
	double *w;                    /* owned */
} tb_weights_in;

static int tb_weights_read(const Onnx__NodeProto *p, const char *prefix, tb_weights_in *in,
			   char *err, size_t n)
{
	char name[40];
	int64_t nw;

	snprintf(name, sizeof(name), "%s_ids", prefix);
	in->n = cpu_attr_ints(p, name, &in->ids);
	snprintf(name, sizeof(name), "%s_nodeids", prefix);
	if (cpu_attr_ints(p, name, &in->nodes) != in->n)
		return snprintf(err, n, "%s_ids and %s_nodeids differ in length", prefix, prefix),
			CPU_E_INVALID;
	snprintf(name, sizeof(name), "%s_treeids", prefix);
	if (cpu_attr_ints(p, name, &in->trees) != in->n)
		return snprintf(err, n, "%s_ids and %s_treeids differ in length", prefix, prefix),
			CPU_E_INVALID;
	snprintf(name, sizeof(name), "%s_weights", prefix);
	nw = ml_attr_reals(p, name, &in->w, err, n);
	if (nw < 0)
		return CPU_E_INVALID;
	if ((size_t)nw != in->n)
		return snprintf(err, n, "%s_weights has %lld entries for %zu ids", prefix,
				(long long)nw, in->n), CPU_E_INVALID;
	return 0;
}

/* Each weight's leaf position into at[] (-1: not a leaf, ignored),
 * counted per leaf in e->wcount; checks the ids. */
static int tb_weights_locate(const char *prefix, tree_ens *e, const tb_nodes *b,
			     const tb_weights_in *in, int64_t *at, char *err, size_t n)
{
	e->all_positive = 1;
	for (size_t j = 0; j < in->n; j++) {
		int64_t i = *tb_slot(b, in->trees[j], in->nodes[j]), pos, id = in->ids[j];

		if (i < 0)
			return snprintf(err, n, "%s weight %zu names node %lld of tree %lld, which "
					"does not exist", prefix, j, (long long)in->nodes[j],
					(long long)in->trees[j]), CPU_E_INVALID;
		if (id < 0 || id > INT32_MAX || (e->n_out > 0 && id >= e->n_out))
			return snprintf(err, n, "%s_ids[%zu] = %lld is out of range", prefix, j,
					(long long)id), CPU_E_INVALID;
		e->all_positive &= in->w[j] >= 0;
		pos = b->pos[i];
		at[j] = pos >= 0 && b->mode[i] == TREE_LEAF ? pos : -1;
		if (at[j] >= 0)
			e->wcount[pos]++;
	}
	return 0;
}

/* Distinct ids (counted up to three) and, when the op did not say, n_out
 * from the largest. */
static void tb_weight_ids(tree_ens *e, const tb_weights_in *in)
{
	int64_t d0 = 0, d1 = 0, max_id = -1;

	for (size_t j = 0; j < in->n; j++) {
		int64_t id = in->ids[j];

		if (e->n_weight_classes == 0 ||
		    (id != d0 && (e->n_weight_classes == 1 || id != d1))) {
			if (e->n_weight_classes == 0)
				d0 = id;
			else if (e->n_weight_classes == 1)
				d1 = id;
			e->n_weight_classes += e->n_weight_classes < 3;
		}
		max_id = id > max_id ? id : max_id;
	}
	if (e->n_out <= 0)
		e->n_out = max_id + 1;
}

/* Gathers every leaf's weights, in the order the attributes list them;
 * a leaf's first weight is also its value (tree.h). */
static int tb_weights(const Onnx__NodeProto *p, const char *prefix, tree_ens *e,
		      const tb_nodes *b, char *err, size_t n)
{
	tb_weights_in in = {0};
	int64_t k = 0, *at = NULL;
	int rc = tb_weights_read(p, prefix, &in, err, n);

	if (rc)
		goto done;
	at = malloc((in.n + 1) * sizeof(int64_t));
	e->wtarget = malloc((in.n + 1) * sizeof(int32_t));
	e->wval = malloc((in.n + 1) * sizeof(float));
	e->wval64 = malloc((in.n + 1) * sizeof(double));
	rc = at && e->wtarget && e->wval && e->wval64 ? 0 : CPU_E_NOMEM;
	if (rc || (rc = tb_weights_locate(prefix, e, b, &in, at, err, n)))
		goto done;
	for (int64_t q = 0; q < e->n_nodes; q++) {
		e->wfirst[q] = (int32_t)k;
		k += e->wcount[q];
		e->wcount[q] = 0;
	}
	for (size_t j = 0; j < in.n; j++) {
		int64_t q = at[j], slot;

		if (q < 0)
			continue;
		slot = e->wfirst[q] + e->wcount[q]++;
		if (slot == e->wfirst[q]) {
			e->nodes[q].thr = (float)in.w[j];
			e->thr64[q] = in.w[j];
		}
		e->wtarget[slot] = (int32_t)in.ids[j];
		e->wval[slot] = (float)in.w[j];
		e->wval64[slot] = in.w[j];
	}
	e->n_weights = k;
	tb_weight_ids(e, &in);
done:
	free(at);
	free(in.w);
	return rc;
}

int tree_build(const Onnx__NodeProto *p, const char *prefix, int64_t n_out, tree_ens *e,
	       char *err, size_t n)
{
	tb_nodes b = {0};
	int rc;

	memset(e, 0, sizeof(*e));
	e->n_out = n_out;
	e->max_feature = -1;
	if ((rc = tb_read(p, &b, err, n)) || (rc = tb_check_runs(&b, err, n)) ||
	    (rc = tb_alloc(e, b.n, b.n)) || (rc = tb_layout(e, &b, err, n)) ||
	    (rc = tb_weights(p, prefix, e, &b, err, n)))
		goto done;
	if (e->n_out <= 0)
		e->n_out = 1;
	/* ONNX Runtime checks every node's feature id, leaves' too */
	for (int64_t i = 0; i < b.n; i++)
		e->max_feature = b.feat[i] > e->max_feature ? b.feat[i] : e->max_feature;
	e->dense = e->n_nodes > 0;
	for (int64_t q = 0; q < e->n_nodes && e->dense; q++) {
		if (e->nodes[q].inc[0] || e->nodes[q].inc[1])
			continue;
		e->dense = e->wcount[q] == e->n_out;
		for (int32_t k = 0; k < e->wcount[q] && e->dense; k++)
			e->dense = e->wtarget[e->wfirst[q] + k] == k;
	}
	e->mode = -1;
	for (int64_t q = 0; q < e->n_nodes; q++) {
		int m = e->flags[q] & 15;

		e->missing |= (e->flags[q] & TREE_MISSING_TRUE) != 0;
		if (m != TREE_LEAF)
			e->mode = e->mode < 0 || e->mode == m ? m : TREE_MIXED;
	}
	if (e->mode < 0)
		e->mode = TREE_LEQ;
	e->n_base = ml_attr_reals(p, "base_values", &e->base, err, n);
	if (e->n_base < 0)
		rc = CPU_E_INVALID;
done:
	tb_free(&b);
	return rc;
}

void tree_free(tree_ens *e)
{
	free(e->nodes);
	free(e->thr64);
	free(e->flags);
	free(e->wfirst);
	free(e->wcount);
	free(e->roots);
	free(e->depth);
	free(e->wtarget);
	free(e->wval);
	free(e->wval64);
	free(e->base);
	memset(e, 0, sizeof(*e));
}
