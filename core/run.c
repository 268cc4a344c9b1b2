/*
 * run: one inference.  Inputs are checked against the model's signature,
 * the plan for their shapes is found (or built and cached), the run takes
 * a slot of the session (its own arena and dynamic region, so several runs
 * can be in flight), they are made known to the providers, and each step
 * is sent as one RUN whose bindings say where every tensor it touches
 * lives.  A provider that dies fails the run with ORTMK_ERR_PROVIDER_DIED;
 * dynamic outputs that did not fit make the region grow and the step run
 * again.  ortmk_session_run binds by name and returns new host outputs;
 * IO binding (binding.c) enters at core_session_run_outs.
 *
 * Locking (docs/ARCHITECTURE.md, "Concurrent runs"): a run holds the
 * session's steps_lock for reading and a slot; it holds its providers'
 * locks while it prepares and while it collects its outputs, not while
 * its steps run: a RUN goes on a lane of the provider (core_ep_run_request)
 * beside the runs of other threads and sessions.  A run with device values
 * or a stream (run_device.c) holds the providers' locks throughout.
 */
#include <errno.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "run.h"
#include "trace.h"

#define DYN_INITIAL (1u << 20)
#define MAX_PLANS 16
/* How long waiting for a RUN reply spins when a CPU is free (see
 * send_run). */
#define RUN_SPIN_NS 1000000u
/* A single run whose threads fill the CPUs is placed once its step's last
 * two RUNs took this long each (see send_run). */
#define PLACE_SINGLE_NS 100000u

static int find_input(const graph *g, const char *name)
{
	for (size_t i = 0; i < g->n_inputs; i++)
		if (strcmp(g->values[g->inputs[i]].name, name) == 0)
			return (int)i;
	return -1;
}

/* Which value kinds a declared type accepts (bit per ortmk_value_kind). */
static unsigned accepted_kinds(const Onnx__TypeProto *t)
{
	if (!t)
		return 1u << ORTMK_VALUE_TENSOR;
	switch (t->value_case) {
	case ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE:
		return 1u << ORTMK_VALUE_SEQUENCE;
	case ONNX__TYPE_PROTO__VALUE_OPTIONAL_TYPE:
		return (1u << ORTMK_VALUE_NONE) | accepted_kinds(t->optional_type->elem_type);
	default:
		return 1u << ORTMK_VALUE_TENSOR;
	}
}

ortmk_status core_check_input(const ortmk_session *s, size_t i, const ortmk_value *v)
{
	const graph_value *gv = &s->g->values[s->g->inputs[i]];
	int32_t want = gv->elem_type;
	static const char *kinds[] = {"a tensor", "a sequence", "an empty optional", "a map"};

	if (!v)
		return core_fail(ORTMK_ERR_INPUT, "input '%s': NULL value", gv->name);
	if (!(accepted_kinds(gv->type) & (1u << v->kind)))
		return core_fail(ORTMK_ERR_INPUT, "input '%s': the model does not take %s here",
				 gv->name, kinds[v->kind]);
	if (v->kind != ORTMK_VALUE_TENSOR || !gv->is_tensor)
		return ORTMK_OK;
	if (want && v->dtype != want)
		return core_fail(ORTMK_ERR_INPUT, "input '%s': expected %s, got %s", gv->name,
				 graph_dtype_name(want), graph_dtype_name(v->dtype));
	if (gv->rank >= 0 && (size_t)gv->rank != v->rank)
		return core_fail(ORTMK_ERR_INPUT, "input '%s': expected rank %d, got rank %zu",
				 gv->name, gv->rank, v->rank);
	for (int d = 0; gv->rank >= 0 && d < gv->rank; d++)
		if (gv->dims[d] >= 0 && gv->dims[d] != v->dims[d])
			return core_fail(ORTMK_ERR_INPUT, "input '%s': dim %d is %lld, the model needs %lld",
					 gv->name, d, (long long)v->dims[d], (long long)gv->dims[d]);
	return ORTMK_OK;
}

static ortmk_status bind_inputs(ortmk_session *s, const char *const *names,
				const ortmk_value *const *inputs, size_t n,
				const ortmk_value **bound)
{
	const graph *g = s->g;

	for (size_t i = 0; i < n; i++) {
		int k = names && names[i] ? find_input(g, names[i]) : -1;
		ortmk_status st;

		if (k < 0)
			return core_fail(ORTMK_ERR_INPUT, "'%s' is not an input of the model",
					 names && names[i] ? names[i] : "(null)");
		if (bound[k])
			return core_fail(ORTMK_ERR_INPUT, "input '%s' given twice", names[i]);
		st = core_check_input(s, (size_t)k, inputs[i]);
		if (st)
			return st;
		bound[k] = inputs[i];
	}
	for (size_t i = 0; i < g->n_inputs; i++)
		if (!bound[i])
			return core_fail(ORTMK_ERR_INPUT, "input '%s' is missing",
					 g->values[g->inputs[i]].name);
	return ORTMK_OK;
}

static int sig_equal(const core_plan *p, const ortmk_value **bound, size_t n_in)
{
	size_t k = 0;

	for (size_t i = 0; i < n_in; i++) {
		if (k >= p->n_sig || p->sig[k++] != (int64_t)bound[i]->rank)
			return 0;
		for (size_t d = 0; d < bound[i]->rank; d++)
			if (k >= p->n_sig || p->sig[k++] != bound[i]->dims[d])
				return 0;
	}
	return k == p->n_sig;
}

