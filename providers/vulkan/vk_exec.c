/*
 * vk_exec: loading a subgraph onto the device and planning its runs (see
 * vk_exec.h); the recording and submission are in vk_record.c.
 */
#include "vk_exec.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "vk_cache.h"
#include "vk_prepack.h"

/* ---- load --------------------------------------------------------------- */

static void exec_free(vk_exec *ex)
{
	vk_heap *h = &ex->ep->heap;

	for (size_t k = 0; ex->nodes && k < ex->n_nodes; k++) {
		free(ex->nodes[k].in);
		free(ex->nodes[k].out);
		free(ex->nodes[k].state);
		vk_heap_free(h, &ex->nodes[k].keep);
	}
	for (size_t v = 0; ex->own && v < ex->n_values; v++)
		vk_heap_free(h, &ex->own[v]);
	for (size_t i = 0; i < ex->temps.n; i++)
		vk_heap_free(h, &((vk_buf *)ex->temps.v)[i]);
	for (size_t i = 0; i < ex->htemps.n; i++)
		free(((void **)ex->htemps.v)[i]);
	free(ex->nodes);
	free(ex->consts);
	free(ex->own);
	free(ex->vals);
	ep_wiring_fini(&ex->w);
	free(ex->in);
	free(ex->disp.v);
	free(ex->up.v);
	free(ex->down.v);
	free(ex->temps.v);
	free(ex->htemps.v);
	free(ex->d2d.v);
	free(ex->dynbufs.v);
	free(ex);
}

static int alloc_tables(vk_exec *ex)
{
	size_t nv = ex->n_values + 1, nn = ex->n_nodes + 1;

	ex->nodes = calloc(nn, sizeof(*ex->nodes));
	ex->consts = calloc(nv, sizeof(*ex->consts));
	ex->own = calloc(nv, sizeof(*ex->own));
	ex->vals = calloc(nv, sizeof(*ex->vals));
	if (!ex->nodes || !ex->consts || !ex->own || !ex->vals ||
	    ep_wiring_init(&ex->w, ex->sg))
		return -1;
	for (size_t v = 0; v < nv; v++) {
		ex->own[v].block = -1;
		ex->consts[v].dev.block = -1;
	}
	for (size_t k = 0; k < nn; k++)
		ex->nodes[k].keep.block = -1;
	ex->disp.size = sizeof(vk_dispatch);
	ex->up.size = ex->down.size = sizeof(vk_xfer);
	ex->temps.size = sizeof(vk_buf);
	ex->htemps.size = sizeof(void *);
	ex->d2d.size = sizeof(vk_d2d);
	ex->dynbufs.size = sizeof(vk_dynbuf);
	return 0;
}

static int load_node(vk_exec *ex, size_t k, size_t *max_in, char *err, size_t n)
{
	const ep_subgraph *sg = ex->sg;
	const Onnx__NodeProto *p = sg->graph->node[k];
	vk_node *nd = &ex->nodes[k];
	const char *domain = p->domain ? p->domain : "";
	int rc;

	nd->proto = p;
	nd->opset = ep_subgraph_opset(sg, domain);
	nd->op = vk_op_find(p->op_type, domain, nd->opset);
	if (!nd->op)
		return snprintf(err, n, "node '%s': %s (opset %lld) is not a Vulkan op", p->name,
				p->op_type, (long long)nd->opset), EP_E_UNSUPPORTED;
	nd->n_in = (int)p->n_input;
	nd->n_out = (int)p->n_output;
	rc = ep_node_wire(&ex->w, p, (int)k, &nd->in, &nd->out, err, n);
	if (!rc && nd->op->prepare)
		rc = nd->op->prepare(nd, err, n);
	if (rc)
		return rc;
	if (p->n_input > *max_in)
		*max_in = p->n_input;
	for (int id = 0; id < VKP_COUNT; id++)
		if ((nd->op->pipes & VKX_PIPE(id)) &&
		    !vk_pipe_get(&ex->ep->dev, &ex->ep->pipes,
				 nd->n_in && nd->in[0] >= 0 && ex->ep->dev.f16 &&
				 sg->values[nd->in[0]].dtype == VKX_FLOAT16 ? id + VKP_F16 : id, err, n))
			return EP_E_INTERNAL;
	return 0;
}

