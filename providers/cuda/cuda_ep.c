/*
 * cuda_ep: ort-ep-cuda, the CUDA execution provider process.  It fills the
 * ep_host vtable: `init` opens the device (cuda_dev.c), `supported` asks
 * the op registry (cuda_util.c and the cuda_ops_*.c tables), `load` and
 * `run` the device kit's executor (providers/devkit/) on cuda_exec.c, the
 * device-memory entries cuda_buf.c.  A machine without a GPU or driver still gets a provider that
 * starts, says so in its HELLO detail and refuses every node with the
 * reason, so `--provider cuda,cpu` runs everything on cpu there.
 *
 * `ort-ep-cuda --probe` lists the devices, marks the one it would use and
 * exits 0, or 77 when there is none (the tests' skip code).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_buf.h"
#include "ep_host.h"
#include "log.h"

static int cuda_init(void **self, char *detail, size_t n)
{
	cuda_ep *ep = calloc(1, sizeof(*ep));

	*self = ep;
	if (!ep)
		return -1;
	cuda_exec_device(ep);
	if (cuda_dev_open(&ep->dev, ep->dk.why, sizeof(ep->dk.why))) {
		cuda_dev_close(&ep->dev);
		ipc_log(IPC_LOG_WARN, "no CUDA device: %s; every node goes to the next provider",
			ep->dk.why);
		snprintf(detail, n, "cuda: no device (%s)", ep->dk.why);
		ep_host_unavailable(ep->dk.why);
		return 0;
	}
	ep->dk.ok = 1;
	cuda_pinned_init(&ep->pinned);
	cuda_dev_describe(&ep->dev, detail, n);
	ipc_log(IPC_LOG_INFO, "device: %s", detail);
	return 0;
}

static void cuda_fini(void *self)
{
	cuda_ep *ep = self;

	if (!ep)
		return;
	if (ep->dk.ok) {
		cuda_dev_bind(&ep->dev);
		cudaDeviceSynchronize();
		cuda_buf_fini(ep);
		cuda_dev_close(&ep->dev);
		cuda_heap_fini(&ep->heap);
		cuda_pinned_fini(&ep->pinned);
	}
	free(ep);
}

static int cuda_supported(void *self, const Onnx__NodeProto *node, int64_t opset,
			  const int32_t *in_dtypes, int n_in, char *why, size_t n)
{
	cuda_ep *ep = self;

	return dk_supported(&ep->dk, node, opset, in_dtypes, n_in, why, n);
}

static int cuda_load(void *self, ep_subgraph *sg, char *err, size_t n)
{
	cuda_ep *ep = self;

	if (!ep->dk.ok)
		return dk_unavailable(&ep->dk, err, n);
	cuda_dev_bind(&ep->dev);
	return dk_exec_load(&ep->dk, sg, err, n);
}

static int cuda_run(void *self, ep_subgraph *sg, ep_run *r, char *err, size_t n)
{
	cuda_ep *ep = self;

	cuda_dev_bind(&ep->dev);
	return dk_exec_run(sg, r, err, n);
}

static void cuda_unload(void *self, ep_subgraph *sg)
{
	cuda_ep *ep = self;

	cuda_dev_bind(&ep->dev);
	dk_exec_unload(sg);
}

/* The driver filter: the CUDA driver opens /dev/nvidia*, /dev/nvidia-uvm
 * and /proc files lazily (contexts, streams, cuBLAS handles, module loads
 * after start) and talks to them with ioctl; it runs no program and opens
 * no network socket (docs/SECURITY.md, "Per provider": checked on the
 * emulation here, not yet on a real driver). */
static const ep_sandbox_policy cuda_sandbox = {
	.driver = 1,
};

static const ep_vtable cuda_vtable = {
	.name = "cuda",
	.sandbox = &cuda_sandbox,
	.init = cuda_init,
	.supported = cuda_supported,
	.load = cuda_load,
	.run = cuda_run,
	.unload = cuda_unload,
	.fini = cuda_fini,
	.buf_alloc = cuda_buf_alloc,
	.buf_free = cuda_buf_free,
	.copy = cuda_copy,
	.stream_free = cuda_stream_free,
};

int main(int argc, char **argv)
{
	if (argc == 2 && strcmp(argv[1], "--probe") == 0)
		cuda_dev_probe();
	return ep_host_main(&cuda_vtable, argc, argv);
}
