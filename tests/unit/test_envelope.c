/*
 * test_envelope: the validator at ipc/'s choke point rejects every
 * malformed message (truncated, garbage, wrong version, unknown kind, body
 * not matching kind, tensor references outside their segment, bad sizes),
 * and the channel and descriptor passing work between two processes.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "channel.h"
#include "envelope.h"

static uint8_t *pack(Ortmk__Envelope *e, size_t *n)
{
	uint8_t *buf;

	*n = ortmk__envelope__get_packed_size(e);
	buf = malloc(*n + 1);
	assert_non_null(buf);
	ortmk__envelope__pack(e, buf);
	return buf;
}

static int decode(Ortmk__Envelope *e, const ipc_segtab *segs, char *err, size_t n)
{
	size_t len;
	uint8_t *buf = pack(e, &len);
	Ortmk__Envelope *out = NULL;
	int rc = ipc_envelope_decode(buf, len, segs, &out, err, n);

	ipc_envelope_free(out);
	free(buf);
	return rc;
}

/* A RUN with one float32 [2,3] binding at `off` of segment `seg`. */
typedef struct run_msg {
	Ortmk__Envelope e;
	Ortmk__Run run;
	Ortmk__TensorRef ref;
	Ortmk__TensorRef *refs[1];
	int64_t dims[2];
} run_msg;

static void make_run(run_msg *m, uint64_t seg, uint64_t off)
{
	ortmk__envelope__init(&m->e);
	ortmk__run__init(&m->run);
	ortmk__tensor_ref__init(&m->ref);
	m->dims[0] = 2;
	m->dims[1] = 3;
	m->ref.value = 0;
	m->ref.dtype = 1;
	m->ref.n_dims = 2;
	m->ref.dims = m->dims;
	m->ref.segment_id = seg;
	m->ref.offset = off;
	m->ref.nbytes = 24;
	m->refs[0] = &m->ref;
	m->run.subgraph_id = 1;
	m->run.run_id = 7;
	m->run.n_bindings = 1;
	m->run.bindings = m->refs;
	m->e.version = IPC_PROTOCOL_VERSION;
	m->e.seq = 1;
	m->e.kind = ORTMK__KIND__RUN;
	m->e.body_case = ORTMK__ENVELOPE__BODY_RUN;
	m->e.run = &m->run;
}

static shm_segment seg;
static ipc_segtab segs;

static int setup(void **state)
{
	(void)state;
	memset(&segs, 0, sizeof(segs));
	if (shm_segment_create("test", 4096, 5, &seg))
		return -1;
	return ipc_segtab_add(&segs, &seg);
}

static int teardown(void **state)
{
	(void)state;
	ipc_segtab_fini(&segs);
	shm_segment_destroy(&seg);
	return 0;
}

static void test_valid_run(void **state)
{
	run_msg m;
	char err[256] = "";

	(void)state;
	make_run(&m, 5, 64);
	assert_int_equal(decode(&m.e, &segs, err, sizeof(err)), 0);
}

static void test_offset_outside_segment(void **state)
{
	run_msg m;
	char err[256] = "";

	(void)state;
	make_run(&m, 5, 4096 - 8);
	assert_int_equal(decode(&m.e, &segs, err, sizeof(err)), -EPROTO);
	assert_non_null(strstr(err, "outside segment 5"));
	make_run(&m, 5, UINT64_MAX - 4);      /* offset + nbytes overflows */
	assert_int_equal(decode(&m.e, &segs, err, sizeof(err)), -EPROTO);
	make_run(&m, 9, 0);                   /* a segment nobody mapped */
	assert_int_equal(decode(&m.e, &segs, err, sizeof(err)), -EPROTO);
	assert_non_null(strstr(err, "unknown segment 9"));
}

static void test_nbytes_mismatch(void **state)
{
	run_msg m;
	char err[256] = "";

	(void)state;
	make_run(&m, 5, 0);
	m.ref.nbytes = 20;
	assert_int_equal(decode(&m.e, &segs, err, sizeof(err)), -EPROTO);
	assert_non_null(strstr(err, "needs 24"));
	make_run(&m, 5, 0);
	m.dims[1] = -3;
	assert_int_equal(decode(&m.e, &segs, err, sizeof(err)), -EPROTO);
	make_run(&m, 5, 0);
	m.ref.n_dims = 17;
	assert_int_equal(decode(&m.e, &segs, err, sizeof(err)), -EPROTO);
}

static void test_wrong_version(void **state)
{
	run_msg m;
	char err[256] = "";

	(void)state;
	make_run(&m, 5, 0);
	m.e.version = 99;
	assert_int_equal(decode(&m.e, &segs, err, sizeof(err)), -EPROTO);
	assert_non_null(strstr(err, "protocol version 99"));
}

