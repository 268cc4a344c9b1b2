/*
 * cpu_exec: the CPU provider's graph executor (see cpu_exec.h): plans
 * built once per graph, frames holding one run's values, and the run loop
 * shared by the graph the core loads (cpu_ep.c) and the bodies of the
 * control-flow ops (cpu_graph.c), which also records each node's span
 * when the run is profiled.
 */
#include <stdio.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cpu_exec.h"

/* ---- plans ---------------------------------------------------------------- */

int cpu_plan_alloc(cpu_plan *p, size_t nv, size_t nn)
{
	memset(p, 0, sizeof(*p));
	p->n_values = nv;
	p->n_nodes = nn;
	p->names = calloc(nv + 1, sizeof(*p->names));
	p->consts = calloc(nv + 1, sizeof(*p->consts));
	p->last_use = calloc(nv + 1, sizeof(int));
	p->pinned = calloc(nv + 1, 1);
	p->nodes = calloc(nn + 1, sizeof(*p->nodes));
	p->node_in = calloc(nn + 1, sizeof(int *));
	p->node_out = calloc(nn + 1, sizeof(int *));
	p->node_consts = calloc(nn + 1, sizeof(*p->node_consts));
	p->node_refs = calloc(nn + 1, sizeof(int *));
	if (!p->names || !p->consts || !p->last_use || !p->pinned || !p->nodes || !p->node_in ||
	    !p->node_out || !p->node_consts || !p->node_refs)
		return CPU_E_NOMEM;
	for (size_t v = 0; v < nv; v++)
		p->last_use[v] = -1;
	return 0;
}

void cpu_plan_free(cpu_plan *p)
{
	if (!p)
		return;
	for (size_t k = 0; p->nodes && k < p->inited; k++)
		cpu_node_fini(&p->nodes[k]);
	for (size_t k = 0; k < p->n_nodes; k++) {
		free(p->node_in ? p->node_in[k] : NULL);
		free(p->node_out ? p->node_out[k] : NULL);
		free(p->node_consts ? p->node_consts[k] : NULL);
		free(p->node_refs ? p->node_refs[k] : NULL);
	}
	free(p->names);
	free(p->consts);
	free(p->last_use);
	free(p->pinned);
	free(p->nodes);
	free(p->node_in);
	free(p->node_out);
	free(p->node_consts);
	free(p->node_refs);
	free(p->node_ns);
	free(p->layout);
	memset(p, 0, sizeof(*p));
}

int cpu_plan_find(const cpu_plan *p, const char *name)
{
	for (size_t v = 0; v < p->n_values; v++)
		if (p->names[v] && strcmp(p->names[v], name) == 0)
			return (int)v;
	return -1;
}

typedef struct refs_arg {
	cpu_plan *p;
	int k, n;
	int *list;
} refs_arg;

static void note_ref(void *arg, const char *name)
{
	refs_arg *r = arg;
	int v = cpu_plan_find(r->p, name);

	if (v < 0 || r->p->last_use[v] == r->k)
		return;   /* from further out, or already noted */
	r->p->last_use[v] = r->k;
	if ((size_t)r->n < r->p->n_values)
		r->list[r->n++] = v;
}

static void refs_graph(const Onnx__GraphProto *gp, void (*fn)(void *, const char *), void *arg)
{
	for (size_t k = 0; k < gp->n_node; k++) {
		const Onnx__NodeProto *p = gp->node[k];

		for (size_t i = 0; i < p->n_input; i++)
			if (p->input[i] && p->input[i][0])
				fn(arg, p->input[i]);
		cpu_exec_refs(p, fn, arg);
	}
	for (size_t i = 0; i < gp->n_output; i++)
		if (gp->output[i]->name && gp->output[i]->name[0])
			fn(arg, gp->output[i]->name);
}

void cpu_exec_refs(const Onnx__NodeProto *p, void (*fn)(void *arg, const char *name), void *arg)
{
	for (size_t a = 0; a < p->n_attribute; a++) {
		const Onnx__AttributeProto *at = p->attribute[a];

		if (at->g)
			refs_graph(at->g, fn, arg);
		for (size_t j = 0; j < at->n_graphs; j++)
			refs_graph(at->graphs[j], fn, arg);
	}
}

int cpu_plan_refs(cpu_plan *p, size_t k, const Onnx__NodeProto *proto)
{
	refs_arg r = {p, (int)k, 0, malloc(sizeof(int) * (p->n_values + 1))};

	if (!r.list)
		return CPU_E_NOMEM;
	cpu_exec_refs(proto, note_ref, &r);
	r.list[r.n] = -1;
	free(p->node_refs[k]);
	p->node_refs[k] = r.list;
	return 0;
}