static ortmk_status get_plan(ortmk_session *s, const ortmk_value **bound, core_plan **out)
{
	size_t n_in = s->g->n_inputs;
	const int64_t **pd;
	size_t *pr;
	core_plan *p;
	ortmk_status st;

	for (size_t i = 0; i < s->n_plans; i++) {
		if (sig_equal(s->plans[i], bound, n_in)) {
			*out = s->plans[i];
			s->plans[i]->refs++;
			return ORTMK_OK;
		}
	}
	/* A new shape signature: plan once, cache (oldest evicted). */
	pd = malloc((n_in + 1) * sizeof(*pd));
	pr = malloc((n_in + 1) * sizeof(*pr));
	for (size_t i = 0; pd && pr && i < n_in; i++) {
		pd[i] = bound[i]->dims;
		pr[i] = bound[i]->rank;
	}
	st = pd && pr ? core_plan_build(s, pd, pr, &p) : core_fail(ORTMK_ERR_NO_MEMORY, "out of memory");
	free(pd);
	free(pr);
	if (st)
		return st;
	if (!s->plans)
		s->plans = calloc(MAX_PLANS, sizeof(*s->plans));
	if (!s->plans) {
		core_plan_free(p);
		return core_fail(ORTMK_ERR_NO_MEMORY, "out of memory");
	}
	if (s->n_plans == MAX_PLANS) {
		/* A run still using the oldest frees it when done. */
		if (--s->plans[0]->refs == 0)
			core_plan_free(s->plans[0]);
		memmove(s->plans, s->plans + 1, (MAX_PLANS - 1) * sizeof(*s->plans));
		s->n_plans--;
	}
	p->refs = 2;   /* the cache's and this run's */
	s->plans[s->n_plans++] = p;
	*out = p;
	return ORTMK_OK;
}

/* ---- slots: the memory of the runs in flight -------------------------- */

/* A free slot of the session, waiting while all are taken (session lock
 * held). */
static core_slot *slot_take(ortmk_session *s)
{
	for (;;) {
		for (int i = 0; i < s->n_slots; i++) {
			if (!s->slots[i].busy) {
				s->slots[i].busy = 1;
				return &s->slots[i];
			}
		}
		pthread_cond_wait(&s->slot_cv, &s->lock);
	}
}

/* The plan and a slot for a run (the plan built on a new signature). */
static ortmk_status run_begin(run_ctx *c, const ortmk_value **bound)
{
	ortmk_session *s = c->s;
	ortmk_status st;

	pthread_mutex_lock(&s->lock);
	st = get_plan(s, bound, &c->plan);
	if (st == ORTMK_OK)
		c->slot = slot_take(s);
	pthread_mutex_unlock(&s->lock);
	return st;
}

static void run_end(run_ctx *c)
{
	ortmk_session *s = c->s;

	pthread_mutex_lock(&s->lock);
	if (c->plan && --c->plan->refs == 0)
		core_plan_free(c->plan);
	if (c->slot) {
		c->slot->busy = 0;
		pthread_cond_signal(&s->slot_cv);
	}
	pthread_mutex_unlock(&s->lock);
	c->plan = NULL;
	c->slot = NULL;
}

/* *out = a new segment of `size` bytes. */
static ortmk_status segment_new(ortmk_session *s, uint64_t size, const char *name,
				shm_segment **out)
{
	shm_segment *n;
	int rc = -ENOMEM;

	if (core_mem_check(s->env, size, name) != ORTMK_OK)
		return ORTMK_ERR_NO_MEMORY;
	n = calloc(1, sizeof(*n));
	if (n)
		rc = shm_segment_create(name, size ? size : 1, core_env_next_id(s->env), n);
	if (rc) {
		free(n);
		return core_fail(ORTMK_ERR_NO_MEMORY, "cannot create %llu bytes of shared memory (%s): %s",
				 (unsigned long long)size, name, strerror(-rc));
	}
	*out = n;
	return ORTMK_OK;
}

/* Providers that hold seg drop it; then it goes (their locks held). */
static void segment_drop(ortmk_session *s, shm_segment *seg)
{
	for (int e = 0; e < s->n_eps; e++)
		if (ipc_segtab_find(&s->eps[e]->p.segs, seg->id))
			core_ep_release_segment(s->eps[e], seg->id);
	shm_segment_destroy(seg);
	free(seg);
}

/* Replaces a session segment with a larger one; providers drop the old. */
static ortmk_status grow_segment(ortmk_session *s, shm_segment **seg, uint64_t size,
				 const char *name)
{
	shm_segment *n;
	ortmk_status st;

	if (*seg && (*seg)->size >= size)
		return ORTMK_OK;
	if ((st = segment_new(s, size, name, &n)) != ORTMK_OK)
		return st;
	if (*seg)
		segment_drop(s, *seg);
	*seg = n;
	return ORTMK_OK;
}

void core_run_set_loc(loc *l, shm_segment *seg, uint64_t off, uint64_t nbytes, int kind,
		      int32_t dtype, int rank, const int64_t *dims)
{
	l->seg = seg;
	l->kind = kind;
	l->offset = off;
	l->nbytes = nbytes;
	l->dtype = dtype;
	l->rank = rank;
	if (rank > 0)
		memcpy(l->dyn_dims, dims, sizeof(int64_t) * (size_t)rank);
	l->dims = l->dyn_dims;
}

/* The binding for value v in step i, or 0 when the provider keeps it. */
static int make_ref(run_ctx *c, size_t step, int v, Ortmk__TensorRef *r)
{
	ortmk_session *s = c->s;
	const graph_value *gv = &s->g->values[v];
	const loc *l = &c->locs[v];

	ortmk__tensor_ref__init(r);
	if (core_run_device_ref(c, step, v, r))
		return 1;
	r->dtype = c->plan->tinfo[v].elem_type ? c->plan->tinfo[v].elem_type : gv->elem_type;
	if (l->seg) {
		r->dtype = l->dtype;
		r->has_kind = l->kind != 0;
		r->kind = (Ortmk__ValueKind)l->kind;
		r->n_dims = (size_t)l->rank;
		r->dims = (int64_t *)l->dims;
		r->segment_id = l->seg->id;
		r->offset = l->offset;
		r->nbytes = l->nbytes;
		return 1;
	}
	if (gv->kind != GRAPH_VALUE_ACTIVATION)
		return 0;
	if (gv->is_tensor && c->plan->offset[v] != PLAN_NONE) {
		r->n_dims = (size_t)c->plan->tinfo[v].rank;
		r->dims = c->plan->tinfo[v].dims;
		r->segment_id = c->slot->arena->id;
		r->offset = c->plan->offset[v];
		r->nbytes = c->plan->nbytes[v];
		return 1;
	}
	/* Unknown shape: only what leaves the step needs a place in shm. */
	if (!gv->is_graph_output && s->last_step[v] <= (int)step)
		return 0;
	r->dynamic = 1;
	r->has_dynamic = 1;
	r->segment_id = c->slot->dyn->id;
	return 1;
}

