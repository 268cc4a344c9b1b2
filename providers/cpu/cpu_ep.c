/*
 * cpu_ep: ort-ep-cpu, the CPU execution provider process.  It fills the
 * ep_host vtable: capability answers come from the op registry, `load`
 * prepares every node once (weights are read in place from shm or the
 * mapped external-data file), and `run` walks the nodes in order.  Values
 * the core planned live in shared memory and kernels write them in place;
 * values it did not plan (shapes known only at run time) live on this
 * process's heap until their last use, and those that are graph outputs are
 * copied into the run's dynamic region for the core.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cpu_exec.h"
#include "cpu_fuse.h"
#include "cpu_graph.h"
#include "cpu_io.h"
#include "cpu_prepack.h"
#include "cpu_kernel.h"
#include "ep_host.h"
#include "log.h"
#include "threadpool.h"

typedef struct cpu_sg {
	size_t n_values;
	cpu_tensor *consts;       /* per value; data != NULL for weights */
	size_t n_nodes;
	cpu_node *nodes;
	int **node_in, **node_out;
	const cpu_tensor ***node_consts;
	int **node_refs;          /* values a node's subgraphs read, -1 ended */
	int *last_use;            /* last node reading each value, -1 if none */
	int inited;               /* nodes successfully initialised */
	/* per-run scratch, sized at load so a run does not allocate these */
	cpu_tensor *vals;
	int *heap, *have;
	const cpu_tensor **in;
	const cpu_tensor **planned;
	cpu_tensor *out;
	int *out_heap;
	int max_in, max_out;
	int bound_index_size;
	int *bound;               /* value -> binding index or -1 */
	cpu_arena *arena;         /* strings and sequences of one run */
	cpu_pack_cache *pack;     /* pre-packed weights of this subgraph */
	cpu_opsets opsets;        /* the model's, for ops with subgraphs */
	const char **opset_domains;
	int64_t *opset_versions;
	const ep_subgraph *sg;    /* for the scope of a run */
	cpu_pool *pool;          /* intra-op threads and GEMM scratch, or NULL */
	cpu_fuse_node *fuse;      /* per node: fused chains (cpu_fuse.h), or NULL */
} cpu_sg;

/* The top-level values by name, for subgraphs that read them. */
typedef struct cpu_sg_scope {
	cpu_scope base;
	cpu_sg *c;
} cpu_sg_scope;

static int value_index(const ep_subgraph *sg, const char *name)
{
	/* Subgraphs are small lists; the core sends them in node order. */
	for (size_t i = 0; i < sg->n_values; i++)
		if (strcmp(sg->values[i].name, name) == 0)
			return (int)i;
	return -1;
}

static int cpu_init(void **self, char *detail, size_t n)
{
	*self = NULL;
	snprintf(detail, n, "cpu, %ld cores", sysconf(_SC_NPROCESSORS_ONLN));
	return 0;
}

static int cpu_supported(void *self, const Onnx__NodeProto *node, int64_t opset,
			 const int32_t *in_dtypes, int n_in, char *why, size_t n)
{
	(void)self;
	return cpu_node_supported(node, opset, in_dtypes, n_in, why, n);
}

static void cpu_sg_free(cpu_sg *c)
{
	if (!c)
		return;
	for (int i = 0; i < c->inited; i++)
		cpu_node_fini(&c->nodes[i]);
	for (size_t i = 0; i < c->n_nodes; i++) {
		if (c->node_in)
			free(c->node_in[i]);
		if (c->node_out)
			free(c->node_out[i]);
		if (c->node_consts)
			free(c->node_consts[i]);
		if (c->node_refs)
			free(c->node_refs[i]);
	}
	free(c->node_refs);
	free(c->opset_domains);
	free(c->opset_versions);
	free(c->node_in);
	free(c->node_out);
	free(c->node_consts);
	free(c->nodes);
	free(c->consts);
	free(c->last_use);
	free(c->vals);
	free(c->heap);
	free(c->have);
	free(c->in);
	free(c->planned);
	free(c->out);
	free(c->out_heap);
	free(c->bound);
	cpu_arena_free(c->arena);
	cpu_pack_cache_close(c->pack);
	cpu_pool_destroy(c->pool);
	cpu_fuse_free(c->fuse, c->n_nodes);
	free(c);
}