int cpu_plan_init_node(cpu_plan *p, size_t k, const cpu_load_env *env,
		       const cpu_fusion *fuse, cpu_tensor *const *folded,
		       const Onnx__NodeProto *proto, int64_t opset, int n_in, char *err,
		       size_t n)
{
	int n_out = (int)proto->n_output, rc;
	cpu_load_env e = *env;

	e.layout = p->layout ? p->layout[k] : 0;
	p->node_consts[k] = calloc((size_t)n_in + 1, sizeof(cpu_tensor *));
	if (!p->node_consts[k])
		return snprintf(err, n, "out of memory"), CPU_E_NOMEM;
	for (int i = 0; i < n_in; i++) {
		int v = p->node_in[k][i];

		if (folded && folded[i])
			p->node_consts[k][i] = folded[i];
		else if (v >= 0 && p->consts[v].data)
			p->node_consts[k][i] = &p->consts[v];
		if (v >= 0 && p->last_use[v] < (int)k)
			p->last_use[v] = (int)k;
	}
	if (n_in > p->max_in)
		p->max_in = n_in;
	if (n_out > p->max_out)
		p->max_out = n_out;
	rc = cpu_node_init(&p->nodes[k], &e, fuse, proto, opset, p->node_consts[k], n_in, n_out,
			   err, n);
	if (rc == 0 && p->inited < k + 1)
		p->inited = k + 1;
	return rc;
}

/* A Cast to float32 reads a wide value as it is (a copy): the float16
 * rounding between the float32 producer and it is skipped, as ONNX
 * Runtime drops the Cast pair it would insert there. */
static int cast_to_float(const cpu_node *node)
{
	return strcmp(node->proto->op_type, "Cast") == 0 &&
	       (!node->proto->domain || !node->proto->domain[0]) &&
	       cpu_attr_int(node->proto, "to", 0) == CPU_FLOAT;
}

/* A Cast of a float32 value to float16 may keep its output float32 too
 * (its kernel then copies): ONNX Runtime removes such a Cast together with
 * the Cast back to float32 it inserts before a node without a float16
 * kernel, so the value is never rounded there either. */
static int cast_f32_to_f16(const cpu_node *node, int32_t in_dtype)
{
	return strcmp(node->proto->op_type, "Cast") == 0 &&
	       (!node->proto->domain || !node->proto->domain[0]) && in_dtype == CPU_FLOAT &&
	       cpu_attr_int(node->proto, "to", 0) == CPU_FLOAT16;
}

int cpu_plan_wide(cpu_plan *p, const int32_t *dtype, const unsigned char *exported)
{
	int *producer = malloc(sizeof(int) * (p->n_values + 1));
	unsigned char *ok = malloc(p->n_values + 1);
	int32_t dt[64];
	int count = 0;

	if (!producer || !ok) {
		free(producer);
		free(ok);
		return CPU_E_NOMEM;
	}
	for (size_t v = 0; v < p->n_values; v++) {
		producer[v] = -1;
		ok[v] = dtype[v] == CPU_FLOAT16 && !exported[v] && !p->consts[v].data;
	}
	for (size_t k = 0; k < p->n_nodes; k++) {
		cpu_node *node = &p->nodes[k];

		if (!node->op)
			continue;   /* folded or fused away */
		for (int i = 0; i < node->n_in && i < 64; i++) {
			int v = p->node_in[k][i];

			dt[i] = p->node_consts[k][i] ? p->node_consts[k][i]->dtype :
				v < 0 ? CPU_UNDEFINED : dtype[v] ? dtype[v] : -1;
		}
		cpu_node_f16_decide(node, dt);
		for (int i = 0; i < node->n_in; i++) {
			int v = p->node_in[k][i];

			if (v >= 0 && !p->node_consts[k][i] && node->f16_mode != CPU_F16_WIDEN &&
			    !cast_to_float(node))
				ok[v] = 0;
		}
		for (int i = 0; p->node_refs[k][i] >= 0; i++)
			ok[p->node_refs[k][i]] = 0;
		for (int i = 0; i < node->n_out; i++) {
			int v = p->node_out[k][i];

			if (v >= 0) {
				producer[v] = (int)k;
				if (i >= 32 || (node->f16_mode != CPU_F16_WIDEN &&
						!cast_f32_to_f16(node, dt[0])))
					ok[v] = 0;
			}
		}
	}
	for (size_t k = 0; k < p->n_nodes; k++) {
		cpu_node *node = &p->nodes[k];

		node->f16_wide_out = 0;
		for (int i = 0; node->op && i < node->n_out && i < 32; i++) {
			int v = p->node_out[k][i];

			if (v >= 0 && ok[v] && producer[v] == (int)k) {
				node->f16_wide_out |= 1u << i;
				count++;
			}
		}
	}
	free(producer);
	free(ok);
	return count;
}

