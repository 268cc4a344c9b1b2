/*
 * emu_cudart: a host emulation of the parts of the CUDA runtime and cuBLAS
 * that ort-ep-cuda calls, for testing the provider on machines without a
 * GPU (tests/cuda/emu, docs/CUDA.md).  "Device" memory is host memory from
 * malloc (so AddressSanitizer, which the emulated provider is built with,
 * checks every access the provider and the emulated kernels make).
 *
 * Streams are asynchronous, as on a GPU: each has a worker thread that runs
 * the work enqueued on it (copies, memsets, kernels, GEMMs, convolutions,
 * event records) in order, after a small random delay, while the caller
 * goes on; cudaStreamSynchronize, cudaEventSynchronize and
 * cudaDeviceSynchronize wait for it, and cudaFree/cudaFreeHost wait for all
 * streams as the real ones do.  So host code that reads a result before
 * waiting, or reuses a buffer a pending copy still reads, gets wrong bytes
 * here too.  One device, reported as "ortmk CUDA emulator".
 *
 * cublasSgemmStridedBatched / cublasGemmStridedBatchedEx follow the BLAS
 * definition literally (column-major, op(A) m x k, op(B) k x n, C = alpha
 * op(A) op(B) + beta C, C not read when beta is 0), which is what checks the
 * provider's row-major-to-column-major argument mapping.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <condition_variable>
#include <deque>
#include <mutex>
#include <set>
#include <thread>

#include <cublas_v2.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include "emu.h"

/* ---- streams ---------------------------------------------------------------- */

struct emu_stream {
	std::mutex mu;
	std::condition_variable cv;
	std::deque<std::function<void()>> q;
	bool running = false, stop = false;
	unsigned seed;
	std::thread worker;
};

static std::mutex streams_mu;
static std::set<emu_stream *> streams;

static void worker_main(emu_stream *s)
{
	std::unique_lock<std::mutex> lk(s->mu);

	for (;;) {
		s->cv.wait(lk, [s] { return s->stop || !s->q.empty(); });
		if (s->q.empty())
			return;
		std::function<void()> f = std::move(s->q.front());
		s->q.pop_front();
		s->running = true;
		lk.unlock();
		/* Lag behind the host a little, unevenly. */
		usleep(rand_r(&s->seed) % 300);
		f();
		lk.lock();
		s->running = false;
		s->cv.notify_all();
	}
}

void emu_enqueue(cudaStream_t st, std::function<void()> f)
{
	emu_stream *s = (emu_stream *)st;

	if (!s) {
		f();
		return;
	}
	std::lock_guard<std::mutex> lk(s->mu);
	s->q.push_back(std::move(f));
	s->cv.notify_all();
}

static void stream_wait(emu_stream *s)
{
	std::unique_lock<std::mutex> lk(s->mu);

	s->cv.wait(lk, [s] { return s->q.empty() && !s->running; });
}

static void wait_all(void)
{
	std::lock_guard<std::mutex> lk(streams_mu);

	for (emu_stream *s : streams)
		stream_wait(s);
}

struct emu_event {
	std::mutex mu;
	std::condition_variable cv;
	bool done = true;
};

static cudaError_t ok(void)
{
	return cudaSuccess;
}

extern "C" {

cudaError_t cudaGetDeviceCount(int *count)
{
	*count = 1;
	return ok();
}

cudaError_t cudaSetDevice(int device)
{
	return device == 0 ? ok() : cudaErrorInvalidDevice;
}

cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *prop, int device)
{
	if (device != 0)
		return cudaErrorInvalidDevice;
	memset(prop, 0, sizeof(*prop));
	snprintf(prop->name, sizeof(prop->name), "ortmk CUDA emulator (host memory)");
	prop->major = 9;
	prop->minor = 0;
	prop->totalGlobalMem = (size_t)16 << 30;
	return ok();
}

cudaError_t cudaDriverGetVersion(int *v)
{
	*v = 13000;
	return ok();
}

cudaError_t cudaRuntimeGetVersion(int *v)
{
	*v = 13000;
	return ok();
}

cudaError_t cudaGetLastError(void)
{
	return ok();
}

const char *cudaGetErrorString(cudaError_t e)
{
	return e == cudaSuccess ? "no error" : "emulated CUDA error";
}

const char *cudaGetErrorName(cudaError_t e)
{
	return e == cudaSuccess ? "cudaSuccess" : "cudaErrorEmulated";
}