static void test_unknown_kind_and_mismatched_body(void **state)
{
	run_msg m;
	char err[256] = "";

	(void)state;
	make_run(&m, 5, 0);
	m.e.kind = 77;
	assert_int_equal(decode(&m.e, &segs, err, sizeof(err)), -EPROTO);
	assert_non_null(strstr(err, "unknown message kind 77"));
	make_run(&m, 5, 0);
	m.e.kind = ORTMK__KIND__RESULT;       /* says RESULT, carries a RUN */
	assert_int_equal(decode(&m.e, &segs, err, sizeof(err)), -EPROTO);
	assert_non_null(strstr(err, "RESULT message carries body"));
}

/* RESULT's profiling spans: bounded, and a nested span names an earlier
 * one as its parent (readers walk the nesting without a cycle). */
static void test_result_spans(void **state)
{
	Ortmk__Envelope e = ORTMK__ENVELOPE__INIT;
	Ortmk__Result r = ORTMK__RESULT__INIT;
	Ortmk__NodeSpan sp[2], *psp[2] = {&sp[0], &sp[1]};
	Ortmk__NodeSpan **many;
	char err[256] = "";

	(void)state;
	for (int i = 0; i < 2; i++) {
		ortmk__node_span__init(&sp[i]);
		sp[i].node = (uint32_t)i;
		sp[i].name = "n";
		sp[i].op_type = "Add";
		sp[i].start_ns = 100u + (uint64_t)i;
		sp[i].dur_ns = 1;
	}
	sp[1].has_parent = 1;
	sp[1].parent = 0;
	e.version = IPC_PROTOCOL_VERSION;
	e.seq = 1;
	e.kind = ORTMK__KIND__RESULT;
	e.body_case = ORTMK__ENVELOPE__BODY_RESULT;
	e.result = &r;
	r.run_id = 1;
	r.n_spans = 2;
	r.spans = psp;
	assert_int_equal(decode(&e, &segs, err, sizeof(err)), 0);
	sp[1].parent = 1;                     /* itself */
	assert_int_equal(decode(&e, &segs, err, sizeof(err)), -EPROTO);
	assert_non_null(strstr(err, "span 1 has parent 1"));
	sp[0].has_parent = 1;                 /* the first cannot have one */
	sp[0].parent = 0;
	sp[1].parent = 0;
	assert_int_equal(decode(&e, &segs, err, sizeof(err)), -EPROTO);
	many = calloc(IPC_MAX_SPANS + 1, sizeof(*many));
	assert_non_null(many);
	sp[0].has_parent = 0;
	for (size_t i = 0; i <= IPC_MAX_SPANS; i++)
		many[i] = &sp[0];
	r.spans = many;
	r.n_spans = IPC_MAX_SPANS;
	assert_int_equal(decode(&e, &segs, err, sizeof(err)), 0);
	r.n_spans = IPC_MAX_SPANS + 1;
	assert_int_equal(decode(&e, &segs, err, sizeof(err)), -EPROTO);
	assert_non_null(strstr(err, "node spans (at most"));
	free(many);
}

static void test_truncated_and_garbage(void **state)
{
	run_msg m;
	size_t n;
	uint8_t *buf;
	Ortmk__Envelope *out = NULL;
	char err[256] = "";
	uint8_t junk[512];

	(void)state;
	make_run(&m, 5, 0);
	buf = pack(&m.e, &n);
	for (size_t cut = 0; cut < n; cut++) {
		int rc = ipc_envelope_decode(buf, cut, &segs, &out, err, sizeof(err));

		/* Some prefixes are valid protobuf; none may pass validation. */
		assert_int_equal(rc, -EPROTO);
		assert_null(out);
	}
	free(buf);
	srand(42);
	for (int iter = 0; iter < 2000; iter++) {
		size_t len = 1 + (size_t)rand() % sizeof(junk);

		for (size_t i = 0; i < len; i++)
			junk[i] = (uint8_t)rand();
		if (ipc_envelope_decode(junk, len, &segs, &out, err, sizeof(err)) == 0) {
			ipc_envelope_free(out);
			out = NULL;
		}
	}
}

static void test_load_weight_index(void **state)
{
	Ortmk__Envelope e = ORTMK__ENVELOPE__INIT;
	Ortmk__LoadSubgraph l = ORTMK__LOAD_SUBGRAPH__INIT;
	Ortmk__ValueDesc vd = ORTMK__VALUE_DESC__INIT, *pvd = &vd;
	Ortmk__Weight w = ORTMK__WEIGHT__INIT, *pw = &w;
	int64_t dims[1] = {4};
	char err[256] = "";

	(void)state;
	vd.name = "w";
	vd.dtype = 1;
	w.value = 3;                          /* only one value exists */
	w.dtype = 1;
	w.n_dims = 1;
	w.dims = dims;
	w.nbytes = 16;
	l.n_values = 1;
	l.values = &pvd;
	l.n_weights = 1;
	l.weights = &pw;
	e.version = IPC_PROTOCOL_VERSION;
	e.kind = ORTMK__KIND__LOAD_SUBGRAPH;
	e.body_case = ORTMK__ENVELOPE__BODY_LOAD_SUBGRAPH;
	e.load_subgraph = &l;
	assert_int_equal(decode(&e, NULL, err, sizeof(err)), -EPROTO);
	assert_non_null(strstr(err, "out of range"));
	w.value = 0;
	w.nbytes = 12;
	assert_int_equal(decode(&e, NULL, err, sizeof(err)), -EPROTO);
	w.nbytes = 16;
	assert_int_equal(decode(&e, NULL, err, sizeof(err)), 0);
}

