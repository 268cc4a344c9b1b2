/*
 * test_trace: the tap at ipc/'s choke point (ipc/trace.c).  Off by default
 * and then silent; when on, every message through ipc_send/ipc_recv becomes
 * one length-prefixed record with the decoded summary and, for replies, the
 * latency to their request; refused messages are recorded as invalid; the
 * death of the peer is recorded once; a failing trace descriptor turns
 * tracing off instead of failing the program.  The "provider" end of each
 * channel sends and receives raw nng messages, so only the core end taps.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "channel.h"
#include "ortmk_trace.pb-c.h"
#include "trace.h"
#include "trace_record.h"

#define MAX_RECORDS 64

typedef struct pair {
	char dir[64], url[128];
	ipc_chan core, ep;
} pair;

static void pair_open(pair *p)
{
	snprintf(p->dir, sizeof(p->dir), "/tmp/ortmk-trace-test-XXXXXX");
	assert_non_null(mkdtemp(p->dir));
	snprintf(p->url, sizeof(p->url), "ipc://%s/t.sock", p->dir);
	ipc_chan_init(&p->core);
	ipc_chan_init(&p->ep);
	assert_int_equal(ipc_chan_listen(&p->core, p->url), 0);
	assert_int_equal(ipc_chan_dial(&p->ep, p->url), 0);
	snprintf(p->core.peer, sizeof(p->core.peer), "ort-ep-cpu[4242]");
}

static void pair_close(pair *p)
{
	char path[192];

	ipc_chan_close(&p->ep);
	ipc_chan_close(&p->core);
	snprintf(path, sizeof(path), "%s/t.sock", p->dir);
	unlink(path);
	rmdir(p->dir);
}

/* The provider side: packs and sends without the tap. */
static void raw_send(ipc_chan *c, Ortmk__Envelope *e)
{
	size_t n = ortmk__envelope__get_packed_size(e);
	uint8_t *buf = malloc(n);

	assert_non_null(buf);
	e->version = IPC_PROTOCOL_VERSION;
	ortmk__envelope__pack(e, buf);
	assert_int_equal(nng_send(c->sock, buf, n, 0), 0);
	free(buf);
}

static uint64_t raw_recv_seq(ipc_chan *c)
{
	Ortmk__Envelope *e;
	void *buf;
	size_t n;
	uint64_t seq;

	assert_int_equal(nng_recv(c->sock, &buf, &n, NNG_FLAG_ALLOC), 0);
	e = ortmk__envelope__unpack(NULL, n, buf);
	assert_non_null(e);
	seq = e->seq;
	ortmk__envelope__free_unpacked(e, NULL);
	nng_free(buf, n);
	return seq;
}

static int trace_memfd(void)
{
	int fd = (int)syscall(SYS_memfd_create, "trace", 0);

	assert_true(fd >= 0);
	assert_int_equal(ipc_trace_start_fd(fd, 0), 0);
	assert_true(ipc_trace_on());
	return fd;
}

/* Parses every record written to fd so far. */
static size_t read_records(int fd, Ortmk__Trace__Record **out)
{
	off_t size = lseek(fd, 0, SEEK_END);
	uint8_t *buf = malloc((size_t)size + 1);
	size_t n = 0, off = 0;

	assert_non_null(buf);
	assert_int_equal(pread(fd, buf, (size_t)size, 0), size);
	while (off + 4 <= (size_t)size && n < MAX_RECORDS) {
		uint32_t len = (uint32_t)buf[off] | (uint32_t)buf[off + 1] << 8 |
			(uint32_t)buf[off + 2] << 16 | (uint32_t)buf[off + 3] << 24;

		assert_true(off + 4 + len <= (size_t)size);
		out[n] = ortmk__trace__record__unpack(NULL, len, buf + off + 4);
		assert_non_null(out[n]);
		n++;
		off += 4 + len;
	}
	assert_int_equal(off, (size_t)size);
	free(buf);
	return n;
}

static void free_records(Ortmk__Trace__Record **r, size_t n)
{
	for (size_t i = 0; i < n; i++)
		ortmk__trace__record__free_unpacked(r[i], NULL);
}

