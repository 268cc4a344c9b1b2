/*
 * cuda_exec: loading a subgraph onto the GPU and the ops' side of a run
 * (outputs, views, scratch, uploads; see cuda_ops.h and cuda_exec.h).  The
 * run itself is cuda_run.c.
 */
#include "cuda_exec.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

/* ---- load --------------------------------------------------------------- */

static void exec_free(cu_exec *ex)
{
	cuda_heap *h = &ex->ep->heap;

	for (size_t k = 0; ex->nodes && k < ex->n_nodes; k++) {
		cu_node *nd = &ex->nodes[k];

		if (nd->op && nd->op->fini)
			nd->op->fini(nd);
		free(nd->in);
		free(nd->out);
		free(nd->state);
		cuda_heap_free(h, &nd->keep);
	}
	for (size_t v = 0; ex->own && v < ex->n_values; v++)
		cuda_heap_free(h, &ex->own[v]);
	free(ex->nodes);
	free(ex->consts);
	free(ex->own);
	free(ex->vals);
	ep_wiring_fini(&ex->w);
	free(ex->in);
	free(ex->up.v);
	free(ex->down.v);
	free(ex->d2d.v);
	free(ex->temps.v);
	free(ex->stage.v);
	free(ex->htemps.v);
	free(ex->made.v);
	free(ex);
}

static int alloc_tables(cu_exec *ex)
{
	size_t nv = ex->n_values + 1, nn = ex->n_nodes + 1;

	ex->nodes = calloc(nn, sizeof(*ex->nodes));
	ex->consts = calloc(nv, sizeof(*ex->consts));
	ex->own = calloc(nv, sizeof(*ex->own));
	ex->vals = calloc(nv, sizeof(*ex->vals));
	if (!ex->nodes || !ex->consts || !ex->own || !ex->vals ||
	    ep_wiring_init(&ex->w, ex->sg))
		return -1;
	ex->up.size = ex->down.size = ex->d2d.size = sizeof(cu_xfer);
	ex->temps.size = sizeof(cuda_block);
	ex->stage.size = sizeof(cuda_pinned_buf *);
	ex->htemps.size = sizeof(void *);
	ex->made.size = sizeof(uint64_t);
	return 0;
}

static int load_node(cu_exec *ex, size_t k, size_t *max_in, char *err, size_t n)
{
	const Onnx__NodeProto *p = ex->sg->graph->node[k];
	cu_node *nd = &ex->nodes[k];
	const char *domain = p->domain ? p->domain : "";
	int rc;

	nd->proto = p;
	nd->opset = ep_subgraph_opset(ex->sg, domain);
	nd->op = cu_op_find(p->op_type, domain, nd->opset);
	if (!nd->op)
		return snprintf(err, n, "node '%s': %s (opset %lld) is not a CUDA op",
				p->name ? p->name : "", p->op_type, (long long)nd->opset),
		       EP_E_UNSUPPORTED;
	nd->n_in = (int)p->n_input;
	nd->n_out = (int)p->n_output;
	rc = ep_node_wire(&ex->w, p, (int)k, &nd->in, &nd->out, err, n);
	if (!rc && nd->op->prepare)
		rc = nd->op->prepare(nd, err, n);
	if (rc)
		return rc;
	if (p->n_input > *max_in)
		*max_in = p->n_input;
	return 0;
}

static int load_weights(cu_exec *ex, char *err, size_t n)
{
	const ep_subgraph *sg = ex->sg;
	cuda_block *dst;
	int rc = ep_weights_check(sg, err, n);

	if (rc)
		return rc;
	dst = calloc(sg->n_weights + 1, sizeof(*dst));
	if (!dst)
		return snprintf(err, n, "out of memory"), EP_E_NOMEM;
	rc = cuda_load_weights(ex->ep, sg, dst, err, n);
	for (size_t i = 0; i < sg->n_weights; i++) {
		const ep_weight *w = &sg->weights[i];
		cu_val *c = &ex->consts[w->value];

		c->dtype = w->dtype;
		c->rank = w->rank;
		memcpy(c->dims, w->dims, sizeof(int64_t) * (size_t)w->rank);
		c->numel = ep_numel(w->rank, w->dims);
		c->nbytes = w->nbytes;
		c->host = w->data;
		c->dev = dst[i].ptr;
		c->is_const = 1;
		c->ready = 1;
		/* The exec owns them now (freed with the other values). */
		cuda_heap_free(&ex->ep->heap, &ex->own[w->value]);
		ex->own[w->value] = dst[i];
	}
	free(dst);
	return rc;
}

