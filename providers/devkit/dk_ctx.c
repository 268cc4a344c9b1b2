/*
 * dk_ctx: what an op's run calls on the executor (see dk_exec.h): its
 * inputs, its outputs (device memory kept per value across runs, written
 * in place when bound to a device buffer, or a view), scratch memory,
 * uploads, errors.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dk_exec.h"
#include "dk_shape.h"

int dk_buf_same(const dk_buf *a, const dk_buf *b)
{
	return a->ptr == b->ptr && a->off == b->off;
}

int dk_node_vfail(char *err, size_t n, const Onnx__NodeProto *p, int code, const char *fmt,
		  va_list ap)
{
	int at = snprintf(err, n, "node '%s' (%s): ", p->name ? p->name : "", p->op_type);

	if (at < 0 || (size_t)at >= n)
		return code;
	vsnprintf(err + at, n - (size_t)at, fmt, ap);
	return code;
}

int dk_fail(dk_ctx *c, int code, const char *fmt, ...)
{
	va_list ap;

	c->status = code;
	va_start(ap, fmt);
	dk_node_vfail(c->err, c->errlen, c->node->proto, code, fmt, ap);
	va_end(ap);
	return code;
}

const dk_val *dk_in(const dk_ctx *c, int i)
{
	return i < c->n_in ? c->in[i] : NULL;
}

int64_t dk_get_int(const dk_val *v, int64_t i)
{
	if (v->dtype == DK_INT32)
		return ((const int32_t *)v->host)[i];
	return ((const int64_t *)v->host)[i];
}

uint64_t dk_dev_bytes(const dk_exec *ex, int32_t dtype, int64_t numel)
{
	size_t esz = ex->dev->f16_as_f32 && dtype == DK_FLOAT16 ? 4 : dk_esz(dtype);

	return (uint64_t)numel * esz;
}

/* Checks a dtype and shape against the binding the core planned for
 * value v, when it planned one. */
static int check_planned(dk_ctx *c, int v, int32_t dtype, int rank, const int64_t *dims)
{
	const dk_exec *ex = c->ex;
	const ep_tensor *b;
	char s1[128], s2[128];

	if (ex->w.bound[v] < 0)
		return 0;
	b = &ex->run->bindings[ex->w.bound[v]];
	if (dtype && b->dtype && b->dtype != dtype)
		return dk_fail(c, EP_E_SHAPE, "output '%s' is dtype %d but the core planned %d",
			       ex->sg->values[v].name, dtype, b->dtype);
	if (b->dynamic)
		return 0;
	if (b->rank != rank || memcmp(b->dims, dims, sizeof(int64_t) * (size_t)rank))
		return dk_fail(c, EP_E_SHAPE, "output '%s' is %s but the core planned %s",
			       ex->sg->values[v].name, dk_shape_str(rank, dims, s1, sizeof(s1)),
			       dk_shape_str(b->rank, b->dims, s2, sizeof(s2)));
	return 0;
}

static dk_val *out_value(dk_ctx *c, int i, int32_t dtype, int rank, const int64_t *dims,
			 int *rc)
{
	int v = i < c->node->n_out ? c->node->out[i] : -1;
	int64_t numel = dk_numel(rank, dims);

	if (v < 0)
		*rc = dk_fail(c, EP_E_INTERNAL, "output %d is not in the graph", i);
	else if (rank > EP_MAX_RANK || numel < 0)
		*rc = dk_fail(c, EP_E_INVALID, "output of %lld elements", (long long)numel);
	else if (numel >= c->ex->dev->max_elems)
		*rc = dk_fail(c, EP_E_UNSUPPORTED, "output of %lld elements is too large",
			      (long long)numel);
	else
		*rc = check_planned(c, v, dtype, rank, dims);
	return *rc ? NULL : &c->ex->vals[v];
}

/* b's memory goes back at the end of the run (work queued in this run may
 * still read it); b becomes empty. */
static int retire(dk_exec *ex, dk_buf *b)
{
	dk_buf *t;

	if (!b->ptr)
		return 0;
	t = dk_list_push(&ex->temps);
	if (!t)
		return -1;
	*t = *b;
	memset(b, 0, sizeof(*b));
	return 0;
}

/* Output memory of value v: the device buffer it is bound to (written in
 * place), else its own, kept across runs (a larger shape gets more). */
static int out_memory(dk_ctx *c, int v, int32_t dtype, int rank, const int64_t *dims,
		      dk_buf *out)
{
	dk_exec *ex = c->ex;
	ep_tensor *b = ex->w.bound[v] >= 0 ? &ex->run->bindings[ex->w.bound[v]] : NULL;
	int64_t numel = dk_numel(rank, dims);
	uint64_t nbytes = (uint64_t)numel * dk_esz(dtype), dev_bytes = dk_dev_bytes(ex, dtype, numel);
	int rc;

	if (b && b->buffer_id) {
		if (nbytes != dev_bytes)
			return dk_fail(c, EP_E_UNSUPPORTED, "a float16 device buffer needs 16-bit storage");
		rc = dk_device_output(ex, b, rank, dims, nbytes, out, c->err, c->errlen);
		/* The value's own memory from unbound runs is not needed. */
		if (!rc && retire(ex, &ex->own[v]))
			rc = dk_fail(c, EP_E_NOMEM, "out of memory");
		return c->status = rc;
	}
	if (!ex->own[v].ptr || ex->own[v].size < dev_bytes) {
		if (retire(ex, &ex->own[v]))
			return dk_fail(c, EP_E_NOMEM, "out of memory");
		if (ex->dev->ops->alloc(ex->dev->self, dev_bytes, &ex->own[v], c->err, c->errlen))
			return c->status = EP_E_NOMEM;
	}
	*out = ex->own[v];
	return 0;
}

