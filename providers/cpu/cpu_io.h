/*
 * cpu_io: converts between the CPU provider's in-memory values
 * (cpu_kernel.h: string tensors, sequences, empty optionals) and their
 * layout in shared memory (ipc/value_codec.h), for the run's bindings.
 */
#ifndef ORTMK_CPU_IO_H
#define ORTMK_CPU_IO_H

#include "cpu_kernel.h"
#include "ep_host.h"

/* 1 when a binding needs decoding (not a plain numeric tensor). */
int cpu_io_special(const ep_tensor *b);
/* Decodes a bound input into *out, allocating in the arena; the bytes are
 * checked first.  Returns 0 or an ep_status with err set. */
int cpu_io_decode(cpu_arena *a, const ep_tensor *b, cpu_tensor *out, char *err, size_t n);
/* Encoded size of a value, and the encoding into dst; the binding's kind,
 * dtype and dims are set to describe it. */
uint64_t cpu_io_size(const cpu_tensor *t);
int cpu_io_encode(const cpu_tensor *t, void *dst, uint64_t cap, ep_tensor *b);

#endif
