/*
 * device: values in a provider's own memory, streams and fences
 * (docs/DEVICE.md).  A device value is a buffer id the core assigned and
 * ALLOCated in one provider process; it is valid only while that process
 * (core_proc.exec_id) lives: a restart or a swap starts a process that never
 * had it, so any later use is ORTMK_ERR_PROVIDER_DIED.  Each stream owns
 * one fence word (fence.c) as a timeline: each COPY signals the next value;
 * when a provider process fails, fence.c fails the values its streams had
 * not reached.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "log.h"

void core_dev_env_fini(ortmk_env *env)
{
	/* The processes are gone: their buffers with them. */
	while (env->n_dev_pool)
		free(env->dev_pool[--env->n_dev_pool]);
	while (env->streams) {
		ortmk_stream *st = env->streams;

		env->streams = st->next;
		free(st);
	}
	if (env->fences.base)
		shm_segment_destroy(&env->fences);
}

/* 1 when ep's current process is the one `exec` names and it lives. */
static int same_process(const core_ep *ep, uint64_t exec)
{
	return ep->p.alive && ep->p.exec_id == exec;
}

static ortmk_status pend_wait(ortmk_env *env, core_pend *p, uint64_t deadline_ns, int locked)
{
	core_ep *ep = p->ep;
	shm_fence *f;

	if (p->slot < 0)
		return ORTMK_OK;
	f = core_dev_fence(env, p->slot);
	for (;;) {
		uint64_t now = shm_now_ns(), slice = now + 5000000u;
		int rc = shm_fence_wait(f, p->value, deadline_ns < slice ? deadline_ns : slice);

		if (rc == 0) {
			core_dev_slot_put(env, p->slot);
			p->slot = -1;
			return ORTMK_OK;
		}
		if (rc == -EPIPE)
			return same_process(ep, p->exec) ?
				core_fail(ORTMK_ERR_PROVIDER, "provider '%s': a copy failed", ep->name) :
				core_fail(ORTMK_ERR_PROVIDER_DIED, "provider '%s' died before finishing a copy: %s",
					  ep->name, ep->last_failure);
		if (deadline_ns != UINT64_MAX && shm_now_ns() >= deadline_ns)
			return core_fail(ORTMK_ERR_TIMEOUT, "provider '%s': work not done by the deadline",
					 ep->name);
		/* A ring or a fence knows nothing of a dead process: look.  A
		 * run in progress holds the lock and will notice it itself. */
		if (locked) {
			core_proc_check_dead(ep, &ep->p);
		} else if (pthread_mutex_trylock(&ep->lock) == 0) {
			core_proc_check_dead(ep, &ep->p);
			pthread_mutex_unlock(&ep->lock);
		}
	}
}

ortmk_status core_dev_pend_wait(ortmk_env *env, core_pend *p, uint64_t deadline_ns)
{
	return pend_wait(env, p, deadline_ns, 0);
}

ortmk_status core_dev_pend_wait_locked(ortmk_env *env, core_pend *p, uint64_t deadline_ns)
{
	return pend_wait(env, p, deadline_ns, 1);
}

/* ---- device values ---------------------------------------------------------- */

/* Room to grow: a tensor that gets a little larger every step (a cache)
 * still fits the buffer a previous step freed.  ALLOC refuses 0 bytes. */
static uint64_t capacity_for(uint64_t n)
{
	uint64_t unit = 4096;

	while (unit < n / 8)
		unit <<= 1;
	return n ? (n + unit - 1) / unit * unit : unit;
}

/* A pooled buffer of ep's current process that fits n bytes without
 * wasting more than half of it; 1 with *out reshaped. */
