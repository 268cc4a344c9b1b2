/*
 * ring: shared-memory SPSC rings with a futex doorbell (see ring.h).
 *
 * Layout of a message: u32 length, then the packed Envelope, padded to 8
 * bytes.  A length of RING_WRAP means "continue at offset 0": messages are
 * never split, so the consumer can unpack in place.  head and tail count
 * bytes forever (no wrap of the counters); position = counter & (size-1).
 * Everything read from the ring is bounds-checked: the other process is
 * not trusted.
 */
#include "ring.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "channel.h"
#include "trace.h"

#define RING_MAGIC 0x6f72696eu   /* "orin" */
#define RING_WRAP 0xffffffffu
#define PAUSE_NS 3000            /* the first part of a spin: no yielding */

static inline void relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#endif
}

static void *arena_alloc(void *ctx, size_t n)
{
	ipc_ring_pair *p = ctx;
	size_t need = (n + 15) & ~(size_t)15;

	if (p->arena_used + need > p->arena_cap)
		return NULL;
	p->arena_used += need;
	return p->arena + p->arena_used - need;
}

static void arena_free(void *ctx, void *ptr)
{
	(void)ctx;
	(void)ptr;          /* released all at once, per message */
}

void ipc_ring_format(void *base)
{
	for (int i = 0; i < 2; i++) {
		ipc_ring_hdr *h = (ipc_ring_hdr *)((uint8_t *)base + (size_t)i * (IPC_RING_BYTES + 4096));

		memset(h, 0, sizeof(*h));
		h->magic = RING_MAGIC;
		h->size = IPC_RING_BYTES;
	}
}

int ipc_ring_attach(ipc_ring_pair *p, void *base, size_t seg_size)
{
	ipc_ring *rings[2] = {&p->req, &p->rep};

	memset(p, 0, sizeof(*p));
	if (seg_size < IPC_RING_SEGMENT)
		return -EINVAL;
	for (int i = 0; i < 2; i++) {
		ipc_ring_hdr *h = (ipc_ring_hdr *)((uint8_t *)base + (size_t)i * (IPC_RING_BYTES + 4096));

		if (h->magic != RING_MAGIC || h->size != IPC_RING_BYTES)
			return -EINVAL;
		rings[i]->hdr = h;
		rings[i]->data = (uint8_t *)h + 4096;
		rings[i]->size = IPC_RING_BYTES;
	}
	p->buf_cap = IPC_RING_MAX_MESSAGE;
	p->buf = malloc(p->buf_cap);
	p->arena_cap = IPC_RING_ARENA_BYTES;
	p->arena = malloc(p->arena_cap);
	if (!p->buf || !p->arena) {
		ipc_ring_detach(p);
		return -ENOMEM;
	}
	p->alloc = (ProtobufCAllocator){arena_alloc, arena_free, p};
	p->next_seq = 1;
	return 0;
}

void ipc_ring_detach(ipc_ring_pair *p)
{
	free(p->buf);
	free(p->arena);
	p->buf = p->arena = NULL;
}

