/*
 * hostile: the state of ort-ep-hostile (hostile_ep.c: the wire, the
 * handshake and the honest requests) shared with hostile_lie.c (RUN: the
 * honest answer and every lie).  A test binary only.
 */
#ifndef ORTMK_HOSTILE_H
#define ORTMK_HOSTILE_H

#include <stddef.h>
#include <stdint.h>

#include "envelope.h"
#include "ring.h"

typedef struct hostile {
	char mode[32];
	int sock;               /* the nng ipc:// connection, spoken by hand */
	int fd_sock;            /* the inherited descriptor socketpair */
	uint64_t next_seq;
	ipc_segtab segs;        /* what the core handed over, mapped */
	ipc_ring_pair ring;
	int ring_on;            /* RING_SETUP accepted (ring-* modes) */
	int on_ring;            /* the request being served came on the ring */
	unsigned runs;          /* RUNs received by this process */
} hostile;

/* Frame header of a body of body_len bytes: type 1, big-endian length
 * (hop count included), the pair1 hop count. */
void hostile_frame_head(uint8_t head[13], uint64_t body_len);
int hostile_send_raw(hostile *h, const void *buf, size_t n);
/* Stamps and sends e, as the reply to req when req is not NULL, on the
 * path req came by. */
int hostile_send(hostile *h, Ortmk__Envelope *e, const Ortmk__Envelope *req);
int hostile_reply_kind(hostile *h, const Ortmk__Envelope *req, Ortmk__Kind kind);
int hostile_reply_error(hostile *h, const Ortmk__Envelope *req, const char *msg);

int hostile_mode_known(const char *mode);
/* RUN: honest the first time, then the mode's lie.  <0 to stop serving. */
int hostile_on_run(hostile *h, const Ortmk__Envelope *req);

#endif
