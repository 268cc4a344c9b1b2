/*
 * trace: the tap at the IPC choke point (see trace.h).  Each message or
 * event becomes one Record (proto/ortmk_trace.proto) written with a single
 * write(2) under a lock, length first, so that records from several threads
 * never interleave and nothing sits in a user-space buffer when the traced
 * program or a provider crashes.  The tap copies nothing out of the
 * envelope: the record points into it while it is packed.  What a message
 * says (tensors, status, notes) is decoded by trace_record.c.  A profiled
 * run's RESULT is followed by a ProviderRun record of its node spans, and
 * each run of a profiled session ends with a SessionRun record.
 */
#include "trace.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "channel.h"
#include "log.h"
#include "ortmk_trace.pb-c.h"
#include "sysio.h"
#include "trace_record.h"

#define STACK_RECORD 4096
#define DIED_MEMORY 8           /* pids whose death is already recorded */

int ipc_trace_flag;

static struct {
	pthread_mutex_t lock;
	int fd, own;
	uint32_t core_pid;
	int died[DIED_MEMORY];
	unsigned next_died;
} T = {PTHREAD_MUTEX_INITIALIZER, -1, 0, 0, {0}, 0};

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static int init_rc;

/* ---- writing ----------------------------------------------------------- */

/* One record, one write(2), under the lock so records from several threads
 * never interleave.  A failing descriptor (reader gone, disk full) turns
 * tracing off rather than slowing or failing the program. */
static void write_out(const uint8_t *p, size_t n)
{
	int rc = 0;

	pthread_mutex_lock(&T.lock);
	if (T.fd >= 0)
		rc = sys_write_all(T.fd, p, n, -1);
	if (rc) {
		__atomic_store_n(&ipc_trace_flag, 0, __ATOMIC_RELAXED);
		if (T.own)
			close(T.fd);
		T.fd = -1;
	}
	pthread_mutex_unlock(&T.lock);
	if (rc)
		ipc_log(IPC_LOG_WARN, "trace: cannot write (%s); tracing stopped", strerror(-rc));
}

/* The body of a record is at buf + FRAME (len bytes): writes the Record
 * wrapper (field `body_case`, length-delimited) and the 4-byte little-endian
 * length in front of it, then the whole.  Writing the wrapper by hand keeps
 * protobuf-c from sizing the body once more. */
