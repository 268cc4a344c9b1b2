/*
 * vk_exec: the Vulkan device's operations for the device kit's executor
 * (see vk_exec.h): memory from the heap, the core's buffers by id, the
 * run's stream, loading pipelines and weights, and what the ops call to
 * append their dispatches.  Recording and submission: vk_record.c.
 */
#include "vk_exec.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vk_cache.h"
#include "vk_prepack.h"

/* ---- memory ------------------------------------------------------------- */

static int vk_ex_mem_alloc(void *self, uint64_t nbytes, dk_buf *out, char *err, size_t n)
{
	vk_ep *ep = self;

	return vk_heap_alloc(&ep->heap, nbytes, out, err, n) ? EP_E_NOMEM : 0;
}

static void vk_ex_mem_free(void *self, dk_buf *b)
{
	vk_ep *ep = self;

	vk_heap_free(&ep->heap, b);
	memset(b, 0, sizeof(*b));
}

static uint64_t vk_ex_mem_in_use(void *self)
{
	return ((vk_ep *)self)->heap.used;
}

static int vk_ex_buf_range(void *self, uint64_t id, uint64_t off, uint64_t nbytes, dk_buf *out,
		     char *err, size_t n)
{
	vk_ep *ep = self;

	return vk_dm_range(&ep->dm, id, off, nbytes, out, err, n) ? EP_E_INVALID : 0;
}

static int vk_ex_buf_exists(void *self, uint64_t id)
{
	return vk_dm_find(&((vk_ep *)self)->dm, id) != NULL;
}

static int vk_ex_buf_adopt(void *self, uint64_t id, uint64_t nbytes, const dk_buf *b, char *err,
		     size_t n)
{
	return vk_dm_adopt(&((vk_ep *)self)->dm, id, nbytes, b, err, n);
}

/* ---- a run -------------------------------------------------------------- */

/* After the stream's earlier work: its downloads to host memory are done
 * now, its device work is waited for by the submission. */
static int vk_ex_run_begin(dk_exec *ex, char *err, size_t n)
{
	vk_ep *ep = vk_ep_of(ex);
	vk_stream *s = vk_stream_get(&ep->dm.streams, ex->run->stream, 0, err, n);
	VkSemaphore sem = VK_NULL_HANDLE;

	if (s)
		vk_stream_order(s, &sem, &ex->wait_value);
	ex->wait = sem;
	vk_dm_collect(&ep->dm);
	return 0;
}

/* An input in a device buffer that the ops read on the host: fetched on
 * the run's stream. */
static int vk_ex_run_fetch(dk_exec *ex, const ep_tensor *b, void *dst, char *err, size_t n)
{
	vk_ep *ep = vk_ep_of(ex);
	vk_copy_op op = {.src_buf = b->buffer_id, .src_off = b->buffer_offset, .dst_host = dst,
			 .nbytes = b->nbytes};
	int rc = vk_dm_copy(&ep->dm, ex->run->stream, &op, 1, NULL, err, n);

	if (rc)
		return rc == -ENOMEM ? EP_E_NOMEM : EP_E_INVALID;
	vk_stream_sync(vk_stream_get(&ep->dm.streams, ex->run->stream, 0, err, n));
	return 0;
}

/* Nothing is on the device before the submission: a failed run has
 * nothing to wait for. */
static int vk_ex_run_submit(dk_exec *ex, int ok, char *err, size_t n)
{
	return ok ? vk_record_and_run(ex, err, n) : 0;
}

/* ---- load --------------------------------------------------------------- */

static int vk_ex_load_node(dk_exec *ex, dk_node *nd, char *err, size_t n)
{
	vk_ep *ep = vk_ep_of(ex);
	int f16 = nd->n_in && nd->in[0] >= 0 && ep->dev.f16 &&
		  ex->sg->values[nd->in[0]].dtype == VKX_FLOAT16;

	for (int id = 0; id < VKP_COUNT; id++)
		if ((nd->op->needs & VKX_PIPE(id)) &&
		    !vk_pipe_get(&ep->dev, &ep->pipes, f16 ? id + VKP_F16 : id, err, n))
			return EP_E_INTERNAL;
	return 0;
}

/* Only float tensors are read by shaders; int64 ones (shapes, axes,
 * indices) stay on the host. */