/* ---- cancellation (ortmk_run_options) --------------------------------- */

/* The provider's cancel word, its segment made and handed over on first
 * use (a restarted process gets it back with the other segments); ep's
 * lock held. */
static _Atomic uint64_t *cancel_word_locked(ortmk_session *s, core_ep *ep)
{
	if (!ep->cancel_seg.base &&
	    shm_segment_create("ortmk-cancel", sizeof(uint64_t), core_env_next_id(s->env), &ep->cancel_seg))
		memset(&ep->cancel_seg, 0, sizeof(ep->cancel_seg));
	if (!ep->cancel_seg.base)
		return NULL;
	if (!ipc_segtab_find(&ep->p.segs, ep->cancel_seg.id) &&
	    core_ep_add_segment(ep, &ep->cancel_seg) != ORTMK_OK) {
		core_clear_error();
		return NULL;
	}
	return (_Atomic uint64_t *)ep->cancel_seg.base;
}

static _Atomic uint64_t *cancel_word(run_ctx *c, core_ep *ep)
{
	_Atomic uint64_t *w;

	if (c->exclusive)
		return cancel_word_locked(c->s, ep);
	pthread_mutex_lock(&ep->lock);
	w = cancel_word_locked(c->s, ep);
	pthread_mutex_unlock(&ep->lock);
	return w;
}

/* Records that a step with `token` runs where `word` is read; a terminate
 * already asked for is written at once.  The slot, or -1 when full (the
 * step then runs to its end; the next one is not started). */
static int ro_enter(ortmk_run_options *ro, _Atomic uint64_t *word, uint64_t token)
{
	int slot = -1;

	pthread_mutex_lock(&ro->lock);
	for (int i = 0; i < CORE_RO_ACTIVE && slot < 0; i++) {
		if (!ro->active[i].word) {
			ro->active[i].word = word;
			ro->active[i].token = token;
			slot = i;
		}
	}
	if (slot >= 0 && ro->terminate)
		atomic_store(word, token);
	pthread_mutex_unlock(&ro->lock);
	return slot;
}

static void ro_leave(ortmk_run_options *ro, int slot)
{
	if (slot < 0)
		return;
	pthread_mutex_lock(&ro->lock);
	ro->active[slot].word = NULL;
	pthread_mutex_unlock(&ro->lock);
}

static int ro_terminated(ortmk_run_options *ro)
{
	int t;

	pthread_mutex_lock(&ro->lock);
	t = ro->terminate;
	pthread_mutex_unlock(&ro->lock);
	return t;
}

ortmk_status ortmk_run_options_create(ortmk_run_options **out)
{
	ortmk_run_options *ro;

	if (!out)
		return core_fail(ORTMK_ERR_INVALID_ARGUMENT, "run options: NULL out");
	if (!(ro = calloc(1, sizeof(*ro))))
		return core_fail(ORTMK_ERR_NO_MEMORY, "out of memory");
	pthread_mutex_init(&ro->lock, NULL);
	*out = ro;
	return ORTMK_OK;
}

void ortmk_run_options_destroy(ortmk_run_options *ro)
{
	if (!ro)
		return;
	pthread_mutex_destroy(&ro->lock);
	free(ro);
}

ortmk_status ortmk_run_options_set_tag(ortmk_run_options *ro, const char *tag)
{
	if (!ro || !tag || strlen(tag) >= sizeof(ro->tag))
		return core_fail(ORTMK_ERR_INVALID_ARGUMENT, "run options: tag missing or longer than %zu bytes",
				 sizeof(ro->tag) - 1);
	pthread_mutex_lock(&ro->lock);
	snprintf(ro->tag, sizeof(ro->tag), "%s", tag);
	pthread_mutex_unlock(&ro->lock);
	return ORTMK_OK;
}

ortmk_status ortmk_run_options_set_timeout_ms(ortmk_run_options *ro, int timeout_ms)
{
	if (!ro || timeout_ms < 0)
		return core_fail(ORTMK_ERR_INVALID_ARGUMENT, "run options: bad timeout %d", timeout_ms);
	ro->timeout_ms = timeout_ms;
	return ORTMK_OK;
}

void ortmk_run_options_set_terminate(ortmk_run_options *ro, int terminate)
{
	if (!ro)
		return;
	pthread_mutex_lock(&ro->lock);
	ro->terminate = terminate != 0;
	for (int i = 0; terminate && i < CORE_RO_ACTIVE; i++)
		if (ro->active[i].word)
			atomic_store(ro->active[i].word, ro->active[i].token);
	pthread_mutex_unlock(&ro->lock);
}

/* Sends step i's RUN and waits for the reply: in call until
 * core_ep_call_done. */
