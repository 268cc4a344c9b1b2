/*
 * run_device: device memory in a run (docs/DEVICE.md).  Called by run.c
 * with the locks of every provider the run touches held.
 *
 * Inputs: a graph input bound to a device value goes into the RUN of a step
 * on that provider as TensorRef.buffer_id, without a copy; when a step on
 * another provider reads it too, it is copied to a host value once (COPY,
 * waited for) and that step reads the copy.
 *
 * Outputs: an output bound to a value or a device is written in place when
 * possible: into a bound host value whose shape the plan knows (its
 * segment replaces the arena slot), into a device buffer when every step
 * naming the output runs on that device (a bound device value, a buffer
 * ALLOCated with the planned size, or, shape unknown, a buffer the provider
 * allocates: TensorRef.dynamic + buffer_id).  Otherwise the run computes it
 * as usual and it is copied where it was bound afterwards.
 */
#include <stdlib.h>
#include <string.h>

#include "run.h"

static core_ep *step_ep(const ortmk_session *s, size_t i)
{
	return s->eps[s->steps[i].ep];
}

static uint64_t copy_deadline(const run_ctx *c)
{
	int ms = c->s->run_timeout_ms ? c->s->run_timeout_ms : CORE_CONTROL_MS;

	return shm_now_ns() + (uint64_t)ms * 1000000u;
}

/* Steps naming v: on ep (*on) and elsewhere (*off). */
static void count_steps(const ortmk_session *s, int v, const core_ep *ep, int *on, int *off)
{
	*on = *off = 0;
	for (size_t i = 0; i < s->n_steps; i++)
		for (size_t j = 0; j < s->steps[i].n_values; j++)
			if (s->steps[i].values[j] == v) {
				if (step_ep(s, i) == ep)
					(*on)++;
				else
					(*off)++;
				break;
			}
}

/* One copy on ep (its lock held), waited for: on the run's stream when it
 * is ep's, else on the env's internal stream of ep. */
static ortmk_status copy_now(run_ctx *c, core_ep *ep, Ortmk__Loc *src, Ortmk__Loc *dst,
			     uint64_t nbytes)
{
	Ortmk__CopyOp op = ORTMK__COPY_OP__INIT, *pop = &op;
	ortmk_stream *st = c->stream && c->stream->ep == ep ? c->stream : NULL;
	core_pend done = {.slot = -1};
	ortmk_status s = ORTMK_OK;

	if (!nbytes)
		return ORTMK_OK;
	if (!st)
		s = core_dev_sync_stream(c->s->env, ep, &st);
	op.src = src;
	op.dst = dst;
	op.nbytes = nbytes;
	if (s == ORTMK_OK)
		s = core_dev_copy_ops(st, &pop, 1, &done);
	if (s == ORTMK_OK)
		s = core_dev_pend_wait_locked(c->s->env, &done, copy_deadline(c));
	core_dev_slot_put(c->s->env, done.slot);
	return s;
}

static void loc_seg(Ortmk__Loc *l, const shm_segment *seg, uint64_t off)
{
	ortmk__loc__init(l);
	l->has_segment_id = 1;
	l->segment_id = seg->id;
	l->offset = off;
}

static void loc_buf(Ortmk__Loc *l, const ortmk_value *v)
{
	ortmk__loc__init(l);
	l->has_buffer_id = 1;
	l->buffer_id = v->buffer_id;
}

/* Makes a host segment known to every provider of the session with nodes. */
static ortmk_status share_segment(run_ctx *c, shm_segment *seg)
{
	ortmk_session *s = c->s;
	ortmk_status st = ORTMK_OK;

	for (int e = 0; e < s->n_eps && st == ORTMK_OK; e++)
		if (s->nodes_per_ep[e])
			st = core_ep_add_segment(s->eps[e], seg);
	return st;
}

/* A device value still held by its process (a death not noticed yet is
 * noticed here). */
static ortmk_status dev_alive(const ortmk_value *v)
{
	core_proc_check_dead(v->dev, &v->dev->p);
	return core_dev_value_check(v);
}

