/*
 * ort-trace export --chrome: a trace as Chrome trace-event JSON (the
 * "JSON Object Format" that Perfetto and chrome://tracing open).
 *
 * Processes are the real ones: the traced application (pid = its pid,
 * named "app pid N") and each provider process ("ep cpu pid N"; one per
 * process, so a restart starts a new track).  On a provider's track, one
 * thread per stream carries the messages: a request and its reply become a
 * complete ("X") slice named after the request (runs, copies, loads...),
 * timed on the core's clock; a request that never got one (SHUTDOWN, or
 * the provider died) becomes an instant, or a slice cut at the death.
 * Those threads are not real ones: their tid is IPC_TID + the stream, out
 * of the range of Linux thread ids.  Profiled runs (docs/TRACE.md,
 * "Profiling") add real threads: the provider's run as a slice on the
 * thread that ran it, its node spans nested inside (bodies of If, Loop and
 * Scan inside their node), and the application's ortmk_session_run calls
 * on its calling thread.  Fences named by messages become flow events ("s"
 * where signalled, "f" where waited on), deaths, restarts and other events
 * process-wide instants ("i").  Times are microseconds since the trace
 * began, on CLOCK_MONOTONIC, which every process shares.
 */
#include "ort_trace.h"

#include <stdlib.h>
#include <string.h>

#include "ortmk_ipc.pb-c.h"

#define MAX_OPEN 64               /* unanswered requests per track */
#define MAX_THREADS 64            /* named real threads per track */
#define IPC_TID (1u << 30)        /* + stream: the message threads */
#define NO_PID (1 << 29)          /* + n: a track whose process id is not known */

typedef struct open_req {
	uint64_t seq, t_ns;
	uint32_t kind, stream;
	char summary[256];
} open_req;

typedef struct track {
	uint32_t core_pid;
	char provider[32];
	uint32_t pid;                 /* the process, 0: not known */
	int id;                       /* the Chrome pid: pid, or NO_PID + n */
	uint32_t threads[MAX_THREADS];/* real threads named so far */
	size_t n_threads;
	open_req open[MAX_OPEN];
	size_t n_open;
	uint32_t streams[16];
	size_t n_streams;
} track;

typedef struct exporter {
	FILE *out;
	track *tracks;
	size_t n_tracks;
	uint64_t base_ns;
	bool have_base, first;
	tr_names names;
	uint32_t n_cores;
	uint32_t cores[8];
} exporter;

static double us(const exporter *x, uint64_t t)
{
	return ((double)t - (double)x->base_ns) / 1e3;
}

/* Starts one event object: the fields every event has. */
static void ev_begin(exporter *x, const char *name, const char *ph, double ts, int pid, uint32_t tid)
{
	fputs(x->first ? "\n" : ",\n", x->out);
	x->first = false;
	fputs("{\"name\":", x->out);
	tr_json_str(x->out, name);
	fprintf(x->out, ",\"ph\":\"%s\",\"ts\":%.3f,\"pid\":%d,\"tid\":%u", ph, ts, pid, tid);
}

static void metadata(exporter *x, const char *what, int pid, uint32_t tid, const char *value)
{
	ev_begin(x, what, "M", 0, pid, tid);
	fputs(",\"args\":{\"name\":", x->out);
	tr_json_str(x->out, value);
	fputs("}}", x->out);
}

static void name_stream(exporter *x, track *t, uint32_t stream)
{
	char name[32];

	for (size_t i = 0; i < t->n_streams; i++)
		if (t->streams[i] == stream)
			return;
	if (t->n_streams < 16)
		t->streams[t->n_streams++] = stream;
	snprintf(name, sizeof(name), "ipc stream %u", stream);
	metadata(x, "thread_name", t->id, IPC_TID + stream, name);
}

/* A real thread of a track's process, named on first sight. */
static void name_thread(exporter *x, int pid, uint32_t *threads, size_t *n, uint32_t tid,
			const char *what)
{
	char name[64];

	for (size_t i = 0; i < *n; i++)
		if (threads[i] == tid)
			return;
	if (*n < MAX_THREADS)
		threads[(*n)++] = tid;
	snprintf(name, sizeof(name), "%s thread %u", what, tid);
	metadata(x, "thread_name", pid, tid, name);
}