static int load_weights(vk_exec *ex, ep_subgraph *sg, char *err, size_t n)
{
	vk_uploader u = {.ep = ex->ep, .pending = {.size = sizeof(vk_xfer)}};
	vk_prepack *pk;
	int rc = ep_weights_check(sg, err, n);

	if (rc)
		return rc;
	pk = vk_prepack_open(sg);
	rc = pk ? 0 : EP_E_NOMEM;
	for (size_t i = 0; i < ex->sg->n_weights && rc == 0; i++) {
		const ep_weight *w = &ex->sg->weights[i];
		vk_val *c = &ex->consts[w->value];

		c->dtype = w->dtype;
		c->rank = w->rank;
		memcpy(c->dims, w->dims, sizeof(int64_t) * (size_t)w->rank);
		c->numel = vk_numel(w->rank, w->dims);
		c->nbytes = w->nbytes;
		c->host = w->data;
		c->is_const = 1;
		c->ready = 1;
		/* Only float tensors are read by shaders; int64 ones (shapes,
		 * axes, indices) stay on the host. */
		if (!vk_dev_dtype(w->dtype))
			continue;
		rc = vk_prepack_weight(ex, pk, &u, w, &ex->own[w->value], err, n);
		c->dev = ex->own[w->value];
	}
	for (size_t k = 0; k < ex->n_nodes && rc == 0; k++)
		if (ex->nodes[k].op->pack)
			rc = ex->nodes[k].op->pack(ex, &ex->nodes[k], pk, &u, err, n);
	if (rc == 0)
		rc = vk_upload_flush(&u, err, n);
	free(u.pending.v);
	vk_prepack_close(pk, sg);
	return rc ? EP_E_NOMEM : 0;
}

int vk_exec_load(vk_ep *ep, ep_subgraph *sg, char *err, size_t n)
{
	vk_exec *ex = calloc(1, sizeof(*ex));
	size_t max_in = 1;
	int rc = 0;

	if (!ex)
		return snprintf(err, n, "out of memory"), EP_E_NOMEM;
	ex->ep = ep;
	ex->sg = sg;
	ex->n_values = sg->n_values;
	ex->n_nodes = sg->graph->n_node;
	if (alloc_tables(ex)) {
		exec_free(ex);
		return snprintf(err, n, "out of memory"), EP_E_NOMEM;
	}
	for (size_t k = 0; k < ex->n_nodes && rc == 0; k++)
		rc = load_node(ex, k, &max_in, err, n);
	if (rc == 0)
		rc = load_weights(ex, sg, err, n);
	ex->in = calloc(max_in + 1, sizeof(*ex->in));
	if (rc == 0 && !ex->in) {
		snprintf(err, n, "out of memory");
		rc = EP_E_NOMEM;
	}
	if (rc) {
		exec_free(ex);
		return rc;
	}
	vk_cache_save(&ep->dev);
	sg->impl = ex;
	if (ipc_log_enabled(IPC_LOG_DEBUG))
		ep_log_loaded(sg, ep->heap.used);
	return 0;
}

void vk_exec_unload(vk_ep *ep, ep_subgraph *sg)
{
	(void)ep;
	if (sg->impl)
		exec_free(sg->impl);
	sg->impl = NULL;
}

/* ---- the ops' side ------------------------------------------------------ */

int vk_fail(vk_ctx *c, int code, const char *fmt, ...)
{
	va_list ap;

	c->status = code;
	va_start(ap, fmt);
	ep_node_vfail(c->err, c->errlen, c->node->proto, code, fmt, ap);
	va_end(ap);
	return code;
}