cudaError_t cudaMalloc(void **p, size_t n)
{
	/* An absurd size fails as it would on a GPU. */
	*p = n > ((size_t)1 << 40) ? NULL : malloc(n ? n : 1);
	return *p ? ok() : cudaErrorMemoryAllocation;
}

cudaError_t cudaFree(void *p)
{
	wait_all();
	free(p);
	return ok();
}

cudaError_t cudaHostAlloc(void **p, size_t n, unsigned int flags)
{
	(void)flags;
	*p = malloc(n ? n : 1);
	return *p ? ok() : cudaErrorMemoryAllocation;
}

cudaError_t cudaFreeHost(void *p)
{
	wait_all();
	free(p);
	return ok();
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind)
{
	(void)kind;
	memmove(dst, src, n);
	return ok();
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind,
			    cudaStream_t s)
{
	(void)kind;
	emu_enqueue(s, [=] { memmove(dst, src, n); });
	return ok();
}

cudaError_t cudaMemsetAsync(void *p, int v, size_t n, cudaStream_t s)
{
	emu_enqueue(s, [=] { memset(p, v, n); });
	return ok();
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *out, unsigned int flags)
{
	emu_stream *s = new emu_stream();

	(void)flags;
	s->seed = (unsigned)(uintptr_t)s;
	s->worker = std::thread(worker_main, s);
	{
		std::lock_guard<std::mutex> lk(streams_mu);
		streams.insert(s);
	}
	*out = (cudaStream_t)s;
	return ok();
}

/* Pending work completes first (the real one returns at once and frees
 * the stream later; waiting is the same to the caller). */
cudaError_t cudaStreamDestroy(cudaStream_t st)
{
	emu_stream *s = (emu_stream *)st;

	if (!s)
		return cudaErrorInvalidResourceHandle;
	{
		std::lock_guard<std::mutex> lk(streams_mu);
		streams.erase(s);
	}
	{
		std::lock_guard<std::mutex> lk(s->mu);
		s->stop = true;
		s->cv.notify_all();
	}
	s->worker.join();
	delete s;
	return ok();
}

cudaError_t cudaStreamSynchronize(cudaStream_t s)
{
	if (!s)
		return cudaErrorInvalidResourceHandle;
	stream_wait((emu_stream *)s);
	return ok();
}

cudaError_t cudaDeviceSynchronize(void)
{
	wait_all();
	return ok();
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned int flags)
{
	(void)flags;
	*e = (cudaEvent_t) new emu_event();
	return ok();
}

cudaError_t cudaEventRecord(cudaEvent_t ev, cudaStream_t s)
{
	emu_event *e = (emu_event *)ev;

	if (!e || !s)
		return cudaErrorInvalidResourceHandle;
	{
		std::lock_guard<std::mutex> lk(e->mu);
		e->done = false;
	}
	emu_enqueue(s, [e] {
		std::lock_guard<std::mutex> lk(e->mu);
		e->done = true;
		e->cv.notify_all();
	});
	return ok();
}

cudaError_t cudaEventSynchronize(cudaEvent_t ev)
{
	emu_event *e = (emu_event *)ev;

	if (!e)
		return cudaErrorInvalidResourceHandle;
	std::unique_lock<std::mutex> lk(e->mu);
	e->cv.wait(lk, [e] { return e->done; });
	return ok();
}

cudaError_t cudaEventDestroy(cudaEvent_t ev)
{
	emu_event *e = (emu_event *)ev;

	/* Destroying an event still pending is allowed: it goes once done. */
	cudaEventSynchronize(ev);
	delete e;
	return ok();
}

/* ---- cuBLAS --------------------------------------------------------------- */

struct emu_blas {
	cudaStream_t stream = nullptr;
};

