/*
 * test_ep_device: the provider side of device memory (providers/host/
 * ep_device.c), spoken to directly: this test plays the core, spawns
 * ort-ep-cpu, and sends ALLOC, COPY, RELEASE and RUN messages a real core
 * would not send, checking each answer.
 *   - plain cpu (no device memory): HELLO says so; ALLOC, COPY and a RUN
 *     binding naming a device buffer get E_INVALID "has no device memory",
 *     and the COPY's fence is failed, never left hanging;
 *   - emulated device memory (ORTMK_EP_EMULATE_DEVICE=cpu): buffers work
 *     (ALLOC, h2d, RUN in place with a dynamic device output, d2h bit
 *     exact); duplicate ids, unknown buffers, ranges outside a buffer and
 *     released buffers get E_INVALID naming what was wrong; a COPY the
 *     validator refuses gets an ERROR with reply_to 0.
 * Usage: test_ep_device PATH/TO/ort-ep-cpu
 */
#include <errno.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "channel.h"
#include "onnx.pb-c.h"

extern char **environ;

#include "../check.h"

typedef struct peer {
	ipc_chan c;
	ipc_segtab segs;
	shm_segment seg;          /* 4 KiB of data + fences at 2048.. */
	pid_t pid;
	int device_memory;
	char dir[64];
} peer;

static int start(peer *p, const char *binary, int emulate)
{
	char url[160], envbuf[200], *argv[] = {(char *)binary, NULL};
	uint8_t token[32] = {7};
	posix_spawn_file_actions_t fa;
	Ortmk__Envelope *m = NULL, e = ORTMK__ENVELOPE__INIT;
	Ortmk__HelloAck ack = ORTMK__HELLO_ACK__INIT;
	char err[256];
	int sv[2];

	memset(p, 0, sizeof(*p));
	snprintf(p->dir, sizeof(p->dir), "/tmp/ortmk-epdev-XXXXXX");
	if (!mkdtemp(p->dir) || socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv))
		return -1;
	snprintf(url, sizeof(url), "ipc://%s/ep.sock", p->dir);
	ipc_chan_init(&p->c);
	p->c.segs = &p->segs;
	p->c.fd_sock = sv[0];
	if (ipc_chan_listen(&p->c, url))
		return -1;
	snprintf(envbuf, sizeof(envbuf), "ORTMK_EP_URL=%s", url);
	putenv(envbuf);
	setenv("ORTMK_EP_FD", "3", 1);
	if (emulate)
		setenv("ORTMK_EP_EMULATE_DEVICE", "cpu", 1);
	else
		unsetenv("ORTMK_EP_EMULATE_DEVICE");
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, sv[1], 3);
	if (posix_spawn(&p->pid, binary, &fa, NULL, argv, environ))
		return -1;
	posix_spawn_file_actions_destroy(&fa);
	unsetenv("ORTMK_EP_URL");
	close(sv[1]);
	if (ipc_send_bytes(sv[0], token, sizeof(token)) ||
	    ipc_recv(&p->c, 10000, &m, err, sizeof(err)) || m->kind != ORTMK__KIND__HELLO)
		return -1;
	p->device_memory = m->hello->has_device_memory && m->hello->device_memory;
	ack.accepted = 1;
	e.kind = ORTMK__KIND__HELLO_ACK;
	e.body_case = ORTMK__ENVELOPE__BODY_HELLO_ACK;
	e.hello_ack = &ack;
	e.has_reply_to = 1;
	e.reply_to = m->seq;
	ipc_envelope_free(m);
	if (ipc_send(&p->c, &e) || shm_segment_create("epdev", 4096, 5, &p->seg))
		return -1;
	return 0;
}

/* Sends e and returns the reply (the caller frees it). */
static Ortmk__Envelope *ask(peer *p, Ortmk__Envelope *e)
{
	Ortmk__Envelope *m = NULL;
	char err[256];

	if (ipc_send(&p->c, e) || ipc_recv(&p->c, 10000, &m, err, sizeof(err))) {
		fprintf(stderr, "FAIL: no answer to %s: %s\n", ipc_kind_name(e->kind), err);
		exit(1);
	}
	return m;
}

/* 1 when the reply is an ERROR of `code` whose message contains `text`. */
static int is_error(Ortmk__Envelope *m, int code, const char *text)
{
	int ok = m->kind == ORTMK__KIND__ERROR && (int)m->error->code == code &&
		 strstr(m->error->message, text) != NULL;

	if (!ok)
		fprintf(stderr, "  got %s%s%s\n", ipc_kind_name(m->kind),
			m->kind == ORTMK__KIND__ERROR ? ": " : "",
			m->kind == ORTMK__KIND__ERROR ? m->error->message : "");
	ipc_envelope_free(m);
	return ok;
}