static ortmk_status send_run(run_ctx *c, size_t i, core_call *call)
{
	ortmk_session *s = c->s;
	core_step *st = &s->steps[i];
	core_ep *ep = s->eps[st->ep];
	Ortmk__Envelope e = ORTMK__ENVELOPE__INIT;
	Ortmk__Run run = ORTMK__RUN__INIT;
	_Atomic uint64_t *word = c->ro ? cancel_word(c, ep) : NULL;
	int timeout = c->ro && c->ro->timeout_ms ? c->ro->timeout_ms : s->run_timeout_ms;
	int slot = -1;
	ortmk_status rc;
	size_t n = 0;

	for (size_t j = 0; j < st->n_values; j++) {
		if (make_ref(c, i, st->values[j], &c->refs[n])) {
			c->refs[n].value = (uint32_t)j;
			c->prefs[n] = &c->refs[n];
			n++;
		}
	}
	run.subgraph_id = st->subgraph_id;
	run.run_id = c->run_id = __atomic_add_fetch(&s->next_run, 1, __ATOMIC_RELAXED);
	run.n_bindings = n;
	run.bindings = c->prefs;
	c->n_refs = n;
	run.has_dyn_segment = run.has_dyn_offset = run.has_dyn_size = 1;
	run.dyn_segment = c->slot->dyn->id;
	run.dyn_offset = c->dyn_used;
	run.dyn_size = c->slot->dyn->size - c->dyn_used;
	run.has_profile = run.profile = s->profile && ipc_trace_on();
	e.kind = ORTMK__KIND__RUN;
	e.body_case = ORTMK__ENVELOPE__BODY_RUN;
	e.run = &run;
	e.has_session = 1;
	e.session = s->id;
	if (c->stream && c->stream->ep == s->eps[st->ep]) {
		e.has_stream = 1;
		e.stream = c->stream->id;
	}
	/* With a CPU the provider's threads leave free, waiting for the reply
	 * spins (yielding) up to RUN_SPIN_NS: the wake-up of a sleeping
	 * application thread costs 30-40 us on this VM, a tenth of mlp1's
	 * run at one thread (its median 0.62 -> 0.41 ms); the thread is the
	 * caller's, blocked in ortmk_run either way, as an in-process runtime
	 * would keep it computing.  With every CPU computing it sleeps after
	 * IPC_RING_SPIN_NS.  With several runs in flight (this and other
	 * sessions' threads) each takes its provider's threads and its
	 * waiting thread: when they outnumber the CPUs, a wait that spins
	 * takes a CPU from a run that computes (the example CNN at 2
	 * threads on 2 cores: 1.03x the throughput of one), so it sleeps
	 * at once (spin 1 ns), and the run goes to the lane whose home is
	 * this thread's CPU, bound there (core_ep_run_request): the two then
	 * hand that CPU to each other, where a wake-up across CPUs costs
	 * more, and the wake-up moves this thread next to its lane.  A single
	 * run whose threads fill the CPUs is placed too once its step's last
	 * two RUNs took PLACE_SINGLE_NS each: unbound, its lane's thread
	 * sometimes settled on the CPU of the pool's worker, and the waiting
	 * thread, woken at the end, queued behind the worker's closing spin
	 * (mnv3_cls at 2 threads: a tenth of the processes ran at 0.37 ms
	 * instead of 0.25); bound, this thread and the lane's share one CPU
	 * and the worker has the other.  A shorter step is better off
	 * unbound, the two threads spinning on two CPUs (a 20 us streaming
	 * step: 1.3x its time bound); two RUNs, because a step's first is
	 * slower than the rest and alone would bind a short one once. */
	int waiting = atomic_fetch_add(&s->env->runs_waiting, 1) + 1;
	int crowded = waiting * (s->threads + 1) > s->cpus;
	uint64_t spin = !crowded ? RUN_SPIN_NS : waiting == 1 ? 0 : 1;
	int near = crowded && (waiting > 1 ||
			       (atomic_load_explicit(&st->last_ns, memory_order_relaxed) >= PLACE_SINGLE_NS &&
				atomic_load_explicit(&st->prev_ns, memory_order_relaxed) >= PLACE_SINGLE_NS)) ?
		   sched_getcpu() : -1;
	uint64_t t0 = shm_now_ns();

	if (word) {
		run.has_cancel_segment = run.has_cancel_token = 1;
		run.cancel_segment = ep->cancel_seg.id;
		run.cancel_token = core_env_next_id(s->env);
		slot = ro_enter(c->ro, word, run.cancel_token);
	}
	rc = core_ep_run_request(ep, &e, timeout ? timeout : -1, spin, c->exclusive, near, call);
	atomic_store_explicit(&st->prev_ns, atomic_load_explicit(&st->last_ns, memory_order_relaxed),
			      memory_order_relaxed);
	atomic_store_explicit(&st->last_ns, shm_now_ns() - t0, memory_order_relaxed);
	atomic_fetch_sub(&s->env->runs_waiting, 1);
	if (word)
		ro_leave(c->ro, slot);
	return rc;
}

/* The binding sent as dynamic for step value j (j < n_values), or NULL. */
static const Ortmk__TensorRef *dynamic_binding(const run_ctx *c, uint32_t j)
{
	for (size_t k = 0; k < c->n_refs; k++)
		if (c->prefs[k]->value == j && c->prefs[k]->dynamic)
			return c->prefs[k];
	return NULL;
}

/* One output of a RESULT in the dynamic region.  The envelope check
 * proved its bytes lie inside a segment and match its dims; here it must
 * answer a dynamic binding of this run, once, in the run's own region,
 * with the element type and kind the model declares. */
static ortmk_status take_dynamic(run_ctx *c, size_t i, const Ortmk__TensorRef *t)
{
	core_step *st = &c->s->steps[i];
	const char *ep = c->s->eps[st->ep]->name;
	const Ortmk__TensorRef *b = t->value < st->n_values ? dynamic_binding(c, t->value) : NULL;
	const graph_value *gv;
	int kind = t->has_kind ? (int)t->kind : 0;
	int v;

	if (!b || t->segment_id != c->slot->dyn->id || t->offset < c->dyn_used)
		return core_fail(ORTMK_ERR_PROTOCOL, "provider '%s': result names a tensor it was not given",
				 ep);
	v = st->values[t->value];
	gv = &c->s->g->values[v];
	if (c->locs[v].seg)
		return core_fail(ORTMK_ERR_PROTOCOL, "provider '%s': result reports '%s' twice", ep, gv->name);
	if (b->dtype && t->dtype != b->dtype && kind == ORTMK_VALUE_TENSOR)
		return core_fail(ORTMK_ERR_PROTOCOL, "provider '%s': result gives '%s' as %s, the model says %s",
				 ep, gv->name, graph_dtype_name(t->dtype), graph_dtype_name(b->dtype));
	if (gv->type && !(accepted_kinds(gv->type) & (1u << kind)))
		return core_fail(ORTMK_ERR_PROTOCOL, "provider '%s': result gives '%s' as %s, not what the model declares",
				 ep, gv->name, kind == ORTMK_VALUE_SEQUENCE ? "a sequence" :
				 kind == ORTMK_VALUE_NONE ? "an empty optional" :
				 kind == ORTMK_VALUE_MAP ? "a map" : "a tensor");
	core_run_set_loc(&c->locs[v], c->slot->dyn, t->offset, t->nbytes, kind, t->dtype, (int)t->n_dims,
			 t->dims);
	return ORTMK_OK;
}