static int pool_take(core_ep *ep, int32_t dtype, const int64_t *dims, size_t rank, uint64_t n,
		     ortmk_value **out)
{
	ortmk_env *env = ep->env;
	ortmk_value *v = NULL;

	pthread_mutex_lock(&env->dev_lock);
	for (int i = 0; i < env->n_dev_pool; i++) {
		ortmk_value *c = env->dev_pool[i];

		if (c->dev == ep && c->dev_exec == ep->p.exec_id && c->dev_capacity >= n &&
		    c->dev_capacity / 2 <= n + 4096) {
			v = c;
			env->dev_pool[i] = env->dev_pool[--env->n_dev_pool];
			env->dev_pool_bytes -= c->dev_capacity;
			break;
		}
	}
	pthread_mutex_unlock(&env->dev_lock);
	if (!v)
		return 0;
	v->dtype = dtype;
	v->rank = rank;
	if (rank)
		memcpy(v->dims, dims, rank * sizeof(int64_t));
	v->nbytes = n;
	v->pend.slot = -1;
	*out = v;
	return 1;
}

/* Keeps a destroyed device value's buffer; 1 if kept.  When the pool is
 * full, an entry of the same provider (whose lock the caller holds) makes
 * room and is returned in *evict for the caller to release. */
static int pool_put(ortmk_value *v, ortmk_value **evict)
{
	ortmk_env *env = v->env;
	int kept = 0;

	*evict = NULL;
	if (v->dev_capacity > CORE_DEV_POOL_BYTES / 4)
		return 0;
	pthread_mutex_lock(&env->dev_lock);
	/* Buffers of processes that are gone are just dropped. */
	for (int i = 0; i < env->n_dev_pool; i++) {
		ortmk_value *c = env->dev_pool[i];

		if (!same_process(c->dev, c->dev_exec)) {
			env->dev_pool_bytes -= c->dev_capacity;
			env->dev_pool[i--] = env->dev_pool[--env->n_dev_pool];
			free(c);
		}
	}
	for (int i = 0; i < env->n_dev_pool && (env->n_dev_pool == CORE_DEV_POOL ||
		env->dev_pool_bytes + v->dev_capacity > CORE_DEV_POOL_BYTES); i++) {
		if (env->dev_pool[i]->dev == v->dev) {
			*evict = env->dev_pool[i];
			env->dev_pool_bytes -= (*evict)->dev_capacity;
			env->dev_pool[i] = env->dev_pool[--env->n_dev_pool];
			break;
		}
	}
	if (env->n_dev_pool < CORE_DEV_POOL &&
	    env->dev_pool_bytes + v->dev_capacity <= CORE_DEV_POOL_BYTES) {
		env->dev_pool[env->n_dev_pool++] = v;
		env->dev_pool_bytes += v->dev_capacity;
		kept = 1;
	}
	pthread_mutex_unlock(&env->dev_lock);
	return kept;
}

ortmk_status core_dev_value_check(const ortmk_value *v)
{
	if (!v->dev || same_process(v->dev, v->dev_exec))
		return ORTMK_OK;
	return core_fail(ORTMK_ERR_PROVIDER_DIED,
			 "device value (buffer %llu) on provider '%s' was lost: the process that held it (pid %d) %s",
			 (unsigned long long)v->buffer_id, v->dev->name, v->dev_pid,
			 v->dev->p.alive ? "was replaced" : "died");
}

ortmk_status core_dev_value_wrap(ortmk_env *env, core_ep *ep, uint64_t buffer_id, int32_t dtype,
				 const int64_t *dims, size_t rank, uint64_t nbytes, ortmk_value **out)
{
	ortmk_value *v = calloc(1, sizeof(*v));

	if (!v)
		return core_fail(ORTMK_ERR_NO_MEMORY, "out of memory");
	v->env = env;
	v->seg.fd = -1;
	v->dev = ep;
	v->dev_exec = ep->p.exec_id;
	v->dev_pid = (int)ep->p.pid;
	v->buffer_id = buffer_id;
	v->dev_capacity = nbytes;
	v->pend.slot = -1;
	v->dtype = dtype;
	v->rank = rank;
	if (rank)
		memcpy(v->dims, dims, rank * sizeof(int64_t));
	v->nbytes = nbytes;
	*out = v;
	return ORTMK_OK;
}

