/*
 * sysio.h: the two system helpers the core, the tools and the providers
 * each used to write for themselves: a write that finishes (or says why
 * not) and a monotonic clock.
 */
#ifndef ORTMK_ONNXRULES_SYSIO_H
#define ORTMK_ONNXRULES_SYSIO_H

#include <stddef.h>
#include <stdint.h>

/* Writes all n bytes of buf to fd at offset off (pwrite), or at the file
 * position when off < 0 (write), retrying short writes and EINTR.
 * 0, or -errno (-EIO when the file takes no more). */
int sys_write_all(int fd, const void *buf, size_t n, int64_t off);

/* CLOCK_MONOTONIC in nanoseconds / in milliseconds. */
uint64_t sys_now_ns(void);
double sys_now_ms(void);

#endif
