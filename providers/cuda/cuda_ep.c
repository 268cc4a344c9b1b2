/*
 * cuda_ep: ort-ep-cuda, the CUDA execution provider process.  It fills the
 * ep_host vtable: `init` opens the device (cuda_dev.c), `supported` asks
 * the op registry (cuda_util.c and the cuda_ops_*.c tables), `load` and
 * `run` are cuda_exec.c and cuda_run.c, the device-memory entries
 * cuda_buf.c.  A machine without a GPU or driver still gets a provider that
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
	if (cuda_dev_open(&ep->dev, ep->why, sizeof(ep->why))) {
		cuda_dev_close(&ep->dev);
		ipc_log(IPC_LOG_WARN, "no CUDA device: %s; every node goes to the next provider",
			ep->why);
		snprintf(detail, n, "cuda: no device (%s)", ep->why);
		return 0;
	}
	ep->ok = 1;
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
	if (ep->ok) {
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
	const cu_op *op = ep->ok ? cu_op_find(node->op_type, node->domain, opset) : NULL;

	if (!ep_supported_pre("CUDA", ep->ok, ep->why, op != NULL, node, opset, n_in, why, n))
		return 0;
	return op->supports(node, opset, in_dtypes, n_in, why, n);
}

static int cuda_load(void *self, ep_subgraph *sg, char *err, size_t n)
{
	cuda_ep *ep = self;

	if (!ep->ok)
		return snprintf(err, n, "no CUDA device (%s)", ep->why), EP_E_UNSUPPORTED;
	cuda_dev_bind(&ep->dev);
	return cuda_exec_load(ep, sg, err, n);
}

static int cuda_run(void *self, ep_subgraph *sg, ep_run *r, char *err, size_t n)
{
	cuda_ep *ep = self;

	cuda_dev_bind(&ep->dev);
	return cuda_exec_run(ep, sg, r, err, n);
}

static void cuda_unload(void *self, ep_subgraph *sg)
{
	cuda_ep *ep = self;

	cuda_dev_bind(&ep->dev);
	cuda_exec_unload(ep, sg);
}

static const ep_vtable cuda_vtable = {
	.name = "cuda",
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
