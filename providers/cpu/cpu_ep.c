/*
 * cpu_ep: ort-ep-cpu, the CPU execution provider process.  It fills the
 * ep_host vtable: capability answers come from the op table, `load` builds
 * the graph executor's plan (cpu_exec.h) — value numbers from the core,
 * weights read in place from shm or the mapped external-data file, fusions,
 * every node prepared once — and `run` binds the core's tensors into the
 * run's frame and runs the plan.  Values the core planned live in shared
 * memory and kernels write them in place; values it did not plan (shapes
 * known only at run time) live on this process's heap until their last use,
 * and those that are graph outputs are copied into the run's dynamic region
 * for the core.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cpu_exec.h"
#include "cpu_fold.h"
#include "cpu_fuse.h"
#include "cpu_layout.h"
#include "cpu_io.h"
#include "cpu_prepack.h"
#include "ep_host.h"
#include "igemm.h"
#include "log.h"
#include "ops_table.h"
#include "threadpool.h"

/* One run's state: the executor's frame and the arena of its strings and
 * sequences; nothing of it lives in the plan.  Concurrent runs of a
 * subgraph (ep_host serves one per lane) each take one from the
 * subgraph's free list, made on demand: as many as ever ran at once. */
typedef struct cpu_sg_run {
	cpu_frame *frame;
	cpu_arena *arena;
	cpu_prof prof;            /* profiled runs: spans allocated on the first */
	struct cpu_sg_run *next;  /* in the free list */
} cpu_sg_run;

typedef struct cpu_sg {
	cpu_plan plan;
	pthread_mutex_t runs_mu;  /* the free list */
	cpu_sg_run *free_runs;
	cpu_load_env env;         /* op table, pre-pack cache, opsets */
	cpu_pack_cache *pack;     /* pre-packed weights of this subgraph */
	cpu_opsets opsets;        /* the model's, for ops with subgraphs */
	const char **opset_domains;
	int64_t *opset_versions;
	cpu_pool *pool;           /* intra-op threads and GEMM scratch, or NULL */
	cpu_fuse_node *fuse;      /* per node: fused chains (cpu_fuse.h), or NULL */
	cpu_fold fold;            /* nodes folded into constants at load */
} cpu_sg;

/* The process's state: what it opens before the sandbox forbids opening. */
typedef struct cpu_ep {
	FILE *profile;            /* ORTMK_CPU_PROFILE, or NULL */
} cpu_ep;

static int cpu_init(void **self, char *detail, size_t n)
{
	const char *path = getenv("ORTMK_CPU_PROFILE");
	cpu_ep *ep = calloc(1, sizeof(*ep));

	*self = ep;
	if (!ep)
		return -1;
	if (path && path[0] && !(ep->profile = fopen(path, "a")))
		ipc_log(IPC_LOG_WARN, "ORTMK_CPU_PROFILE=%s: cannot open it; no profile", path);
	/* the int8 kernels' choice asks Linux for the AMX tile state, which
	 * the sandbox entered after init would refuse */
	(void)igemm_isa_best();
	snprintf(detail, n, "cpu, %d cores", cpu_pool_cores());
	return 0;
}

static void cpu_fini(void *self)
{
	cpu_ep *ep = self;

	if (ep && ep->profile)
		fclose(ep->profile);
	free(ep);
}

static int cpu_supported(void *self, const Onnx__NodeProto *node, int64_t opset,
			 const int32_t *in_dtypes, int n_in, char *why, size_t n)
{
	(void)self;
	return cpu_node_supported(&cpu_optable_all, node, opset, in_dtypes, n_in, why, n);
}

static void run_state_free(cpu_sg_run *r)
{
	if (!r)
		return;
	cpu_frame_free(r->frame);
	cpu_arena_free(r->arena);
	free(r->prof.spans);
	free(r);
}

static cpu_sg_run *run_state_new(const cpu_plan *p)
{
	cpu_sg_run *r = calloc(1, sizeof(*r));

	if (r && (!(r->frame = cpu_frame_new(p)) || !(r->arena = cpu_arena_new()))) {
		run_state_free(r);
		r = NULL;
	}
	return r;
}