static void cpu_unload(void *self, ep_subgraph *sg)
{
	(void)self;
	cpu_sg_free(sg->impl);
	sg->impl = NULL;
}

/* Resolves one node's value names to indexes. */
static int map_names(const ep_subgraph *sg, char **names, size_t n, int **out,
		     char *err, size_t errlen)
{
	*out = calloc(n ? n : 1, sizeof(int));
	if (!*out)
		return snprintf(err, errlen, "out of memory"), EP_E_NOMEM;
	for (size_t i = 0; i < n; i++) {
		(*out)[i] = names[i][0] ? value_index(sg, names[i]) : -1;
		if (names[i][0] && (*out)[i] < 0)
			return snprintf(err, errlen, "value '%s' is not in the subgraph", names[i]),
			       EP_E_INVALID;
	}
	return 0;
}

static int alloc_tables(cpu_sg *c, size_t nv, size_t nn)
{
	c->n_values = nv;
	c->n_nodes = nn;
	c->consts = calloc(nv + 1, sizeof(*c->consts));
	c->vals = calloc(nv + 1, sizeof(*c->vals));
	c->heap = calloc(nv + 1, sizeof(int));
	c->have = calloc(nv + 1, sizeof(int));
	c->bound = calloc(nv + 1, sizeof(int));
	c->last_use = calloc(nv + 1, sizeof(int));
	c->nodes = calloc(nn + 1, sizeof(*c->nodes));
	c->node_in = calloc(nn + 1, sizeof(int *));
	c->node_out = calloc(nn + 1, sizeof(int *));
	c->node_consts = calloc(nn + 1, sizeof(*c->node_consts));
	c->node_refs = calloc(nn + 1, sizeof(int *));
	if (!c->consts || !c->vals || !c->heap || !c->have || !c->bound || !c->last_use ||
	    !c->nodes || !c->node_in || !c->node_out || !c->node_consts || !c->node_refs)
		return EP_E_NOMEM;
	for (size_t i = 0; i < nv; i++)
		c->last_use[i] = -1;
	return 0;
}

static int load_weights(cpu_sg *c, const ep_subgraph *sg)
{
	for (size_t i = 0; i < sg->n_weights; i++) {
		const ep_weight *w = &sg->weights[i];
		cpu_tensor *t = &c->consts[w->value];

		t->dtype = w->dtype;
		t->rank = w->rank;
		memcpy(t->dims, w->dims, sizeof(int64_t) * (size_t)w->rank);
		t->data = (void *)w->data;
		t->nbytes = w->nbytes;
	}
	return 0;
}

static int load_opsets(cpu_sg *c, const ep_subgraph *sg)
{
	size_t n = sg->msg ? sg->msg->n_opsets : 0;

	c->opset_domains = calloc(n + 1, sizeof(*c->opset_domains));
	c->opset_versions = calloc(n + 1, sizeof(*c->opset_versions));
	if (!c->opset_domains || !c->opset_versions)
		return EP_E_NOMEM;
	for (size_t i = 0; i < n; i++) {
		c->opset_domains[i] = sg->msg->opsets[i]->domain ? sg->msg->opsets[i]->domain : "";
		c->opset_versions[i] = sg->msg->opsets[i]->version;
	}
	c->opsets.n = n;
	c->opsets.domains = c->opset_domains;
	c->opsets.versions = c->opset_versions;
	return 0;
}

typedef struct refs_arg {
	cpu_sg *c;
	int k, n;
	int *list;
} refs_arg;