static void note_core(exporter *x, uint32_t core_pid)
{
	for (uint32_t i = 0; i < x->n_cores; i++)
		if (x->cores[i] == core_pid)
			return;
	if (x->n_cores < 8)
		x->cores[x->n_cores++] = core_pid;
}

static track *get_track(exporter *x, uint32_t core_pid, const char *provider, uint32_t pid)
{
	char label[96];
	track *t;
	void *p;

	provider = provider && provider[0] ? provider : "?";
	for (size_t i = 0; i < x->n_tracks; i++)
		if (x->tracks[i].core_pid == core_pid && x->tracks[i].pid == pid &&
		    strncmp(x->tracks[i].provider, provider, 31) == 0)
			return &x->tracks[i];
	p = realloc(x->tracks, (x->n_tracks + 1) * sizeof(*x->tracks));
	if (!p)
		return NULL;
	x->tracks = p;
	t = &x->tracks[x->n_tracks++];
	memset(t, 0, sizeof(*t));
	t->core_pid = core_pid;
	t->pid = pid;
	snprintf(t->provider, sizeof(t->provider), "%s", provider);
	t->id = pid ? (int)pid : NO_PID + (int)x->n_tracks;
	if (pid && pid == core_pid)
		snprintf(label, sizeof(label), "app pid %u", pid);   /* the core's own events */
	else if (pid)
		snprintf(label, sizeof(label), "ep %s pid %u", t->provider, pid);
	else
		snprintf(label, sizeof(label), "ep %s", t->provider);
	if (x->n_cores > 1)
		snprintf(label + strlen(label), sizeof(label) - strlen(label), " (app %u)", core_pid);
	metadata(x, "process_name", t->id, 0, label);
	return t;
}

static const char *category(uint32_t kind, const char *name)
{
	if (kind == ORTMK__KIND__RUN)
		return "run";
	return strncmp(name, "COPY", 4) == 0 ? "copy" : "control";
}

static void slice(exporter *x, track *t, const open_req *q, uint64_t end_ns, const char *reply,
		  uint64_t reply_seq)
{
	char kb[32];
	const char *name = tr_kind_name(q->kind, kb, sizeof(kb));
	uint64_t dur = end_ns > q->t_ns ? end_ns - q->t_ns : 0;

	name_stream(x, t, q->stream);
	ev_begin(x, name, "X", us(x, q->t_ns), t->id, IPC_TID + q->stream);
	fprintf(x->out, ",\"dur\":%.3f,\"cat\":\"%s\",\"args\":{\"seq\":%llu,\"reply\":", (double)dur / 1e3,
		category(q->kind, name), (unsigned long long)q->seq);
	tr_json_str(x->out, reply);
	fprintf(x->out, ",\"reply_seq\":%llu,\"summary\":", (unsigned long long)reply_seq);
	tr_json_str(x->out, q->summary);
	fputs("}}", x->out);
}

static void instant(exporter *x, int pid, uint32_t tid, const char *name, uint64_t t_ns,
		    const char *scope, const char *detail)
{
	ev_begin(x, name, "i", us(x, t_ns), pid, tid);
	fprintf(x->out, ",\"s\":\"%s\",\"args\":{\"detail\":", scope);
	tr_json_str(x->out, detail);
	fputs("}}", x->out);
}

static void fences(exporter *x, track *t, const Ortmk__Trace__Message *m)
{
	for (size_t i = 0; i < m->n_fences; i++) {
		const Ortmk__Trace__Fence *f = m->fences[i];
		char id[64];

		snprintf(id, sizeof(id), "fence %llu=%llu", (unsigned long long)f->id,
			 (unsigned long long)f->value);
		ev_begin(x, "fence", f->signal ? "s" : "f", us(x, m->t_ns), t->id, IPC_TID + m->stream);
		fputs(",\"cat\":\"fence\",\"id\":", x->out);
		tr_json_str(x->out, id);
		fputs(f->signal ? "}" : ",\"bp\":\"e\"}", x->out);
	}
}