ortmk_status core_run_device_inputs(run_ctx *c, const ortmk_value **bound)
{
	ortmk_session *s = c->s;

	for (size_t i = 0; i < s->g->n_inputs; i++) {
		const ortmk_value *dv = bound[i];
		int v = s->g->inputs[i], on, off;
		loc *l = &c->locs[v];
		Ortmk__Loc src, dst;
		ortmk_status st;

		if (!dv->dev)
			continue;
		st = dev_alive(dv);
		if (st)
			return st;
		core_run_set_loc(l, NULL, 0, dv->nbytes, dv->kind, dv->dtype, (int)dv->rank, dv->dims);
		l->dev = (ortmk_value *)dv;
		count_steps(s, v, dv->dev, &on, &off);
		if (!off)
			continue;
		/* Read elsewhere too: one host copy for those steps. */
		st = core_value_new(s->env, dv->dtype, dv->dims, dv->rank, &c->staged[i]);
		if (st == ORTMK_OK)
			st = core_ep_add_segment(dv->dev, &c->staged[i]->seg);
		loc_buf(&src, dv);
		loc_seg(&dst, &c->staged[i]->seg, 0);
		if (st == ORTMK_OK)
			st = copy_now(c, dv->dev, &src, &dst, dv->nbytes);
		if (st == ORTMK_OK)
			st = share_segment(c, &c->staged[i]->seg);
		if (st)
			return st;
		l->seg = &c->staged[i]->seg;
	}
	return ORTMK_OK;
}

/* The element type the run gives value v. */
static int32_t out_dtype(const run_ctx *c, int v)
{
	int32_t t = c->plan->tinfo[v].elem_type;

	return t ? t : c->s->g->values[v].elem_type;
}

static int planned(const run_ctx *c, int v)
{
	return c->s->g->values[v].is_tensor && c->plan->offset[v] != PLAN_NONE;
}

/* Can output v be computed straight into ep's memory? */
static int direct_on(const run_ctx *c, int v, core_ep *ep)
{
	const graph_value *gv = &c->s->g->values[v];
	int on, off;

	if (!ep->p.device_memory || gv->kind != GRAPH_VALUE_ACTIVATION || !gv->is_tensor ||
	    !graph_dtype_size(out_dtype(c, v)))
		return 0;
	count_steps(c->s, v, ep, &on, &off);
	return on && !off;
}

static int same_shape(const ortmk_value *a, int rank, const int64_t *dims)
{
	if ((int)a->rank != rank)
		return 0;
	for (int d = 0; d < rank; d++)
		if (a->dims[d] != dims[d])
			return 0;
	return 1;
}

static ortmk_status shape_mismatch(const run_ctx *c, int v, const ortmk_value *val)
{
	return core_fail(ORTMK_ERR_INPUT, "output '%s': the bound %s value of %zu bytes does not fit what the run produces",
			 c->s->g->values[v].name, graph_dtype_name(val->dtype), val->nbytes);
}

static ortmk_status bind_value(run_ctx *c, core_out *o)
{
	int v = o->v;
	loc *l = &c->locs[v];
	const graph_tinfo *t = &c->plan->tinfo[v];
	ortmk_value *val = o->value;
	ortmk_status st;

	if (val->kind != ORTMK_VALUE_TENSOR || (planned(c, v) &&
	    (val->dtype != out_dtype(c, v) || !same_shape(val, t->rank, t->dims))))
		return planned(c, v) || val->kind != ORTMK_VALUE_TENSOR ? shape_mismatch(c, v, val) : ORTMK_OK;
	if (!val->dev) {
		if (!planned(c, v) || c->s->g->values[v].kind != GRAPH_VALUE_ACTIVATION)
			return ORTMK_OK;
		st = share_segment(c, &val->seg);
		if (st == ORTMK_OK)
			core_run_set_loc(l, &val->seg, o->off, val->nbytes, 0, val->dtype, (int)val->rank,
					 val->dims);
		return st;
	}
	st = dev_alive(val);
	if (st || !direct_on(c, v, val->dev))
		return st;
	core_run_set_loc(l, NULL, 0, val->nbytes, 0, val->dtype, (int)val->rank, val->dims);
	l->dev = val;
	return ORTMK_OK;
}

/* An output bound to the host whose shape is planned: its new value
 * takes the place of its arena slot (no copy after the run). */
static ortmk_status bind_host_out(run_ctx *c, int v)
{
	loc *l = &c->locs[v];
	const graph_tinfo *t = &c->plan->tinfo[v];
	ortmk_status st;

	if (!planned(c, v) || c->s->g->values[v].kind != GRAPH_VALUE_ACTIVATION ||
	    !graph_dtype_size(out_dtype(c, v)) || l->seg || l->dev)
		return ORTMK_OK;
	st = core_value_new(c->s->env, out_dtype(c, v), t->dims, (size_t)t->rank, &l->host_out);
	if (st == ORTMK_OK)
		st = share_segment(c, &l->host_out->seg);
	if (st == ORTMK_OK)
		core_run_set_loc(l, &l->host_out->seg, 0, l->host_out->nbytes, 0, l->host_out->dtype,
				 t->rank, t->dims);
	return st;
}

