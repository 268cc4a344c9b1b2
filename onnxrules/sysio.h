/*
 * sysio.h: the system helpers the core, the tools and the providers
 * each used to write for themselves: a write that finishes (or says why
 * not), a monotonic clock, and whether huge pages are cheap to fault in.
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

/* Large buffers filled once at load (packed weights, weights read from a
 * file) go on 2 MiB pages while those are cheap to fault in.  Usually they
 * are, and kernels run a few percent faster on them (fewer TLB misses).
 * On a VM whose host has taken the guest's free memory back, a 2 MiB
 * page's first touch costs ~2.5x that of the 512 small pages it replaces
 * (this Xeon VM: ~5 ms against ~1.8; warm ~0.3 ms against ~0.7), and
 * the pages of a buffer are warm (just freed) or cold one by one.
 * sys_huge_advise(p, n), on a buffer about to be filled (n whole huge
 * pages, 2 MiB-aligned), advises huge pages while they are cheap and
 * faults them in one by one, timing each: at the first slow one the rest
 * of the buffer, and every buffer after it until sys_huge_reset() (each
 * load), takes small pages.  sys_huge_cheap() says what it would do now. */
void sys_huge_reset(void);
int sys_huge_cheap(void);
void sys_huge_advise(void *p, size_t n);

#endif