static void note_ref(void *arg, const char *name)
{
	refs_arg *r = arg;
	int v = value_index(r->c->sg, name);

	if (v < 0 || r->c->last_use[v] == r->k)
		return;   /* defined inside the subgraph, or already noted */
	r->c->last_use[v] = r->k;
	if ((size_t)r->n < r->c->n_values)
		r->list[r->n++] = v;
}

/* Outer values that node k's subgraphs read (its implicit inputs) stay
 * alive until node k has run. */
static int map_refs(cpu_sg *c, size_t k)
{
	refs_arg r = {c, (int)k, 0, malloc(sizeof(int) * (c->n_values + 1))};

	if (!r.list)
		return EP_E_NOMEM;
	cpu_graph_refs(c->sg->graph->node[k], note_ref, &r);
	r.list[r.n] = -1;
	c->node_refs[k] = r.list;
	return 0;
}

/* Node k's value indexes and the outer values its subgraphs read. */
static int map_node(cpu_sg *c, const ep_subgraph *sg, size_t k, char *err, size_t n)
{
	const Onnx__NodeProto *p = sg->graph->node[k];
	int rc;

	rc = map_names(sg, p->input, p->n_input, &c->node_in[k], err, n);
	if (rc == 0)
		rc = map_names(sg, p->output, p->n_output, &c->node_out[k], err, n);
	if (rc == 0 && map_refs(c, k))
		rc = (snprintf(err, n, "out of memory"), EP_E_NOMEM);
	return rc;
}

/* A fused head takes the chain's inputs (constants replaced by folded
 * ones) and writes the chain's last output. */
static int apply_fusion(cpu_sg *c, size_t k, const cpu_fuse_node *f, int *n_in)
{
	int *in = malloc(sizeof(int) * (size_t)(f->n_in + 1));

	if (!in)
		return EP_E_NOMEM;
	memcpy(in, f->in, sizeof(int) * (size_t)f->n_in);
	free(c->node_in[k]);
	c->node_in[k] = in;
	c->node_out[k][0] = f->out0;
	*n_in = f->n_in;
	return 0;
}

static int load_node(cpu_sg *c, const ep_subgraph *sg, size_t k, char *err, size_t n)
{
	const Onnx__NodeProto *p = sg->graph->node[k];
	const cpu_fuse_node *f = c->fuse && c->fuse[k].head ? &c->fuse[k] : NULL;
	int rc, n_in = (int)p->n_input;

	if (f && apply_fusion(c, k, f, &n_in))
		return snprintf(err, n, "out of memory"), EP_E_NOMEM;
	c->node_consts[k] = calloc((size_t)n_in + 1, sizeof(cpu_tensor *));
	if (!c->node_consts[k])
		return EP_E_NOMEM;
	for (int i = 0; i < n_in; i++) {
		int v = c->node_in[k][i];

		if (f && f->folded[i])
			c->node_consts[k][i] = f->folded[i];
		else if (v >= 0 && c->consts[v].data)
			c->node_consts[k][i] = &c->consts[v];
		if (v >= 0 && c->last_use[v] < (int)k)
			c->last_use[v] = (int)k;
	}
	if (n_in > c->max_in)
		c->max_in = n_in;
	if ((int)p->n_output > c->max_out)
		c->max_out = (int)p->n_output;
	rc = cpu_node_init_fused(&c->nodes[k], c->pack, &c->opsets, f ? &f->fuse : NULL, p,
				 ep_subgraph_opset(sg, p->domain ? p->domain : ""),
				 c->node_consts[k], n_in, (int)p->n_output, err, n);
	if (rc == 0)
		c->inited = (int)k + 1;
	return rc;
}

/* Fusions need to know which values the core reads after the step; set
 * ORTMK_CPU_FUSE=0 to run every node as it is (for comparisons). */