const dk_val *dk_out(dk_ctx *c, int i, int32_t dtype, int rank, const int64_t *dims)
{
	int rc;
	dk_val *o = out_value(c, i, dtype, rank, dims, &rc);
	dk_buf mem = {0};

	if (!o || out_memory(c, c->node->out[i], dtype, rank, dims, &mem))
		return NULL;
	memset(o, 0, sizeof(*o));
	o->dev = mem;
	o->dtype = dtype;
	o->rank = rank;
	memcpy(o->dims, dims, sizeof(int64_t) * (size_t)rank);
	o->numel = dk_numel(rank, dims);
	o->nbytes = (uint64_t)o->numel * dk_esz(dtype);
	o->ready = 1;
	return o;
}

int dk_out_alias(dk_ctx *c, int i, const dk_val *src, int rank, const int64_t *dims)
{
	int rc;
	dk_val *o = out_value(c, i, src->dtype, rank, dims, &rc);
	dk_val copy = *src;

	if (!o)
		return rc;
	if (dk_numel(rank, dims) != src->numel)
		return dk_fail(c, EP_E_INVALID, "cannot view %lld elements as %lld",
			       (long long)src->numel, (long long)dk_numel(rank, dims));
	copy.rank = rank;
	memcpy(copy.dims, dims, sizeof(int64_t) * (size_t)rank);
	copy.is_const = 0;
	*o = copy;
	return 0;
}

int dk_device_output(dk_exec *ex, ep_tensor *b, int rank, const int64_t *dims, uint64_t nbytes,
		     dk_buf *out, char *err, size_t n)
{
	const dk_dev_ops *ops = ex->dev->ops;
	dk_dynbuf *d;

	if (!b->dynamic) {
		if (b->nbytes != nbytes)
			return snprintf(err, n, "output '%s': %llu bytes bound, %llu produced",
					ex->sg->values[b->value].name, (unsigned long long)b->nbytes,
					(unsigned long long)nbytes), EP_E_SHAPE;
		return ops->range(ex->dev->self, b->buffer_id, b->buffer_offset, nbytes, out, err, n);
	}
	for (size_t i = 0; i < ex->dynbufs.n; i++) {
		d = DK_AT(&ex->dynbufs, dk_dynbuf, i);
		if (d->id == b->buffer_id)
			return *out = d->b, 0;
	}
	if (ops->exists(ex->dev->self, b->buffer_id))
		return snprintf(err, n, "output '%s': device buffer %llu already exists",
				ex->sg->values[b->value].name, (unsigned long long)b->buffer_id),
		       EP_E_INVALID;
	d = dk_list_push(&ex->dynbufs);
	if (!d)
		return snprintf(err, n, "out of memory"), EP_E_NOMEM;
	if (ops->alloc(ex->dev->self, nbytes, &d->b, err, n)) {
		ex->dynbufs.n--;
		return EP_E_NOMEM;
	}
	d->id = b->buffer_id;
	d->nbytes = nbytes;
	b->rank = rank;
	memcpy(b->dims, dims, sizeof(int64_t) * (size_t)rank);
	b->nbytes = nbytes;
	b->buffer_offset = 0;
	*out = d->b;
	return 0;
}

int dk_queue_upload(dk_exec *ex, const void *data, uint64_t nbytes, const dk_buf *dst, char *err,
		    size_t n)
{
	void *copy = malloc(nbytes ? nbytes : 1), **slot = dk_list_push(&ex->htemps);
	dk_xfer *x;

	if (!copy || !slot) {
		free(copy);
		if (slot)
			ex->htemps.n--;
		return snprintf(err, n, "out of memory"), EP_E_NOMEM;
	}
	memcpy(copy, data, nbytes);
	*slot = copy;
	x = dk_list_push(&ex->up);
	if (!x)
		return snprintf(err, n, "out of memory"), EP_E_NOMEM;
	*x = (dk_xfer){.dev = *dst, .host = copy, .nbytes = nbytes};
	/* A device whose ops enqueue at once needs it there before them. */
	return ex->dev->ops->flush ? ex->dev->ops->flush(ex, err, n) : 0;
}

int dk_temp(dk_ctx *c, uint64_t nbytes, dk_buf *out)
{
	dk_exec *ex = c->ex;
	dk_buf *t = dk_list_push(&ex->temps);

	if (!t)
		return dk_fail(c, EP_E_NOMEM, "out of memory");
	if (ex->dev->ops->alloc(ex->dev->self, nbytes, t, c->err, c->errlen)) {
		ex->temps.n--;
		return c->status = EP_E_NOMEM;
	}
	*out = *t;
	return 0;
}

int dk_upload_temp(dk_ctx *c, const void *data, uint64_t nbytes, dk_buf *out)
{
	int rc = dk_temp(c, nbytes, out);

	if (!rc)
		rc = dk_queue_upload(c->ex, data, nbytes, out, c->err, c->errlen);
	return rc ? (c->status = rc) : 0;
}

int dk_upload_keep(dk_ctx *c, const void *data, uint64_t nbytes, dk_buf *out)
{
	dk_node *nd = c->node;
	int rc;

	if (nd->keep.ptr) {
		*out = nd->keep;
		return 0;
	}
	if (c->ex->dev->ops->alloc(c->ex->dev->self, nbytes, &nd->keep, c->err, c->errlen))
		return c->status = EP_E_NOMEM;
	nd->keep_fresh = 1;
	*out = nd->keep;
	rc = dk_queue_upload(c->ex, data, nbytes, out, c->err, c->errlen);
	return rc ? (c->status = rc) : 0;
}