cublasStatus_t cublasCreate(cublasHandle_t *h)
{
	*h = (cublasHandle_t) new emu_blas();
	return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy(cublasHandle_t h)
{
	delete (emu_blas *)h;
	return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetMathMode(cublasHandle_t h, cublasMath_t mode)
{
	(void)h;
	(void)mode;
	return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream(cublasHandle_t h, cudaStream_t s)
{
	((emu_blas *)h)->stream = s;
	return CUBLAS_STATUS_SUCCESS;
}

const char *cublasGetStatusString(cublasStatus_t s)
{
	return s == CUBLAS_STATUS_SUCCESS ? "CUBLAS_STATUS_SUCCESS" : "CUBLAS_STATUS_INVALID_VALUE";
}

} /* extern "C" */

static float get(const void *p, cudaDataType t, long long i)
{
	return t == CUDA_R_16F ? __half2float(((const __half *)p)[i]) : ((const float *)p)[i];
}

static void put(void *p, cudaDataType t, long long i, float v)
{
	if (t == CUDA_R_16F)
		((__half *)p)[i] = __float2half_rn(v);
	else
		((float *)p)[i] = v;
}

/* The BLAS definition, element by element, with the argument checks a real
 * cuBLAS makes (leading dimensions at least the rows they hold). */
static void gemm_run(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
		     float alpha, const void *A, cudaDataType at, int lda, long long sa,
		     const void *B, cudaDataType bt, int ldb, long long sb, float beta,
		     void *C, cudaDataType ct, int ldc, long long sc, int batch)
{
	for (int b = 0; b < batch; b++)
		for (int j = 0; j < n; j++)
			for (int i = 0; i < m; i++) {
				double acc = 0;
				long long ci = b * sc + i + (long long)j * ldc;

				for (int l = 0; l < k; l++) {
					long long ai = b * sa + (ta == CUBLAS_OP_N ? i + (long long)l * lda
										  : l + (long long)i * lda);
					long long bi = b * sb + (tb == CUBLAS_OP_N ? l + (long long)j * ldb
										  : j + (long long)l * ldb);

					acc += (double)get(A, at, ai) * get(B, bt, bi);
				}
				put(C, ct, ci, (float)(alpha * acc + (beta != 0.0f ?
								       beta * get(C, ct, ci) : 0.0)));
			}
}

/* Checks the arguments as cuBLAS does (leading dimensions at least the
 * rows they hold), then enqueues the product on the handle's stream;
 * alpha and beta are read now (host pointer mode). */
static cublasStatus_t gemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m,
			   int n, int k, float alpha, const void *A, cudaDataType at, int lda,
			   long long sa, const void *B, cudaDataType bt, int ldb, long long sb,
			   float beta, void *C, cudaDataType ct, int ldc, long long sc, int batch)
{
	int arows = ta == CUBLAS_OP_N ? m : k, brows = tb == CUBLAS_OP_N ? k : n;

	if (m < 0 || n < 0 || k < 0 || batch < 0 || lda < (arows > 1 ? arows : 1) ||
	    ldb < (brows > 1 ? brows : 1) || ldc < (m > 1 ? m : 1))
		return CUBLAS_STATUS_INVALID_VALUE;
	emu_enqueue(((emu_blas *)h)->stream, [=] {
		gemm_run(ta, tb, m, n, k, alpha, A, at, lda, sa, B, bt, ldb, sb, beta, C, ct, ldc,
			 sc, batch);
	});
	return CUBLAS_STATUS_SUCCESS;
}

extern "C" {

cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t h, cublasOperation_t transa,
					 cublasOperation_t transb, int m, int n, int k,
					 const float *alpha, const float *A, int lda,
					 long long int strideA, const float *B, int ldb,
					 long long int strideB, const float *beta, float *C, int ldc,
					 long long int strideC, int batchCount)
{
	return gemm(h, transa, transb, m, n, k, *alpha, A, CUDA_R_32F, lda, strideA, B, CUDA_R_32F,
		    ldb, strideB, *beta, C, CUDA_R_32F, ldc, strideC, batchCount);
}

cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t h, cublasOperation_t transa,
					  cublasOperation_t transb, int m, int n, int k,
					  const void *alpha, const void *A, cudaDataType Atype,
					  int lda, long long int strideA, const void *B,
					  cudaDataType Btype, int ldb, long long int strideB,
					  const void *beta, void *C, cudaDataType Ctype, int ldc,
					  long long int strideC, int batchCount,
					  cublasComputeType_t computeType, cublasGemmAlgo_t algo)
{
	(void)algo;
	/* Float scalars go with a float32 compute type. */
	if (computeType != CUBLAS_COMPUTE_32F)
		return CUBLAS_STATUS_NOT_SUPPORTED;
	return gemm(h, transa, transb, m, n, k, *(const float *)alpha, A, Atype, lda, strideA, B,
		    Btype, ldb, strideB, *(const float *)beta, C, Ctype, ldc, strideC, batchCount);
}

} /* extern "C" */
