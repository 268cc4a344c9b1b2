/*
 * vk_ep: ort-ep-vulkan, the Vulkan execution provider process.  It fills
 * the ep_host vtable: `init` opens the device (vk_device.c), `supported`
 * asks the op registry (vk_util.c and the vk_ops_*.c tables), `load` and
 * `run` are the device kit's executor (providers/devkit/) on vk_exec.c.
 * A machine without a usable Vulkan device still gets a provider that starts and refuses every node (with
 * the reason), so `--provider vulkan,cpu` runs everything on cpu there.
 * Device buffers, COPY and streams are vk_copy.c and vk_stream.c.
 *
 * `ort-ep-vulkan --probe` lists the devices, marks the one it would use
 * and exits 0, or 77 when there is none (the tests' skip code).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ep_host.h"
#include "log.h"
#include "vk_exec.h"

static ep_vtable vk_vtable;

static int vk_init(void **self, char *detail, size_t n)
{
	vk_ep *ep = calloc(1, sizeof(*ep));

	*self = ep;
	if (!ep)
		return -1;
	ep->dk.ok = !vk_dev_open(&ep->dev, ep->dk.why, sizeof(ep->dk.why));
	vk_exec_device(ep);
	if (!ep->dk.ok) {
		ipc_log(IPC_LOG_WARN, "no Vulkan device: %s; every node goes to the next provider",
			ep->dk.why);
		vk_vtable.buf_alloc = NULL;
		vk_vtable.buf_free = NULL;
		vk_vtable.copy = NULL;
		vk_vtable.stream_free = NULL;
		snprintf(detail, n, "vulkan: no device (%s)", ep->dk.why);
		ep_host_unavailable(ep->dk.why);
		return 0;
	}
	vk_heap_init(&ep->heap, &ep->dev, VKX_BLOCK_SIZE);
	vk_dm_init(&ep->dm, &ep->dev, &ep->heap);
	vk_dev_describe(&ep->dev, detail, n);
	ipc_log(IPC_LOG_INFO, "device: %s", detail);
	ipc_log(IPC_LOG_INFO, "float16 tensors are %s", ep->dev.f16 ?
		"float16 in device memory (16-bit storage)" :
		"float32 in device memory (no 16-bit storage: converted at transfers)");
	return 0;
}

static void vk_fini(void *self)
{
	vk_ep *ep = self;

	if (!ep)
		return;
	if (ep->dk.ok) {
		vkDeviceWaitIdle(ep->dev.dev);
		vk_dm_fini(&ep->dm);
		vk_pipes_fini(&ep->dev, &ep->pipes);
		vk_staging_fini(&ep->dev, &ep->staging);
		vk_heap_fini(&ep->heap);
		vk_dev_close(&ep->dev);
	}
	free(ep);
}

static int vk_supported(void *self, const Onnx__NodeProto *node, int64_t opset,
			const int32_t *in_dtypes, int n_in, char *why, size_t n)
{
	vk_ep *ep = self;

	return dk_supported(&ep->dk, node, opset, in_dtypes, n_in, why, n);
}

static int vk_supported_shapes(void *self, const Onnx__NodeProto *node,
			       const Ortmk__NodeQuery *q, char *why, size_t n)
{
	vk_ep *ep = self;

	(void)node;
	if (!ep->dk.ok)
		return 0;
	return vk_shapes_fit(q, ep->dev.props.limits.maxStorageBufferRange, ep->dev.f16, why, n);
}

static int vk_load(void *self, ep_subgraph *sg, char *err, size_t n)
{
	vk_ep *ep = self;

	if (!ep->dk.ok)
		return dk_unavailable(&ep->dk, err, n);
	return dk_exec_load(&ep->dk, sg, err, n);
}

static int vk_run(void *self, ep_subgraph *sg, ep_run *r, char *err, size_t n)
{
	(void)self;
	return dk_exec_run(sg, r, err, n);
}

static void vk_unload(void *self, ep_subgraph *sg)
{
	(void)self;
	dk_exec_unload(sg);
}

/* ---- device memory, copies, streams (vk_copy.c, vk_stream.c) ---------- */