static ortmk_status take_result(run_ctx *c, size_t i, uint64_t run_id, const Ortmk__Result *r)
{
	core_step *st = &c->s->steps[i];

	if (r->run_id != run_id)
		return core_fail(ORTMK_ERR_PROTOCOL, "provider '%s': RESULT of run %llu, but run %llu was asked",
				 c->s->eps[st->ep]->name, (unsigned long long)r->run_id,
				 (unsigned long long)run_id);
	for (size_t k = 0; k < r->n_outputs; k++) {
		const Ortmk__TensorRef *t = r->outputs[k];
		ortmk_status s = t->has_buffer_id && t->value < st->n_values ?
			core_run_take_buffer(c, i, st->values[t->value], t) : take_dynamic(c, i, t);

		if (s)
			return s;
	}
	for (size_t k = 0; k < r->n_outputs; k++) {
		const Ortmk__TensorRef *t = r->outputs[k];

		if (!t->has_buffer_id && t->offset + t->nbytes > c->dyn_used)
			c->dyn_used = (t->offset + t->nbytes + SHM_ALIGN - 1) & ~(uint64_t)(SHM_ALIGN - 1);
	}
	return ORTMK_OK;
}

static void lock_eps(ortmk_env *env, unsigned mask, int lock);

/* Grows the dynamic region of a run to `size` bytes, keeping what earlier
 * steps put there: their bytes are copied into the new segment and their
 * locations moved to it, and every provider of the session is given it
 * (a later step on another provider reads them from there). */
static ortmk_status grow_dyn(run_ctx *c, uint64_t size)
{
	ortmk_session *s = c->s;
	shm_segment *old = c->slot->dyn, *n;
	ortmk_status st = segment_new(s, size, "ortmk-dynamic", &n);

	if (st != ORTMK_OK)
		return st;
	memcpy(n->base, old->base, c->dyn_used);
	for (size_t v = 0; v < s->g->n_values; v++)
		if (c->locs[v].seg == old)
			c->locs[v].seg = n;
	if (!c->exclusive)
		lock_eps(s->env, c->mask, 1);
	segment_drop(s, old);
	c->slot->dyn = n;
	for (int e = 0; e < s->n_eps && st == ORTMK_OK; e++)
		if (s->nodes_per_ep[e])
			st = core_ep_add_segment(s->eps[e], n);
	if (!c->exclusive)
		lock_eps(s->env, c->mask, 0);
	return st;
}

static ortmk_status run_step(run_ctx *c, size_t i)
{
	ortmk_session *s = c->s;
	core_ep *ep = s->eps[s->steps[i].ep];

	if (c->ro && ro_terminated(c->ro))
		return core_fail(ORTMK_ERR_CANCELLED, "run cancelled before step %zu of %zu", i + 1,
				 s->n_steps);
	for (int attempt = 0; attempt < 4; attempt++) {
		core_call call;
		ortmk_status st = send_run(c, i, &call);
		Ortmk__Envelope *rep = call.rep;
		uint64_t need;

		if (st == ORTMK_OK) {
			st = rep->kind == ORTMK__KIND__RESULT ? take_result(c, i, c->run_id, rep->result) :
				core_fail(ORTMK_ERR_PROTOCOL, "provider '%s': expected RESULT, got %s",
					  ep->name, ipc_kind_name(rep->kind));
			/* Still on the process the RESULT came from (plock). */
			if (st == ORTMK_ERR_PROTOCOL)
				st = core_ep_broke_protocol(ep);
			core_ep_call_done(&call);
			return st;
		}
		if (!rep || rep->kind != ORTMK__KIND__ERROR ||
		    rep->error->code != ORTMK__ERROR_CODE__E_DYN_OVERFLOW || !rep->error->has_needed) {
			core_ep_call_done(&call);
			return st;
		}
		need = c->dyn_used + rep->error->needed;
		core_ep_call_done(&call);
		st = grow_dyn(c, need * 2);
		if (st)
			return st;
	}
	return core_fail(ORTMK_ERR_INTERNAL, "dynamic region keeps overflowing");
}

static ortmk_status prepare_memory(run_ctx *c, const ortmk_value **bound)
{
	ortmk_session *s = c->s;
	ortmk_status st = grow_segment(s, &c->slot->arena, c->plan->arena_size, "ortmk-arena");

	if (st == ORTMK_OK && !c->slot->dyn)
		st = grow_segment(s, &c->slot->dyn, DYN_INITIAL, "ortmk-dynamic");
	for (int e = 0; e < s->n_eps && st == ORTMK_OK; e++) {
		if (!s->nodes_per_ep[e])
			continue;
		st = core_ep_add_segment(s->eps[e], c->slot->arena);
		if (st == ORTMK_OK)
			st = core_ep_add_segment(s->eps[e], c->slot->dyn);
		for (size_t i = 0; i < s->g->n_inputs && st == ORTMK_OK; i++)
			if (!bound[i]->dev)
				st = core_ep_add_segment(s->eps[e], (shm_segment *)&bound[i]->seg);
	}
	for (size_t i = 0; i < s->g->n_inputs && st == ORTMK_OK; i++) {
		const ortmk_value *v = bound[i];

		if (!v->dev)
			core_run_set_loc(&c->locs[s->g->inputs[i]], (shm_segment *)&v->seg,
					 c->in_off ? c->in_off[i] : 0, v->nbytes,
					 v->kind, v->dtype, (int)v->rank, v->dims);
	}
	if (st == ORTMK_OK)
		st = core_run_device_inputs(c, bound);
	if (st == ORTMK_OK)
		st = core_run_bind_outputs(c);
	return st;
}

/* The providers a run touches: the session's and those holding its
 * device inputs and outputs (bit per env index). */
static unsigned run_ep_mask(const run_ctx *c, const ortmk_value **bound)
{
	const ortmk_session *s = c->s;
	unsigned m = 0;

	for (int e = 0; e < s->n_eps; e++)
		m |= 1u << s->eps[e]->index;
	for (size_t i = 0; i < s->g->n_inputs; i++)
		if (bound[i]->dev)
			m |= 1u << bound[i]->dev->index;
	for (size_t i = 0; i < c->n_out; i++) {
		if (c->outs[i].dev)
			m |= 1u << c->outs[i].dev->index;
		if (c->outs[i].value && c->outs[i].value->dev)
			m |= 1u << c->outs[i].value->dev->index;
	}
	return m;
}