/* ---- frames --------------------------------------------------------------- */

cpu_frame *cpu_frame_new(const cpu_plan *p)
{
	cpu_frame *f = calloc(1, sizeof(*f));
	size_t nv = p->n_values + 1;

	if (!f)
		return NULL;
	f->plan = p;
	f->vals = calloc(nv, sizeof(*f->vals));
	f->heap = calloc(nv, 1);
	f->have = calloc(nv, 1);
	f->placed = calloc(nv, 1);
	f->pinned = calloc(nv, 1);
	f->in = calloc((size_t)p->max_in + 1, sizeof(*f->in));
	f->planned = calloc((size_t)p->max_out + 1, sizeof(*f->planned));
	f->out = calloc((size_t)p->max_out + 1, sizeof(*f->out));
	f->out_heap = calloc((size_t)p->max_out + 1, sizeof(int));
	f->keep = calloc(1, sizeof(*f->keep));
	f->wbuf = calloc(nv, sizeof(*f->wbuf));
	f->wcap = calloc(nv, sizeof(*f->wcap));
	f->wsrc = calloc(nv, sizeof(*f->wsrc));
	f->wplanned = calloc((size_t)p->max_out + 1, sizeof(*f->wplanned));
	f->have0 = calloc(nv, 1);
	f->cidx = calloc(nv, sizeof(*f->cidx));
	if (!f->vals || !f->heap || !f->have || !f->placed || !f->pinned || !f->in ||
	    !f->planned || !f->out || !f->out_heap || !f->keep || !f->wbuf || !f->wcap || !f->wsrc ||
	    !f->wplanned || !f->have0 || !f->cidx) {
		cpu_frame_free(f);
		return NULL;
	}
	for (size_t v = 0; v < p->n_values; v++)
		if (p->consts[v].data) {
			f->have0[v] = 1;
			f->cidx[f->n_consts++] = (int)v;
		}
	return f;
}

void cpu_frame_free(cpu_frame *f)
{
	if (!f)
		return;
	if (f->busy)
		cpu_frame_end(f);
	if (f->keep)
		cpu_keep_free(f->keep);
	free(f->vals);
	free(f->have0);
	free(f->cidx);
	free(f->heap);
	free(f->have);
	free(f->placed);
	free(f->pinned);
	free(f->in);
	free(f->planned);
	free(f->out);
	free(f->out_heap);
	free(f->keep);
	for (size_t v = 0; f->wbuf && v < f->plan->n_values; v++)
		free(f->wbuf[v]);
	free(f->wbuf);
	free(f->wcap);
	free(f->wsrc);
	free(f->wplanned);
	free(f);
}

static void release(cpu_frame *f, int v)
{
	if (f->heap[v])
		cpu_keep_release(f->keep, f->vals[v].data, f->vals[v].nbytes);
	f->heap[v] = 0;
	f->have[v] = 0;
}

/* Per run, the arrays are reset whole and only the constants' tensors
 * copied (a loop over every value with a branch each was 1.5% of the
 * example CNN's provider run). */
void cpu_frame_begin(cpu_frame *f)
{
	const cpu_plan *p = f->plan;
	size_t nv = p->n_values;

	memset(f->heap, 0, nv);
	memset(f->placed, 0, nv);
	memcpy(f->pinned, p->pinned, nv);
	memcpy(f->have, f->have0, nv);
	for (size_t i = 0; i < f->n_consts; i++)
		f->vals[f->cidx[i]] = p->consts[f->cidx[i]];
	f->busy = 1;
}

void cpu_frame_bind(cpu_frame *f, int v, const cpu_tensor *t, int placed, int pinned)
{
	if (pinned)
		f->pinned[v] = 1;
	if (!t)
		return;
	f->vals[v] = *t;
	f->have[v] = 1;
	f->placed[v] = (unsigned char)placed;
}

void cpu_frame_end(cpu_frame *f)
{
	for (size_t v = 0; v < f->plan->n_values; v++)
		release(f, (int)v);
	f->busy = 0;
}

/* ---- the run loop --------------------------------------------------------- */

typedef struct frame_scope {
	cpu_scope base;
	const cpu_frame *f;
} frame_scope;

static const cpu_tensor *frame_find(const cpu_scope *s, const char *name)
{
	const cpu_frame *f = ((const frame_scope *)s)->f;
	int v = cpu_plan_find(f->plan, name);

	return v >= 0 && f->have[v] ? &f->vals[v] : NULL;
}