static void plan_fusions(cpu_sg *c, const ep_subgraph *sg)
{
	const char *env = getenv("ORTMK_CPU_FUSE");
	unsigned char *exported = calloc(c->n_values + 1, 1);
	int *extra = calloc(c->n_values + 1, sizeof(int));
	cpu_fuse_graph fg = {sg->graph, c->n_values, c->node_in, c->node_out, c->consts,
			     exported, extra, ep_subgraph_opset(sg, "")};

	if (exported && extra && sg->msg->exported_known && !(env && strcmp(env, "0") == 0)) {
		for (size_t i = 0; i < sg->msg->n_exported; i++)
			if (sg->msg->exported[i] < c->n_values)
				exported[sg->msg->exported[i]] = 1;
		for (size_t k = 0; k < c->n_nodes; k++)
			for (int i = 0; c->node_refs[k][i] >= 0; i++)
				extra[c->node_refs[k][i]]++;
		c->fuse = cpu_fuse_plan(&fg);
	}
	for (size_t k = 0; c->fuse && k < c->n_nodes; k++)
		if (c->fuse[k].head)
			ipc_log(IPC_LOG_DEBUG, "fused %d nodes into '%s' (%s): add %d, bias %d, act %d%s",
				c->fuse[k].n_fused, sg->graph->node[k]->name,
				sg->graph->node[k]->op_type, c->fuse[k].fuse.add_input,
				c->fuse[k].fuse.bias_input, (int)c->fuse[k].fuse.act,
				c->fuse[k].fuse.attention ? ", attention" : "");
	free(exported);
	free(extra);
}

/* Intra-op threads for a session's request: at least 1, and no more than
 * four per online CPU (more only adds waiting threads and scratch). */
static int pool_size(int requested)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	int cap = cpus > 0 && cpus < 64 ? 4 * (int)cpus : 256;

	return requested < 1 ? 1 : requested > cap ? cap : requested;
}

static int cpu_load(void *self, ep_subgraph *sg, char *err, size_t n)
{
	cpu_sg *c = calloc(1, sizeof(*c));
	int rc;

	(void)self;
	if (!c || alloc_tables(c, sg->n_values, sg->graph->n_node) || load_opsets(c, sg) ||
	    !(c->arena = cpu_arena_new())) {
		cpu_sg_free(c);
		return snprintf(err, n, "out of memory"), EP_E_NOMEM;
	}
	c->sg = sg;
	/* The session's intra-op threads: this thread plus threads - 1
	 * workers, shared by the GEMM-based kernels of every node.  With one
	 * thread the pool still keeps the GEMM's packing scratch between
	 * runs (no allocation per call). */
	if (cpu_pool_create(pool_size(sg->threads), &c->pool))
		fprintf(stderr, "ort-ep-cpu: warning: no thread pool (%d threads), running on one\n",
			sg->threads);
	load_weights(c, sg);
	c->pack = cpu_pack_cache_open(sg->prepack_in_fd, sg->prepack_in_size,
				      cpu_pack_hash(sg->msg->graph.data, sg->msg->graph.len));
	if (!c->pack) {
		cpu_sg_free(c);
		return snprintf(err, n, "out of memory"), EP_E_NOMEM;
	}
	for (size_t k = 0; k < c->n_nodes; k++) {
		rc = map_node(c, sg, k, err, n);
		if (rc) {
			cpu_sg_free(c);
			return rc < 0 ? rc : EP_E_INVALID;
		}
	}
	plan_fusions(c, sg);
	for (size_t k = 0; k < c->n_nodes; k++) {
		/* A node fused into an earlier one stays uninitialised: not run. */
		rc = c->fuse && c->fuse[k].skip ? 0 : load_node(c, sg, k, err, n);
		if (rc) {
			cpu_sg_free(c);
			return rc < 0 ? rc : EP_E_INVALID;
		}
		c->inited = (int)k + 1;
	}
	c->in = calloc((size_t)c->max_in + 1, sizeof(*c->in));
	c->planned = calloc((size_t)c->max_out + 1, sizeof(*c->planned));
	c->out = calloc((size_t)c->max_out + 1, sizeof(*c->out));
	c->out_heap = calloc((size_t)c->max_out + 1, sizeof(int));
	if (!c->in || !c->planned || !c->out || !c->out_heap) {
		cpu_sg_free(c);
		return snprintf(err, n, "out of memory"), EP_E_NOMEM;
	}
	cpu_pack_cache_stats(c->pack, &sg->prepack_hits, &sg->prepack_misses, &sg->prepack_ns);
	/* A fresh cache only when something was packed: hits-only is current. */
	if (sg->prepack_out_fd >= 0 && (sg->prepack_misses || sg->prepack_in_fd < 0))
		sg->prepack_written = cpu_pack_cache_write(c->pack, sg->prepack_out_fd) == 0;
	sg->impl = c;
	return 0;
}