ortmk_status core_run_bind_outputs(run_ctx *c)
{
	for (size_t i = 0; i < c->n_out; i++) {
		core_out *o = &c->outs[i];
		int v = o->v;
		loc *l = &c->locs[v];
		ortmk_status st = ORTMK_OK;

		if (o->mode == CORE_OUT_VALUE) {
			st = bind_value(c, o);
		} else if (o->mode == CORE_OUT_DEVICE && (!o->dev || !o->dev->p.device_memory)) {
			st = bind_host_out(c, v);
		} else if (o->mode == CORE_OUT_DEVICE) {
			if (!direct_on(c, v, o->dev))
				;
			else if (planned(c, v)) {
				const graph_tinfo *t = &c->plan->tinfo[v];

				st = core_dev_value_alloc(o->dev, out_dtype(c, v), t->dims, (size_t)t->rank, &l->dev);
				if (st == ORTMK_OK) {
					l->own_dev = 1;
					core_run_set_loc(l, NULL, 0, l->dev->nbytes, 0, l->dev->dtype, t->rank, t->dims);
				}
			} else {
				l->dyn_buffer = core_env_next_id(c->s->env);
				l->dyn_ep = o->dev;
			}
		}
		if (st)
			return st;
	}
	return ORTMK_OK;
}

int core_run_device_ref(run_ctx *c, size_t step, int v, Ortmk__TensorRef *r)
{
	const loc *l = &c->locs[v];
	core_ep *ep = step_ep(c->s, step);

	if (l->dev && l->dev->dev == ep) {
		r->dtype = l->dev->dtype;
		r->n_dims = l->dev->rank;
		r->dims = (int64_t *)l->dev->dims;
		r->has_buffer_id = 1;
		r->buffer_id = l->dev->buffer_id;
		r->nbytes = l->dev->nbytes;
		return 1;
	}
	if (!l->dev && l->dyn_buffer && l->dyn_ep == ep) {
		r->dtype = out_dtype(c, v);
		r->dynamic = 1;
		r->has_dynamic = 1;
		r->has_buffer_id = 1;
		r->buffer_id = l->dyn_buffer;
		return 1;
	}
	return 0;
}

ortmk_status core_run_take_buffer(run_ctx *c, size_t step, int v, const Ortmk__TensorRef *t)
{
	loc *l = &c->locs[v];
	core_ep *ep = step_ep(c->s, step);
	ortmk_status st;

	if (!l->dyn_buffer || l->dev || t->buffer_id != l->dyn_buffer || l->dyn_ep != ep ||
	    t->n_dims > GRAPH_MAX_RANK || t->offset != 0)
		return core_fail(ORTMK_ERR_PROTOCOL, "provider '%s': result names a device buffer it was not given",
				 ep->name);
	st = core_dev_value_wrap(c->s->env, ep, t->buffer_id, t->dtype, t->dims, t->n_dims, t->nbytes,
				 &l->dev);
	if (st)
		return st;
	l->own_dev = 1;
	core_run_set_loc(l, NULL, 0, t->nbytes, 0, t->dtype, (int)t->n_dims, t->dims);
	return ORTMK_OK;
}

/* The host bytes of output v, checked (they may come from a provider). */
static ortmk_status host_source(run_ctx *c, int v)
{
	loc *l = &c->locs[v];
	const char *name = c->s->g->values[v].name;

	if (!l->seg && !l->dev && c->plan->offset[v] != PLAN_NONE)
		core_run_set_loc(l, c->slot->arena, c->plan->offset[v], c->plan->nbytes[v], 0,
				 c->plan->tinfo[v].elem_type, c->plan->tinfo[v].rank, c->plan->tinfo[v].dims);
	if (!l->seg && !l->dev)
		return core_fail(ORTMK_ERR_INTERNAL, "output '%s' was not produced", name);
	if (l->seg && (!shm_segment_contains(l->seg, l->offset, l->nbytes) ||
		       !core_value_blob_ok(l->kind, l->dtype, l->dims, (size_t)l->rank,
					   (uint8_t *)l->seg->base + l->offset, l->nbytes)))
		return core_fail(ORTMK_ERR_PROTOCOL, "output '%s': its bytes do not match its type and shape",
				 name);
	return ORTMK_OK;
}