ortmk_status core_dev_value_alloc(core_ep *ep, int32_t dtype, const int64_t *dims, size_t rank,
				  ortmk_value **out)
{
	Ortmk__Envelope e = ORTMK__ENVELOPE__INIT, *rep = NULL;
	Ortmk__Alloc body = ORTMK__ALLOC__INIT;
	size_t n = graph_dtype_size(dtype);
	ortmk_status st;

	if (!n || rank > GRAPH_MAX_RANK || (rank && !dims))
		return core_fail(ORTMK_ERR_INVALID_ARGUMENT, "device value: bad dtype or shape");
	for (size_t i = 0; i < rank; i++) {
		if (dims[i] < 0 || (dims[i] && n > (IPC_MAX_DEVICE_BYTES >> 1) / (uint64_t)dims[i]))
			return core_fail(ORTMK_ERR_INVALID_ARGUMENT, "device value: bad dim %lld",
					 (long long)dims[i]);
		n *= (size_t)dims[i];
	}
	st = core_ep_ensure(ep);
	if (st)
		return st;
	if (pool_take(ep, dtype, dims, rank, n, out))
		return ORTMK_OK;
	body.buffer_id = core_env_next_id(ep->env);
	body.nbytes = capacity_for(n);
	e.kind = ORTMK__KIND__ALLOC;
	e.body_case = ORTMK__ENVELOPE__BODY_ALLOC;
	e.alloc = &body;
	st = core_proc_request(ep, &ep->p, &e, CORE_DEVICE_MS, &rep);
	if (st == ORTMK_OK && rep->kind != ORTMK__KIND__ACK)
		st = core_fail(ORTMK_ERR_PROTOCOL, "provider '%s': ALLOC answered with %s", ep->name,
			       ipc_kind_name(rep->kind));
	core_ep_reply_free(ep, rep);
	if (st)
		return st;
	st = core_dev_value_wrap(ep->env, ep, body.buffer_id, dtype, dims, rank, n, out);
	if (st == ORTMK_OK)
		(*out)->dev_capacity = body.nbytes;
	return st;
}

/* Frees a device value's buffer in the process that holds it (if it still
 * lives) and the value.  Called by ortmk_value_destroy. */
static void release_buffer(ortmk_value *v)
{
	core_ep *ep = v->dev;

	if (same_process(ep, v->dev_exec)) {
		Ortmk__Envelope e = ORTMK__ENVELOPE__INIT, *rep = NULL;
		Ortmk__Release body = ORTMK__RELEASE__INIT;

		body.has_buffer_id = 1;
		body.buffer_id = v->buffer_id;
		e.kind = ORTMK__KIND__RELEASE;
		e.body_case = ORTMK__ENVELOPE__BODY_RELEASE;
		e.release = &body;
		core_proc_request(ep, &ep->p, &e, CORE_DEVICE_MS, &rep);
		core_ep_reply_free(ep, rep);
	}
	free(v);
}

static void dev_value_free_locked(ortmk_value *v)
{
	ortmk_value *evict = NULL;

	/* A copy into it may still be running: let it end first. */
	core_dev_pend_wait_locked(v->env, &v->pend, shm_now_ns() + (uint64_t)CORE_CONTROL_MS * 1000000u);
	core_dev_slot_put(v->env, v->pend.slot);
	v->pend.slot = -1;
	if (same_process(v->dev, v->dev_exec) && pool_put(v, &evict))
		v = NULL;
	if (evict)
		release_buffer(evict);
	if (v)
		release_buffer(v);
}

void core_dev_value_free(ortmk_value *v)
{
	core_ep *ep = v->dev;

	pthread_mutex_lock(&ep->lock);
	dev_value_free_locked(v);
	pthread_mutex_unlock(&ep->lock);
}

/* ---- streams ---------------------------------------------------------------- */

