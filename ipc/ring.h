/*
 * ring: the shared-memory fast path for the per-run hot path.  One segment
 * holds two single-producer single-consumer byte rings: requests (core to
 * provider) and replies (provider to core).  A message is the same packed
 * Envelope that nng would carry, length-prefixed.  The consumer spins
 * briefly and then sleeps on a futex doorbell the producer rings.  A ring,
 * like any queue in shared memory, knows nothing of a dead peer: every wait
 * here is bounded, and the caller checks the peer (pidfd) between slices.
 *
 * Messages too large for a ring, and everything when the fast path is off,
 * go over nng.  A provider process may serve several rings ("lanes", one
 * request outstanding on each, docs/PROTOCOL.md): runs on different lanes
 * proceed at once; a request and its reply stay on one lane, so nothing
 * on a lane is reordered.
 */
#ifndef ORTMK_RING_H
#define ORTMK_RING_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "envelope.h"

#define IPC_RING_BYTES (1u << 20)        /* data bytes per direction */
#define IPC_RING_SEGMENT (2 * (IPC_RING_BYTES + 4096))
#define IPC_RING_MAX_MESSAGE (IPC_RING_BYTES / 4)
#define IPC_RING_ARENA_BYTES (1u << 20)  /* a received message, decoded */

typedef struct ipc_ring_hdr {
	_Atomic uint64_t head;           /* bytes produced (producer writes) */
	char pad0[56];
	_Atomic uint64_t tail;           /* bytes consumed (consumer writes) */
	char pad1[56];
	_Atomic uint32_t doorbell;       /* futex word, bumped per message */
	_Atomic uint32_t sleeping;       /* consumer is (about to be) asleep */
	_Atomic uint32_t closed;         /* a side gave up on the ring */
	uint32_t magic;
	uint64_t size;                   /* data bytes, a power of two */
	char pad2[4096 - 152];
} ipc_ring_hdr;

/* One direction, as mapped by one side. */
typedef struct ipc_ring {
	ipc_ring_hdr *hdr;
	uint8_t *data;
	uint64_t size;
} ipc_ring;

/* The two directions of a ring segment at `base` (IPC_RING_SEGMENT bytes). */
typedef struct ipc_ring_pair {
	ipc_ring req, rep;
	uint64_t next_seq;               /* shared with the channel's numbering */
	uint8_t *buf;                    /* packing/receive scratch */
	size_t buf_cap;
	ProtobufCAllocator alloc;        /* unpack without malloc per message */
	uint8_t *arena;
	size_t arena_cap, arena_used;
	struct ipc_chan *trace;          /* core side: the channel the tap names; NULL in providers */
} ipc_ring_pair;

/* Core side: lays out an empty pair in a fresh segment. */
void ipc_ring_format(void *base);
/* Either side: checks the layout (peer-written memory is not trusted). */
int ipc_ring_attach(ipc_ring_pair *p, void *base, size_t seg_size);
void ipc_ring_detach(ipc_ring_pair *p);

/* Sends on `r`: 0, -EMSGSIZE when it is too big for the ring (use nng),
 * -ENOSPC when full.  Stamps like ipc_send (version, seq, time). */
int ipc_ring_send(ipc_ring_pair *p, ipc_ring *r, Ortmk__Envelope *e, uint64_t *seq);
/* How long a ring wait spins before it sleeps, unless the caller knows
 * better: long enough to catch a quick reply, short enough not to hold a
 * CPU a busy peer could use. */
#define IPC_RING_SPIN_NS 50000u

/* Waits up to timeout_ms for a message on `r`: spins up to spin_ns (0:
 * none; a caller that waits in slices spins in the first only, so its
 * wake-ups every slice do not take a CPU from the peer), then sleeps on
 * the futex.  0 and *out (valid until the next receive on this pair; do
 * not free), -ETIMEDOUT, -EPIPE if closed, -EPROTO (err says why). */
int ipc_ring_recv(ipc_ring_pair *p, ipc_ring *r, int timeout_ms, uint64_t spin_ns,
		  const ipc_segtab *segs, Ortmk__Envelope **out, char *err, size_t errlen);
void ipc_ring_close(ipc_ring *r);
/* Waits as ipc_ring_recv does, without taking the message: 0 once one is
 * there, -ETIMEDOUT, -EPIPE.  A caller that must hold a lock to decode
 * (the segment table the check reads) waits first, unlocked. */
int ipc_ring_wait(ipc_ring *r, int timeout_ms, uint64_t spin_ns);

#endif
