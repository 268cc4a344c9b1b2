/*
 * channel: nng pair1 transport and the send/receive choke point (see
 * channel.h).  Receiving polls nng's receive descriptor together with the
 * peer's pidfd, so a provider that dies wakes its waiter immediately with
 * -ECHILD instead of leaving it until a deadline.
 */
#include "channel.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include <nng/protocol/pair1/pair.h>

#define SEND_TIMEOUT_MS 5000
/* After the connection closes, how long the peer's process has to exit
 * for this to count as its death rather than a broken connection (a
 * process that dies closes its sockets just before its pidfd fires). */
#define LOST_GRACE_MS 100

uint64_t ipc_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int chan_open(ipc_chan *c)
{
	int rv = nng_pair1_open(&c->sock);

	if (rv)
		return -EIO;
	c->open = 1;
	nng_socket_set_size(c->sock, NNG_OPT_RECVMAXSZ, IPC_MAX_MESSAGE);
	nng_socket_set_ms(c->sock, NNG_OPT_SENDTIMEO, SEND_TIMEOUT_MS);
	return 0;
}

void ipc_chan_init(ipc_chan *c)
{
	memset(c, 0, sizeof(*c));
	c->fd_sock = -1;
	c->peer_pidfd = -1;
	c->lost_fd = -1;
	c->next_seq = 1;
}

/* nng's thread, when a connection of the socket goes: nng drops a peer
 * that breaks the framing or sends more than NNG_OPT_RECVMAXSZ, and a
 * receive would otherwise wait for a message that cannot come.  nng_close
 * returns only after these callbacks, so the descriptor outlives them. */
static void pipe_gone(nng_pipe pipe, nng_pipe_ev ev, void *arg)
{
	uint64_t one = 1;

	(void)pipe;
	(void)ev;
	if (write((int)(intptr_t)arg, &one, sizeof(one)) < 0)
		return;  /* the counter is full: it is already readable */
}

int ipc_chan_listen(ipc_chan *c, const char *url)
{
	int rc = chan_open(c);

	if (rc)
		return rc;
	c->lost_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (c->lost_fd < 0 ||
	    nng_pipe_notify(c->sock, NNG_PIPE_EV_REM_POST, pipe_gone, (void *)(intptr_t)c->lost_fd)) {
		ipc_chan_close(c);
		return -EIO;
	}
	if (nng_listen(c->sock, url, NULL, 0)) {
		ipc_chan_close(c);
		return -EADDRINUSE;
	}
	return 0;
}

int ipc_chan_dial(ipc_chan *c, const char *url)
{
	int rc = chan_open(c), fd;

	if (rc)
		return rc;
	if (nng_dial(c->sock, url, NULL, 0)) {
		ipc_chan_close(c);
		return -ECONNREFUSED;
	}
	/* nng makes the receive descriptor on first use: make it now, before
	 * a provider's sandbox forbids creating descriptors. */
	if (nng_socket_get_int(c->sock, NNG_OPT_RECVFD, &fd)) {
		ipc_chan_close(c);
		return -EIO;
	}
	return 0;
}

void ipc_chan_close(ipc_chan *c)
{
	if (c->open)
		nng_close(c->sock);
	c->open = 0;
	if (c->lost_fd >= 0)
		close(c->lost_fd);
	c->lost_fd = -1;
}

int ipc_send(ipc_chan *c, Ortmk__Envelope *e)
{
	size_t n;
	void *buf;
	int rv;

	e->version = IPC_PROTOCOL_VERSION;
	e->seq = __atomic_fetch_add(&c->next_seq, 1, __ATOMIC_RELAXED);   /* shared with rings */
	e->has_send_ns = 1;
	e->send_ns = ipc_now_ns();
	n = ortmk__envelope__get_packed_size(e);
	if (n > IPC_MAX_MESSAGE)
		return -EMSGSIZE;
	buf = nng_alloc(n ? n : 1);
	if (!buf)
		return -ENOMEM;
	ortmk__envelope__pack(e, buf);
	if (ipc_trace_on())
		ipc_trace_message(c, IPC_TRACE_SEND, e, n);
	/* NNG_FLAG_ALLOC hands the buffer to nng, which frees it. */
	rv = nng_send(c->sock, buf, n, NNG_FLAG_ALLOC);
	if (rv) {
		nng_free(buf, n);
		return rv == NNG_ETIMEDOUT || rv == NNG_ECLOSED ? -EPIPE : rv == NNG_ENOMEM ? -ENOMEM : -EIO;
	}
	return 0;
}