/* Output v (its source checked) into `dst` (host or device, same size). */
static ortmk_status copy_into(run_ctx *c, int v, ortmk_value *dst, uint64_t off)
{
	loc *l = &c->locs[v];
	Ortmk__Loc src, to;
	core_ep *ep;

	if (l->dev == dst)
		return ORTMK_OK;
	if (dst->kind != ORTMK_VALUE_TENSOR || l->kind != ORTMK_VALUE_TENSOR || dst->dtype != l->dtype ||
	    !same_shape(dst, l->rank, l->dims))
		return shape_mismatch(c, v, dst);
	if (l->seg && !dst->dev) {
		if (l->seg != &dst->seg && l->nbytes)
			memcpy((uint8_t *)dst->seg.base + off, (uint8_t *)l->seg->base + l->offset,
			       l->nbytes);
		return ORTMK_OK;
	}
	if (l->seg) {
		loc_seg(&src, l->seg, l->offset);
	} else {
		loc_buf(&src, l->dev);
	}
	if (dst->dev) {
		loc_buf(&to, dst);
	} else {
		loc_seg(&to, &dst->seg, off);
	}
	if (!l->seg && dst->dev && l->dev->dev != dst->dev)
		return core_fail(ORTMK_ERR_NOT_IMPLEMENTED,
				 "output '%s': bound to '%s' but held by '%s'; copy it with ortmk_copy_tensors",
				 c->s->g->values[v].name, dst->dev->name, l->dev->dev->name);
	ep = dst->dev ? dst->dev : l->dev->dev;
	if (l->seg) {
		ortmk_status st = core_ep_add_segment(ep, l->seg);

		if (st)
			return st;
	} else if (!dst->dev) {
		ortmk_status st = core_ep_add_segment(ep, &dst->seg);

		if (st)
			return st;
	}
	return copy_now(c, ep, &src, &to, l->nbytes);
}

static ortmk_status new_host(run_ctx *c, int v, ortmk_value **out)
{
	loc *l = &c->locs[v];
	ortmk_status st = core_value_new_blob(c->s->env, l->kind, l->dtype, l->dims, (size_t)l->rank,
					      l->nbytes, out);

	if (st == ORTMK_OK && l->seg) {
		memcpy((*out)->seg.base, (uint8_t *)l->seg->base + l->offset, l->nbytes);
	} else if (st == ORTMK_OK) {
		(*out)->kind = ORTMK_VALUE_TENSOR;
		st = copy_into(c, v, *out, 0);
	}
	return st;
}

static ortmk_status finish_one(run_ctx *c, core_out *o)
{
	loc *l = &c->locs[o->v];
	ortmk_status st = host_source(c, o->v);

	if (st)
		return st;
	switch (o->mode) {
	case CORE_OUT_VALUE:
		st = copy_into(c, o->v, o->value, o->off);
		if (st == ORTMK_OK)
			o->result = o->value;
		return st;
	case CORE_OUT_DEVICE:
		if (o->dev && o->dev->p.device_memory && l->kind == ORTMK_VALUE_TENSOR &&
		    graph_dtype_size(l->dtype)) {
			if (l->dev && l->own_dev && l->dev->dev == o->dev) {
				o->result = l->dev;
				l->own_dev = 0;
				return ORTMK_OK;
			}
			st = core_dev_value_alloc(o->dev, l->dtype, l->dims, (size_t)l->rank, &o->result);
			return st ? st : copy_into(c, o->v, o->result, 0);
		}
		if (l->host_out && l->seg == &l->host_out->seg) {
			o->result = l->host_out;
			l->host_out = NULL;
			return ORTMK_OK;
		}
		return new_host(c, o->v, &o->result);
	default:
		return new_host(c, o->v, &o->result);
	}
}

ortmk_status core_run_finish_outputs(run_ctx *c)
{
	for (size_t i = 0; i < c->n_out; i++) {
		ortmk_status st = finish_one(c, &c->outs[i]);

		if (st)
			return st;
	}
	return ORTMK_OK;
}

void core_run_device_cleanup(run_ctx *c)
{
	const ortmk_session *s = c->s;

	for (size_t v = 0; v < s->g->n_values; v++) {
		if (c->locs[v].own_dev && c->locs[v].dev)
			ortmk_value_destroy(c->locs[v].dev);
		c->locs[v].dev = NULL;
		ortmk_value_destroy(c->locs[v].host_out);
		c->locs[v].host_out = NULL;
	}
	for (size_t i = 0; c->staged && i < s->g->n_inputs; i++) {
		ortmk_value_destroy(c->staged[i]);
		c->staged[i] = NULL;
	}
}