static int acked(Ortmk__Envelope *m)
{
	int ok = m->kind == ORTMK__KIND__ACK;

	if (!ok)
		fprintf(stderr, "  got %s: %s\n", ipc_kind_name(m->kind),
			m->kind == ORTMK__KIND__ERROR ? m->error->message : "");
	ipc_envelope_free(m);
	return ok;
}

static void add_segment(peer *p)
{
	Ortmk__Envelope e = ORTMK__ENVELOPE__INIT;
	Ortmk__AddSegment a = ORTMK__ADD_SEGMENT__INIT;

	a.segment_id = 5;
	a.size = 4096;
	a.fd_tag = 1;
	e.kind = ORTMK__KIND__ADD_SEGMENT;
	e.body_case = ORTMK__ENVELOPE__BODY_ADD_SEGMENT;
	e.add_segment = &a;
	ipc_send_fd(p->c.fd_sock, p->seg.fd, 1);
	CHECK(acked(ask(p, &e)), "ADD_SEGMENT");
	ipc_segtab_add(&p->segs, &p->seg);
}

static Ortmk__Envelope *alloc_msg(Ortmk__Envelope *e, Ortmk__Alloc *a, uint64_t id, uint64_t n)
{
	ortmk__envelope__init(e);
	ortmk__alloc__init(a);
	a->buffer_id = id;
	a->nbytes = n;
	e->kind = ORTMK__KIND__ALLOC;
	e->body_case = ORTMK__ENVELOPE__BODY_ALLOC;
	e->alloc = a;
	return e;
}

/* One COPY op between segment 5 at soff and buffer `buf` at boff
 * (to_dev: segment -> buffer), signalling fence word 0 at 2048 with `value`. */
typedef struct copy_msg {
	Ortmk__Envelope e;
	Ortmk__Copy c;
	Ortmk__CopyOp op, *pop;
	Ortmk__Loc seg, buf;
	Ortmk__FenceRef f;
} copy_msg;

static Ortmk__Envelope *copy_msg_make(copy_msg *m, int to_dev, uint64_t soff, uint64_t buf,
				      uint64_t boff, uint64_t n, uint64_t value)
{
	ortmk__envelope__init(&m->e);
	ortmk__copy__init(&m->c);
	ortmk__copy_op__init(&m->op);
	ortmk__loc__init(&m->seg);
	ortmk__loc__init(&m->buf);
	ortmk__fence_ref__init(&m->f);
	m->seg.has_segment_id = 1;
	m->seg.segment_id = 5;
	m->seg.offset = soff;
	m->buf.has_buffer_id = 1;
	m->buf.buffer_id = buf;
	m->buf.offset = boff;
	m->op.src = to_dev ? &m->seg : &m->buf;
	m->op.dst = to_dev ? &m->buf : &m->seg;
	m->op.nbytes = n;
	m->pop = &m->op;
	m->f.segment_id = 5;
	m->f.offset = 2048;
	m->f.value = value;
	m->c.n_ops = 1;
	m->c.ops = &m->pop;
	m->c.signal = &m->f;
	m->e.kind = ORTMK__KIND__COPY;
	m->e.body_case = ORTMK__ENVELOPE__BODY_COPY;
	m->e.copy = &m->c;
	m->e.has_stream = 1;
	m->e.stream = 1;
	return &m->e;
}

static shm_fence *fence(peer *p)
{
	return (shm_fence *)((uint8_t *)p->seg.base + 2048);
}

/* LOAD_SUBGRAPH of one Identity x -> y (float), id 1. */
static void load_identity(peer *p)
{
	Onnx__NodeProto node = ONNX__NODE_PROTO__INIT, *pn = &node;
	Onnx__GraphProto g = ONNX__GRAPH_PROTO__INIT;
	Ortmk__Envelope e = ORTMK__ENVELOPE__INIT;
	Ortmk__LoadSubgraph l = ORTMK__LOAD_SUBGRAPH__INIT;
	Ortmk__ValueDesc vx = ORTMK__VALUE_DESC__INIT, vy = ORTMK__VALUE_DESC__INIT;
	Ortmk__ValueDesc *pv[2] = {&vx, &vy};
	Ortmk__OpsetId op = ORTMK__OPSET_ID__INIT, *pop = &op;
	char *in[] = {"x"}, *out[] = {"y"};
	uint8_t buf[256];
	Ortmk__Envelope *m;

	node.op_type = "Identity";
	node.n_input = 1;
	node.input = in;
	node.n_output = 1;
	node.output = out;
	g.n_node = 1;
	g.node = &pn;
	l.subgraph_id = 1;
	l.graph.len = onnx__graph_proto__pack(&g, buf);
	l.graph.data = buf;
	op.domain = "";
	op.version = 17;
	l.n_opsets = 1;
	l.opsets = &pop;
	vx.name = "x";
	vx.dtype = 1;
	vy.name = "y";
	vy.dtype = 1;
	l.n_values = 2;
	l.values = pv;
	e.kind = ORTMK__KIND__LOAD_SUBGRAPH;
	e.body_case = ORTMK__ENVELOPE__BODY_LOAD_SUBGRAPH;
	e.load_subgraph = &l;
	m = ask(p, &e);
	CHECK(m->kind == ORTMK__KIND__LOAD_DONE, "LOAD_SUBGRAPH: %s", ipc_kind_name(m->kind));
	ipc_envelope_free(m);
}