/* A free run state of c, or a new one (NULL: out of memory). */
static cpu_sg_run *run_state_take(cpu_sg *c)
{
	cpu_sg_run *r;

	pthread_mutex_lock(&c->runs_mu);
	r = c->free_runs;
	if (r)
		c->free_runs = r->next;
	pthread_mutex_unlock(&c->runs_mu);
	return r ? r : run_state_new(&c->plan);
}

static void run_state_put(cpu_sg *c, cpu_sg_run *r)
{
	pthread_mutex_lock(&c->runs_mu);
	r->next = c->free_runs;
	c->free_runs = r;
	pthread_mutex_unlock(&c->runs_mu);
}

static void cpu_sg_free(cpu_sg *c)
{
	size_t n_nodes;

	if (!c)
		return;
	n_nodes = c->plan.n_nodes;
	while (c->free_runs) {
		cpu_sg_run *r = c->free_runs;

		c->free_runs = r->next;
		run_state_free(r);
	}
	pthread_mutex_destroy(&c->runs_mu);
	cpu_plan_free(&c->plan);     /* the nodes first: they read the folded constants */
	cpu_fuse_free(c->fuse, n_nodes);
	cpu_fold_free(&c->fold);
	free(c->opset_domains);
	free(c->opset_versions);
	cpu_pack_cache_close(c->pack);
	cpu_pool_destroy(c->pool);
	free(c);
}

/* ORTMK_CPU_PROFILE=FILE (opened at init): at unload, each node's mean
 * time per run is appended to FILE as tab-separated lines (subgraph id,
 * node index, op type, node name, microseconds per run, runs), fused heads
 * under their own op type with "+fused".  Read it with
 * tools/bench/profile_ops.py. */
static void write_profile(const cpu_sg *c, const ep_subgraph *sg, FILE *fp)
{
	uint64_t runs = c->plan.node_ns ? c->plan.node_ns[c->plan.n_nodes] : 0;

	if (!fp || !runs)
		return;
	for (size_t k = 0; k < c->plan.n_nodes; k++) {
		const Onnx__NodeProto *p = sg->graph->node[k];

		if (!c->plan.nodes[k].op)
			continue;
		fprintf(fp, "%u\t%zu\t%s%s\t%s\t%.3f\t%llu\n", sg->id, k, p->op_type,
			c->plan.nodes[k].fuse ? "+fused" : "", p->name ? p->name : "",
			(double)c->plan.node_ns[k] / 1e3 / (double)runs, (unsigned long long)runs);
	}
	fflush(fp);
}

static void cpu_unload(void *self, ep_subgraph *sg)
{
	cpu_ep *ep = self;

	if (sg->impl)
		write_profile(sg->impl, sg, ep->profile);
	cpu_sg_free(sg->impl);
	sg->impl = NULL;
}

/* Resolves one node's value names to the core's value numbers. */
static int map_names(const cpu_plan *p, char **names, size_t n, int **out, char *err,
		     size_t errlen)
{
	*out = calloc(n ? n : 1, sizeof(int));
	if (!*out)
		return snprintf(err, errlen, "out of memory"), EP_E_NOMEM;
	for (size_t i = 0; i < n; i++) {
		(*out)[i] = names[i][0] ? cpu_plan_find(p, names[i]) : -1;
		if (names[i][0] && (*out)[i] < 0)
			return snprintf(err, errlen, "value '%s' is not in the subgraph", names[i]),
			       EP_E_INVALID;
	}
	return 0;
}

