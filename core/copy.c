/*
 * copy: ortmk_copy_tensors (docs/DEVICE.md).  Host to host is a memcpy in
 * the application; every copy with a device side becomes one op of a COPY
 * message to the provider that holds the device side, enqueued on a stream
 * whose fence word the provider signals when the ops are done.  Device to
 * device across providers is staged through a host value: the first leg is
 * waited for, the second enqueued.  A copy waits first for an earlier,
 * still-pending copy into the same values when that one is on another
 * stream (on the same stream the provider orders them).
 */
#include <stdlib.h>
#include <string.h>

#include "core.h"

#define COPY_WAIT_NS ((uint64_t)CORE_CONTROL_MS * 1000000u)

static void loc_host(Ortmk__Loc *l, const ortmk_value *v)
{
	ortmk__loc__init(l);
	l->has_segment_id = 1;
	l->segment_id = v->seg.id;
}

static void loc_dev(Ortmk__Loc *l, const ortmk_value *v)
{
	ortmk__loc__init(l);
	l->has_buffer_id = 1;
	l->buffer_id = v->buffer_id;
}

/* Waits for a value's pending copy unless it is on `slot`. */
static ortmk_status settle(ortmk_value *v, int slot)
{
	if (v->pend.slot < 0 || v->pend.slot == slot)
		return ORTMK_OK;
	return core_dev_pend_wait(v->env, &v->pend, shm_now_ns() + COPY_WAIT_NS);
}

static void set_pending(ortmk_value *v, const core_pend *done)
{
	core_dev_slot_put(v->env, v->pend.slot);
	v->pend = *done;
	core_dev_slot_get(v->env, done->slot);
}

/* One batch of copies on one stream: every device side is on st->ep. */
static ortmk_status enqueue(ortmk_stream *st, const ortmk_value *const *src, ortmk_value *const *dst,
			    size_t n, int wait)
{
	core_ep *ep = st->ep;
	Ortmk__CopyOp *ops = calloc(n + 1, sizeof(*ops)), **pops = calloc(n + 1, sizeof(*pops));
	Ortmk__Loc *locs = calloc(2 * n + 2, sizeof(*locs));
	core_pend done = {.slot = -1};
	ortmk_status s = ORTMK_OK;
	size_t k = 0;

	if (!ops || !pops || !locs)
		s = core_fail(ORTMK_ERR_NO_MEMORY, "out of memory");
	for (size_t i = 0; i < n && s == ORTMK_OK; i++) {
		s = settle((ortmk_value *)src[i], st->slot);
		if (s == ORTMK_OK)
			s = settle(dst[i], st->slot);
	}
	if (s == ORTMK_OK) {
		pthread_mutex_lock(&ep->lock);
		s = core_ep_ensure(ep);
		for (size_t i = 0; i < n && s == ORTMK_OK; i++) {
			const ortmk_value *a = src[i], *b = dst[i];

			if (!a->nbytes)
				continue;
			s = core_dev_value_check(a);
			if (s == ORTMK_OK)
				s = core_dev_value_check(b);
			if (s == ORTMK_OK && !a->dev)
				s = core_ep_add_segment(ep, (shm_segment *)&a->seg);
			if (s == ORTMK_OK && !b->dev)
				s = core_ep_add_segment(ep, (shm_segment *)&b->seg);
			if (s)
				break;
			ortmk__copy_op__init(&ops[k]);
			(a->dev ? loc_dev : loc_host)(&locs[2 * k], a);
			(b->dev ? loc_dev : loc_host)(&locs[2 * k + 1], b);
			ops[k].src = &locs[2 * k];
			ops[k].dst = &locs[2 * k + 1];
			ops[k].nbytes = a->nbytes;
			pops[k] = &ops[k];
			k++;
		}
		if (s == ORTMK_OK && k)
			s = core_dev_copy_ops(st, pops, k, &done);
		/* A death noticed only by the request: say what it cost. */
		for (size_t i = 0; i < n && s == ORTMK_ERR_PROVIDER_DIED; i++)
			if (core_dev_value_check(src[i]) || core_dev_value_check(dst[i]))
				break;
		pthread_mutex_unlock(&ep->lock);
	}
	free(ops);
	free(pops);
	free(locs);
	if (s || done.slot < 0)
		return s;
	for (size_t i = 0; i < n; i++)
		set_pending(dst[i], &done);
	if (wait)
		s = core_dev_pend_wait(st->env, &done, shm_now_ns() + COPY_WAIT_NS);
	core_dev_slot_put(st->env, done.slot);
	return s;
}