/* RUN: x = 16 floats in buffer xbuf, y dynamic into new buffer ybuf. */
static Ortmk__Envelope *run_identity(peer *p, uint64_t xbuf, uint64_t ybuf)
{
	Ortmk__Envelope e = ORTMK__ENVELOPE__INIT;
	Ortmk__Run r = ORTMK__RUN__INIT;
	Ortmk__TensorRef x = ORTMK__TENSOR_REF__INIT, y = ORTMK__TENSOR_REF__INIT;
	Ortmk__TensorRef *refs[2] = {&x, &y};
	int64_t dims[1] = {16};

	x.value = 0;
	x.dtype = 1;
	x.n_dims = 1;
	x.dims = dims;
	x.nbytes = 64;
	x.has_buffer_id = 1;
	x.buffer_id = xbuf;
	y.value = 1;
	y.dtype = 1;
	y.dynamic = y.has_dynamic = 1;
	y.has_buffer_id = 1;
	y.buffer_id = ybuf;
	r.subgraph_id = 1;
	r.run_id = 1;
	r.n_bindings = 2;
	r.bindings = refs;
	r.has_dyn_segment = r.has_dyn_offset = r.has_dyn_size = 1;
	r.dyn_segment = 5;
	r.dyn_offset = 3072;
	r.dyn_size = 1024;
	e.kind = ORTMK__KIND__RUN;
	e.body_case = ORTMK__ENVELOPE__BODY_RUN;
	e.run = &r;
	return ask(p, &e);
}

static void stop(peer *p)
{
	Ortmk__Envelope e = ORTMK__ENVELOPE__INIT;
	Ortmk__Shutdown s = ORTMK__SHUTDOWN__INIT;
	char path[128];
	int status;

	e.kind = ORTMK__KIND__SHUTDOWN;
	e.body_case = ORTMK__ENVELOPE__BODY_SHUTDOWN;
	e.shutdown = &s;
	ipc_send(&p->c, &e);
	waitpid(p->pid, &status, 0);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "provider exit status %d", status);
	ipc_chan_close(&p->c);
	close(p->c.fd_sock);
	ipc_segtab_fini(&p->segs);
	shm_segment_destroy(&p->seg);
	snprintf(path, sizeof(path), "%s/ep.sock", p->dir);
	unlink(path);
	rmdir(p->dir);
}

static void test_no_device(const char *binary)
{
	peer p;
	Ortmk__Envelope e;
	Ortmk__Alloc a;
	copy_msg cm;

	CHECK(start(&p, binary, 0) == 0, "cannot start %s", binary);
	CHECK(!p.device_memory, "cpu announced device memory");
	add_segment(&p);
	CHECK(is_error(ask(&p, alloc_msg(&e, &a, 7, 64)), ORTMK__ERROR_CODE__E_INVALID,
		       "provider 'cpu' has no device memory"), "ALLOC on cpu");
	shm_fence_init(fence(&p), 0);
	CHECK(is_error(ask(&p, copy_msg_make(&cm, 1, 0, 7, 0, 64, 1)), ORTMK__ERROR_CODE__E_INVALID,
		       "no device memory"), "COPY on cpu");
	CHECK(shm_fence_read(fence(&p)) & SHM_FENCE_FAILED, "a refused COPY's fence is failed");
	load_identity(&p);
	CHECK(is_error(run_identity(&p, 7, 9), ORTMK__ERROR_CODE__E_INVALID, "no device memory"),
	      "RUN binding a device buffer on cpu");
	stop(&p);
}