int vk_device_is_cpu(const vk_ctx *c)
{
	return c->ex->ep->dev.props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU;
}

int32_t vk_node_dtype(const vk_ctx *c)
{
	return c->n_in && c->in[0] && c->in[0]->dtype == VKX_FLOAT16 ? VKX_FLOAT16 : VKX_FLOAT;
}

const vk_val *vk_in(const vk_ctx *c, int i)
{
	return i < c->n_in ? c->in[i] : NULL;
}

/* Checks a shape against the binding the core planned for value v. */
static int check_planned(vk_ctx *c, int v, int rank, const int64_t *dims)
{
	vk_exec *ex = c->ex;
	char msg[512];
	int rc = ep_check_planned(&ex->w, ex->run, v, 0, rank, dims, msg, sizeof(msg));

	return rc ? vk_fail(c, rc, "%s", msg) : 0;
}

static vk_val *out_value(vk_ctx *c, int i, int rank, const int64_t *dims, int *rc)
{
	int v = i < c->node->n_out ? c->node->out[i] : -1;
	int64_t numel = vk_numel(rank, dims);

	if (v < 0)
		*rc = vk_fail(c, EP_E_INTERNAL, "output %d is not in the graph", i);
	else if (rank > EP_MAX_RANK || numel < 0 || numel >= VKX_MAX_ELEMS)
		*rc = vk_fail(c, EP_E_UNSUPPORTED, "output of %lld elements is too large",
			      (long long)numel);
	else
		*rc = check_planned(c, v, rank, dims);
	return *rc ? NULL : &c->ex->vals[v];
}

const vk_val *vk_out(vk_ctx *c, int i, int rank, const int64_t *dims)
{
	int rc;
	vk_val *o = out_value(c, i, rank, dims, &rc);
	vk_exec *ex = c->ex;
	int v;
	uint64_t nbytes, dev_bytes;

	if (!o)
		return NULL;
	v = c->node->out[i];
	nbytes = (uint64_t)vk_numel(rank, dims) * vk_esz(vk_node_dtype(c));
	dev_bytes = (uint64_t)vk_numel(rank, dims) * vk_dev_esz(&ex->ep->dev, vk_node_dtype(c));
	if (ex->w.bound[v] >= 0 && ex->run->bindings[ex->w.bound[v]].buffer_id) {
		/* Bound to a device buffer: written in place. */
		vk_buf dst;
		int rc = nbytes != dev_bytes ?
			 vk_fail(c, EP_E_UNSUPPORTED, "a float16 device buffer needs 16-bit storage") :
			 vk_run_device_output(ex, &ex->run->bindings[ex->w.bound[v]], rank, dims,
					      nbytes, &dst, c->err, c->errlen);

		if (rc) {
			c->status = rc;
			return NULL;
		}
		/* The value's own memory from unbound runs is not needed. */
		vk_heap_free(&ex->ep->heap, &ex->own[v]);
		memset(o, 0, sizeof(*o));
		o->dev = dst;
		goto fill;
	}
	if (ex->own[v].block < 0 || ex->own[v].size < dev_bytes) {
		vk_heap_free(&ex->ep->heap, &ex->own[v]);
		if (vk_heap_alloc(&ex->ep->heap, dev_bytes, &ex->own[v], c->err, c->errlen)) {
			c->status = EP_E_NOMEM;
			return NULL;
		}
	}
	memset(o, 0, sizeof(*o));
	o->dev = ex->own[v];
fill:
	o->dtype = vk_node_dtype(c);
	o->rank = rank;
	memcpy(o->dims, dims, sizeof(int64_t) * (size_t)rank);
	o->numel = vk_numel(rank, dims);
	o->nbytes = nbytes;
	o->ready = 1;
	return o;
}

