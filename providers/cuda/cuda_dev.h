/*
 * cuda_dev: the CUDA device of ort-ep-cuda: which one (ORTMK_CUDA_DEVICE,
 * else device 0), its library handles (cuBLAS, cuDNN when built with it),
 * one cudaStream_t per ortmk stream, and the completion thread that turns
 * "everything enqueued so far on this stream is done" into a callback
 * (cudaEvent + a waiter thread; the callbacks signal shared-memory fences).
 */
#ifndef ORTMK_CUDA_DEV_H
#define ORTMK_CUDA_DEV_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#ifdef ORTMK_HAVE_CUDNN
#include <cudnn.h>
#endif

typedef struct cuda_stream {
	uint32_t id;            /* ortmk stream id; 0 = the default one */
	cudaStream_t s;
} cuda_stream;

/* A callback run by the completion thread once `ev` completed (ok = 1) or
 * the stream failed (ok = 0).  It must not call the CUDA API. */
typedef struct cuda_pending {
	cudaEvent_t ev;
	void (*fn)(void *arg, int ok);
	void *arg;
	struct cuda_pending *next;
} cuda_pending;

typedef struct cuda_dev {
	int index;
	struct cudaDeviceProp props;
	int driver, runtime;    /* versions, 1000 * major + 10 * minor */
	cublasHandle_t blas;
	int tf32;               /* ORTMK_CUDA_TF32=1: TF32 tensor cores allowed */
#ifdef ORTMK_HAVE_CUDNN
	cudnnHandle_t dnn;
#endif
	cuda_stream *streams;
	size_t n_streams, cap_streams;
	/* completion thread */
	pthread_t waiter;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	cuda_pending *head, *tail;
	int busy;               /* the waiter is running a callback */
	pthread_cond_t idle;    /* signalled when the queue drains */
	int stop, waiter_on;
} cuda_dev;

/* Opens the device; -1 with the reason when there is none usable (no
 * driver, no device, ORTMK_CUDA_DEVICE out of range). */
int cuda_dev_open(cuda_dev *d, char *why, size_t n);
void cuda_dev_close(cuda_dev *d);
/* "NVIDIA H100 80GB HBM3, sm_90, 79.1 GiB, driver 13.0, runtime 13.0" */
void cuda_dev_describe(const cuda_dev *d, char *out, size_t n);
/* ort-ep-cuda --probe: lists the devices; exit 0, or 77 when none. */
_Noreturn void cuda_dev_probe(void);

/* The CUDA stream of ortmk stream `id`, created on first use. */
int cuda_dev_stream(cuda_dev *d, uint32_t id, cudaStream_t *out, char *err, size_t n);
/* Destroys it once its pending work is done (a later use makes a new one). */
void cuda_dev_stream_free(cuda_dev *d, uint32_t id);
/* Makes the device current on the calling thread: ep_host calls the
 * vtable from its request thread and from its ring thread, and the CUDA
 * runtime's current device is per thread. */
void cuda_dev_bind(const cuda_dev *d);
/* Waits for every stream's work. */
void cuda_dev_sync_all(cuda_dev *d);
/* Calls fn(arg, ok) from the completion thread once the work enqueued on
 * `s` so far has completed.  On error nothing is queued (the caller still
 * owns arg). */
int cuda_dev_when_done(cuda_dev *d, cudaStream_t s, void (*fn)(void *, int), void *arg,
		       char *err, size_t n);

/* Waits until every queued callback has run (their staging buffers are
 * back in the pool). */
void cuda_dev_drain(cuda_dev *d);

/* "cudaMalloc: out of memory" into err; returns -1. */
int cuda_err(cudaError_t e, const char *what, char *err, size_t n);

#endif