void ipc_ring_close(ipc_ring *r)
{
	if (!r->hdr)
		return;
	atomic_store_explicit(&r->hdr->closed, 1, memory_order_release);
	atomic_fetch_add_explicit(&r->hdr->doorbell, 1, memory_order_release);
	syscall(SYS_futex, (uint32_t *)&r->hdr->doorbell, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

static void ring_put(ipc_ring *r, uint64_t pos, const void *src, size_t n)
{
	memcpy(r->data + (pos & (r->size - 1)), src, n);
}

int ipc_ring_send(ipc_ring_pair *p, ipc_ring *r, Ortmk__Envelope *e, uint64_t *seq)
{
	ipc_ring_hdr *h = r->hdr;
	uint64_t head, tail, at, need;
	uint32_t len, wrap = RING_WRAP;
	size_t n;

	e->version = IPC_PROTOCOL_VERSION;
	/* Several rings of one peer (and its nng channel) share a numbering,
	 * each sending from its own thread. */
	e->seq = __atomic_fetch_add(seq ? seq : &p->next_seq, 1, __ATOMIC_RELAXED);
	e->has_send_ns = 1;
	e->send_ns = ipc_now_ns();
	n = ortmk__envelope__get_packed_size(e);
	if (n > IPC_RING_MAX_MESSAGE)
		return -EMSGSIZE;
	len = (uint32_t)n;
	need = (4 + n + 7) & ~(uint64_t)7;
	head = atomic_load_explicit(&h->head, memory_order_relaxed);
	tail = atomic_load_explicit(&h->tail, memory_order_acquire);
	at = head & (r->size - 1);
	/* A message never straddles the end: skip to 0 with a marker. */
	if (at + need > r->size)
		need += r->size - at;
	if (head + need - tail > r->size)
		return -ENOSPC;
	if (at + ((4 + n + 7) & ~(uint64_t)7) > r->size) {
		ring_put(r, head, &wrap, 4);
		head += r->size - at;
	}
	ring_put(r, head, &len, 4);
	ortmk__envelope__pack(e, r->data + ((head + 4) & (r->size - 1)));
	if (ipc_trace_on() && p->trace)
		ipc_trace_ring_message(p->trace, IPC_TRACE_SEND, e, n);
	atomic_store_explicit(&h->head, head + ((4 + n + 7) & ~(uint64_t)7), memory_order_release);
	atomic_fetch_add_explicit(&h->doorbell, 1, memory_order_release);
	if (atomic_load_explicit(&h->sleeping, memory_order_acquire))
		syscall(SYS_futex, (uint32_t *)&h->doorbell, FUTEX_WAKE, 1, NULL, NULL, 0);
	return 0;
}

/* Waits until head moves past tail (see ring.h).  The wait
 * spins PAUSE_NS, then spins yielding the CPU until spin_ns, then sleeps
 * on the doorbell.  The yield matters when the waiter shares two CPUs
 * with a provider computing on two threads (the application waiting for
 * a RUN): a plain spin takes a CPU from the provider's pool (mlp1 at 2
 * threads: 0.24 -> 0.18 ms median, see docs/PERFORMANCE.md), while
 * sched_yield returns at once when nothing else wants the CPU, so an idle
 * machine still answers in microseconds. */
int ipc_ring_wait(ipc_ring *r, int timeout_ms, uint64_t spin_ns)
{
	ipc_ring_hdr *h = r->hdr;
	uint64_t tail = atomic_load_explicit(&h->tail, memory_order_relaxed);
	uint64_t start = ipc_now_ns(), deadline = timeout_ms < 0 ? UINT64_MAX :
		start + (uint64_t)timeout_ms * 1000000u;

	for (;;) {
		uint32_t bell = atomic_load_explicit(&h->doorbell, memory_order_acquire);
		uint64_t now;

		if (atomic_load_explicit(&h->head, memory_order_acquire) != tail)
			return 0;
		if (atomic_load_explicit(&h->closed, memory_order_acquire))
			return -EPIPE;
		now = ipc_now_ns();
		if (now >= deadline)
			return -ETIMEDOUT;
		if (now - start < spin_ns) {
			if (now - start < PAUSE_NS)
				relax();
			else
				sched_yield();
			continue;
		}
		/* Sleep on the doorbell; the producer wakes us when `sleeping`. */
		atomic_store_explicit(&h->sleeping, 1, memory_order_seq_cst);
		if (atomic_load_explicit(&h->head, memory_order_seq_cst) == tail) {
			uint64_t left = deadline - now;
			struct timespec ts = {(time_t)(left / 1000000000u), (long)(left % 1000000000u)};

			syscall(SYS_futex, (uint32_t *)&h->doorbell, FUTEX_WAIT, bell,
				deadline == UINT64_MAX ? NULL : &ts, NULL, 0);
		}
		atomic_store_explicit(&h->sleeping, 0, memory_order_relaxed);
	}
}

int ipc_ring_recv(ipc_ring_pair *p, ipc_ring *r, int timeout_ms, uint64_t spin_ns,
		  const ipc_segtab *segs, Ortmk__Envelope **out, char *err, size_t errlen)
{
	ipc_ring_hdr *h = r->hdr;
	uint64_t tail, head, at;
	uint32_t len;
	int rc;

	*out = NULL;
	rc = ipc_ring_wait(r, timeout_ms, spin_ns);
	if (rc)
		return rc;
	tail = atomic_load_explicit(&h->tail, memory_order_relaxed);
	head = atomic_load_explicit(&h->head, memory_order_acquire);
	at = tail & (r->size - 1);
	memcpy(&len, r->data + at, 4);
	if (len == RING_WRAP) {
		tail += r->size - at;
		at = 0;
		memcpy(&len, r->data, 4);
	}
	/* The peer wrote head and len: check both before using them. */
	if (head - tail > r->size || len == 0 || len > IPC_RING_MAX_MESSAGE ||
	    4 + (uint64_t)len > head - tail || at + 4 + len > r->size) {
		snprintf(err, errlen, "ring: corrupt message header (length %u)", len);
		atomic_store_explicit(&h->tail, head, memory_order_release);
		return -EPROTO;
	}
	/* Copy out first so the peer cannot change bytes while we decode. */
	memcpy(p->buf, r->data + at + 4, len);
	atomic_store_explicit(&h->tail, tail + ((4 + (uint64_t)len + 7) & ~(uint64_t)7),
			      memory_order_release);
	p->arena_used = 0;
	*out = ortmk__envelope__unpack(&p->alloc, len, p->buf);
	if (!*out) {
		snprintf(err, errlen, "ring: undecodable message of %u bytes", len);
		return -EPROTO;
	}
	rc = ipc_envelope_check(*out, segs, err, errlen);
	if (ipc_trace_on() && p->trace) {
		if (rc)
			ipc_trace_invalid(p->trace, len, err);
		else
			ipc_trace_ring_message(p->trace, IPC_TRACE_RECV, *out, len);
	}
	if (rc)
		*out = NULL;
	return rc;
}