static void lock_eps(ortmk_env *env, unsigned mask, int lock)
{
	/* Always in env order so two sessions sharing providers cannot deadlock. */
	for (int k = 0; k < env->n_eps; k++) {
		int e = lock ? k : env->n_eps - 1 - k;

		if (!(mask & (1u << e)))
			continue;
		if (lock)
			pthread_mutex_lock(&env->eps[e]->lock);
		else
			pthread_mutex_unlock(&env->eps[e]->lock);
	}
}

/* A run needs its providers' locks throughout when it has device values
 * or a stream (run_device.c, device.c), or a provider of the session has
 * device memory: their buffers and streams are ordered by those locks. */
static int needs_exclusive(const run_ctx *c, const ortmk_value **bound)
{
	const ortmk_session *s = c->s;

	if (c->stream)
		return 1;
	for (int e = 0; e < s->n_eps; e++)
		if (s->eps[e]->p.device_memory)
			return 1;
	for (size_t i = 0; i < s->g->n_inputs; i++)
		if (bound[i]->dev)
			return 1;
	for (size_t i = 0; i < c->n_out; i++)
		if (c->outs[i].mode != CORE_OUT_HOST_NEW)
			return 1;
	return 0;
}

/* One attempt: plan and slot, memory made known (providers locked), the
 * steps (locked only when exclusive), the outputs (locked). */
static ortmk_status run_attempt(run_ctx *c, const ortmk_value **bound)
{
	ortmk_session *s = c->s;
	size_t nv = s->g->n_values;
	ortmk_status st;

	c->dyn_used = 0;
	c->locs = calloc(nv + 1, sizeof(*c->locs));
	c->refs = calloc(nv + 1, sizeof(*c->refs));
	c->prefs = calloc(nv + 1, sizeof(*c->prefs));
	c->staged = calloc(s->g->n_inputs + 1, sizeof(*c->staged));
	if (!c->locs || !c->refs || !c->prefs || !c->staged)
		return core_fail(ORTMK_ERR_NO_MEMORY, "out of memory");
	/* The slot first: a run waiting for one holds no provider's lock. */
	st = run_begin(c, bound);
	if (st)
		return st;
	c->mask = run_ep_mask(c, bound);
	c->exclusive = needs_exclusive(c, bound);
	lock_eps(s->env, c->mask, 1);
	st = prepare_memory(c, bound);
	if (!c->exclusive)
		lock_eps(s->env, c->mask, 0);
	for (size_t i = 0; i < s->n_steps && st == ORTMK_OK; i++)
		st = run_step(c, i);
	if (!c->exclusive)
		lock_eps(s->env, c->mask, 1);
	if (st == ORTMK_OK)
		st = core_run_finish_outputs(c);
	if (st == ORTMK_OK)
		for (int e = 0; e < s->n_eps; e++)
			core_ep_healthy(s->eps[e]);
	lock_eps(s->env, c->mask, 0);
	return st;
}

/* After the providers' locks are released: what the run made and did not
 * hand out (destroying a value may talk to providers), its slot and plan. */
static void run_release(run_ctx *c)
{
	if (c->locs)
		core_run_device_cleanup(c);
	free(c->locs);
	free(c->refs);
	free(c->prefs);
	free(c->staged);
	run_end(c);
}

/* Failures that restarting the provider can cure. */
static int provider_failure(ortmk_status st)
{
	return st == ORTMK_ERR_PROVIDER_DIED || st == ORTMK_ERR_TIMEOUT || st == ORTMK_ERR_PROTOCOL;
}

/* Disables providers that failed too often and moves their nodes on. */
static ortmk_status check_crash_loop(ortmk_session *s)
{
	int changed = 0, left = 0;

	for (int e = 0; e < s->n_eps; e++) {
		unsigned n = core_ep_recent_failures(s->eps[e], (unsigned)s->crash_loop_window_ms);

		if (!s->disabled[e] && s->nodes_per_ep[e] && n >= (unsigned)s->crash_loop_n) {
			s->disabled[e] = 1;
			changed = 1;
			ipc_trace_event(s->eps[e]->name, (int)s->eps[e]->p.pid, "disabled",
					s->eps[e]->last_failure);
			ipc_log(IPC_LOG_WARN, "provider %s disabled for session %llu: %u failures within %d ms (last: %s)",
				s->eps[e]->name, (unsigned long long)s->id, n, s->crash_loop_window_ms,
				s->eps[e]->last_failure);
		}
		left += !s->disabled[e];
	}
	if (!changed)
		return ORTMK_OK;
	if (!left) {
		snprintf(s->broken, sizeof(s->broken),
			 "no provider left for this session: every provider failed %d times within %d ms (last: %s)",
			 s->crash_loop_n, s->crash_loop_window_ms, s->eps[0]->last_failure);
		return core_fail(ORTMK_ERR_PROVIDER, "%s", s->broken);
	}
	if (core_session_repartition(s)) {
		snprintf(s->broken, sizeof(s->broken), "re-partitioning after a crash loop failed: %s",
			 ortmk_last_error());
		return core_fail(ORTMK_ERR_PROVIDER, "%s", s->broken);
	}
	return ORTMK_OK;
}

/* Drops the results of a failed attempt (values the caller owns stay). */
static void clear_results(core_out *outs, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (outs[i].result && outs[i].result != outs[i].value)
			ortmk_value_destroy(outs[i].result);
		outs[i].result = NULL;
	}
}

/* Inputs still being written by a copy are waited for, unless the copy is
 * on the run's stream and the value is read in place on that provider
 * (the provider orders the two). */
static ortmk_status settle_inputs(ortmk_session *s, const ortmk_value **bound, ortmk_stream *stream)
{
	uint64_t deadline = shm_now_ns() +
		(uint64_t)(s->run_timeout_ms ? s->run_timeout_ms : CORE_CONTROL_MS) * 1000000u;

	for (size_t i = 0; i < s->g->n_inputs; i++) {
		ortmk_value *v = (ortmk_value *)bound[i];
		ortmk_status st;

		if (v->pend.slot < 0 || (stream && v->pend.slot == stream->slot && v->dev == stream->ep))
			continue;
		st = core_dev_pend_wait(s->env, &v->pend, deadline);
		if (st)
			return st;
	}
	return ORTMK_OK;
}