static void test_emulated(const char *binary)
{
	peer p;
	Ortmk__Envelope e, *m;
	Ortmk__Alloc a;
	copy_msg cm;
	uint8_t *d;

	CHECK(start(&p, binary, 1) == 0, "cannot start %s", binary);
	CHECK(p.device_memory, "emulated cpu did not announce device memory");
	add_segment(&p);
	d = p.seg.base;
	for (int i = 0; i < 64; i++)
		d[i] = (uint8_t)(i * 37 + 1);
	shm_fence_init(fence(&p), 0);
	CHECK(acked(ask(&p, alloc_msg(&e, &a, 7, 64))), "ALLOC");
	CHECK(is_error(ask(&p, alloc_msg(&e, &a, 7, 64)), ORTMK__ERROR_CODE__E_INVALID,
		       "buffer 7 already exists"), "duplicate ALLOC");
	CHECK(acked(ask(&p, copy_msg_make(&cm, 1, 0, 7, 0, 64, 1))), "COPY h2d");
	CHECK(shm_fence_wait(fence(&p), 1, shm_now_ns() + 1000000000u) == 0, "fence 1");
	CHECK(is_error(ask(&p, copy_msg_make(&cm, 0, 128, 8, 0, 64, 2)), ORTMK__ERROR_CODE__E_INVALID,
		       "unknown device buffer 8"), "COPY from an unknown buffer");
	CHECK(shm_fence_read(fence(&p)) & SHM_FENCE_FAILED, "failed copy's fence");
	shm_fence_init(fence(&p), 1);
	CHECK(is_error(ask(&p, copy_msg_make(&cm, 0, 128, 7, 32, 64, 2)), ORTMK__ERROR_CODE__E_INVALID,
		       "outside buffer 7 of 64 bytes"), "COPY past the end of a buffer");
	shm_fence_init(fence(&p), 1);
	/* In place: RUN reads buffer 7, its dynamic output lands in new buffer 9. */
	load_identity(&p);
	m = run_identity(&p, 7, 9);
	CHECK(m->kind == ORTMK__KIND__RESULT && m->result->n_outputs == 1 &&
	      m->result->outputs[0]->has_buffer_id && m->result->outputs[0]->buffer_id == 9 &&
	      m->result->outputs[0]->nbytes == 64, "RESULT of a dynamic device output");
	ipc_envelope_free(m);
	CHECK(is_error(run_identity(&p, 7, 9), ORTMK__ERROR_CODE__E_INVALID,
		       "dynamic output into existing buffer 9"), "dynamic output into a live buffer");
	CHECK(is_error(run_identity(&p, 11, 12), ORTMK__ERROR_CODE__E_INVALID,
		       "unknown device buffer 11"), "RUN on an unknown buffer");
	CHECK(acked(ask(&p, copy_msg_make(&cm, 0, 256, 9, 0, 64, 2))), "COPY d2h");
	CHECK(shm_fence_wait(fence(&p), 2, shm_now_ns() + 1000000000u) == 0, "fence 2");
	CHECK(memcmp(d, d + 256, 64) == 0, "host -> buffer -> RUN -> buffer -> host not bit-exact");
	{
		Ortmk__Envelope r = ORTMK__ENVELOPE__INIT;
		Ortmk__Release rel = ORTMK__RELEASE__INIT;

		rel.has_buffer_id = 1;
		rel.buffer_id = 7;
		r.kind = ORTMK__KIND__RELEASE;
		r.body_case = ORTMK__ENVELOPE__BODY_RELEASE;
		r.release = &rel;
		CHECK(acked(ask(&p, &r)), "RELEASE buffer");
	}
	CHECK(is_error(ask(&p, copy_msg_make(&cm, 1, 0, 7, 0, 64, 3)), ORTMK__ERROR_CODE__E_INVALID,
		       "unknown device buffer 7"), "COPY into a released buffer");
	/* Refused by the provider's validator: it cannot tell which request
	 * that was, so the ERROR has reply_to 0. */
	copy_msg_make(&cm, 1, 4090, 9, 0, 64, 3);
	m = ask(&p, &cm.e);
	CHECK(m->kind == ORTMK__KIND__ERROR && m->reply_to == 0 &&
	      strstr(m->error->message, "outside segment 5"), "ill-ranged COPY: %s",
	      m->kind == ORTMK__KIND__ERROR ? m->error->message : ipc_kind_name(m->kind));
	ipc_envelope_free(m);
	stop(&p);
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: test_ep_device PATH/TO/ort-ep-cpu\n");
		return 2;
	}
	test_no_device(argv[1]);
	test_emulated(argv[1]);
	if (failures)
		fprintf(stderr, "%d check(s) failed\n", failures);
	else
		printf("all provider-side device checks passed\n");
	return failures ? 1 : 0;
}