static int vk_ex_load_weights(dk_exec *ex, char *err, size_t n)
{
	ep_subgraph *sg = (ep_subgraph *)ex->sg;
	vk_uploader u = {.ep = vk_ep_of(ex), .pending = {.size = sizeof(dk_xfer)}};
	vk_loader l = {.pk = vk_prepack_open(sg), .u = &u};
	int rc = l.pk ? 0 : EP_E_NOMEM;

	for (size_t i = 0; i < sg->n_weights && rc == 0; i++) {
		const ep_weight *w = &sg->weights[i];

		if (vk_dev_dtype(w->dtype))
			rc = vk_prepack_weight(ex, l.pk, &u, w, &ex->own[w->value], err, n);
	}
	/* the pack hooks read the weights where they are now */
	for (size_t i = 0; i < sg->n_weights; i++)
		ex->consts[sg->weights[i].value].dev = ex->own[sg->weights[i].value];
	for (size_t k = 0; k < ex->n_nodes && rc == 0; k++)
		if (ex->nodes[k].op->pack)
			rc = ex->nodes[k].op->pack(ex, &ex->nodes[k], &l, err, n);
	if (rc == 0)
		rc = vk_upload_flush(&u, err, n);
	free(u.pending.v);
	vk_prepack_close(l.pk, sg);
	if (rc == 0)
		vk_cache_save(&vk_ep_of(ex)->dev);
	return rc ? EP_E_NOMEM : 0;
}

static const dk_dev_ops vk_dk_ops = {
	.alloc = vk_ex_mem_alloc,
	.free = vk_ex_mem_free,
	.range = vk_ex_buf_range,
	.exists = vk_ex_buf_exists,
	.adopt = vk_ex_buf_adopt,
	.begin = vk_ex_run_begin,
	.fetch = vk_ex_run_fetch,
	.submit = vk_ex_run_submit,
	.find_op = vk_op_find,
	.load_node = vk_ex_load_node,
	.load_weights = vk_ex_load_weights,
};

void vk_exec_device(vk_ep *ep)
{
	dk_device *d = &ep->dk;

	d->ops = &vk_dk_ops;
	d->self = ep;
	d->name = "Vulkan";
	d->f16_as_f32 = !ep->dev.f16;
	d->max_elems = VKX_MAX_ELEMS;
	d->work_size = sizeof(vk_dispatch);
	d->mem_in_use = vk_ex_mem_in_use;
}

/* ---- the ops' side ------------------------------------------------------ */

int vk_device_is_cpu(const dk_ctx *c)
{
	return vk_ep_of(c->ex)->dev.props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU;
}

int32_t vk_node_dtype(const dk_ctx *c)
{
	return c->n_in && c->in[0] && c->in[0]->dtype == VKX_FLOAT16 ? VKX_FLOAT16 : VKX_FLOAT;
}

int vk_emit(dk_ctx *c, int pipe, const vk_buf *bufs, int n_bufs, uint32_t writes,
	    const void *push, size_t push_bytes, uint32_t gx, uint32_t gy, uint32_t gz)
{
	vk_dispatch *d;

	if (gx == 0 || gy == 0 || gz == 0)
		return 0;
	if (n_bufs != vk_pipe_bindings(pipe) || push_bytes > VKX_PUSH_BYTES)
		return dk_fail(c, EP_E_INTERNAL, "bad dispatch of pipeline %d", pipe);
	d = dk_list_push(&c->ex->work);
	if (!d)
		return dk_fail(c, EP_E_NOMEM, "out of memory");
	d->pipe = vk_node_dtype(c) == VKX_FLOAT16 && vk_ep_of(c->ex)->dev.f16 ? pipe + VKP_F16 : pipe;
	d->n_bufs = n_bufs;
	memcpy(d->bufs, bufs, sizeof(*bufs) * (size_t)n_bufs);
	d->writes = writes;
	memcpy(d->push, push, push_bytes);
	d->groups[0] = gx;
	d->groups[1] = gy;
	d->groups[2] = gz;
	return 0;
}

int vk_emit_1d(dk_ctx *c, int pipe, const vk_buf *bufs, int n_bufs, uint32_t writes,
	       const void *push, size_t push_bytes, uint64_t threads)
{
	uint64_t groups = (threads + 63) / 64, gx = groups < 65535 ? groups : 65535;

	if (threads == 0)
		return 0;
	return vk_emit(c, pipe, bufs, n_bufs, writes, push, push_bytes, (uint32_t)gx,
		       (uint32_t)((groups + gx - 1) / gx), 1);
}