static ortmk_status stream_new(ortmk_env *env, core_ep *ep, int internal, ortmk_stream **out)
{
	ortmk_stream *st = calloc(1, sizeof(*st));

	if (!st)
		return core_fail(ORTMK_ERR_NO_MEMORY, "out of memory");
	st->env = env;
	st->ep = ep;
	st->internal = internal;
	st->slot = core_dev_slot_new(env);
	if (st->slot < 0) {
		free(st);
		return core_fail(ORTMK_ERR_NO_MEMORY, "no fence left: %d streams and fences alive",
				 CORE_FENCE_SLOTS);
	}
	pthread_mutex_lock(&env->dev_lock);
	st->id = ++env->next_stream;
	st->next = env->streams;
	env->streams = st;
	pthread_mutex_unlock(&env->dev_lock);
	*out = st;
	return ORTMK_OK;
}

ortmk_status core_dev_sync_stream(ortmk_env *env, core_ep *ep, ortmk_stream **out)
{
	ortmk_stream *st;

	pthread_mutex_lock(&env->dev_lock);
	for (st = env->streams; st; st = st->next)
		if (st->internal && st->ep == ep)
			break;
	pthread_mutex_unlock(&env->dev_lock);
	if (st) {
		*out = st;
		return ORTMK_OK;
	}
	return stream_new(env, ep, 1, out);
}

ortmk_status ortmk_stream_create(ortmk_env *env, const char *provider, ortmk_stream **out)
{
	core_ep *ep;
	ortmk_status st;

	core_clear_error();
	if (!env || !provider || !out)
		return core_fail(ORTMK_ERR_INVALID_ARGUMENT, "stream_create: NULL argument");
	st = core_env_get_ep(env, provider, &ep);
	return st ? st : stream_new(env, ep, 0, out);
}

static void stream_unlink(ortmk_stream *st)
{
	ortmk_env *env = st->env;

	pthread_mutex_lock(&env->dev_lock);
	for (ortmk_stream **pp = &env->streams; *pp; pp = &(*pp)->next) {
		if (*pp == st) {
			*pp = st->next;
			break;
		}
	}
	if (env->fence_refs[st->slot])
		env->fence_refs[st->slot]--;
	pthread_mutex_unlock(&env->dev_lock);
}

void ortmk_stream_destroy(ortmk_stream *st)
{
	Ortmk__Envelope e = ORTMK__ENVELOPE__INIT, *rep = NULL;
	Ortmk__Release body = ORTMK__RELEASE__INIT;

	if (!st || st->internal)
		return;
	ortmk_stream_synchronize(st, -1);
	pthread_mutex_lock(&st->ep->lock);
	if (st->issued && same_process(st->ep, st->exec)) {
		body.has_stream = 1;
		body.stream = st->id;
		e.kind = ORTMK__KIND__RELEASE;
		e.body_case = ORTMK__ENVELOPE__BODY_RELEASE;
		e.release = &body;
		core_proc_request(st->ep, &st->ep->p, &e, CORE_CONTROL_MS, &rep);
		ipc_envelope_free(rep);
	}
	pthread_mutex_unlock(&st->ep->lock);
	stream_unlink(st);
	free(st);
}

static uint64_t deadline_of(int timeout_ms)
{
	return timeout_ms < 0 ? UINT64_MAX : shm_now_ns() + (uint64_t)timeout_ms * 1000000u;
}

ortmk_status ortmk_stream_synchronize(ortmk_stream *st, int timeout_ms)
{
	core_pend p;

	core_clear_error();
	if (!st)
		return core_fail(ORTMK_ERR_INVALID_ARGUMENT, "stream_synchronize: NULL stream");
	if (!st->issued)
		return ORTMK_OK;
	p.slot = st->slot;
	p.value = st->issued;
	p.exec = st->exec;
	p.ep = st->ep;
	core_dev_slot_get(st->env, p.slot);
	{
		ortmk_status s = core_dev_pend_wait(st->env, &p, deadline_of(timeout_ms));

		core_dev_slot_put(st->env, p.slot);
		return s;
	}
}