static const char *node_label(const Onnx__NodeProto *p)
{
	if (p->name && p->name[0])
		return p->name;
	return p->n_output > 0 && p->output[0] ? p->output[0] : "";
}

static int wide_out(const cpu_node *node, int i)
{
	return i < 32 && (node->f16_wide_out >> i & 1);
}

/* A float16 value kept wide that the core placed: its float32 twin of the
 * same shape in the frame's buffer for v (grown as needed, kept between
 * runs).  0 when out of memory: then the kernel allocates it. */
static int wide_place(cpu_frame *f, int v, cpu_tensor *t)
{
	int64_t numel = cpu_numel(&f->vals[v]);
	size_t need = numel > 0 ? (size_t)numel * sizeof(float) : 0;

	if (f->vals[v].dtype != CPU_FLOAT16 || numel < 0)
		return 0;
	if (need > f->wcap[v]) {
		void *b = aligned_alloc(64, (need + 63) & ~(size_t)63);

		if (!b)
			return 0;
		free(f->wbuf[v]);
		f->wbuf[v] = b;
		f->wcap[v] = need;
	}
	f->wsrc[v] = f->vals[v].data;
	*t = f->vals[v];
	t->dtype = CPU_FLOAT;
	t->nbytes = need;
	t->data = f->wbuf[v];
	return 1;
}

/* Where the core put output v over an input it planned to die there (a
 * fused chain's output over its residual, an output over its input), the
 * input's float32 twin becomes v's, so the kernel sees the same overlap as
 * in a float32 model (ResNet-50's fp16 Conv -> Add -> Relu copied its
 * residual into a separate twin first: layer1's 813 -> 1467 us against the
 * float32 model's). */
static void wide_share(cpu_frame *f, size_t k, int v)
{
	const cpu_plan *p = f->plan;
	const cpu_node *node = &p->nodes[k];
	int64_t numel = cpu_numel(&f->vals[v]);

	if (f->vals[v].dtype != CPU_FLOAT16 || numel <= 0 || !f->vals[v].data)
		return;
	for (int j = 0; j < node->n_in; j++) {
		int r = p->node_in[k][j];
		void *b;
		size_t c;

		if (r < 0 || r == v || p->node_consts[k][j] || f->wsrc[r] != f->vals[v].data ||
		    f->vals[r].data != f->wbuf[r] || f->vals[r].dtype != CPU_FLOAT ||
		    cpu_numel(&f->vals[r]) != numel || p->last_use[r] != (int)k)
			continue;
		b = f->wbuf[v];
		c = f->wcap[v];
		f->wbuf[v] = f->wbuf[r];
		f->wcap[v] = f->wcap[r];
		f->wbuf[r] = b;
		f->wcap[r] = c;
		return;
	}
}

/* Inputs from the constants and the frame; outputs at their planned place
 * (a wide value's float32 twin: wide_place) or left for the kernel to
 * allocate. */
static int gather_io(cpu_frame *f, size_t k, char *err, size_t n)
{
	const cpu_plan *p = f->plan;
	const cpu_node *node = &p->nodes[k];

	for (int i = 0; i < node->n_in; i++) {
		int v = p->node_in[k][i];

		/* Constants (folded ones included) come from the node itself. */
		if (p->node_consts[k][i]) {
			f->in[i] = p->node_consts[k][i];
			continue;
		}
		if (v >= 0 && !f->have[v])
			return snprintf(err, n, "node '%s': input '%s' has no value",
					node_label(node->proto), p->names[v]), CPU_E_INVALID;
		f->in[i] = v >= 0 ? &f->vals[v] : NULL;
	}
	for (int i = 0; i < node->n_out; i++) {
		int v = p->node_out[k][i];

		f->planned[i] = v >= 0 && f->placed[v] ? &f->vals[v] : NULL;
		f->out_heap[i] = 0;
		if (f->planned[i] && wide_out(node, i)) {
			wide_share(f, k, v);
			if (wide_place(f, v, &f->wplanned[i]))
				f->planned[i] = &f->wplanned[i];
		}
	}
	return 0;
}