static void send_run(ipc_chan *c, size_t n_bindings)
{
	Ortmk__Envelope e = ORTMK__ENVELOPE__INIT;
	Ortmk__Run run = ORTMK__RUN__INIT;
	Ortmk__TensorRef *refs = calloc(n_bindings, sizeof(*refs));
	Ortmk__TensorRef **prefs = calloc(n_bindings, sizeof(*prefs));
	int64_t dims[4] = {1, 3, 32, 32};

	assert_non_null(refs);
	assert_non_null(prefs);
	for (size_t i = 0; i < n_bindings; i++) {
		ortmk__tensor_ref__init(&refs[i]);
		refs[i].value = (uint32_t)i;
		refs[i].dtype = 1;
		refs[i].n_dims = 4;
		refs[i].dims = dims;
		refs[i].segment_id = 9;
		refs[i].nbytes = 3 * 32 * 32 * 4;
		prefs[i] = &refs[i];
	}
	run.subgraph_id = 5;
	run.run_id = 11;
	run.n_bindings = n_bindings;
	run.bindings = prefs;
	e.kind = ORTMK__KIND__RUN;
	e.body_case = ORTMK__ENVELOPE__BODY_RUN;
	e.run = &run;
	e.has_session = 1;
	e.session = 7;
	assert_int_equal(ipc_send(c, &e), 0);
	free(prefs);
	free(refs);
}

static void reply_result(ipc_chan *c, uint64_t reply_to)
{
	Ortmk__Envelope e = ORTMK__ENVELOPE__INIT;
	Ortmk__Result res = ORTMK__RESULT__INIT;

	res.run_id = 11;
	e.seq = 1;
	e.has_reply_to = 1;
	e.reply_to = reply_to;
	e.kind = ORTMK__KIND__RESULT;
	e.body_case = ORTMK__ENVELOPE__BODY_RESULT;
	e.result = &res;
	raw_send(c, &e);
}

static void test_off_by_default(void **state)
{
	(void)state;
	assert_false(ipc_trace_on());
	/* An event with tracing off goes nowhere and does not crash. */
	ipc_trace_event("cpu", 1, "restart", NULL);
}

static void test_request_and_reply(void **state)
{
	Ortmk__Trace__Record *r[MAX_RECORDS];
	Ortmk__Envelope *m = NULL;
	char err[256];
	int fd = trace_memfd();
	size_t n;
	pair p;

	(void)state;
	pair_open(&p);
	send_run(&p.core, 2);
	reply_result(&p.ep, raw_recv_seq(&p.ep));
	assert_int_equal(ipc_recv(&p.core, 5000, &m, err, sizeof(err)), 0);
	ipc_envelope_free(m);
	n = read_records(fd, r);
	assert_int_equal(n, 3);
	assert_int_equal(r[0]->body_case, ORTMK__TRACE__RECORD__BODY_HEADER);
	assert_string_equal(r[0]->header->magic, IPC_TRACE_MAGIC);
	assert_int_equal(r[0]->header->format_version, IPC_TRACE_FORMAT_VERSION);
	assert_int_equal(r[0]->header->protocol_version, IPC_PROTOCOL_VERSION);
	assert_int_equal(r[0]->header->core_pid, (uint32_t)getpid());

	const Ortmk__Trace__Message *run = r[1]->message, *res = r[2]->message;

	assert_int_equal(run->dir, ORTMK__TRACE__DIRECTION__TO_PROVIDER);
	assert_int_equal(run->kind, ORTMK__KIND__RUN);
	assert_string_equal(run->provider, "cpu");
	assert_int_equal(run->pid, 4242);
	assert_int_equal(run->session, 7);
	assert_int_equal(run->seq, 1);
	assert_int_equal(run->subgraph_id, 5);
	assert_int_equal(run->run_id, 11);
	assert_true(run->size > 0);
	assert_int_equal(run->n_tensors, 2);
	assert_int_equal(run->tensors[1]->value, 1);
	assert_int_equal(run->tensors[1]->n_dims, 4);
	assert_int_equal(run->tensors[1]->dims[3], 32);
	assert_int_equal(run->tensors[1]->nbytes, 12288);
	assert_int_equal(res->dir, ORTMK__TRACE__DIRECTION__FROM_PROVIDER);
	assert_int_equal(res->kind, ORTMK__KIND__RESULT);
	assert_int_equal(res->reply_to, 1);
	assert_true(res->has_latency_ns);
	assert_int_equal(res->latency_ns, res->t_ns - run->t_ns);
	assert_int_equal(res->request_kind, ORTMK__KIND__RUN);
	free_records(r, n);
	pair_close(&p);
	ipc_trace_stop();
	close(fd);
}

