/*
 * cuda_dev: device choice, library handles, streams and the completion
 * thread (see cuda_dev.h).
 *
 * Without a GPU or a driver, cudaGetDeviceCount fails (no driver:
 * cudaErrorInsufficientDriver / cudaErrorNoDevice): cuda_dev_open says so
 * and the provider refuses every node, so `--provider cuda,cpu` runs on cpu.
 */
#include "cuda_dev.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"

int cuda_err(cudaError_t e, const char *what, char *err, size_t n)
{
	snprintf(err, n, "%s: %s (%s)", what, cudaGetErrorString(e), cudaGetErrorName(e));
	return -1;
}

/* The index ORTMK_CUDA_DEVICE names (else 0); -1 with the reason. */
static int choose(int count, char *why, size_t n)
{
	const char *e = getenv("ORTMK_CUDA_DEVICE");
	char *end;
	long i;

	if (!e || !e[0])
		return 0;
	i = strtol(e, &end, 10);
	if (*end || i < 0)
		return snprintf(why, n, "ORTMK_CUDA_DEVICE=%s is not a device index", e), -1;
	if (i >= count)
		return snprintf(why, n, "ORTMK_CUDA_DEVICE=%ld but %d device(s)", i, count), -1;
	return (int)i;
}

static int count_devices(int *count, char *why, size_t n)
{
	cudaError_t e = cudaGetDeviceCount(count);

	if (e != cudaSuccess) {
		*count = 0;
		return cuda_err(e, "cudaGetDeviceCount", why, n);
	}
	if (*count == 0)
		return snprintf(why, n, "no CUDA device"), -1;
	return 0;
}

static void *waiter_main(void *arg);

static int open_libs(cuda_dev *d, char *why, size_t n)
{
	cublasStatus_t bs = cublasCreate(&d->blas);
	const char *tf = getenv("ORTMK_CUDA_TF32");

	if (bs != CUBLAS_STATUS_SUCCESS)
		return snprintf(why, n, "cublasCreate: status %d", (int)bs), -1;
	d->tf32 = tf && strcmp(tf, "1") == 0;
	/* CUBLAS_DEFAULT_MATH keeps float32 products in float32 (no TF32). */
	cublasSetMathMode(d->blas, d->tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH);
#ifdef ORTMK_HAVE_CUDNN
	{
		cudnnStatus_t ds = cudnnCreate(&d->dnn);

		if (ds != CUDNN_STATUS_SUCCESS)
			return snprintf(why, n, "cudnnCreate: %s", cudnnGetErrorString(ds)), -1;
	}
#endif
	return 0;
}

int cuda_dev_open(cuda_dev *d, char *why, size_t n)
{
	int count;
	cudaError_t e;

	memset(d, 0, sizeof(*d));
	if (count_devices(&count, why, n))
		return -1;
	d->index = choose(count, why, n);
	if (d->index < 0)
		return -1;
	e = cudaSetDevice(d->index);
	if (e == cudaSuccess)
		e = cudaGetDeviceProperties(&d->props, d->index);
	if (e == cudaSuccess)
		e = cudaFree(NULL);     /* creates the context now, not mid-run */
	if (e != cudaSuccess)
		return cuda_err(e, "device init", why, n);
	cudaDriverGetVersion(&d->driver);
	cudaRuntimeGetVersion(&d->runtime);
	if (open_libs(d, why, n))
		return -1;
	pthread_mutex_init(&d->mu, NULL);
	pthread_cond_init(&d->cv, NULL);
	pthread_cond_init(&d->idle, NULL);
	if (pthread_create(&d->waiter, NULL, waiter_main, d))
		return snprintf(why, n, "cannot start the completion thread"), -1;
	d->waiter_on = 1;
	return 0;
}

void cuda_dev_close(cuda_dev *d)
{
	if (d->waiter_on) {
		pthread_mutex_lock(&d->mu);
		d->stop = 1;
		pthread_cond_signal(&d->cv);
		pthread_mutex_unlock(&d->mu);
		pthread_join(d->waiter, NULL);
		d->waiter_on = 0;
	}
	for (size_t i = 0; i < d->n_streams; i++) {
		cudaStreamSynchronize(d->streams[i].s);
		cudaStreamDestroy(d->streams[i].s);
	}
	free(d->streams);
	d->streams = NULL;
	d->n_streams = d->cap_streams = 0;
#ifdef ORTMK_HAVE_CUDNN
	if (d->dnn)
		cudnnDestroy(d->dnn);
#endif
	if (d->blas)
		cublasDestroy(d->blas);
}

void cuda_dev_describe(const cuda_dev *d, char *out, size_t n)
{
	snprintf(out, n, "cuda: %s, sm_%d%d, %.1f GiB, driver %d.%d, runtime %d.%d%s%s",
		 d->props.name, d->props.major, d->props.minor,
		 (double)d->props.totalGlobalMem / (1 << 30), d->driver / 1000,
		 d->driver % 1000 / 10, d->runtime / 1000, d->runtime % 1000 / 10,
#ifdef ORTMK_HAVE_CUDNN
		 ", cuDNN",
#else
		 "",
#endif
		 d->tf32 ? ", TF32" : "");
}