int vk_out_alias(vk_ctx *c, int i, const vk_val *src, int rank, const int64_t *dims)
{
	int rc;
	vk_val *o = out_value(c, i, rank, dims, &rc);
	vk_val copy = *src;

	if (!o)
		return rc;
	if (vk_numel(rank, dims) != src->numel)
		return vk_fail(c, EP_E_INVALID, "cannot view %lld elements as %lld",
			       (long long)src->numel, (long long)vk_numel(rank, dims));
	copy.rank = rank;
	memcpy(copy.dims, dims, sizeof(int64_t) * (size_t)rank);
	copy.is_const = 0;
	*o = copy;
	return 0;
}

int vk_emit(vk_ctx *c, int pipe, const vk_buf *bufs, int n_bufs, uint32_t writes,
	    const void *push, size_t push_bytes, uint32_t gx, uint32_t gy, uint32_t gz)
{
	vk_dispatch *d;

	if (gx == 0 || gy == 0 || gz == 0)
		return 0;
	if (n_bufs != vk_pipe_bindings(pipe) || push_bytes > VKX_PUSH_BYTES)
		return vk_fail(c, EP_E_INTERNAL, "bad dispatch of pipeline %d", pipe);
	d = ep_list_push(&c->ex->disp);
	if (!d)
		return vk_fail(c, EP_E_NOMEM, "out of memory");
	d->pipe = vk_node_dtype(c) == VKX_FLOAT16 && c->ex->ep->dev.f16 ? pipe + VKP_F16 : pipe;
	d->n_bufs = n_bufs;
	memcpy(d->bufs, bufs, sizeof(*bufs) * (size_t)n_bufs);
	d->writes = writes;
	memcpy(d->push, push, push_bytes);
	d->groups[0] = gx;
	d->groups[1] = gy;
	d->groups[2] = gz;
	return 0;
}

int vk_emit_1d(vk_ctx *c, int pipe, const vk_buf *bufs, int n_bufs, uint32_t writes,
	       const void *push, size_t push_bytes, uint64_t threads)
{
	uint64_t groups = (threads + 63) / 64, gx = groups < 65535 ? groups : 65535;

	if (threads == 0)
		return 0;
	return vk_emit(c, pipe, bufs, n_bufs, writes, push, push_bytes, (uint32_t)gx,
		       (uint32_t)((groups + gx - 1) / gx), 1);
}

static int upload(vk_ctx *c, const void *data, uint64_t nbytes, vk_buf *dst)
{
	vk_exec *ex = c->ex;
	void *copy = malloc(nbytes ? nbytes : 1), **slot = ep_list_push(&ex->htemps);
	vk_xfer *x;

	if (!copy || !slot) {
		free(copy);
		if (slot)
			ex->htemps.n--;
		return vk_fail(c, EP_E_NOMEM, "out of memory");
	}
	memcpy(copy, data, nbytes);
	*slot = copy;
	x = ep_list_push(&ex->up);
	if (!x)
		return vk_fail(c, EP_E_NOMEM, "out of memory");
	x->dev = *dst;
	x->host = copy;
	x->nbytes = nbytes;
	return 0;
}

int vk_upload_temp(vk_ctx *c, const void *data, uint64_t nbytes, vk_buf *out)
{
	vk_buf *t = ep_list_push(&c->ex->temps);

	if (!t)
		return vk_fail(c, EP_E_NOMEM, "out of memory");
	if (vk_heap_alloc(&c->ex->ep->heap, nbytes, t, c->err, c->errlen)) {
		c->ex->temps.n--;
		return EP_E_NOMEM;
	}
	*out = *t;
	return upload(c, data, nbytes, out);
}

int vk_upload_keep(vk_ctx *c, const void *data, uint64_t nbytes, vk_buf *out)
{
	vk_node *nd = c->node;

	if (nd->keep.block >= 0) {
		*out = nd->keep;
		return 0;
	}
	if (vk_heap_alloc(&c->ex->ep->heap, nbytes, &nd->keep, c->err, c->errlen))
		return EP_E_NOMEM;
	nd->keep_fresh = 1;
	*out = nd->keep;
	return upload(c, data, nbytes, out);
}