static int run_node(cpu_frame *f, cpu_run_env *env, size_t k, char *err, size_t n)
{
	const cpu_plan *p = f->plan;
	cpu_node *node = &p->nodes[k];
	int rc = gather_io(f, k, err, n);

	if (rc)
		return rc;
	env->keep = f->keep;   /* one block for every node: they run one at a time */
	rc = cpu_node_run(node, env, f->in, f->planned, f->out, f->out_heap, err, n);
	if (rc)
		return rc;
	for (int i = 0; i < node->n_out; i++) {
		int v = p->node_out[k][i];

		/* a planned output written in place; on the heap instead only
		 * when it is kept wide (cpu_plan_wide): then the heap copy is
		 * the value for the rest of this run */
		if (v >= 0 && f->planned[i] == &f->wplanned[i]) {
			f->vals[v] = f->wplanned[i];   /* the float32 twin, in place */
			continue;
		}
		if (v < 0 || (f->planned[i] && !(f->out_heap[i] && wide_out(node, i)))) {
			if (f->out_heap[i])
				cpu_keep_release(f->keep, f->out[i].data, f->out[i].nbytes);
			continue;
		}
		release(f, v);
		f->placed[v] = 0;
		f->vals[v] = f->out[i];
		f->heap[v] = (unsigned char)f->out_heap[i];
		f->have[v] = f->out[i].data != NULL || f->out[i].dtype == CPU_NONE;
	}
	return 0;
}

/* Heap values nobody reads after node k go now, unless pinned. */
static void release_dead(cpu_frame *f, size_t k)
{
	const cpu_plan *p = f->plan;
	const cpu_node *node = &p->nodes[k];

	for (int i = 0; i < node->n_in; i++) {
		int v = p->node_in[k][i];

		if (v >= 0 && f->heap[v] && p->last_use[v] == (int)k && !f->pinned[v])
			release(f, v);
	}
	for (int i = 0; p->node_refs[k][i] >= 0; i++) {
		int v = p->node_refs[k][i];

		if (f->heap[v] && p->last_use[v] == (int)k && !f->pinned[v])
			release(f, v);
	}
	for (int i = 0; i < node->n_out; i++) {
		int v = p->node_out[k][i];

		if (v >= 0 && f->heap[v] && p->last_use[v] < 0 && !f->pinned[v])
			release(f, v);
	}
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* gettid once per thread: a system call per node would show in the spans. */
static uint32_t thread_id(void)
{
	static __thread uint32_t tid;

	if (!tid)
		tid = (uint32_t)syscall(SYS_gettid);
	return tid;
}

/* Profiling: reserves node k's span before it runs, so the nodes of its
 * bodies can name it as their parent; NULL once the cap is reached (the
 * reservation still counts: prof->n - cap were dropped). */
static cpu_span *span_open(const cpu_run_env *env, const cpu_plan *p, size_t k, int32_t *index)
{
	cpu_prof *prof = env->prof;
	size_t i = __atomic_fetch_add(&prof->n, 1, __ATOMIC_RELAXED);
	cpu_span *s;

	*index = -1;
	if (i >= prof->cap)
		return NULL;
	s = &prof->spans[i];
	s->proto = p->nodes[k].proto;
	s->node = (uint32_t)k;
	s->tid = thread_id();
	s->depth = env->prof_depth;
	s->parent = env->prof_parent;
	*index = (int32_t)i;
	return s;
}

int cpu_exec_run(cpu_frame *f, const cpu_run_env *env, char *err, size_t n)
{
	const cpu_plan *p = f->plan;
	frame_scope scope = {{env->scope, frame_find}, f};
	cpu_run_env e = *env;
	int timed = p->node_ns || env->prof;
	int rc = 0;

	e.scope = &scope.base;
	e.prof_depth = env->prof_depth + 1;   /* for the nodes of bodies */
	for (size_t k = 0; rc == 0 && k < p->n_nodes; k++) {
		cpu_span *span = NULL;
		uint64_t t0, t1;

		if (!p->nodes[k].op)
			continue;   /* fused into an earlier node */
		if (e.cancel && __atomic_load_n((const uint64_t *)e.cancel, __ATOMIC_RELAXED) ==
				e.cancel_token) {
			snprintf(err, n, "run cancelled before node %zu of %zu", k, p->n_nodes);
			rc = CPU_E_CANCELLED;
			break;
		}
		if (env->prof)
			span = span_open(env, p, k, &e.prof_parent);
		t0 = timed ? now_ns() : 0;
		rc = run_node(f, &e, k, err, n);
		if (rc == 0)
			release_dead(f, k);
		if (!timed)
			continue;
		t1 = now_ns();
		if (p->node_ns)
			__atomic_fetch_add(&p->node_ns[k], t1 - t0, __ATOMIC_RELAXED);
		if (span) {
			span->start_ns = t0;
			span->dur_ns = t1 - t0;
		}
	}
	if (p->node_ns)
		__atomic_fetch_add(&p->node_ns[p->n_nodes], 1, __ATOMIC_RELAXED);
	return rc;
}