static ortmk_status run_with_recovery(ortmk_session *s, ortmk_run_options *ro,
				      const ortmk_value **bound, core_out *outs, size_t n_out,
				      ortmk_stream *stream, const uint64_t *in_off)
{
	ortmk_status st = ORTMK_OK;

	for (int attempt = 0; attempt < 2; attempt++) {
		run_ctx c = {.s = s, .outs = outs, .n_out = n_out, .stream = stream, .ro = ro,
			     .in_off = in_off};
		char keep[1024];
		ortmk_status cl;

		st = settle_inputs(s, bound, stream);
		if (st)
			return st;
		pthread_rwlock_rdlock(&s->steps_lock);
		st = s->broken[0] ? core_fail(ORTMK_ERR_PROVIDER, "%s", s->broken) : run_attempt(&c, bound);
		run_release(&c);
		pthread_rwlock_unlock(&s->steps_lock);
		if (st == ORTMK_OK || !provider_failure(st))
			return st;
		clear_results(outs, n_out);
		snprintf(keep, sizeof(keep), "%s", ortmk_last_error());
		/* Re-partitioning changes the steps: no run of the session in
		 * flight meanwhile. */
		pthread_rwlock_wrlock(&s->steps_lock);
		cl = check_crash_loop(s);
		pthread_rwlock_unlock(&s->steps_lock);
		if (cl || !s->retry || attempt == 1)
			return core_fail(st, "%s", keep);
		pthread_mutex_lock(&s->lock);
		s->retried_runs++;
		pthread_mutex_unlock(&s->lock);
		ipc_log(IPC_LOG_INFO, "retrying a run: %s", keep);
	}
	return st;
}

/* ---- batch chunks: a large batch run a few images at a time (batch.c) ---- */

/* The batch every input of a run shares as its dim 0, or 0. */
static int64_t run_batch(const ortmk_session *s, const ortmk_value **bound, const core_out *outs,
			 size_t n_out)
{
	int64_t n = 0;

	for (size_t i = 0; i < n_out; i++)
		if (outs[i].mode != CORE_OUT_HOST_NEW)
			return 0;
	for (size_t i = 0; i < s->g->n_inputs; i++) {
		const ortmk_value *v = bound[i];

		if (v->dev || v->kind != ORTMK_VALUE_TENSOR || v->rank < 1 ||
		    !graph_dtype_size(v->dtype) || v->dims[0] < 2 || (n && v->dims[0] != n))
			return 0;
		n = v->dims[0];
	}
	for (int e = 0; e < s->n_eps; e++)
		if (s->nodes_per_ep[e] && strcmp(s->eps[e]->name, "cpu"))
			return 0;
	return n;
}

static void plan_put(core_plan *p)
{
	if (p && --p->refs == 0)
		core_plan_free(p);
}

/* Rows [i0, i0 + k) of a batch of n as input values in[] (the caller's
 * segments, their dim 0 k) and vb[] pointing at them; off[i] (when given)
 * where input i's rows start in its segment. */
static void input_rows(const ortmk_session *s, const ortmk_value **bound, int64_t n, int64_t i0,
		       int64_t k, ortmk_value *in, const ortmk_value **vb, uint64_t *off)
{
	for (size_t i = 0; i < s->g->n_inputs; i++) {
		size_t row = bound[i]->nbytes / (size_t)n;

		in[i] = *bound[i];
		in[i].dims[0] = k;
		in[i].nbytes = row * (size_t)k;
		if (off)
			off[i] = row * (uint64_t)i0;
		vb[i] = &in[i];
	}
}

/* Whether the plan of chunks of b images keeps the images apart as the
 * plan pn of the whole batch n does (session lock held). */
static int chunk_ok(ortmk_session *s, const ortmk_value **bound, const core_plan *pn,
		    int64_t n, int64_t b)
{
	size_t n_in = s->g->n_inputs;
	ortmk_value *v = malloc((n_in + 1) * sizeof(*v));
	const ortmk_value **vb = malloc((n_in + 1) * sizeof(*vb));
	core_plan *pb = NULL;
	int ok = 0;

	if (v && vb)
		input_rows(s, bound, n, 0, b, v, vb, NULL);
	if (v && vb && get_plan(s, vb, &pb) == ORTMK_OK) {
		ok = core_batch_separable(s->g, pn, pb, n, b);
	} else {
		ipc_log(IPC_LOG_DEBUG, "batch kept whole: no plan for %lld images: %s",
			(long long)b, ortmk_last_error());
		core_clear_error();   /* the batch runs whole: no error to report */
	}
	plan_put(pb);
	free(v);
	free(vb);
	return ok;
}

/* The images a chunk of this run should hold, 0 to run it whole; for
 * chunks, outs[i].result is the output of the whole batch, made here. */
static int64_t batch_chunk(ortmk_session *s, const ortmk_value **bound, core_out *outs,
			   size_t n_out)
{
	int64_t n = run_batch(s, bound, outs, n_out), b = 0;
	core_plan *pn = NULL;

	if (!n)
		return 0;
	pthread_rwlock_rdlock(&s->steps_lock);
	pthread_mutex_lock(&s->lock);
	if (get_plan(s, bound, &pn) != ORTMK_OK) {
		core_clear_error();   /* the whole run reports it */
	} else {
		if (!pn->chunk) {
			b = core_batch_chunk_size(s, pn, n);
			pn->chunk = b > 0 && chunk_ok(s, bound, pn, n, b) &&
				(n % b == 0 || chunk_ok(s, bound, pn, n, n % b)) ? b : -1;
			if (pn->chunk > 0)
				ipc_log(IPC_LOG_DEBUG, "batch of %lld run in chunks of %lld",
					(long long)n, (long long)b);
		}
		b = pn->chunk > 0 ? pn->chunk : 0;
	}
	for (size_t i = 0; i < n_out && b; i++) {
		const graph_tinfo *t = &pn->tinfo[outs[i].v];
		int32_t dt = t->elem_type ? t->elem_type : s->g->values[outs[i].v].elem_type;

		if (core_value_new(s->env, dt, t->dims, (size_t)t->rank, &outs[i].result) != ORTMK_OK)
			b = 0;
	}
	plan_put(pn);
	pthread_mutex_unlock(&s->lock);
	pthread_rwlock_unlock(&s->steps_lock);
	if (!b)
		clear_results(outs, n_out);
	return b;
}