_Noreturn void cuda_dev_probe(void)
{
	char why[256] = "";
	int count, chosen = -1;

	if (count_devices(&count, why, sizeof(why)) == 0)
		chosen = choose(count, why, sizeof(why));
	for (int i = 0; i < count; i++) {
		struct cudaDeviceProp p;

		if (cudaGetDeviceProperties(&p, i) != cudaSuccess)
			continue;
		printf("%c %d: %s, sm_%d%d, %.1f GiB\n", i == chosen ? '*' : ' ', i, p.name, p.major,
		       p.minor, (double)p.totalGlobalMem / (1 << 30));
	}
	if (chosen < 0)
		printf("no usable CUDA device: %s\n", why);
	fflush(stdout);
	_exit(chosen < 0 ? 77 : 0);
}

/* ---- streams ------------------------------------------------------------ */

int cuda_dev_stream(cuda_dev *d, uint32_t id, cudaStream_t *out, char *err, size_t n)
{
	cudaError_t e;

	for (size_t i = 0; i < d->n_streams; i++)
		if (d->streams[i].id == id)
			return *out = d->streams[i].s, 0;
	if (d->n_streams == d->cap_streams) {
		size_t cap = d->cap_streams ? 2 * d->cap_streams : 8;
		cuda_stream *ns = realloc(d->streams, cap * sizeof(*ns));

		if (!ns)
			return snprintf(err, n, "out of memory"), -1;
		d->streams = ns;
		d->cap_streams = cap;
	}
	/* Non-blocking: never implicitly ordered with the legacy stream. */
	e = cudaStreamCreateWithFlags(out, cudaStreamNonBlocking);
	if (e != cudaSuccess)
		return cuda_err(e, "cudaStreamCreate", err, n);
	d->streams[d->n_streams++] = (cuda_stream){id, *out};
	return 0;
}

void cuda_dev_stream_free(cuda_dev *d, uint32_t id)
{
	for (size_t i = 0; i < d->n_streams; i++) {
		if (d->streams[i].id != id)
			continue;
		/* Destroying a stream with pending work is allowed: the work
		 * completes and the resources go after. */
		cudaStreamDestroy(d->streams[i].s);
		d->streams[i] = d->streams[--d->n_streams];
		return;
	}
}

void cuda_dev_bind(const cuda_dev *d)
{
	cudaSetDevice(d->index);
}

void cuda_dev_sync_all(cuda_dev *d)
{
	for (size_t i = 0; i < d->n_streams; i++)
		cudaStreamSynchronize(d->streams[i].s);
}

/* ---- completion thread -------------------------------------------------- */

static void *waiter_main(void *arg)
{
	cuda_dev *d = arg;

	cudaSetDevice(d->index);
	pthread_mutex_lock(&d->mu);
	for (;;) {
		cuda_pending *p;
		cudaError_t e;

		while (!d->head && !d->stop)
			pthread_cond_wait(&d->cv, &d->mu);
		if (!d->head)
			break;          /* stopping, nothing left */
		p = d->head;
		d->head = p->next;
		if (!d->head)
			d->tail = NULL;
		d->busy = 1;
		pthread_mutex_unlock(&d->mu);
		/* Events complete in stream order, and callbacks of different
		 * streams may wait behind one another: fine for fences. */
		e = cudaEventSynchronize(p->ev);
		if (e != cudaSuccess)
			ipc_log(IPC_LOG_ERROR, "asynchronous work failed: %s", cudaGetErrorString(e));
		p->fn(p->arg, e == cudaSuccess);
		cudaEventDestroy(p->ev);
		free(p);
		pthread_mutex_lock(&d->mu);
		d->busy = 0;
		if (!d->head)
			pthread_cond_broadcast(&d->idle);
	}
	pthread_mutex_unlock(&d->mu);
	return NULL;
}

void cuda_dev_drain(cuda_dev *d)
{
	if (!d->waiter_on)
		return;
	pthread_mutex_lock(&d->mu);
	while (d->head || d->busy)
		pthread_cond_wait(&d->idle, &d->mu);
	pthread_mutex_unlock(&d->mu);
}

int cuda_dev_when_done(cuda_dev *d, cudaStream_t s, void (*fn)(void *, int), void *arg,
		       char *err, size_t n)
{
	cuda_pending *p = calloc(1, sizeof(*p));
	cudaError_t e;

	if (!p)
		return snprintf(err, n, "out of memory"), -1;
	e = cudaEventCreateWithFlags(&p->ev, cudaEventDisableTiming | cudaEventBlockingSync);
	if (e == cudaSuccess) {
		e = cudaEventRecord(p->ev, s);
		if (e != cudaSuccess)
			cudaEventDestroy(p->ev);
	}
	if (e != cudaSuccess) {
		free(p);
		return cuda_err(e, "cudaEventRecord", err, n);
	}
	p->fn = fn;
	p->arg = arg;
	pthread_mutex_lock(&d->mu);
	if (d->tail)
		d->tail->next = p;
	else
		d->head = p;
	d->tail = p;
	pthread_cond_signal(&d->cv);
	pthread_mutex_unlock(&d->mu);
	return 0;
}