ortmk_status ortmk_stream_fence(ortmk_stream *st, ortmk_fence **out)
{
	ortmk_fence *f;

	core_clear_error();
	if (!st || !out)
		return core_fail(ORTMK_ERR_INVALID_ARGUMENT, "stream_fence: NULL argument");
	f = calloc(1, sizeof(*f));
	if (!f)
		return core_fail(ORTMK_ERR_NO_MEMORY, "out of memory");
	f->env = st->env;
	f->ep = st->ep;
	f->exec = st->exec;
	f->slot = st->slot;
	f->value = st->issued;
	core_dev_slot_get(st->env, f->slot);
	*out = f;
	return ORTMK_OK;
}

ortmk_status ortmk_fence_wait(const ortmk_fence *f, int timeout_ms)
{
	core_pend p;
	ortmk_status st;

	core_clear_error();
	if (!f)
		return core_fail(ORTMK_ERR_INVALID_ARGUMENT, "fence_wait: NULL fence");
	if (!f->value)
		return ORTMK_OK;
	p.slot = f->slot;
	p.value = f->value;
	p.exec = f->exec;
	p.ep = f->ep;
	core_dev_slot_get(f->env, p.slot);
	st = core_dev_pend_wait(f->env, &p, deadline_of(timeout_ms));
	core_dev_slot_put(f->env, p.slot);
	return st;
}

void ortmk_fence_destroy(ortmk_fence *f)
{
	if (!f)
		return;
	core_dev_slot_put(f->env, f->slot);
	free(f);
}

/* ---- enqueueing copies ---------------------------------------------------- */

/* A stream whose fence failed (its provider died, a copy failed) gets a
 * fresh one: the failed word stays failed for the fences that name it. */
static ortmk_status stream_reslot(ortmk_stream *st)
{
	int slot;

	if (!(shm_fence_read(core_dev_fence(st->env, st->slot)) & SHM_FENCE_FAILED))
		return ORTMK_OK;
	slot = core_dev_slot_new(st->env);
	if (slot < 0)
		return core_fail(ORTMK_ERR_NO_MEMORY, "no fence left");
	core_dev_slot_put(st->env, st->slot);
	st->slot = slot;
	st->issued = 0;
	return ORTMK_OK;
}

ortmk_status core_dev_copy_ops(ortmk_stream *st, Ortmk__CopyOp **ops, size_t n_ops,
			       core_pend *done)
{
	core_ep *ep = st->ep;
	Ortmk__Envelope e = ORTMK__ENVELOPE__INIT, *rep = NULL;
	Ortmk__Copy body = ORTMK__COPY__INIT;
	Ortmk__FenceRef fence = ORTMK__FENCE_REF__INIT;
	ortmk_status s = stream_reslot(st);

	if (s == ORTMK_OK)
		s = core_ep_ensure(ep);
	if (s == ORTMK_OK)
		s = core_ep_add_segment(ep, &st->env->fences);
	if (s)
		return s;
	fence.segment_id = st->env->fences.id;
	fence.offset = (uint64_t)st->slot * IPC_FENCE_ALIGN;
	fence.value = st->issued + 1;
	body.n_ops = n_ops;
	body.ops = ops;
	body.signal = &fence;
	e.kind = ORTMK__KIND__COPY;
	e.body_case = ORTMK__ENVELOPE__BODY_COPY;
	e.copy = &body;
	e.has_stream = 1;
	e.stream = st->id;
	/* Issued before the request: a death during it must fail this value. */
	st->issued = fence.value;
	st->exec = ep->p.exec_id;
	s = core_proc_request(ep, &ep->p, &e, CORE_DEVICE_MS, &rep);
	if (s == ORTMK_OK && rep->kind != ORTMK__KIND__ACK)
		s = core_fail(ORTMK_ERR_PROTOCOL, "provider '%s': COPY answered with %s", ep->name,
			      ipc_kind_name(rep->kind));
	core_ep_reply_free(ep, rep);
	if (s) {
		/* ERROR: the provider failed the fence; make sure of it. */
		shm_fence_fail(core_dev_fence(st->env, st->slot));
		return s;
	}
	done->slot = st->slot;
	done->value = fence.value;
	done->exec = st->exec;
	done->ep = ep;
	core_dev_slot_get(st->env, st->slot);
	return ORTMK_OK;
}