/* A run of the batch as runs of b images each: the inputs' rows in place,
 * each chunk's outputs written straight into its rows of outs[i].result. */
static ortmk_status run_chunks(ortmk_session *s, ortmk_run_options *ro,
			       const ortmk_value **bound, core_out *outs, size_t n_out, int64_t b)
{
	size_t n_in = s->g->n_inputs;
	int64_t n = bound[0]->dims[0];
	ortmk_value *in = calloc(n_in + 1, sizeof(*in)), *out = calloc(n_out + 1, sizeof(*out));
	const ortmk_value **vb = calloc(n_in + 1, sizeof(*vb));
	uint64_t *off = calloc(n_in + 1, sizeof(*off));
	core_out *co = calloc(n_out + 1, sizeof(*co));
	ortmk_status st = in && out && vb && off && co ? settle_inputs(s, bound, NULL) :
		core_fail(ORTMK_ERR_NO_MEMORY, "out of memory");

	for (int64_t i0 = 0; i0 < n && st == ORTMK_OK; i0 += b) {
		int64_t k = n - i0 < b ? n - i0 : b;

		input_rows(s, bound, n, i0, k, in, vb, off);
		for (size_t j = 0; j < n_out; j++) {
			size_t row = outs[j].result->nbytes / (size_t)n;

			out[j] = *outs[j].result;
			out[j].dims[0] = k;
			out[j].nbytes = row * (size_t)k;
			co[j] = (core_out){.v = outs[j].v, .mode = CORE_OUT_VALUE, .value = &out[j],
					   .off = row * (uint64_t)i0};
		}
		st = run_with_recovery(s, ro, vb, co, n_out, NULL, off);
	}
	free(in);
	free(out);
	free(vb);
	free(off);
	free(co);
	return st;
}

ortmk_status core_session_run_outs(ortmk_session *s, ortmk_run_options *ro,
				   const ortmk_value **bound, core_out *outs,
				   size_t n_out, ortmk_stream *stream)
{
	uint64_t t0 = s->profile && ipc_trace_on() ? ipc_now_ns() : 0;
	int64_t chunk;
	ortmk_status st;

	for (size_t i = 0; i < n_out; i++)
		outs[i].result = NULL;
	if (ro && ro->tag[0])
		ipc_trace_event("core", (int)getpid(), "run", ro->tag);
	chunk = stream ? 0 : batch_chunk(s, bound, outs, n_out);
	st = chunk > 0 ? run_chunks(s, ro, bound, outs, n_out, chunk) :
		run_with_recovery(s, ro, bound, outs, n_out, stream, NULL);
	/* A death noticed only by a request: name the device values it cost. */
	for (size_t i = 0; i < s->g->n_inputs && st == ORTMK_ERR_PROVIDER_DIED; i++)
		if (core_dev_value_check(bound[i]))
			break;
	for (size_t i = 0; i < n_out && st == ORTMK_ERR_PROVIDER_DIED; i++)
		if (outs[i].value && core_dev_value_check(outs[i].value))
			break;
	pthread_mutex_lock(&s->lock);
	s->runs++;
	s->failed_runs += st != ORTMK_OK;
	pthread_mutex_unlock(&s->lock);
	if (t0)
		ipc_trace_session_run(s->id, t0, ipc_now_ns() - t0, (int)st);
	if (st)
		clear_results(outs, n_out);
	return st;
}

ortmk_status ortmk_session_run(ortmk_session *s, const char *const *input_names,
			       const ortmk_value *const *inputs, size_t n_inputs,
			       const char *const *output_names, size_t n_outputs,
			       ortmk_value **outputs)
{
	return ortmk_session_run_with_options(s, NULL, input_names, inputs, n_inputs, output_names,
					      n_outputs, outputs);
}

ortmk_status ortmk_session_run_with_options(ortmk_session *s, ortmk_run_options *ro,
					    const char *const *input_names,
					    const ortmk_value *const *inputs, size_t n_inputs,
					    const char *const *output_names, size_t n_outputs,
					    ortmk_value **outputs)
{
	const ortmk_value **bound;
	core_out *outs;
	ortmk_status st = ORTMK_OK;

	core_clear_error();
	if (!s || (n_inputs && (!input_names || !inputs)) || (n_outputs && (!output_names || !outputs)))
		return core_fail(ORTMK_ERR_INVALID_ARGUMENT, "run: NULL argument");
	for (size_t i = 0; i < n_outputs; i++)
		outputs[i] = NULL;
	bound = calloc(s->g->n_inputs + 1, sizeof(*bound));
	outs = calloc(n_outputs + 1, sizeof(*outs));
	if (!bound || !outs) {
		free(bound);
		free(outs);
		return core_fail(ORTMK_ERR_NO_MEMORY, "out of memory");
	}
	for (size_t i = 0; i < n_outputs && st == ORTMK_OK; i++) {
		int v = output_names[i] ? graph_find_value(s->g, output_names[i]) : -1;

		if (v < 0 || !s->g->values[v].is_graph_output)
			st = core_fail(ORTMK_ERR_INPUT, "'%s' is not an output of the model",
				       output_names[i] ? output_names[i] : "(null)");
		outs[i].v = v;
		outs[i].mode = CORE_OUT_HOST_NEW;
	}
	if (st == ORTMK_OK) {
		pthread_mutex_lock(&s->lock);
		st = bind_inputs(s, input_names, inputs, n_inputs, bound);
		pthread_mutex_unlock(&s->lock);
	}
	if (st == ORTMK_OK) {
		st = core_session_run_outs(s, ro, bound, outs, n_outputs, NULL);
	} else {
		pthread_mutex_lock(&s->lock);
		s->runs++;
		s->failed_runs++;
		pthread_mutex_unlock(&s->lock);
	}
	for (size_t i = 0; i < n_outputs && st == ORTMK_OK; i++)
		outputs[i] = outs[i].result;
	free(outs);
	free(bound);
	return st;
}