#define FRAME 16
static void frame_and_write(uint8_t *buf, size_t len, unsigned body_case)
{
	uint8_t hdr[16];
	size_t h = 0, n, start;
	uint64_t v = len;

	hdr[h++] = (uint8_t)(body_case << 3 | 2);
	while (v >= 0x80) {
		hdr[h++] = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	hdr[h++] = (uint8_t)v;
	n = h + len;
	start = FRAME - h - 4;
	buf[start] = (uint8_t)n;
	buf[start + 1] = (uint8_t)(n >> 8);
	buf[start + 2] = (uint8_t)(n >> 16);
	buf[start + 3] = (uint8_t)(n >> 24);
	memcpy(buf + start + 4, hdr, h);
	write_out(buf + start, 4 + n);
}

/* Any record, through protobuf-c. */
static void write_record(const ProtobufCMessage *body, unsigned body_case)
{
	size_t len = protobuf_c_message_get_packed_size(body);
	uint8_t stack[STACK_RECORD], *buf = stack;

	if (len > IPC_TRACE_MAX_RECORD - FRAME)
		return;
	if (len + FRAME > sizeof(stack) && !(buf = malloc(len + FRAME)))
		return;
	protobuf_c_message_pack(body, buf + FRAME);
	frame_and_write(buf, len, body_case);
	if (buf != stack)
		free(buf);
}

/* A message record: the direct encoder when it fits the stack buffer. */
static void write_message(const Ortmk__Trace__Message *m)
{
	uint8_t buf[STACK_RECORD];
	size_t len = ipc_trace_encode_message(m, buf + FRAME, sizeof(buf) - FRAME);

	if (len)
		frame_and_write(buf, len, ORTMK__TRACE__RECORD__BODY_MESSAGE);
	else
		write_record(&m->base, ORTMK__TRACE__RECORD__BODY_MESSAGE);
}

static void program_name(char *out, size_t n)
{
	int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
	ssize_t r = fd >= 0 ? read(fd, out, n - 1) : -1;

	if (fd >= 0)
		close(fd);
	if (r <= 0) {
		out[0] = 0;
		return;
	}
	out[r] = 0;
	/* argv is NUL-separated; the last NUL ends the string. */
	for (ssize_t i = 0; i < r - 1; i++)
		if (out[i] == 0)
			out[i] = ' ';
}

static int write_header(void)
{
	Ortmk__Trace__Header h = ORTMK__TRACE__HEADER__INIT;
	char program[1024], host[256] = "";
	struct timespec rt;
	int ok;

	program_name(program, sizeof(program));
	gethostname(host, sizeof(host) - 1);
	clock_gettime(CLOCK_REALTIME, &rt);
	h.magic = IPC_TRACE_MAGIC;
	h.format_version = IPC_TRACE_FORMAT_VERSION;
	h.protocol_version = IPC_PROTOCOL_VERSION;
	h.has_core_pid = h.has_start_ns = h.has_start_unix_ns = 1;
	h.core_pid = T.core_pid;
	h.start_ns = ipc_now_ns();
	h.start_unix_ns = (uint64_t)rt.tv_sec * 1000000000u + (uint64_t)rt.tv_nsec;
	h.program = program;
	h.host = host;
	write_record(&h.base, ORTMK__TRACE__RECORD__BODY_HEADER);
	pthread_mutex_lock(&T.lock);
	ok = T.fd >= 0;
	pthread_mutex_unlock(&T.lock);
	return ok ? 0 : -EIO;
}

/* ---- starting and stopping --------------------------------------------- */

int ipc_trace_start_fd(int fd, int own)
{
	int rc;

	ipc_trace_stop();
	if (fd < 0 || fcntl(fd, F_GETFD) < 0)
		return -EBADF;
	/* Provider processes must not inherit it: they would hold a pipe open
	 * after the core is gone, and they never write to it.  (Standard
	 * descriptors, ORTMK_TRACE_FD=1, are left as they are.) */
	if (fd > 2)
		fcntl(fd, F_SETFD, FD_CLOEXEC);
	pthread_mutex_lock(&T.lock);
	T.fd = fd;
	T.own = own;
	T.core_pid = (uint32_t)getpid();
	T.next_died = 0;
	memset(T.died, 0, sizeof(T.died));
	pthread_mutex_unlock(&T.lock);
	rc = write_header();
	if (rc == 0)
		__atomic_store_n(&ipc_trace_flag, 1, __ATOMIC_RELAXED);
	return rc;
}

void ipc_trace_stop(void)
{
	pthread_mutex_lock(&T.lock);
	__atomic_store_n(&ipc_trace_flag, 0, __ATOMIC_RELAXED);
	if (T.fd >= 0 && T.own)
		close(T.fd);
	T.fd = -1;
	pthread_mutex_unlock(&T.lock);
}

static int parse_fd(const char *s)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < 0 || v > 1 << 20)
		return -1;
	return (int)v;
}

static void init_from_env(void)
{
	const char *fd_env = getenv("ORTMK_TRACE_FD"), *path = getenv("ORTMK_TRACE");
	int fd;

	if (fd_env && *fd_env) {
		fd = parse_fd(fd_env);
		init_rc = ipc_trace_start_fd(fd, 1);
		if (init_rc)
			ipc_log(IPC_LOG_ERROR, "trace: ORTMK_TRACE_FD=%s is not an open descriptor; tracing off",
				fd_env);
		return;
	}
	if (!path || !*path)
		return;
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
	if (fd < 0) {
		init_rc = -errno;
		ipc_log(IPC_LOG_ERROR, "trace: cannot open ORTMK_TRACE=%s: %s; tracing off",
			path, strerror(errno));
		return;
	}
	init_rc = ipc_trace_start_fd(fd, 1);
}