static void request(exporter *x, track *t, const Ortmk__Trace__Message *m)
{
	open_req *q;

	if (t->n_open == MAX_OPEN) {
		/* The oldest never got an answer: show it as an instant. */
		char kb[32];

		name_stream(x, t, t->open[0].stream);
		instant(x, t->id, IPC_TID + t->open[0].stream, tr_kind_name(t->open[0].kind, kb, sizeof(kb)),
			t->open[0].t_ns, "t", t->open[0].summary);
		memmove(t->open, t->open + 1, (MAX_OPEN - 1) * sizeof(*t->open));
		t->n_open--;
	}
	q = &t->open[t->n_open++];
	q->seq = m->seq;
	q->t_ns = m->t_ns;
	q->kind = m->kind;
	q->stream = m->stream;
	tr_summary(&x->names, m, q->summary, sizeof(q->summary));
}

static void reply(exporter *x, track *t, const Ortmk__Trace__Message *m)
{
	char kb[32], summary[256];

	for (size_t i = 0; i < t->n_open; i++) {
		if (t->open[i].seq != m->reply_to)
			continue;
		slice(x, t, &t->open[i], m->t_ns, tr_kind_name(m->kind, kb, sizeof(kb)), m->seq);
		t->open[i] = t->open[--t->n_open];
		return;
	}
	/* A reply with no request in the trace (an ERROR with reply_to 0...). */
	tr_summary(&x->names, m, summary, sizeof(summary));
	name_stream(x, t, m->stream);
	instant(x, t->id, IPC_TID + m->stream, tr_kind_name(m->kind, kb, sizeof(kb)), m->t_ns, "t",
		summary);
}

static void message(exporter *x, const Ortmk__Trace__Message *m)
{
	track *t = get_track(x, m->core_pid, m->provider, m->has_pid ? m->pid : 0);

	tr_names_note(&x->names, m);
	if (!t)
		return;
	if (m->invalid) {
		name_stream(x, t, 0);
		instant(x, t->id, IPC_TID, "invalid message", m->t_ns, "t", m->error);
	} else if (m->dir == ORTMK__TRACE__DIRECTION__TO_PROVIDER && !(m->has_reply_to && m->reply_to)) {
		request(x, t, m);
	} else if (m->dir == ORTMK__TRACE__DIRECTION__FROM_PROVIDER && m->has_reply_to && m->reply_to) {
		reply(x, t, m);
	} else {
		char kb[32], summary[256];

		tr_summary(&x->names, m, summary, sizeof(summary));
		name_stream(x, t, m->stream);
		instant(x, t->id, IPC_TID + m->stream, tr_kind_name(m->kind, kb, sizeof(kb)), m->t_ns,
			"t", summary);
	}
	fences(x, t, m);
}

/* Unanswered requests end at `end_ns` (a death) or become instants. */
static void close_open(exporter *x, track *t, uint64_t end_ns, const char *why)
{
	char kb[32];

	for (size_t i = 0; i < t->n_open; i++) {
		name_stream(x, t, t->open[i].stream);
		if (end_ns)
			slice(x, t, &t->open[i], end_ns, why, 0);
		else
			instant(x, t->id, IPC_TID + t->open[i].stream,
				tr_kind_name(t->open[i].kind, kb, sizeof(kb)), t->open[i].t_ns, "t",
				t->open[i].summary);
	}
	t->n_open = 0;
}

static void event(exporter *x, const Ortmk__Trace__Event *e)
{
	track *t = get_track(x, e->core_pid, e->provider, e->has_pid ? e->pid : 0);
	char name[96];

	if (!t)
		return;
	if (strcmp(e->event, "died") == 0)
		close_open(x, t, e->t_ns, "(provider died)");
	snprintf(name, sizeof(name), "%s", e->event);
	instant(x, t->id, 0, name, e->t_ns, "p", e->detail);
}

/* ---- profiling ------------------------------------------------------------ */

/* A provider's run on the thread that ran it, its node spans inside: the
 * same thread and nested times, so Perfetto nests them (bodies too). */