int cuda_exec_load(cuda_ep *ep, ep_subgraph *sg, char *err, size_t n)
{
	cu_exec *ex = calloc(1, sizeof(*ex));
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
		rc = load_weights(ex, err, n);
	ex->in = calloc(max_in + 1, sizeof(*ex->in));
	if (rc == 0 && !ex->in) {
		snprintf(err, n, "out of memory");
		rc = EP_E_NOMEM;
	}
	if (rc) {
		exec_free(ex);
		return rc;
	}
	sg->impl = ex;
	if (ipc_log_enabled(IPC_LOG_DEBUG))
		ep_log_loaded(sg, ep->heap.in_use);
	return 0;
}

void cuda_exec_unload(cuda_ep *ep, ep_subgraph *sg)
{
	/* Its memory goes back to the cache: nothing may still use it. */
	cuda_dev_sync_all(&ep->dev);
	if (sg->impl)
		exec_free(sg->impl);
	sg->impl = NULL;
}

/* ---- the ops' side ------------------------------------------------------ */

int cu_fail(cu_ctx *c, int code, const char *fmt, ...)
{
	va_list ap;

	c->status = code;
	va_start(ap, fmt);
	ep_node_vfail(c->err, c->errlen, c->node->proto, code, fmt, ap);
	va_end(ap);
	return code;
}

int cu_check(cu_ctx *c, cudaError_t e, const char *what)
{
	if (e == cudaSuccess)
		return 0;
	return cu_fail(c, EP_E_INTERNAL, "%s: %s", what, cudaGetErrorString(e));
}

struct cuda_dev *cu_dev(const cu_ctx *c)
{
	return &c->ex->ep->dev;
}

const cu_val *cu_in(const cu_ctx *c, int i)
{
	return i < c->n_in ? c->in[i] : NULL;
}

/* Checks a dtype and shape against the binding the core planned for value v. */
static int check_planned(cu_ctx *c, int v, int32_t dtype, int rank, const int64_t *dims)
{
	cu_exec *ex = c->ex;
	char msg[512];
	int rc = ep_check_planned(&ex->w, ex->run, v, dtype, rank, dims, msg, sizeof(msg));

	return rc ? cu_fail(c, rc, "%s", msg) : 0;
}

static cu_val *out_value(cu_ctx *c, int i, int32_t dtype, int rank, const int64_t *dims,
			 int *rc)
{
	int v = i < c->node->n_out ? c->node->out[i] : -1;
	int64_t numel = ep_numel(rank, dims);

	if (v < 0)
		*rc = cu_fail(c, EP_E_INTERNAL, "output %d is not in the graph", i);
	else if (rank > EP_MAX_RANK || numel < 0)
		*rc = cu_fail(c, EP_E_INVALID, "output of %lld elements", (long long)numel);
	else
		*rc = check_planned(c, v, dtype, rank, dims);
	return *rc ? NULL : &c->ex->vals[v];
}