/* ---- run --------------------------------------------------------------- */

static void release_heap(cpu_sg *c, int v)
{
	if (c->heap[v])
		free(c->vals[v].data);
	c->heap[v] = 0;
	c->have[v] = 0;
}

static int bind_values(cpu_sg *c, const ep_subgraph *sg, ep_run *r, char *err, size_t n)
{
	for (size_t v = 0; v < c->n_values; v++) {
		c->bound[v] = -1;
		c->heap[v] = 0;
		c->have[v] = c->consts[v].data != NULL;
		if (c->have[v])
			c->vals[v] = c->consts[v];
	}
	for (size_t i = 0; i < r->n_bindings; i++) {
		ep_tensor *b = &r->bindings[i];
		cpu_tensor *t = &c->vals[b->value];

		if (b->kind == 0 && b->dtype != sg->values[b->value].dtype && sg->values[b->value].dtype)
			return snprintf(err, n, "value '%s': bound as %d, loaded as %d",
					sg->values[b->value].name, b->dtype,
					sg->values[b->value].dtype), EP_E_INVALID;
		c->bound[b->value] = (int)i;
		if (b->dynamic)
			continue;
		if (cpu_io_special(b)) {
			int rc = cpu_io_decode(c->arena, b, t, err, n);

			if (rc)
				return rc;
			c->have[b->value] = 1;
			continue;
		}
		t->dtype = b->dtype;
		t->rank = b->rank;
		memcpy(t->dims, b->dims, sizeof(int64_t) * (size_t)b->rank);
		t->data = b->data;
		t->nbytes = b->nbytes;
		c->have[b->value] = 1;
	}
	return 0;
}

static const cpu_tensor *sg_find(const cpu_scope *s, const char *name)
{
	cpu_sg *c = ((const cpu_sg_scope *)s)->c;
	int v = value_index(c->sg, name);

	return v >= 0 && c->have[v] ? &c->vals[v] : NULL;
}

static int run_node(cpu_sg *c, const ep_subgraph *sg, ep_run *r, size_t k,
		    int threads, char *err, size_t n)
{
	cpu_node *node = &c->nodes[k];
	cpu_sg_scope scope = {{NULL, sg_find}, c};
	int rc;

	for (int i = 0; i < node->n_in; i++) {
		int v = c->node_in[k][i];

		/* Constants (folded ones included) come from the node itself. */
		if (c->node_consts[k][i]) {
			c->in[i] = c->node_consts[k][i];
			continue;
		}
		if (v >= 0 && !c->have[v])
			return snprintf(err, n, "node '%s': input '%s' has no value",
					sg->graph->node[k]->name, sg->values[v].name), EP_E_INVALID;
		c->in[i] = v >= 0 ? &c->vals[v] : NULL;
	}
	for (int i = 0; i < node->n_out; i++) {
		int v = c->node_out[k][i];
		int b = v >= 0 ? c->bound[v] : -1;

		c->planned[i] = b >= 0 && !r->bindings[b].dynamic ? &c->vals[v] : NULL;
		c->out_heap[i] = 0;
	}
	rc = cpu_node_run_pool(node, c->arena, &scope.base, c->pool, c->in, c->planned, c->out,
			       c->out_heap, threads, err, n);
	if (rc)
		return rc;
	for (int i = 0; i < node->n_out; i++) {
		int v = c->node_out[k][i];

		if (v < 0 || c->planned[i]) {
			if (c->out_heap[i])
				free(c->out[i].data);
			continue;
		}
		release_heap(c, v);
		c->vals[v] = c->out[i];
		c->heap[v] = c->out_heap[i];
		c->have[v] = c->out[i].data != NULL || c->out[i].dtype == CPU_NONE;
	}
	return 0;
}