int ipc_trace_init_from_env(void)
{
	pthread_once(&init_once, init_from_env);
	return init_rc;
}

/* ---- identity and events ----------------------------------------------- */

void ipc_chan_set_trace_identity(ipc_chan *c, const char *provider, int pid)
{
	ipc_trace_chan *t = &c->trace;

	snprintf(t->provider, sizeof(t->provider), "%s", provider ? provider : "");
	if (pid != t->pid)
		t->lost_logged = 0;
	t->pid = pid;
	t->identity_set = 1;
}

/* Without an explicit identity, the channel's peer label says it:
 * "ort-ep-cpu[1234]". */
static void chan_identity(ipc_chan *c)
{
	ipc_trace_chan *t = &c->trace;
	const char *p = c->peer, *b;
	size_t n;
	int pid;

	if (t->identity_set || !p[0])
		return;
	if (strncmp(p, "ort-ep-", 7) == 0)
		p += 7;
	b = strchr(p, '[');
	n = b ? (size_t)(b - p) : strlen(p);
	if (n >= sizeof(t->provider))
		n = sizeof(t->provider) - 1;
	memcpy(t->provider, p, n);
	t->provider[n] = 0;
	pid = b ? atoi(b + 1) : (int)c->peer_pid;
	if (pid != t->pid)
		t->lost_logged = 0;
	t->pid = pid;
}

/* 1 the first time a death of pid is reported, 0 after. */
static int first_death(int pid)
{
	int first = 1;

	pthread_mutex_lock(&T.lock);
	for (int i = 0; i < DIED_MEMORY; i++)
		if (pid > 0 && T.died[i] == pid)
			first = 0;
	if (first && pid > 0)
		T.died[T.next_died++ % DIED_MEMORY] = pid;
	pthread_mutex_unlock(&T.lock);
	return first;
}

void ipc_trace_event(const char *provider, int pid, const char *event, const char *detail)
{
	Ortmk__Trace__Event ev = ORTMK__TRACE__EVENT__INIT;

	if (!ipc_trace_on() || !event)
		return;
	/* The tap records a death when ipc_recv sees it; the supervisor may
	 * report the same death again. */
	if (strcmp(event, "died") == 0 && !first_death(pid))
		return;
	ev.t_ns = ipc_now_ns();
	ev.event = (char *)event;
	ev.provider = (char *)provider;
	ev.has_pid = pid > 0;
	ev.pid = (uint32_t)pid;
	ev.has_core_pid = 1;
	ev.core_pid = T.core_pid;
	ev.detail = (char *)detail;
	write_record(&ev.base, ORTMK__TRACE__RECORD__BODY_EVENT);
}

/* How pid ended, without reaping it (the core reaps it afterwards). */
static void death_detail(int pid, char *out, size_t n)
{
	siginfo_t si;

	memset(&si, 0, sizeof(si));
	snprintf(out, n, "connection lost");
	if (pid <= 0 || waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) || si.si_pid != pid)
		return;
	if (si.si_code == CLD_EXITED)
		snprintf(out, n, "exited with status %d", si.si_status);
	else
		snprintf(out, n, "killed by signal %d (%s)", si.si_status, strsignal(si.si_status));
}