static int peer_exited(const ipc_chan *c)
{
	struct pollfd p = {.fd = c->peer_pidfd, .events = POLLIN};

	return c->peer_pidfd >= 0 && poll(&p, 1, 0) == 1;
}

/* One non-blocking attempt: 1 with a message, 0 when none, <0 on error. */
static int try_recv(ipc_chan *c, nng_msg **msg)
{
	int rv = nng_recvmsg(c->sock, msg, NNG_FLAG_NONBLOCK);

	if (rv == 0)
		return 1;
	if (rv == NNG_EAGAIN)
		return 0;
	return rv == NNG_ECLOSED ? -EPIPE : rv == NNG_ENOMEM ? -ENOMEM : -EIO;
}

static int readable(int fd)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};

	return fd >= 0 && poll(&p, 1, 0) == 1;
}

/* The connection is gone: a death if the process follows within
 * LOST_GRACE_MS, else a peer nng dropped for what it sent. */
static int connection_lost(const ipc_chan *c)
{
	struct pollfd p = {.fd = c->peer_pidfd, .events = POLLIN};

	if (c->peer_pidfd >= 0 && poll(&p, 1, LOST_GRACE_MS) == 1)
		return -ECHILD;
	return -ECONNRESET;
}

static int wait_msg(ipc_chan *c, int timeout_ms, nng_msg **msg)
{
	uint64_t deadline = timeout_ms < 0 ? UINT64_MAX :
		ipc_now_ns() + (uint64_t)timeout_ms * 1000000u;
	struct pollfd p[3];
	int recvfd, rc;

	if (nng_socket_get_int(c->sock, NNG_OPT_RECVFD, &recvfd))
		return -EIO;
	for (;;) {
		int np = 1, wait_ms = -1;

		rc = try_recv(c, msg);
		if (rc)
			return rc < 0 ? rc : 0;
		if (peer_exited(c))
			return -ECHILD;
		if (readable(c->lost_fd))
			return connection_lost(c);
		if (deadline != UINT64_MAX) {
			uint64_t now = ipc_now_ns();

			if (now >= deadline)
				return -ETIMEDOUT;
			wait_ms = (int)((deadline - now + 999999) / 1000000);
		}
		p[0] = (struct pollfd){.fd = recvfd, .events = POLLIN};
		if (c->peer_pidfd >= 0)
			p[np++] = (struct pollfd){.fd = c->peer_pidfd, .events = POLLIN};
		if (c->lost_fd >= 0)
			p[np++] = (struct pollfd){.fd = c->lost_fd, .events = POLLIN};
		if (poll(p, (nfds_t)np, wait_ms) < 0 && errno != EINTR)
			return -errno;
	}
}

int ipc_recv(ipc_chan *c, int timeout_ms, Ortmk__Envelope **out,
	     char *err, size_t errlen)
{
	nng_msg *msg = NULL;
	nng_pipe pipe;
	uint64_t pid;
	int rc;

	*out = NULL;
	rc = wait_msg(c, timeout_ms, &msg);
	if (rc == -ENOMEM && err && errlen)
		snprintf(err, errlen, "out of memory receiving");
	if (rc == -ECONNRESET && err && errlen)
		snprintf(err, errlen, "nng closed it (a frame that is malformed or over %u bytes, "
			 "or a hang-up)", IPC_MAX_MESSAGE);
	if (rc) {
		if (ipc_trace_on())
			ipc_trace_recv_failed(c, rc, timeout_ms);
		return rc;
	}
	pipe = nng_msg_get_pipe(msg);
	/* nng exposes the peer pid (SO_PEERCRED) as a uint64 option. */
	if (nng_pipe_get_uint64(pipe, NNG_OPT_IPC_PEER_PID, &pid) == 0)
		c->peer_pid = (pid_t)pid;
	rc = ipc_envelope_decode(nng_msg_body(msg), nng_msg_len(msg), c->segs, out,
				 err, errlen);
	if (ipc_trace_on()) {
		if (rc == 0)
			ipc_trace_message(c, IPC_TRACE_RECV, *out, nng_msg_len(msg));
		else
			ipc_trace_invalid(c, nng_msg_len(msg), err && errlen ? err : NULL);
	}
	nng_msg_free(msg);
	return rc;
}

pid_t ipc_last_peer_pid(const ipc_chan *c)
{
	return c->peer_pid ? c->peer_pid : -1;
}