static ortmk_status check_pair(const ortmk_value *a, const ortmk_value *b, size_t i)
{
	if (!a || !b)
		return core_fail(ORTMK_ERR_INVALID_ARGUMENT, "copy_tensors: NULL value at %zu", i);
	if (a == b)
		return core_fail(ORTMK_ERR_INVALID_ARGUMENT, "copy_tensors: pair %zu copies a value onto itself", i);
	if (a->kind != ORTMK_VALUE_TENSOR || b->kind != ORTMK_VALUE_TENSOR || a->dtype == ORTMK_STRING ||
	    b->dtype == ORTMK_STRING)
		return core_fail(ORTMK_ERR_INVALID_ARGUMENT, "copy_tensors: pair %zu: only numeric tensors", i);
	if (a->dtype != b->dtype || a->nbytes != b->nbytes)
		return core_fail(ORTMK_ERR_INVALID_ARGUMENT,
				 "copy_tensors: pair %zu: %s of %zu bytes into %s of %zu bytes", i,
				 graph_dtype_name(a->dtype), a->nbytes, graph_dtype_name(b->dtype), b->nbytes);
	return ORTMK_OK;
}

/* The provider whose stream carries the copy a -> b (NULL: host only). */
static core_ep *copy_ep(const ortmk_value *a, const ortmk_value *b)
{
	return b->dev ? b->dev : a->dev;
}

/* a -> b across two providers' memories, through a host value. */
static ortmk_status copy_across(ortmk_env *env, const ortmk_value *a, ortmk_value *b,
				ortmk_stream *stream)
{
	ortmk_value *tmp = NULL;
	ortmk_stream *first;
	ortmk_status s = core_value_new(env, a->dtype, a->dims, a->rank, &tmp);

	if (s == ORTMK_OK)
		s = core_dev_sync_stream(env, a->dev, &first);
	if (s == ORTMK_OK)
		s = enqueue(first, &a, &tmp, 1, 1);
	if (s == ORTMK_OK && !stream)
		s = core_dev_sync_stream(env, b->dev, &stream);
	if (s == ORTMK_OK)
		s = enqueue(stream, (const ortmk_value *const *)&tmp, &b, 1, stream->internal);
	/* tmp's destroy waits for the second leg if it is still running. */
	ortmk_value_destroy(tmp);
	return s;
}

ortmk_status ortmk_copy_tensors(ortmk_env *env, const ortmk_value *const *src,
				ortmk_value *const *dst, size_t n, ortmk_stream *stream)
{
	const ortmk_value **bs = NULL;
	ortmk_value **bd = NULL;
	ortmk_status s = ORTMK_OK;
	core_ep *ep = stream ? stream->ep : NULL;
	size_t nb = 0;

	core_clear_error();
	if (!env || (n && (!src || !dst)) || (stream && stream->env != env))
		return core_fail(ORTMK_ERR_INVALID_ARGUMENT, "copy_tensors: bad arguments");
	for (size_t i = 0; i < n; i++) {
		s = check_pair(src[i], dst[i], i);
		if (s)
			return s;
		if (src[i]->dev && dst[i]->dev && src[i]->dev != dst[i]->dev) {
			if (stream && stream->ep != dst[i]->dev)
				return core_fail(ORTMK_ERR_INVALID_ARGUMENT,
						 "copy_tensors: pair %zu: the stream is on '%s', the destination on '%s'",
						 i, stream->ep->name, dst[i]->dev->name);
			continue;
		}
		if (stream && copy_ep(src[i], dst[i]) && copy_ep(src[i], dst[i]) != stream->ep)
			return core_fail(ORTMK_ERR_INVALID_ARGUMENT,
					 "copy_tensors: pair %zu: the stream is on '%s', the device value on '%s'",
					 i, stream->ep->name, copy_ep(src[i], dst[i])->name);
	}
	bs = calloc(n + 1, sizeof(*bs));
	bd = calloc(n + 1, sizeof(*bd));
	if (!bs || !bd) {
		free(bs);
		free(bd);
		return core_fail(ORTMK_ERR_NO_MEMORY, "out of memory");
	}
	/* Host to host at once; across providers one by one; the rest in one
	 * COPY per provider. */
	for (size_t i = 0; i < n && s == ORTMK_OK; i++) {
		const ortmk_value *a = src[i];
		ortmk_value *b = dst[i];

		if (!a->dev && !b->dev) {
			s = settle((ortmk_value *)a, -1);
			if (s == ORTMK_OK)
				s = settle(b, -1);
			if (s == ORTMK_OK && a->nbytes)
				memcpy(b->seg.base, a->seg.base, a->nbytes);
		} else if (a->dev && b->dev && a->dev != b->dev) {
			s = copy_across(env, a, b, stream);
		}
	}
	for (int e = 0; e < env->n_eps && s == ORTMK_OK; e++) {
		ortmk_stream *st = stream;

		nb = 0;
		for (size_t i = 0; i < n; i++) {
			if ((!src[i]->dev && !dst[i]->dev) ||
			    (src[i]->dev && dst[i]->dev && src[i]->dev != dst[i]->dev) ||
			    copy_ep(src[i], dst[i]) != env->eps[e])
				continue;
			bs[nb] = src[i];
			bd[nb++] = dst[i];
		}
		if (!nb)
			continue;
		if (!st || st->ep != env->eps[e])
			s = core_dev_sync_stream(env, env->eps[e], &st);
		if (s == ORTMK_OK)
			s = enqueue(st, bs, bd, nb, !stream || st->internal);
	}
	(void)ep;
	free(bs);
	free(bd);
	return s;
}