void ipc_trace_recv_failed(ipc_chan *c, int rc, int timeout_ms)
{
	ipc_trace_chan *t = &c->trace;
	char detail[128];

	chan_identity(c);
	if (rc == -ETIMEDOUT && timeout_ms > 0) {
		snprintf(detail, sizeof(detail), "no message within %d ms", timeout_ms);
		ipc_trace_event(t->provider, t->pid, "timeout", detail);
		return;
	}
	if ((rc != -ECHILD && rc != -EPIPE) || t->lost_logged)
		return;
	t->lost_logged = 1;
	death_detail(t->pid, detail, sizeof(detail));
	ipc_trace_event(t->provider, t->pid, "died", detail);
}

/* ---- messages ---------------------------------------------------------- */

/* Requests remember their send time; replies find it by reply_to. */
static void match_request(ipc_trace_chan *t, Ortmk__Trace__Message *m, const Ortmk__Envelope *e)
{
	if (m->dir == ORTMK__TRACE__DIRECTION__TO_PROVIDER && !e->has_reply_to) {
		unsigned i = t->next_pending++ % IPC_TRACE_PENDING;

		t->pending[i].seq = e->seq;
		t->pending[i].t_ns = m->t_ns;
		t->pending[i].kind = (uint32_t)e->kind;
		return;
	}
	if (m->dir != ORTMK__TRACE__DIRECTION__FROM_PROVIDER || !e->has_reply_to || !e->reply_to)
		return;
	for (unsigned i = 0; i < IPC_TRACE_PENDING; i++) {
		if (t->pending[i].seq != e->reply_to || !t->pending[i].t_ns)
			continue;
		m->has_latency_ns = m->has_request_kind = 1;
		m->latency_ns = m->t_ns - t->pending[i].t_ns;
		m->request_kind = t->pending[i].kind;
		t->pending[i].t_ns = 0;
		return;
	}
}

static void common_fields(ipc_chan *c, Ortmk__Trace__Message *m, enum ipc_trace_dir dir, size_t size)
{
	chan_identity(c);
	m->t_ns = ipc_now_ns();
	m->dir = dir == IPC_TRACE_SEND ? ORTMK__TRACE__DIRECTION__TO_PROVIDER :
		ORTMK__TRACE__DIRECTION__FROM_PROVIDER;
	m->provider = c->trace.provider;
	m->has_pid = c->trace.pid > 0;
	m->pid = (uint32_t)c->trace.pid;
	m->has_core_pid = 1;
	m->core_pid = T.core_pid;
	m->has_size = 1;
	m->size = size;
}


/* ---- profiling ---------------------------------------------------------- */

/* A RESULT of a profiled run (Run.profile), after its message record: the
 * provider's run and node spans.  The spans point into the envelope. */
static void write_provider_run(const Ortmk__Trace__Message *m, const Ortmk__Envelope *e)
{
	const Ortmk__Result *r = e->result;
	Ortmk__Trace__ProviderRun pr = ORTMK__TRACE__PROVIDER_RUN__INIT;
	Ortmk__Trace__NodeSpan *spans = calloc(r->n_spans + 1, sizeof(*spans));
	Ortmk__Trace__NodeSpan **ps = calloc(r->n_spans + 1, sizeof(*ps));

	if (!spans || !ps)
		goto out;
	for (size_t i = 0; i < r->n_spans; i++) {
		const Ortmk__NodeSpan *s = r->spans[i];
		Ortmk__Trace__NodeSpan *d = &spans[i];

		ortmk__trace__node_span__init(d);
		d->has_node = d->has_start_ns = d->has_dur_ns = 1;
		d->node = s->node;
		d->name = s->name;
		d->op_type = s->op_type;
		d->start_ns = s->start_ns;
		d->dur_ns = s->dur_ns;
		d->has_tid = s->has_tid;
		d->tid = s->tid;
		d->has_parent = s->has_parent;
		d->parent = s->parent;
		d->has_depth = s->has_depth;
		d->depth = s->depth;
		d->has_fused = s->has_fused;
		d->fused = s->fused;
		ps[i] = d;
	}
	pr.has_t_ns = pr.has_core_pid = pr.has_start_ns = pr.has_dur_ns = 1;
	pr.t_ns = m->t_ns;
	pr.provider = m->provider;
	pr.has_pid = m->has_pid;
	pr.pid = m->pid;
	pr.core_pid = T.core_pid;
	pr.has_session = e->has_session;
	pr.session = e->session;
	pr.has_run_id = 1;
	pr.run_id = r->run_id;
	pr.has_seq = e->has_reply_to;
	pr.seq = e->reply_to;
	pr.start_ns = r->run_start_ns;
	pr.dur_ns = r->compute_ns;
	pr.has_tid = r->has_run_tid;
	pr.tid = r->run_tid;
	pr.n_spans = r->n_spans;
	pr.spans = ps;
	pr.has_spans_dropped = r->has_spans_dropped;
	pr.spans_dropped = r->spans_dropped;
	write_record(&pr.base, ORTMK__TRACE__RECORD__BODY_PROVIDER_RUN);
out:
	free(ps);
	free(spans);
}

