/*
 * channel: the one send/receive choke point between the core and a provider.
 * A channel is an nng pair1 socket over ipc:// (the control plane, always
 * available) plus an inherited AF_UNIX socketpair that carries descriptors
 * (SCM_RIGHTS), since nng cannot.  ipc_send() stamps the envelope (version,
 * sequence, send time); ipc_recv() validates every incoming message through
 * envelope.c before returning it.  Receiving also watches the peer's pidfd,
 * so the death of the process at the other end is noticed at once rather
 * than at a timeout.  When tracing is on (trace.h), both hand every message
 * to the tap; off, that costs one predicted branch.
 */
#ifndef ORTMK_CHANNEL_H
#define ORTMK_CHANNEL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <nng/nng.h>

#include "envelope.h"
#include "trace.h"

typedef struct ipc_chan {
	nng_socket sock;
	int open;
	int fd_sock;              /* socketpair end for descriptors, -1 if none */
	int peer_pidfd;           /* watched while receiving, -1 if none */
	int lost_fd;              /* listener: an eventfd nng's pipe-removal callback
	                             writes when the peer's connection goes, -1 if none */
	pid_t peer_pid;
	uint64_t next_seq;
	const ipc_segtab *segs;   /* validation view of mapped memory */
	char peer[64];            /* "ort-ep-cpu[1234]" for messages */
	ipc_trace_chan trace;     /* the tap's view (trace.h) */
} ipc_chan;

/* Zeroes the channel; descriptors -1. Call before listen/dial. */
void ipc_chan_init(ipc_chan *c);
int ipc_chan_listen(ipc_chan *c, const char *url);
int ipc_chan_dial(ipc_chan *c, const char *url);
void ipc_chan_close(ipc_chan *c);

/* Stamps version, seq (written back to e->seq), send time; packs; sends.
 * 0, or -EPIPE when the peer is gone, -ENOMEM, -EIO otherwise. */
int ipc_send(ipc_chan *c, Ortmk__Envelope *e);
/* Waits up to timeout_ms (-1 forever) for one message and validates it.
 * 0 and *out; -ETIMEDOUT; -ECHILD when the watched peer process exited;
 * -ECONNRESET when a listener's peer connection closed while the process
 * lives on (nng drops a peer that sends an oversized or malformed frame);
 * -ENOMEM; -EPROTO for a message that failed validation (err says why). */
int ipc_recv(ipc_chan *c, int timeout_ms, Ortmk__Envelope **out,
	     char *err, size_t errlen);
/* The nng pipe's peer process id of the last received message, or -1. */
pid_t ipc_last_peer_pid(const ipc_chan *c);

/* Descriptor passing over the socketpair; tag pairs a descriptor with the
 * message that announces it.  recv waits up to timeout_ms. */
int ipc_send_fd(int sock, int fd, uint64_t tag);
int ipc_recv_fd(int sock, uint64_t tag, int timeout_ms, int *fd);
/* Plain bytes over the socketpair (the spawn token). */
int ipc_send_bytes(int sock, const void *buf, size_t n);
int ipc_recv_bytes(int sock, void *buf, size_t n, int timeout_ms);

uint64_t ipc_now_ns(void);

#endif
