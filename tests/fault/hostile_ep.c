/*
 * ort-ep-hostile: a provider process for tests that lies to the core (see
 * test_hostile.c).  It speaks the real protocol, but on its own: the nng
 * ipc:// wire (the 8-byte SP header, then frames of a type byte, a 64-bit
 * big-endian length and the pair1 hop count before each Envelope) is
 * written by hand on a plain AF_UNIX stream socket, so it can also send
 * what no nng peer would: an oversized frame header, half a frame, bytes
 * that are no frame at all.  Envelopes are packed with the ipc/ schema.
 *
 * It serves exactly the hostile test model (gen_hostile_model.py: one
 * NonZero of a float[4] input, whose output is dynamic), and computes it
 * honestly on the first RUN each process receives.  From the second RUN on
 * it answers in the way ORTMK_TEST_HOSTILE names (hostile_lie.c lists the
 * modes); modes named ring-* accept the shared-memory fast path and lie
 * there.  The core is expected to refuse every lie, kill this process and
 * start a new one, whose first RUN is honest again.
 */
#include "hostile.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include "channel.h"

/* ---- the wire ---------------------------------------------------------- */

static int write_all(int fd, const void *buf, size_t n)
{
	const uint8_t *p = buf;

	while (n) {
		ssize_t w = write(fd, p, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -EPIPE;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

static int read_all(int fd, void *buf, size_t n)
{
	uint8_t *p = buf;

	while (n) {
		ssize_t r = read(fd, p, n);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -EPIPE;
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

void hostile_frame_head(uint8_t head[13], uint64_t body_len)
{
	head[0] = 1;  /* nng's message type */
	for (int i = 0; i < 8; i++)
		head[1 + i] = (uint8_t)((body_len + 4) >> (56 - 8 * i));
	head[9] = head[10] = head[11] = 0;
	head[12] = 1; /* pair1 hop count */
}

int hostile_send_raw(hostile *h, const void *buf, size_t n)
{
	uint8_t head[13];

	hostile_frame_head(head, n);
	if (write_all(h->sock, head, sizeof(head)))
		return -EPIPE;
	return write_all(h->sock, buf, n);
}

/* Stamps, packs and sends e as a reply to req (NULL: unsolicited). */
int hostile_send(hostile *h, Ortmk__Envelope *e, const Ortmk__Envelope *req)
{
	size_t n;
	uint8_t *buf;
	int rc;

	e->version = IPC_PROTOCOL_VERSION;
	e->seq = h->next_seq++;
	if (req) {
		e->has_reply_to = 1;
		e->reply_to = req->seq;
	}
	if (h->on_ring)
		return ipc_ring_send(&h->ring, &h->ring.rep, e, &h->next_seq);
	n = ortmk__envelope__get_packed_size(e);
	buf = malloc(n ? n : 1);
	if (!buf)
		return -ENOMEM;
	ortmk__envelope__pack(e, buf);
	rc = hostile_send_raw(h, buf, n);
	free(buf);
	return rc;
}

/* One frame from the core, decoded and checked like ep_host would. */
static int recv_env(hostile *h, Ortmk__Envelope **out)
{
	uint8_t head[9];
	uint64_t len = 0;
	uint8_t *buf;
	char err[256];
	int rc;

	if (read_all(h->sock, head, sizeof(head)) || head[0] != 1)
		return -EPIPE;
	for (int i = 0; i < 8; i++)
		len = len << 8 | head[1 + i];
	if (len < 4 || len > IPC_MAX_MESSAGE)
		return -EPROTO;
	buf = malloc(len);
	if (!buf)
		return -ENOMEM;
	rc = read_all(h->sock, buf, len);
	if (rc == 0)
		rc = ipc_envelope_decode(buf + 4, len - 4, &h->segs, out, err, sizeof(err));
	if (rc == -EPROTO)
		fprintf(stderr, "ort-ep-hostile: bad request: %s\n", err);
	free(buf);
	return rc;
}

/* Dials the core's socket and exchanges the SP headers (pair1 is 0x11). */
static int dial(hostile *h, const char *url)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	const uint8_t mine[8] = {0, 'S', 'P', 0, 0x00, 0x11, 0, 0};
	uint8_t theirs[8];

	if (strncmp(url, "ipc://", 6) || strlen(url + 6) >= sizeof(a.sun_path))
		return -EINVAL;
	strcpy(a.sun_path, url + 6);
	h->sock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (h->sock < 0 || connect(h->sock, (struct sockaddr *)&a, sizeof(a)))
		return -errno;
	if (write_all(h->sock, mine, sizeof(mine)) || read_all(h->sock, theirs, sizeof(theirs)))
		return -EPIPE;
	return theirs[1] == 'S' && theirs[2] == 'P' ? 0 : -EPROTO;
}

static int handshake(hostile *h)
{
	Ortmk__Envelope e = ORTMK__ENVELOPE__INIT, *ack = NULL;
	Ortmk__Hello body = ORTMK__HELLO__INIT;
	const char *url = getenv("ORTMK_EP_URL"), *fds = getenv("ORTMK_EP_FD");
	uint8_t token[32];
	int rc;

	if (!url || !fds)
		return -EINVAL;
	h->fd_sock = atoi(fds);
	rc = ipc_recv_bytes(h->fd_sock, token, sizeof(token), 10000);
	if (rc == 0)
		rc = dial(h, url);
	if (rc)
		return rc;
	body.protocol_version = IPC_PROTOCOL_VERSION;
	body.token = (ProtobufCBinaryData){sizeof(token), token};
	body.pid = (uint32_t)getpid();
	body.provider = "hostile";
	body.detail = h->mode;
	e.kind = ORTMK__KIND__HELLO;
	e.body_case = ORTMK__ENVELOPE__BODY_HELLO;
	e.hello = &body;
	rc = hostile_send(h, &e, NULL);
	if (rc == 0)
		rc = recv_env(h, &ack);
	if (rc == 0 && (ack->kind != ORTMK__KIND__HELLO_ACK || !ack->hello_ack->accepted))
		rc = -EACCES;
	ipc_envelope_free(ack);
	return rc;
}

/* ---- the honest part --------------------------------------------------- */

int hostile_reply_kind(hostile *h, const Ortmk__Envelope *req, Ortmk__Kind kind)
{
	Ortmk__Envelope e = ORTMK__ENVELOPE__INIT;
	Ortmk__Ack ack = ORTMK__ACK__INIT;
	Ortmk__LoadDone done = ORTMK__LOAD_DONE__INIT;

	e.kind = kind;
	if (kind == ORTMK__KIND__LOAD_DONE) {
		done.subgraph_id = req->load_subgraph->subgraph_id;
		e.body_case = ORTMK__ENVELOPE__BODY_LOAD_DONE;
		e.load_done = &done;
	} else {
		e.body_case = ORTMK__ENVELOPE__BODY_ACK;
		e.ack = &ack;
	}
	return hostile_send(h, &e, req);
}

int hostile_reply_error(hostile *h, const Ortmk__Envelope *req, const char *msg)
{
	Ortmk__Envelope e = ORTMK__ENVELOPE__INIT;
	Ortmk__Error body = ORTMK__ERROR__INIT;

	body.code = ORTMK__ERROR_CODE__E_INVALID;
	body.message = (char *)msg;
	e.kind = ORTMK__KIND__ERROR;
	e.body_case = ORTMK__ENVELOPE__BODY_ERROR;
	e.error = &body;
	return hostile_send(h, &e, req);
}

static int on_capability(hostile *h, const Ortmk__Envelope *req)
{
	Ortmk__Envelope e = ORTMK__ENVELOPE__INIT;
	Ortmk__CapabilityReply body = ORTMK__CAPABILITY_REPLY__INIT;
	size_t n = req->capability_query->n_nodes;
	protobuf_c_boolean *sup = calloc(n + 1, sizeof(*sup));
	char **why = calloc(n + 1, sizeof(*why));
	int rc = -ENOMEM;

	if (sup && why) {
		for (size_t i = 0; i < n; i++) {
			sup[i] = 1;
			why[i] = "";
		}
		body.n_supported = body.n_reason = n;
		body.supported = sup;
		body.reason = why;
		e.kind = ORTMK__KIND__CAPABILITY_REPLY;
		e.body_case = ORTMK__ENVELOPE__BODY_CAPABILITY_REPLY;
		e.capability_reply = &body;
		rc = hostile_send(h, &e, req);
	}
	free(sup);
	free(why);
	return rc;
}

static int on_add_segment(hostile *h, const Ortmk__Envelope *req)
{
	const Ortmk__AddSegment *a = req->add_segment;
	shm_segment s = {.fd = -1};
	int fd, rc = ipc_recv_fd(h->fd_sock, a->fd_tag, 5000, &fd);

	if (rc == 0)
		rc = shm_segment_map_fd_take(fd, a->size, a->segment_id, &s);
	if (rc == 0)
		rc = ipc_segtab_add(&h->segs, &s);
	if (rc) {
		shm_segment_destroy(&s);
		return hostile_reply_error(h, req, "cannot map the segment");
	}
	return hostile_reply_kind(h, req, ORTMK__KIND__ACK);
}

static int on_add_file(hostile *h, const Ortmk__Envelope *req)
{
	int fd;

	if (ipc_recv_fd(h->fd_sock, req->add_file->fd_tag, 5000, &fd) == 0)
		close(fd);
	return hostile_reply_kind(h, req, ORTMK__KIND__ACK);
}

static int on_release(hostile *h, const Ortmk__Envelope *req)
{
	shm_segment s;

	if (req->release->has_segment_id && ipc_segtab_remove(&h->segs, req->release->segment_id, &s))
		shm_segment_destroy(&s);
	return hostile_reply_kind(h, req, ORTMK__KIND__ACK);
}

/* The fast path only in ring-* modes: elsewhere RUN stays on the wire. */
static int on_ring_setup(hostile *h, const Ortmk__Envelope *req)
{
	const shm_segment *s = ipc_segtab_find(&h->segs, req->ring_setup->segment_id);

	if (strncmp(h->mode, "ring-", 5) || !s || ipc_ring_attach(&h->ring, s->base, s->size))
		return hostile_reply_error(h, req, "no fast path here");
	h->ring_on = 1;
	return hostile_reply_kind(h, req, ORTMK__KIND__ACK);
}

/* Handles one request; 1 to stop. */
static int dispatch(hostile *h, Ortmk__Envelope *req)
{
	switch (req->kind) {
	case ORTMK__KIND__ADD_SEGMENT: return on_add_segment(h, req) < 0;
	case ORTMK__KIND__ADD_FILE: return on_add_file(h, req) < 0;
	case ORTMK__KIND__CAPABILITY_QUERY: return on_capability(h, req) < 0;
	case ORTMK__KIND__LOAD_SUBGRAPH: return hostile_reply_kind(h, req, ORTMK__KIND__LOAD_DONE) < 0;
	case ORTMK__KIND__RELEASE: return on_release(h, req) < 0;
	case ORTMK__KIND__RING_SETUP: return on_ring_setup(h, req) < 0;
	case ORTMK__KIND__RUN: return hostile_on_run(h, req) < 0;
	case ORTMK__KIND__SHUTDOWN: return 1;
	default: return hostile_reply_error(h, req, "not served by ort-ep-hostile") < 0;
	}
}

/* Waits for the next request on the wire or (when on) the ring; 1 when
 * one arrived, 0 when none yet, <0 when the core is gone. */
static int next_request(hostile *h, Ortmk__Envelope **req)
{
	struct pollfd p = {.fd = h->sock, .events = POLLIN};
	char err[256];
	int rc;

	*req = NULL;
	h->on_ring = 0;
	if (h->ring_on) {
		rc = ipc_ring_recv(&h->ring, &h->ring.req, 0, 0, &h->segs, req, err, sizeof(err));
		if (rc == 0) {
			h->on_ring = 1;
			return 1;
		}
	}
	if (poll(&p, 1, h->ring_on ? 1 : 1000) <= 0)
		return getppid() == 1 ? -EPIPE : 0;
	rc = recv_env(h, req);
	return rc == 0 ? 1 : rc;
}

/* ORTMK_TEST_HOSTILE is the mode, or the path of a file holding it (read
 * once, at start). */
static void read_mode(hostile *h)
{
	const char *mode = getenv("ORTMK_TEST_HOSTILE");
	FILE *f = mode && mode[0] == '/' ? fopen(mode, "r") : NULL;

	snprintf(h->mode, sizeof(h->mode), "%s", mode && !f ? mode : "none");
	if (f) {
		if (!fgets(h->mode, sizeof(h->mode), f))
			h->mode[0] = 0;
		h->mode[strcspn(h->mode, "\n")] = 0;
		fclose(f);
	}
}

int main(void)
{
	hostile h = {.sock = -1, .fd_sock = -1, .next_seq = 1};
	int rc;

	signal(SIGPIPE, SIG_IGN);
	read_mode(&h);
	if (!hostile_mode_known(h.mode)) {
		fprintf(stderr, "ort-ep-hostile: unknown mode '%s'\n", h.mode);
		return 2;
	}
	rc = handshake(&h);
	if (rc) {
		fprintf(stderr, "ort-ep-hostile: handshake failed: %s\n", strerror(-rc));
		return 1;
	}
	for (;;) {
		Ortmk__Envelope *req;
		int stop;

		rc = next_request(&h, &req);
		if (rc < 0)
			break;
		if (rc == 0)
			continue;
		stop = dispatch(&h, req);
		if (!h.on_ring)
			ipc_envelope_free(req);
		if (stop)
			break;
	}
	for (size_t i = 0; i < h.segs.n; i++)
		shm_segment_destroy(&h.segs.segs[i]);
	ipc_segtab_fini(&h.segs);
	if (h.ring_on)
		ipc_ring_detach(&h.ring);
	return 0;
}