static void test_invalid_and_identity(void **state)
{
	Ortmk__Trace__Record *r[MAX_RECORDS];
	Ortmk__Envelope *m = NULL;
	char err[256] = "";
	int fd = trace_memfd();
	size_t n;
	pair p;

	(void)state;
	pair_open(&p);
	ipc_chan_set_trace_identity(&p.core, "vulkan", 77);
	assert_int_equal(nng_send(p.ep.sock, "\x08\x63garbage", 9, 0), 0);
	assert_int_equal(ipc_recv(&p.core, 5000, &m, err, sizeof(err)), -EPROTO);
	n = read_records(fd, r);
	assert_int_equal(n, 2);
	assert_true(r[1]->message->invalid);
	assert_int_equal(r[1]->message->size, 9);
	assert_false(r[1]->message->has_kind);
	assert_string_equal(r[1]->message->error, err);
	assert_string_equal(r[1]->message->provider, "vulkan");
	assert_int_equal(r[1]->message->pid, 77);
	free_records(r, n);
	pair_close(&p);
	ipc_trace_stop();
	close(fd);
}

/* More bindings than a record keeps: the rest are counted. */
static void test_tensor_cap(void **state)
{
	Ortmk__Trace__Record *r[MAX_RECORDS];
	int fd = trace_memfd();
	size_t n;
	pair p;

	(void)state;
	pair_open(&p);
	send_run(&p.core, 300);
	raw_recv_seq(&p.ep);
	n = read_records(fd, r);
	assert_int_equal(n, 2);
	assert_int_equal(r[1]->message->n_tensors, 256);
	assert_int_equal(r[1]->message->tensors_omitted, 44);
	free_records(r, n);
	pair_close(&p);
	ipc_trace_stop();
	close(fd);
}

static size_t count_events(Ortmk__Trace__Record **r, size_t n, const char *event)
{
	size_t k = 0;

	for (size_t i = 0; i < n; i++)
		k += r[i]->body_case == ORTMK__TRACE__RECORD__BODY_EVENT && !strcmp(r[i]->event->event, event);
	return k;
}

/* The peer exits: ipc_recv says -ECHILD and the trace has one "died". */
static void test_death_recorded_once(void **state)
{
	Ortmk__Trace__Record *r[MAX_RECORDS];
	Ortmk__Envelope *m = NULL;
	char err[256], peer[64];
	int fd = trace_memfd(), status;
	struct pollfd pfd;
	size_t n;
	pid_t pid;
	pair p;

	(void)state;
	pair_open(&p);
	pid = fork();
	if (pid == 0)
		_exit(3);
	snprintf(peer, sizeof(peer), "ort-ep-cpu[%d]", (int)pid);
	memcpy(p.core.peer, peer, sizeof(peer));
	p.core.peer_pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	assert_true(p.core.peer_pidfd >= 0);
	pfd = (struct pollfd){.fd = p.core.peer_pidfd, .events = POLLIN};
	assert_int_equal(poll(&pfd, 1, 5000), 1);
	assert_int_equal(ipc_recv(&p.core, 1000, &m, err, sizeof(err)), -ECHILD);
	assert_int_equal(ipc_recv(&p.core, 1000, &m, err, sizeof(err)), -ECHILD);
	/* The supervisor reporting the same death adds nothing. */
	ipc_trace_event("cpu", (int)pid, "died", "exited with status 3");
	ipc_trace_event("cpu", (int)pid + 1, "restart", "after 1 failure");
	n = read_records(fd, r);
	assert_int_equal(count_events(r, n, "died"), 1);
	assert_int_equal(count_events(r, n, "restart"), 1);
	assert_string_equal(r[1]->event->detail, "exited with status 3");
	assert_string_equal(r[1]->event->provider, "cpu");
	assert_int_equal(r[1]->event->pid, (uint32_t)pid);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	close(p.core.peer_pidfd);
	free_records(r, n);
	pair_close(&p);
	ipc_trace_stop();
	close(fd);
}

/* A reader that went away: tracing stops, the program goes on. */
static void test_write_failure_stops_tracing(void **state)
{
	int pfd[2];

	(void)state;
	signal(SIGPIPE, SIG_IGN);
	assert_int_equal(pipe(pfd), 0);
	assert_int_equal(ipc_trace_start_fd(pfd[1], 1), 0);
	close(pfd[0]);
	ipc_trace_event("cpu", 1, "spawn", NULL);
	assert_false(ipc_trace_on());
	ipc_trace_stop();
	assert_int_equal(ipc_trace_start_fd(-1, 0), -EBADF);
	assert_false(ipc_trace_on());
}