const cu_val *cu_out(cu_ctx *c, int i, int32_t dtype, int rank, const int64_t *dims)
{
	int rc;
	cu_val *o = out_value(c, i, dtype, rank, dims, &rc);
	cu_exec *ex = c->ex;
	uint64_t nbytes;
	int v;

	if (!o)
		return NULL;
	v = c->node->out[i];
	nbytes = (uint64_t)ep_numel(rank, dims) * cu_elem_size(dtype);
	/* Kept across runs; a larger shape gets a larger block.  The old one
	 * may still be read by work of this stream: it goes back to the cache
	 * only at the end of the run. */
	if (!ex->own[v].ptr || ex->own[v].size < nbytes) {
		cuda_block *t = ex->own[v].ptr ? ep_list_push(&ex->temps) : NULL;

		if (ex->own[v].ptr && !t) {
			cu_fail(c, EP_E_NOMEM, "out of memory");
			return NULL;
		}
		if (t)
			*t = ex->own[v];
		ex->own[v].ptr = NULL;
		if (cuda_heap_alloc(&ex->ep->heap, nbytes, &ex->own[v], c->err, c->errlen)) {
			c->status = EP_E_NOMEM;
			return NULL;
		}
	}
	memset(o, 0, sizeof(*o));
	o->dtype = dtype;
	o->rank = rank;
	memcpy(o->dims, dims, sizeof(int64_t) * (size_t)rank);
	o->numel = ep_numel(rank, dims);
	o->nbytes = nbytes;
	o->dev = ex->own[v].ptr;
	o->ready = 1;
	return o;
}

int cu_out_alias(cu_ctx *c, int i, const cu_val *src, int rank, const int64_t *dims)
{
	int rc;
	cu_val *o = out_value(c, i, src->dtype, rank, dims, &rc);
	cu_val copy = *src;

	if (!o)
		return rc;
	if (ep_numel(rank, dims) != src->numel)
		return cu_fail(c, EP_E_INVALID, "cannot view %lld elements as %lld",
			       (long long)src->numel, (long long)ep_numel(rank, dims));
	copy.rank = rank;
	memcpy(copy.dims, dims, sizeof(int64_t) * (size_t)rank);
	copy.is_const = 0;
	*o = copy;
	return 0;
}

int cu_temp(cu_ctx *c, uint64_t nbytes, void **ptr)
{
	cuda_block *t = ep_list_push(&c->ex->temps);

	if (!t)
		return cu_fail(c, EP_E_NOMEM, "out of memory");
	if (cuda_heap_alloc(&c->ex->ep->heap, nbytes, t, c->err, c->errlen)) {
		c->ex->temps.n--;
		c->status = EP_E_NOMEM;
		return EP_E_NOMEM;
	}
	*ptr = t->ptr;
	return 0;
}

/* Copies host bytes to dst through a pinned buffer released at the end of
 * the run (after the stream synchronised). */
static int upload(cu_ctx *c, const void *data, uint64_t nbytes, void *dst)
{
	cu_exec *ex = c->ex;
	cuda_pinned_buf **slot = ep_list_push(&ex->stage);

	if (!slot)
		return cu_fail(c, EP_E_NOMEM, "out of memory");
	*slot = cuda_stage_get(ex->ep, nbytes, c->err, c->errlen);
	if (!*slot) {
		ex->stage.n--;
		c->status = EP_E_NOMEM;
		return EP_E_NOMEM;
	}
	memcpy((*slot)->ptr, data, nbytes);
	return cu_check(c, cudaMemcpyAsync(dst, (*slot)->ptr, nbytes, cudaMemcpyHostToDevice,
					   c->stream), "upload");
}

int cu_upload_temp(cu_ctx *c, const void *data, uint64_t nbytes, void **ptr)
{
	int rc = cu_temp(c, nbytes, ptr);

	return rc ? rc : upload(c, data, nbytes, *ptr);
}

int cu_upload_keep(cu_ctx *c, const void *data, uint64_t nbytes, void **ptr)
{
	cu_node *nd = c->node;

	if (nd->keep.ptr) {
		*ptr = nd->keep.ptr;
		return 0;
	}
	if (cuda_heap_alloc(&c->ex->ep->heap, nbytes, &nd->keep, c->err, c->errlen))
		return c->status = EP_E_NOMEM;
	nd->keep_fresh = 1;
	*ptr = nd->keep.ptr;
	return upload(c, data, nbytes, *ptr);
}