/* Copies the values the core could not plan into the dynamic region. */
static int publish_dynamic(cpu_sg *c, const ep_subgraph *sg, ep_run *r, char *err, size_t n)
{
	int overflow = 0;

	for (size_t i = 0; i < r->n_bindings; i++) {
		ep_tensor *b = &r->bindings[i];
		cpu_tensor *t = &c->vals[b->value];
		void *dst;

		if (!b->dynamic)
			continue;
		if (!c->have[b->value])
			return snprintf(err, n, "output '%s' was not produced",
					sg->values[b->value].name), EP_E_INVALID;
		dst = ep_run_dyn_alloc(r, cpu_io_size(t));
		if (!dst) {
			overflow = 1;
			continue;
		}
		if (cpu_io_encode(t, dst, cpu_io_size(t), b))
			return snprintf(err, n, "output '%s' cannot be encoded",
					sg->values[b->value].name), EP_E_INTERNAL;
		b->data = dst;
	}
	if (overflow)
		return snprintf(err, n, "dynamic outputs need %llu bytes, region has %llu",
				(unsigned long long)r->dyn_needed,
				(unsigned long long)r->dyn_size), EP_E_DYN_OVERFLOW;
	return 0;
}

/* Heap values nobody reads after node k go now, unless they are bound. */
static void release_dead(cpu_sg *c, size_t k)
{
	const cpu_node *node = &c->nodes[k];

	for (int i = 0; i < node->n_in; i++) {
		int v = c->node_in[k][i];

		if (v >= 0 && c->heap[v] && c->last_use[v] == (int)k && c->bound[v] < 0)
			release_heap(c, v);
	}
	for (int i = 0; c->node_refs[k][i] >= 0; i++) {
		int v = c->node_refs[k][i];

		if (c->heap[v] && c->last_use[v] == (int)k && c->bound[v] < 0)
			release_heap(c, v);
	}
	for (int i = 0; i < node->n_out; i++) {
		int v = c->node_out[k][i];

		if (v >= 0 && c->heap[v] && c->last_use[v] < 0 && c->bound[v] < 0)
			release_heap(c, v);
	}
}

static int cpu_run(void *self, ep_subgraph *sg, ep_run *r, char *err, size_t n)
{
	cpu_sg *c = sg->impl;
	int rc;

	(void)self;
	rc = bind_values(c, sg, r, err, n);
	for (size_t k = 0; rc == 0 && k < c->n_nodes; k++) {
		if (!c->nodes[k].op)
			continue;   /* fused into an earlier node */
		rc = run_node(c, sg, r, k, sg->threads, err, n);
		if (rc == 0)
			release_dead(c, k);
	}
	if (rc == 0)
		rc = publish_dynamic(c, sg, r, err, n);
	for (size_t v = 0; v < c->n_values; v++)
		release_heap(c, (int)v);
	cpu_arena_reset(c->arena);
	return rc;
}

static const ep_vtable cpu_vtable = {
	.name = "cpu",
	.init = cpu_init,
	.supported = cpu_supported,
	.load = cpu_load,
	.run = cpu_run,
	.unload = cpu_unload,
	.fini = NULL,
};

int main(int argc, char **argv)
{
	return ep_host_main(&cpu_vtable, argc, argv);
}