static void test_init_from_env(void **state)
{
	char path[] = "/tmp/ortmk-trace-env-XXXXXX";
	Ortmk__Trace__Record *r[MAX_RECORDS];
	int fd = mkstemp(path), rfd;
	size_t n;

	(void)state;
	assert_true(fd >= 0);
	close(fd);
	setenv("ORTMK_TRACE", path, 1);
	unsetenv("ORTMK_TRACE_FD");
	assert_int_equal(ipc_trace_init_from_env(), 0);
	assert_true(ipc_trace_on());
	/* Once per process: a second environment does not reopen the file. */
	assert_int_equal(ipc_trace_init_from_env(), 0);
	ipc_trace_event("cpu", 1, "spawn", "pid 1");
	ipc_trace_stop();
	rfd = open(path, O_RDONLY);
	assert_true(rfd >= 0);
	n = read_records(rfd, r);
	assert_int_equal(n, 2);
	assert_int_equal(r[0]->body_case, ORTMK__TRACE__RECORD__BODY_HEADER);
	assert_string_equal(r[1]->event->event, "spawn");
	free_records(r, n);
	close(rfd);
	unlink(path);
	unsetenv("ORTMK_TRACE");
}

/* Two tensors, the second with a negative dtype, negative and 8-byte dims
 * and a nested length over 127 bytes. */
static void fill_tensors(Ortmk__Trace__Tensor t[2], int64_t dims[40])
{
	for (int i = 0; i < 40; i++)
		dims[i] = i % 3 ? (int64_t)1 << (i + 3) : -i;
	for (int i = 0; i < 2; i++) {
		ortmk__trace__tensor__init(&t[i]);
		t[i].has_value = t[i].has_dtype = t[i].has_nbytes = t[i].has_segment = 1;
		t[i].value = 300u * (unsigned)i;
		t[i].dtype = i ? -5 : 1;
		t[i].n_dims = i ? 40 : 4;
		t[i].dims = dims;
		t[i].nbytes = UINT64_MAX;
		t[i].segment = 7;
		t[i].has_dynamic = t[i].dynamic = i;
		t[i].has_external = 1;
	}
}

/* The tap's own encoder writes the bytes protobuf-c would, for every field
 * (negative numbers, nested lengths over 127, repeated fields). */
static void test_encoder_matches_protobuf_c(void **state)
{
	Ortmk__Trace__Message m = ORTMK__TRACE__MESSAGE__INIT;
	Ortmk__Trace__Tensor t[2], *pt[2] = {&t[0], &t[1]};
	Ortmk__Trace__Fence f = ORTMK__TRACE__FENCE__INIT, *pf = &f;
	int64_t dims[40];
	char *names[] = {"image", "", "probs"};
	uint8_t mine[4096], ref[4096];
	size_t n, k;

	(void)state;
	fill_tensors(t, dims);
	f.id = 9;
	f.has_value = f.has_signal = f.signal = 1;
	f.value = 1u << 20;
	m.t_ns = 123456789012345ull;
	m.dir = ORTMK__TRACE__DIRECTION__FROM_PROVIDER;
	m.provider = "cpu";
	m.has_pid = m.has_core_pid = m.has_session = m.has_stream = m.has_seq = m.has_reply_to = 1;
	m.pid = 4242;
	m.core_pid = 1;
	m.session = 1ull << 40;
	m.stream = 3;
	m.seq = 17;
	m.reply_to = 16;
	m.has_kind = m.has_size = m.has_latency_ns = m.has_request_kind = m.has_peer_send_ns = 1;
	m.kind = 9;
	m.size = 300;
	m.latency_ns = 99999;
	m.request_kind = 8;
	m.peer_send_ns = 5;
	m.has_invalid = 1;
	m.error = "bad \"thing\"";
	m.has_status = 1;
	m.status = -3;
	m.has_subgraph_id = m.has_run_id = m.has_tensors_omitted = m.has_ring = m.ring = 1;
	m.subgraph_id = 4;
	m.run_id = 200;
	m.n_tensors = 2;
	m.tensors = pt;
	m.tensors_omitted = 44;
	m.n_value_names = 3;
	m.value_names = names;
	m.n_fences = 1;
	m.fences = &pf;
	m.note = "compute 0.5 ms";
	n = ortmk__trace__message__pack(&m, ref);
	k = ipc_trace_encode_message(&m, mine, sizeof(mine));
	assert_int_equal(k, n);
	assert_memory_equal(mine, ref, n);
	/* Too small a buffer: 0, and the caller falls back to protobuf-c. */
	assert_int_equal(ipc_trace_encode_message(&m, mine, n - 1), 0);
	assert_int_equal(ipc_trace_encode_message(&m, mine, 8), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_off_by_default),
		cmocka_unit_test(test_request_and_reply),
		cmocka_unit_test(test_invalid_and_identity),
		cmocka_unit_test(test_tensor_cap),
		cmocka_unit_test(test_death_recorded_once),
		cmocka_unit_test(test_write_failure_stops_tracing),
		cmocka_unit_test(test_init_from_env),
		cmocka_unit_test(test_encoder_matches_protobuf_c),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