void ipc_trace_session_run(uint64_t session, uint64_t start_ns, uint64_t dur_ns, int status)
{
	Ortmk__Trace__SessionRun sr = ORTMK__TRACE__SESSION_RUN__INIT;

	if (!ipc_trace_on())
		return;
	sr.has_start_ns = sr.has_dur_ns = sr.has_core_pid = sr.has_tid = sr.has_session = 1;
	sr.start_ns = start_ns;
	sr.dur_ns = dur_ns;
	sr.core_pid = T.core_pid;
	sr.tid = (uint32_t)syscall(SYS_gettid);
	sr.session = session;
	sr.has_status = status != 0;
	sr.status = status;
	write_record(&sr.base, ORTMK__TRACE__RECORD__BODY_SESSION_RUN);
}

/* ---- messages (continued) ------------------------------------------------ */

static void trace_message(ipc_chan *c, enum ipc_trace_dir dir, const Ortmk__Envelope *e,
			  size_t size, int ring)
{
	Ortmk__Trace__Message m = ORTMK__TRACE__MESSAGE__INIT;
	ipc_trace_scratch s;

	common_fields(c, &m, dir, size);
	m.has_ring = m.ring = ring;
	m.has_session = e->has_session;
	m.session = e->session;
	m.has_stream = e->has_stream;
	m.stream = e->stream;
	m.has_seq = 1;
	m.seq = e->seq;
	m.has_reply_to = e->has_reply_to;
	m.reply_to = e->reply_to;
	m.has_kind = 1;
	m.kind = (uint32_t)e->kind;
	m.has_peer_send_ns = dir == IPC_TRACE_RECV && e->has_send_ns;
	m.peer_send_ns = e->send_ns;
	match_request(&c->trace, &m, e);
	ipc_trace_summarize(&s, &m, e);
	write_message(&m);
	ipc_trace_scratch_free(&s, &m);
	if (e->body_case == ORTMK__ENVELOPE__BODY_RESULT && e->result->has_run_start_ns)
		write_provider_run(&m, e);
}

void ipc_trace_message(ipc_chan *c, enum ipc_trace_dir dir, const Ortmk__Envelope *e, size_t size)
{
	trace_message(c, dir, e, size, 0);
}

void ipc_trace_ring_message(ipc_chan *c, enum ipc_trace_dir dir, const Ortmk__Envelope *e,
			    size_t size)
{
	if (!e)
		return;
	if (!size)
		size = ortmk__envelope__get_packed_size(e);
	trace_message(c, dir, e, size, 1);
}

void ipc_trace_invalid(ipc_chan *c, size_t size, const char *reason)
{
	Ortmk__Trace__Message m = ORTMK__TRACE__MESSAGE__INIT;

	common_fields(c, &m, IPC_TRACE_RECV, size);
	m.has_invalid = m.invalid = 1;
	m.error = (char *)(reason && reason[0] ? reason : "refused by validation");
	write_message(&m);
}