static int ep_status(int rc)
{
	return rc == -ENOMEM ? EP_E_NOMEM : rc == -ENOTSUP ? EP_E_UNSUPPORTED :
	       rc == -EIO ? EP_E_INTERNAL : EP_E_INVALID;
}

static int vk_buf_alloc(void *self, uint64_t id, uint64_t nbytes, char *err, size_t n)
{
	vk_ep *ep = self;
	int rc;

	if (!ep->dk.ok)
		return dk_unavailable(&ep->dk, err, n);
	rc = vk_dm_alloc(&ep->dm, id, nbytes, err, n);
	return rc ? ep_status(rc) : 0;
}

static void vk_buf_free(void *self, uint64_t id)
{
	vk_ep *ep = self;

	if (ep->dk.ok)
		vk_dm_free(&ep->dm, id);
}

/* The bridge thread's signal: the shm fence through ep_host. */
static void fence_done(void *f, uint64_t value, int ok)
{
	ep_fence fence = {f, value};

	if (ok)
		ep_fence_signal(&fence);
	else
		ep_fence_fail(&fence);
}

static int vk_copy(void *self, uint32_t stream, const ep_copy *ops, size_t n_ops,
		   ep_fence signal, char *err, size_t n)
{
	vk_ep *ep = self;
	vk_signal sig = {fence_done, signal.f, signal.value};
	vk_copy_op *v;
	int rc;

	if (!ep->dk.ok)
		return dk_unavailable(&ep->dk, err, n);
	v = calloc(n_ops + 1, sizeof(*v));
	if (!v)
		return snprintf(err, n, "out of memory"), EP_E_NOMEM;
	for (size_t i = 0; i < n_ops; i++)
		v[i] = (vk_copy_op){ops[i].src_host, ops[i].src_buf, ops[i].src_off, ops[i].dst_host,
				    ops[i].dst_buf, ops[i].dst_off, ops[i].nbytes};
	rc = vk_dm_copy(&ep->dm, stream, v, n_ops, &sig, err, n);
	free(v);
	return rc ? ep_status(rc) : 0;
}

static void vk_stream_free(void *self, uint32_t stream)
{
	vk_ep *ep = self;

	if (ep->dk.ok)
		vk_dm_stream_free(&ep->dm, stream);
}

/* The driver filter (docs/SECURITY.md, "Per provider"): after start the
 * provider writes its pipeline cache by path (vk_cache_save after each
 * load: fopen of a temporary file, rename), a GPU driver opens its render
 * node and disk cache and drives the device with ioctl, and lavapipe
 * compiles shaders into executable memory; none of it runs a program,
 * forks, traces or opens a network socket. */
static const ep_sandbox_policy vk_sandbox = {
	.driver = 1,
};

/* Not const: without a device, vk_init takes the device-memory entries
 * out before ep_host says HELLO (device_memory is "buf_alloc is set"), so
 * the core gives host values instead of failing every ALLOC. */
static ep_vtable vk_vtable = {
	.name = "vulkan",
	.sandbox = &vk_sandbox,
	.init = vk_init,
	.supported = vk_supported,
	.supported_shapes = vk_supported_shapes,
	.load = vk_load,
	.run = vk_run,
	.unload = vk_unload,
	.fini = vk_fini,
	.buf_alloc = vk_buf_alloc,
	.buf_free = vk_buf_free,
	.copy = vk_copy,
	.stream_free = vk_stream_free,
};

int main(int argc, char **argv)
{
	if (argc == 2 && strcmp(argv[1], "--probe") == 0)
		vk_dev_probe();
	return ep_host_main(&vk_vtable, argc, argv);
}