static void provider_run(exporter *x, const Ortmk__Trace__ProviderRun *pr)
{
	track *t = get_track(x, pr->core_pid, pr->provider, pr->has_pid ? pr->pid : 0);
	char name[64];

	if (!t)
		return;
	name_thread(x, t->id, t->threads, &t->n_threads, pr->tid, "run");
	snprintf(name, sizeof(name), "run %llu", (unsigned long long)pr->run_id);
	ev_begin(x, name, "X", us(x, pr->start_ns), t->id, pr->tid);
	fprintf(x->out, ",\"dur\":%.3f,\"cat\":\"provider_run\",\"args\":{\"session\":%llu,"
		"\"run_id\":%llu,\"seq\":%llu,\"spans\":%zu,\"spans_dropped\":%u}}",
		(double)pr->dur_ns / 1e3, (unsigned long long)pr->session,
		(unsigned long long)pr->run_id, (unsigned long long)pr->seq, pr->n_spans,
		pr->spans_dropped);
	for (size_t i = 0; i < pr->n_spans; i++) {
		const Ortmk__Trace__NodeSpan *s = pr->spans[i];

		name_thread(x, t->id, t->threads, &t->n_threads, s->tid, "run");
		ev_begin(x, s->name && s->name[0] ? s->name : s->op_type, "X", us(x, s->start_ns),
			 t->id, s->tid);
		fprintf(x->out, ",\"dur\":%.3f,\"cat\":\"node\",\"args\":{\"op_type\":",
			(double)s->dur_ns / 1e3);
		tr_json_str(x->out, s->op_type);
		fprintf(x->out, ",\"node\":%u,\"depth\":%u,\"fused\":%u,\"run_id\":%llu}}", s->node,
			s->depth, s->fused, (unsigned long long)pr->run_id);
	}
}

/* The application's ortmk_session_run, on its calling thread. */
static void session_run(exporter *x, const Ortmk__Trace__SessionRun *sr)
{
	track *t = get_track(x, sr->core_pid, "core", sr->core_pid);

	if (!t)
		return;
	name_thread(x, t->id, t->threads, &t->n_threads, sr->tid, "app");
	ev_begin(x, "session_run", "X", us(x, sr->start_ns), t->id, sr->tid);
	fprintf(x->out, ",\"dur\":%.3f,\"cat\":\"session_run\",\"args\":{\"session\":%llu,"
		"\"status\":%d}}", (double)sr->dur_ns / 1e3, (unsigned long long)sr->session,
		sr->status);
}

static void record(exporter *x, const Ortmk__Trace__Record *r)
{
	if (r->body_case == ORTMK__TRACE__RECORD__BODY_HEADER) {
		if (!x->have_base && r->header->has_start_ns) {
			x->base_ns = r->header->start_ns;
			x->have_base = true;
		}
		note_core(x, r->header->core_pid);
		get_track(x, r->header->core_pid, "core", r->header->core_pid);
	} else if (r->body_case == ORTMK__TRACE__RECORD__BODY_MESSAGE) {
		message(x, r->message);
	} else if (r->body_case == ORTMK__TRACE__RECORD__BODY_EVENT) {
		event(x, r->event);
	} else if (r->body_case == ORTMK__TRACE__RECORD__BODY_PROVIDER_RUN) {
		provider_run(x, r->provider_run);
	} else if (r->body_case == ORTMK__TRACE__RECORD__BODY_SESSION_RUN) {
		session_run(x, r->session_run);
	}
}

int tr_cmd_export_chrome(const char *file, FILE *out)
{
	FILE *in = tr_open(file);
	Ortmk__Trace__Record *r;
	exporter x;
	tr_reader rd;
	int rc;

	if (!in)
		return 1;
	memset(&x, 0, sizeof(x));
	x.out = out;
	x.first = true;
	tr_reader_init(&rd, in, file);
	/* Reading the whole file first would double the memory; instead the
	 * output is only valid once the end is reached, and an error makes
	 * the exit status non-zero so a caller knows not to use it. */
	fputs("{\"displayTimeUnit\":\"ms\",\"traceEvents\":[", out);
	while ((rc = tr_read(&rd, &r)) > 0) {
		record(&x, r);
		ortmk__trace__record__free_unpacked(r, NULL);
	}
	for (size_t i = 0; i < x.n_tracks; i++)
		close_open(&x, &x.tracks[i], 0, NULL);
	fputs("\n]}\n", out);
	if (rc < 0)
		fprintf(stderr, "ort-trace: %s\n", rd.err);
	tr_names_fini(&x.names);
	free(x.tracks);
	tr_reader_fini(&rd);
	if (in != stdin)
		fclose(in);
	return rc < 0 ? 1 : 0;
}