static void test_fd_passing(void **state)
{
	int sv[2], fd = -1;
	shm_segment s, mapped;

	(void)state;
	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
	assert_int_equal(shm_segment_create("fd", 4096, 11, &s), 0);
	strcpy(s.base, "through the socket");
	assert_int_equal(ipc_send_fd(sv[0], s.fd, 1234), 0);
	assert_int_equal(ipc_recv_fd(sv[1], 1234, 1000, &fd), 0);
	assert_int_equal(shm_segment_map_fd_take(fd, 4096, 11, &mapped), 0);
	assert_string_equal(mapped.base, "through the socket");
	shm_segment_destroy(&mapped);
	/* A descriptor with the wrong tag is refused (and closed). */
	assert_int_equal(ipc_send_fd(sv[0], s.fd, 1), 0);
	assert_int_equal(ipc_recv_fd(sv[1], 2, 1000, &fd), -EPROTO);
	assert_int_equal(fd, -1);
	/* Nothing sent: a bounded wait. */
	assert_int_equal(ipc_recv_fd(sv[1], 3, 50, &fd), -ETIMEDOUT);
	shm_segment_destroy(&s);
	close(sv[0]);
	close(sv[1]);
}

/* Child dials and sends a HELLO; a second, garbage message follows. */
static void child_dial(const char *url)
{
	ipc_chan c;
	Ortmk__Envelope e = ORTMK__ENVELOPE__INIT;
	Ortmk__Hello h = ORTMK__HELLO__INIT;
	uint8_t token[32] = {1, 2, 3};
	int rc;

	/* The parent listens after the fork (nng's threads do not survive
	 * one), so retry until it does. */
	for (int i = 0; i < 200; i++) {
		ipc_chan_init(&c);
		rc = ipc_chan_dial(&c, url);
		if (rc == 0)
			break;
		usleep(10000);
	}
	h.protocol_version = IPC_PROTOCOL_VERSION;
	h.token = (ProtobufCBinaryData){32, token};
	h.pid = (uint32_t)getpid();
	h.provider = "test";
	e.kind = ORTMK__KIND__HELLO;
	e.body_case = ORTMK__ENVELOPE__BODY_HELLO;
	e.hello = &h;
	if (rc == 0)
		rc = ipc_send(&c, &e);
	if (rc == 0)
		rc = nng_send(c.sock, "\x08\x63garbage", 9, 0);
	usleep(200000);
	ipc_chan_close(&c);
	_exit(rc ? 1 : 0);
}

static void test_channel_between_processes(void **state)
{
	char dir[] = "/tmp/ortmk-test-XXXXXX", url[128];
	Ortmk__Envelope *m = NULL;
	char err[256] = "";
	ipc_chan c;
	pid_t pid;
	int status;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(url, sizeof(url), "ipc://%s/t.sock", dir);
	pid = fork();
	if (pid == 0)
		child_dial(url);
	ipc_chan_init(&c);
	assert_int_equal(ipc_chan_listen(&c, url), 0);
	assert_int_equal(ipc_recv(&c, 5000, &m, err, sizeof(err)), 0);
	assert_int_equal(m->kind, ORTMK__KIND__HELLO);
	assert_int_equal(m->hello->pid, (uint32_t)pid);
	assert_int_equal(ipc_last_peer_pid(&c), pid);
	ipc_envelope_free(m);
	assert_int_equal(ipc_recv(&c, 5000, &m, err, sizeof(err)), -EPROTO);
	assert_null(m);
	assert_int_equal(ipc_recv(&c, 50, &m, err, sizeof(err)), -ETIMEDOUT);
	waitpid(pid, &status, 0);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	ipc_chan_close(&c);
	snprintf(url, sizeof(url), "%s/t.sock", dir);
	unlink(url);
	rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_valid_run),
		cmocka_unit_test(test_offset_outside_segment),
		cmocka_unit_test(test_nbytes_mismatch),
		cmocka_unit_test(test_wrong_version),
		cmocka_unit_test(test_unknown_kind_and_mismatched_body),
		cmocka_unit_test(test_truncated_and_garbage),
		cmocka_unit_test(test_result_spans),
		cmocka_unit_test(test_load_weight_index),
		cmocka_unit_test(test_fd_passing),
		cmocka_unit_test(test_channel_between_processes),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
