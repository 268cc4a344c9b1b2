/*
 * emu: what the emulated CUDA runtime (emu_cudart.cpp) offers the emulated
 * kernels and libraries: work enqueued on an emulated stream runs later,
 * in order, on that stream's worker thread.
 */
#ifndef ORTMK_EMU_H
#define ORTMK_EMU_H

#include <functional>

#include <cuda_runtime_api.h>

/* Runs f on stream s after the work enqueued on s before (s NULL: now). */
void emu_enqueue(cudaStream_t s, std::function<void()> f);

#endif