static void load_values(cpu_sg *c, const ep_subgraph *sg)
{
	for (size_t v = 0; v < sg->n_values; v++)
		c->plan.names[v] = sg->values[v].name;
	for (size_t i = 0; i < sg->n_weights; i++) {
		const ep_weight *w = &sg->weights[i];
		cpu_tensor *t = &c->plan.consts[w->value];

		t->dtype = w->dtype;
		t->rank = w->rank;
		memcpy(t->dims, w->dims, sizeof(int64_t) * (size_t)w->rank);
		t->data = (void *)w->data;
		t->nbytes = w->nbytes;
	}
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

/* Node k's value numbers and the outer values its subgraphs read. */
static int map_node(cpu_sg *c, const ep_subgraph *sg, size_t k, char *err, size_t n)
{
	const Onnx__NodeProto *p = sg->graph->node[k];
	int rc;

	rc = map_names(&c->plan, p->input, p->n_input, &c->plan.node_in[k], err, n);
	if (rc == 0)
		rc = map_names(&c->plan, p->output, p->n_output, &c->plan.node_out[k], err, n);
	if (rc == 0 && cpu_plan_refs(&c->plan, k, p))
		rc = (snprintf(err, n, "out of memory"), EP_E_NOMEM);
	return rc;
}

/* A fused head takes the chain's inputs (constants replaced by folded
 * ones) and writes the chain's last output. */
static int apply_fusion(cpu_sg *c, size_t k, const cpu_fuse_node *f)
{
	int *in = malloc(sizeof(int) * (size_t)(f->n_in + 1));

	if (!in)
		return EP_E_NOMEM;
	memcpy(in, f->in, sizeof(int) * (size_t)f->n_in);
	free(c->plan.node_in[k]);
	c->plan.node_in[k] = in;
	c->plan.node_out[k][0] = f->out0;
	return 0;
}

static int load_node(cpu_sg *c, const ep_subgraph *sg, size_t k, char *err, size_t n)
{
	const Onnx__NodeProto *p = sg->graph->node[k];
	const cpu_fuse_node *f = c->fuse && c->fuse[k].head ? &c->fuse[k] : NULL;

	if (f && apply_fusion(c, k, f))
		return snprintf(err, n, "out of memory"), EP_E_NOMEM;
	return cpu_plan_init_node(&c->plan, k, &c->env, f ? &f->fuse : NULL, f ? f->folded : NULL,
				  p, ep_subgraph_opset(sg, p->domain ? p->domain : ""),
				  f ? f->n_in : (int)p->n_input, err, n);
}

/* Per value: 1 when the core reads it after the step (all of them when
 * the core did not say), or NULL when out of memory. */
static unsigned char *exported_values(const cpu_sg *c, const ep_subgraph *sg)
{
	unsigned char *exported = calloc(c->plan.n_values + 1, 1);

	if (!exported)
		return NULL;
	if (!sg->msg->exported_known)
		memset(exported, 1, c->plan.n_values);
	for (size_t i = 0; i < sg->msg->n_exported; i++)
		if (sg->msg->exported[i] < c->plan.n_values)
			exported[sg->msg->exported[i]] = 1;
	return exported;
}

/* The session's graph optimisation level (LoadSubgraph.opt_level): 0 runs
 * every node as the model has it, 1 folds constants, 2 also fuses. */
static unsigned opt_level(const ep_subgraph *sg)
{
	return sg->msg->has_opt_level ? sg->msg->opt_level : 2;
}

/* Channel-blocked values between 1x1 and depthwise convolutions
 * (cpu_layout.h); ORTMK_CPU_CONV_BLOCKED=0 keeps every value NCHW. */
static void plan_layout(cpu_sg *c, const ep_subgraph *sg, const cpu_fuse_graph *fg)
{
	int32_t *dt = calloc(c->plan.n_values + 1, sizeof(*dt));
	int count;

	if (!dt || !(c->plan.layout = malloc(c->plan.n_nodes + 1))) {
		free(dt);
		return;
	}
	for (size_t v = 0; v < c->plan.n_values; v++)
		dt[v] = sg->values[v].dtype;
	count = cpu_layout_plan(fg, c->fuse, dt, c->plan.layout);
	free(dt);
	if (count <= 0) {
		free(c->plan.layout);
		c->plan.layout = NULL;
	} else {
		ipc_log(IPC_LOG_DEBUG, "%d values kept channel-blocked", count);
		for (size_t k = 0; k < c->plan.n_nodes; k++)
			if (c->plan.layout[k])
				ipc_log(IPC_LOG_DEBUG, "channel-blocked: '%s' (%s)%s%s%s",
					sg->graph->node[k]->name, sg->graph->node[k]->op_type,
					c->plan.layout[k] & CPU_LAYOUT_IN_BLK8 ? " in" : "",
					c->plan.layout[k] & CPU_LAYOUT_IN1_BLK8 ? " in1" : "",
					c->plan.layout[k] & CPU_LAYOUT_OUT_BLK8 ? " out" : "");
	}
}

/* Fusions need to know which values the core reads after the step; set
 * ORTMK_CPU_FUSE=0 to run every node as it is (for comparisons). */
static void plan_fusions(cpu_sg *c, const ep_subgraph *sg, unsigned char *exported)
{
	const char *env = getenv("ORTMK_CPU_FUSE");
	cpu_plan *p = &c->plan;
	int *extra = calloc(p->n_values + 1, sizeof(int));
	cpu_fuse_graph fg = {sg->graph, p->n_values, p->node_in, p->node_out, p->consts,
			     exported, extra, ep_subgraph_opset(sg, ""), c->fold.node};

	if (extra && sg->msg->exported_known && opt_level(sg) >= 2 && !(env && strcmp(env, "0") == 0)) {
		for (size_t k = 0; k < p->n_nodes; k++)
			for (int i = 0; p->node_refs[k][i] >= 0; i++)
				extra[p->node_refs[k][i]]++;
		c->fuse = cpu_fuse_plan(&fg);
		plan_layout(c, sg, &fg);
	}
	for (size_t k = 0; c->fuse && k < p->n_nodes; k++)
		if (c->fuse[k].head)
			ipc_log(IPC_LOG_DEBUG, "fused %d nodes into '%s' (%s): add %d, bias %d, act %d%s",
				c->fuse[k].n_fused,
				sg->graph->node[k]->name ? sg->graph->node[k]->name : "",
				sg->graph->node[k]->op_type, c->fuse[k].fuse.add_input,
				c->fuse[k].fuse.bias_input, (int)c->fuse[k].fuse.act,
				c->fuse[k].fuse.attention ? ", attention" : "");
	free(extra);
}

/* Intra-op threads for a session's request: at least 1, and no more than
 * four per online CPU (more only adds waiting threads and scratch). */
static int pool_size(int requested)
{
	int cpus = cpu_pool_cores();
	int cap = cpus < 64 ? 4 * cpus : 256;

	return requested < 1 ? 1 : requested > cap ? cap : requested;
}

static int64_t sg_opset(void *arg, const char *domain)
{
	return ep_subgraph_opset(arg, domain);
}

/* float16 values inside the step stay float32 (cpu_plan_wide);
 * ORTMK_CPU_F16_WIDE=0 rounds every one to float16 (for comparisons). */
static int plan_wide(cpu_sg *c, const ep_subgraph *sg, const unsigned char *exported, char *err,
		     size_t n)
{
	const char *env = getenv("ORTMK_CPU_F16_WIDE");
	int32_t *dt;
	int count;

	if (env && strcmp(env, "0") == 0)
		return 0;
	if (!(dt = calloc(c->plan.n_values + 1, sizeof(*dt))))
		return snprintf(err, n, "out of memory"), EP_E_NOMEM;
	for (size_t v = 0; v < c->plan.n_values; v++)
		dt[v] = sg->values[v].dtype;
	count = cpu_plan_wide(&c->plan, dt, exported);
	free(dt);
	if (count < 0)
		return snprintf(err, n, "out of memory"), EP_E_NOMEM;
	if (count)
		ipc_log(IPC_LOG_DEBUG, "%d float16 values kept in float32", count);
	return 0;
}

/* Whether node k runs: not folded into a constant, nor fused into an
 * earlier node (those stay uninitialised). */
static int node_runs(const cpu_sg *c, size_t k)
{
	return !(c->fold.node && c->fold.node[k]) && !(c->fuse && c->fuse[k].skip);
}

/* The weights a subgraph's nodes read as they are, by address (a folded
 * Reshape of a weight may be a view of it): a weight goes back to the host
 * (ep_subgraph_drop_weight) once every reader packed it and said it never
 * reads it again (cpu_node.packed_only).  A reader that cannot say so
 * (a nested subgraph, the core reading an exported value) holds it for
 * good. */
typedef struct weight_readers {
	const ep_weight **w;    /* sorted by data */
	int *readers;
	size_t n;
} weight_readers;

#define READER_FOREVER (1 << 24)

static int cmp_weight(const void *a, const void *b)
{
	const uint8_t *x = (*(const ep_weight *const *)a)->data;
	const uint8_t *y = (*(const ep_weight *const *)b)->data;

	return x < y ? -1 : x > y;
}

/* The index of the weight holding p, or -1. */
static long weight_at(const weight_readers *wr, const void *p)
{
	size_t lo = 0, hi = wr->n;

	while (hi - lo > 1) {
		size_t mid = (lo + hi) / 2;

		if ((const uint8_t *)wr->w[mid]->data <= (const uint8_t *)p)
			lo = mid;
		else
			hi = mid;
	}
	if (wr->n == 0 || (const uint8_t *)p < (const uint8_t *)wr->w[lo]->data ||
	    (const uint8_t *)p >= (const uint8_t *)wr->w[lo]->data + wr->w[lo]->nbytes)
		return -1;
	return (long)lo;
}

static void count_reader(weight_readers *wr, const cpu_tensor *t, int count)
{
	long i = t && t->data ? weight_at(wr, t->data) : -1;

	if (i >= 0)
		wr->readers[i] += count;
}

/* Counts, after fusion, the readers of every weight among the nodes that
 * will run; 0, or -1 when out of memory (nothing is then given back). */
static int weight_readers_count(weight_readers *wr, const cpu_sg *c, const ep_subgraph *sg,
				const unsigned char *exported)
{
	const cpu_plan *p = &c->plan;

	memset(wr, 0, sizeof(*wr));
	wr->w = calloc(sg->n_weights + 1, sizeof(*wr->w));
	wr->readers = calloc(sg->n_weights + 1, sizeof(*wr->readers));
	if (!wr->w || !wr->readers)
		return -1;
	for (size_t i = 0; i < sg->n_weights; i++)
		if (sg->weights[i].data && sg->weights[i].nbytes)
			wr->w[wr->n++] = &sg->weights[i];
	qsort(wr->w, wr->n, sizeof(*wr->w), cmp_weight);
	for (size_t v = 0; v < p->n_values; v++)
		if (exported[v])
			count_reader(wr, &p->consts[v], READER_FOREVER);
	for (size_t k = 0; k < p->n_nodes; k++) {
		const cpu_fuse_node *f = c->fuse && c->fuse[k].head ? &c->fuse[k] : NULL;
		const int *in = f ? f->in : p->node_in[k];
		int n_in = f ? f->n_in : (int)sg->graph->node[k]->n_input;

		if (!node_runs(c, k))
			continue;
		for (int i = 0; i < n_in; i++)
			count_reader(wr, f && f->folded[i] ? f->folded[i] :
				     in[i] >= 0 ? &p->consts[in[i]] : NULL, 1);
		for (int i = 0; p->node_refs[k] && p->node_refs[k][i] >= 0; i++)
			count_reader(wr, &p->consts[p->node_refs[k][i]], READER_FOREVER);
	}
	return 0;
}

/* Node k is prepared: the weights it took in packed form only lose a
 * reader, and those no node reads any more go back. */
static void weight_readers_done(weight_readers *wr, ep_subgraph *sg, const cpu_node *node)
{
	for (int i = 0; wr->readers && node->packed_only && i < node->n_in && i < 64; i++) {
		const cpu_tensor *t = node->consts ? node->consts[i] : NULL;
		long w = (node->packed_only >> i & 1) && t && t->data ? weight_at(wr, t->data) : -1;

		if (w >= 0 && --wr->readers[w] == 0 && ep_subgraph_drop_weight(sg, wr->w[w]->data) == 0)
			ipc_log(IPC_LOG_DEBUG, "weight of %llu bytes given back: every reader packed it",
				(unsigned long long)wr->w[w]->nbytes);
	}
}

/* Every node mapped, constants folded (ORTMK_CPU_FOLD=0: not), fusions
 * planned, every node neither folded nor fused away prepared. */
static int build_plan(cpu_sg *c, ep_subgraph *sg, char *err, size_t n)
{
	const char *env = getenv("ORTMK_CPU_FOLD");
	unsigned char *exported;
	weight_readers wr;
	int rc = 0;

	for (size_t k = 0; rc == 0 && k < c->plan.n_nodes; k++)
		rc = map_node(c, sg, k, err, n);
	if (rc)
		return rc;
	if (!(exported = exported_values(c, sg)))
		return snprintf(err, n, "out of memory"), EP_E_NOMEM;
	if (opt_level(sg) >= 1 && !(env && strcmp(env, "0") == 0) &&
	    cpu_fold_plan(&c->fold, &c->plan, sg->graph, exported, sg_opset, sg, &c->env)) {
		free(exported);
		return snprintf(err, n, "out of memory"), EP_E_NOMEM;
	}
	if (c->fold.n_nodes)
		ipc_log(IPC_LOG_DEBUG, "folded %zu nodes into constants", c->fold.n_nodes);
	plan_fusions(c, sg, exported);
	if (weight_readers_count(&wr, c, sg, exported)) {
		free(wr.readers);
		wr.readers = NULL;
	}
	for (size_t k = 0; rc == 0 && k < c->plan.n_nodes; k++) {
		if (!node_runs(c, k))
			continue;
		rc = load_node(c, sg, k, err, n);
		if (rc == 0)
			weight_readers_done(&wr, sg, &c->plan.nodes[k]);
	}
	free(wr.w);
	free(wr.readers);
	if (rc == 0)
		rc = plan_wide(c, sg, exported, err, n);
	free(exported);
	return rc;
}

/* The pre-pack cache's warnings, through the log. */
static void log_warn(const char *msg)
{
	ipc_log(IPC_LOG_WARN, "%s", msg);
}

static int cpu_load(void *self, ep_subgraph *sg, char *err, size_t n)
{
	const cpu_ep *ep = self;
	cpu_sg *c = calloc(1, sizeof(*c));
	int rc;

	if (c)
		pthread_mutex_init(&c->runs_mu, NULL);
	if (!c || cpu_plan_alloc(&c->plan, sg->n_values, sg->graph->n_node) ||
	    load_opsets(c, sg)) {
		cpu_sg_free(c);
		return snprintf(err, n, "out of memory"), EP_E_NOMEM;
	}
	/* The session's intra-op threads: this thread plus threads - 1
	 * workers, shared by the GEMM-based kernels of every node.  With one
	 * thread the pool still keeps the GEMM's packing scratch between
	 * runs (no allocation per call). */
	if (cpu_pool_create(pool_size(sg->threads), &c->pool))
		ipc_log(IPC_LOG_WARN, "no thread pool (%d threads), running on one", sg->threads);
	load_values(c, sg);
	c->pack = cpu_pack_cache_open(sg->prepack_in_fd, sg->prepack_in_size,
				      cpu_pack_hash(sg->msg->graph.data, sg->msg->graph.len),
				      sg->prepack_out_fd >= 0,
				      log_warn);
	if (!c->pack) {
		cpu_sg_free(c);
		return snprintf(err, n, "out of memory"), EP_E_NOMEM;
	}
	c->env = (cpu_load_env){&cpu_optable_all, c->pack, &c->opsets, 0};
	if (ep->profile)
		c->plan.node_ns = calloc(c->plan.n_nodes + 1, sizeof(uint64_t));
	rc = build_plan(c, sg, err, n);
	/* The first run's state now, as before runs could overlap. */
	if (rc == 0 && !(c->free_runs = run_state_new(&c->plan)))
		rc = (snprintf(err, n, "out of memory"), EP_E_NOMEM);
	if (rc) {
		cpu_sg_free(c);
		return rc < 0 ? rc : EP_E_INVALID;
	}
	cpu_pack_cache_stats(c->pack, &sg->prepack_hits, &sg->prepack_misses, &sg->prepack_ns);
	/* A fresh cache only when something was packed: hits-only is current. */
	if (sg->prepack_out_fd >= 0 && (sg->prepack_misses || sg->prepack_in_fd < 0))
		sg->prepack_written = cpu_pack_cache_write(c->pack, sg->prepack_out_fd) == 0;
	sg->impl = c;
	return 0;
}

/* ---- run --------------------------------------------------------------- */

/* Every binding is pinned (the core reads it after the run); one the core
 * planned (not dynamic) is where its producer writes. */
static int bind_values(cpu_sg *c, cpu_sg_run *rs, const ep_subgraph *sg, ep_run *r, char *err,
		       size_t n)
{
	cpu_frame *f = rs->frame;

	cpu_frame_begin(f);
	for (size_t i = 0; i < r->n_bindings; i++) {
		ep_tensor *b = &r->bindings[i];
		cpu_tensor t;

		if (b->kind == 0 && b->dtype != sg->values[b->value].dtype && sg->values[b->value].dtype)
			return snprintf(err, n, "value '%s': bound as %d, loaded as %d",
					sg->values[b->value].name, b->dtype,
					sg->values[b->value].dtype), EP_E_INVALID;
		if (b->dynamic) {
			cpu_frame_bind(f, (int)b->value, NULL, 0, 1);
			continue;
		}
		if (c->plan.consts[b->value].data)
			continue;   /* folded at load: the constant is the value */
		if (cpu_io_special(b)) {
			int rc = cpu_io_decode(rs->arena, b, &t, err, n);

			if (rc)
				return rc;
		} else {
			memset(&t, 0, sizeof(t));
			t.dtype = b->dtype;
			t.rank = b->rank;
			memcpy(t.dims, b->dims, sizeof(int64_t) * (size_t)b->rank);
			t.data = b->data;
			t.nbytes = b->nbytes;
		}
		cpu_frame_bind(f, (int)b->value, &t, 1, 1);
	}
	return 0;
}

/* Copies the values the core could not plan into the dynamic region. */
static int publish_dynamic(const cpu_frame *f, const ep_subgraph *sg, ep_run *r, char *err,
			   size_t n)
{
	int overflow = 0;

	for (size_t i = 0; i < r->n_bindings; i++) {
		ep_tensor *b = &r->bindings[i];
		const cpu_tensor *t = &f->vals[b->value];
		void *dst;

		if (!b->dynamic)
			continue;
		if (!f->have[b->value])
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

/* A profiled run (ep_run.profile): the executor's spans, nested and in
 * the order the nodes began, as the host's; a fused head counts the nodes
 * of its chain that did not run. */
static void take_spans(const cpu_sg *c, const cpu_prof *prof, ep_profile *out)
{
	size_t n = prof->n < prof->cap ? prof->n : prof->cap;

	for (size_t i = 0; i < n && out->n < out->cap; i++) {
		const cpu_span *s = &prof->spans[i];
		ep_span *d = &out->spans[out->n++];
		const Onnx__NodeProto *p = s->proto;

		d->name = p->name && p->name[0] ? p->name : p->n_output > 0 ? p->output[0] : "";
		d->op_type = p->op_type;
		d->start_ns = s->start_ns;
		d->dur_ns = s->dur_ns;
		d->node = s->node;
		d->tid = s->tid;
		d->depth = s->depth;
		d->parent = s->parent;
		d->fused = s->depth == 0 && c->fuse && c->fuse[s->node].head ?
			(uint32_t)c->fuse[s->node].n_fused - 1 : 0;
	}
	out->n_dropped += (uint32_t)(prof->n - n);
}

/* Runs of one subgraph may overlap (ep_host's lanes): each takes a run
 * state of its own; the plan, the pre-packed weights and the intra-op pool
 * are shared (a kernel that finds the pool busy computes on its own
 * thread, threadpool.h). */
static int cpu_run(void *self, ep_subgraph *sg, ep_run *r, char *err, size_t n)
{
	cpu_sg *c = sg->impl;
	cpu_sg_run *rs = run_state_take(c);
	cpu_prof *prof;
	cpu_run_env env = {NULL, NULL, c->pool, sg->threads, NULL, r->cancel, r->cancel_token,
			   NULL, -1, 0};
	int rc;

	(void)self;
	if (!rs)
		return snprintf(err, n, "out of memory"), EP_E_NOMEM;
	prof = &rs->prof;
	env.arena = rs->arena;
	if (r->profile && !prof->spans && (prof->spans = calloc(r->profile->cap + 1, sizeof(cpu_span))))
		prof->cap = r->profile->cap;
	if (r->profile) {
		prof->n = 0;
		env.prof = prof;
	}
	rc = bind_values(c, rs, sg, r, err, n);
	if (rc == 0) {
		cpu_pool_run(c->pool, 1);
		rc = cpu_exec_run(rs->frame, &env, err, n);
		cpu_pool_run(c->pool, -1);
	}
	if (rc == 0)
		rc = publish_dynamic(rs->frame, sg, r, err, n);
	if (rc == 0 && r->profile)
		take_spans(c, prof, r->profile);
	cpu_frame_end(rs->frame);
	cpu_arena_reset(rs->arena);
	run_state_put(c, rs);
	return rc;
}

static const ep_vtable cpu_vtable = {
	.name = "cpu",
	.concurrent_runs = 1,
	.init = cpu_init,
	.supported = cpu_supported,
	.load = cpu_load,
	.run = cpu_run,
	.unload = cpu_unload,
	.fini = cpu_fini,
};

int main(int argc, char **argv)
{
	return ep_host_main(&cpu_vtable, argc, argv);
}
