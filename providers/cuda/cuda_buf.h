/*
 * cuda_buf: the device-memory entries of ort-ep-cuda's vtable (buffers by
 * id, COPY, stream release; docs/DEVICE.md) — see cuda_buf.c.
 */
#ifndef ORTMK_CUDA_BUF_H
#define ORTMK_CUDA_BUF_H

#include "cuda_exec.h"

int cuda_buf_alloc(void *self, uint64_t id, uint64_t nbytes, char *err, size_t n);
void cuda_buf_free(void *self, uint64_t id);
int cuda_copy(void *self, uint32_t stream, const ep_copy *ops, size_t n_ops, ep_fence signal,
	      char *err, size_t n);
void cuda_stream_free(void *self, uint32_t stream);
/* Frees every buffer (at exit). */
void cuda_buf_fini(cuda_ep *ep);

#endif
