/*
 * ort-trace: printing records, for `show` (a file) and `run` (live, as the
 * traced program writes them).  People get aligned columns, coloured only
 * on a terminal; machines get JSON Lines (--json), one object per record.
 * Filters (--provider, --kind, --session, --grep) apply to messages and
 * events; header records always pass.
 */
#include "ort_trace.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "ortmk_ipc.pb-c.h"

#define C_RESET "\033[0m"
#define C_DIM "\033[2m"
#define C_REQ "\033[36m"
#define C_REP "\033[32m"
#define C_BAD "\033[1;31m"
#define C_EVENT "\033[1;33m"

/* ---- the summary line -------------------------------------------------- */

typedef struct sbuf {
	char *p;
	size_t n, len;
} sbuf;

static void sb_add(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void sb_add(sbuf *b, const char *fmt, ...)
{
	va_list ap;
	int k;

	if (b->len + 1 >= b->n)
		return;
	va_start(ap, fmt);
	k = vsnprintf(b->p + b->len, b->n - b->len, fmt, ap);
	va_end(ap);
	if (k < 0)
		return;
	b->len += (size_t)k;
	if (b->len >= b->n) {
		b->len = b->n - 1;
		if (b->n > 4)
			memcpy(b->p + b->n - 4, "...", 4);
	}
}

static void tensor_summary(sbuf *b, const tr_names *names, const Ortmk__Trace__Message *m,
			   const Ortmk__Trace__Tensor *t)
{
	const char *name = t->has_value ? tr_names_find(names, m, t->value) : NULL;
	char bytes[32];

	if (name)
		sb_add(b, "%s ", name);
	else
		sb_add(b, "#%u ", t->value);
	sb_add(b, "%s", tr_dtype_name(t->dtype));
	if (t->dynamic && t->n_dims == 0 && m->kind == ORTMK__KIND__RUN) {
		sb_add(b, "[?] dynamic");
		if (t->has_buffer)
			sb_add(b, " @buf %llu", (unsigned long long)t->buffer);
		return;
	}
	sb_add(b, "[");
	for (size_t i = 0; i < t->n_dims && i < 16; i++)
		sb_add(b, "%s%lld", i ? "," : "", (long long)t->dims[i]);
	sb_add(b, "%s] %s", t->n_dims > 16 ? ",..." : "", tr_bytes(t->nbytes, bytes, sizeof(bytes)));
	if (t->external)
		sb_add(b, " file %llu+%llu", (unsigned long long)t->segment, (unsigned long long)t->offset);
	if (t->has_buffer)     /* in a device buffer (docs/DEVICE.md) */
		sb_add(b, " @buf %llu", (unsigned long long)t->buffer);
}

static void sb_sep(sbuf *b)
{
	if (b->len)
		sb_add(b, " | ");
}

void tr_summary(const tr_names *names, const Ortmk__Trace__Message *m, char *buf, size_t n)
{
	sbuf b = {buf, n, 0};

	buf[0] = 0;
	if (m->invalid) {
		sb_add(&b, "refused: %s", m->error ? m->error : "?");
		return;
	}
	if (m->has_subgraph_id)
		sb_add(&b, "sg %u", m->subgraph_id);
	if (m->has_run_id)
		sb_add(&b, "%srun %llu", b.len ? " " : "", (unsigned long long)m->run_id);
	if (m->has_status) {
		sb_sep(&b);
		sb_add(&b, "%s: %s", tr_status_name(m->status), m->error ? m->error : "");
	}
	for (size_t i = 0; i < m->n_tensors; i++) {
		if (i == 0)
			sb_sep(&b);
		sb_add(&b, "%s", i ? ", " : "");
		tensor_summary(&b, names, m, m->tensors[i]);
	}
	if (m->has_tensors_omitted)
		sb_add(&b, " (+%u more)", m->tensors_omitted);
	for (size_t i = 0; i < m->n_fences; i++) {
		sb_sep(&b);
		sb_add(&b, "fence %llu=%llu %s", (unsigned long long)m->fences[i]->id,
		       (unsigned long long)m->fences[i]->value, m->fences[i]->signal ? "signal" : "wait");
	}
	if (m->note) {
		sb_sep(&b);
		sb_add(&b, "%s", m->note);
	}
}

/* ---- filters ------------------------------------------------------------- */

static bool kind_listed(const char *list, const char *name)
{
	size_t len = strlen(name);

	for (const char *p = list; *p;) {
		const char *e = strchr(p, ',');
		size_t k = e ? (size_t)(e - p) : strlen(p);

		if (k == len && strncasecmp(p, name, k) == 0)
			return true;
		p += k + (e != NULL);
	}
	return false;
}

static bool pass_message(const tr_filter *f, const Ortmk__Trace__Message *m, const char *kind,
			 const char *summary)
{
	if (f->provider && strcmp(f->provider, m->provider ? m->provider : "") != 0)
		return false;
	if (f->has_session && (!m->has_session || m->session != f->session))
		return false;
	if (f->kinds && !kind_listed(f->kinds, kind))
		return false;
	if (f->grep && !strstr(summary, f->grep) && !strstr(kind, f->grep) &&
	    !(m->provider && strstr(m->provider, f->grep)))
		return false;
	return true;
}

static bool pass_event(const tr_filter *f, const Ortmk__Trace__Event *e)
{
	if (f->provider && strcmp(f->provider, e->provider ? e->provider : "") != 0)
		return false;
	if (f->has_session)
		return false;
	if (f->kinds && !kind_listed(f->kinds, e->event) && !kind_listed(f->kinds, "event"))
		return false;
	if (f->grep && !strstr(e->event, f->grep) && !(e->detail && strstr(e->detail, f->grep)) &&
	    !(e->provider && strstr(e->provider, f->grep)))
		return false;
	return true;
}

/* ---- text output ------------------------------------------------------- */

static const char *fmt_ns(uint64_t ns, char *buf, size_t n)
{
	if (ns < 1000)
		snprintf(buf, n, "%lluns", (unsigned long long)ns);
	else if (ns < 1000000)
		snprintf(buf, n, "%.1fus", (double)ns / 1e3);
	else if (ns < 1000000000)
		snprintf(buf, n, "%.3fms", (double)ns / 1e6);
	else
		snprintf(buf, n, "%.3fs", (double)ns / 1e9);
	return buf;
}

static double rel_s(const tr_printer *p, uint64_t t)
{
	return p->have_base ? ((double)t - (double)p->base_ns) / 1e9 : 0;
}

static void columns(tr_printer *p)
{
	if (p->printed_columns || p->json)
		return;
	p->printed_columns = true;
	fprintf(p->out, "%s%12s %-3s %-8s %7s %5s %3s %6s %6s %-16s %9s %10s  %s%s\n",
		p->color ? C_DIM : "", "TIME(s)", "DIR", "PROVIDER", "PID", "SESS", "STR", "SEQ",
		"REPLY", "KIND", "SIZE", "LATENCY", "SUMMARY", p->color ? C_RESET : "");
}

static void num_col(FILE *f, int width, bool has, uint64_t v)
{
	if (has)
		fprintf(f, " %*llu", width, (unsigned long long)v);
	else
		fprintf(f, " %*s", width, "-");
}

static const char *kind_color(const Ortmk__Trace__Message *m)
{
	if (m->invalid || m->kind == ORTMK__KIND__ERROR)
		return C_BAD;
	return m->dir == ORTMK__TRACE__DIRECTION__TO_PROVIDER ? C_REQ : C_REP;
}

static void text_message(tr_printer *p, const Ortmk__Trace__Message *m, const char *kind,
			 const char *summary)
{
	FILE *f = p->out;
	char size[32], lat[32];

	columns(p);
	/* => and <= : carried by the shared-memory ring rather than nng. */
	fprintf(f, "%12.6f %-3s %-8.8s", rel_s(p, m->t_ns),
		m->dir == ORTMK__TRACE__DIRECTION__TO_PROVIDER ? (m->ring ? "=>" : "->") :
		(m->ring ? "<=" : "<-"),
		m->provider && m->provider[0] ? m->provider : "?");
	num_col(f, 7, m->has_pid, m->pid);
	num_col(f, 5, m->has_session, m->session);
	num_col(f, 3, m->has_stream, m->stream);
	num_col(f, 6, m->has_seq, m->seq);
	num_col(f, 6, m->has_reply_to && m->reply_to, m->reply_to);
	fprintf(f, " %s%-16s%s %9s %10s  ", p->color ? kind_color(m) : "", kind,
		p->color ? C_RESET : "", tr_bytes(m->size, size, sizeof(size)),
		m->has_latency_ns ? fmt_ns(m->latency_ns, lat, sizeof(lat)) : "-");
	tr_print_clean(f, summary);
	fputc('\n', f);
}

static void text_event(tr_printer *p, const Ortmk__Trace__Event *e)
{
	FILE *f = p->out;

	columns(p);
	fprintf(f, "%12.6f %-3s %-8.8s", rel_s(p, e->t_ns), "**",
		e->provider && e->provider[0] ? e->provider : "-");
	num_col(f, 7, e->has_pid, e->pid);
	fprintf(f, " %5s %3s %6s %6s %s%-16.16s%s %9s %10s  ", "-", "-", "-", "-",
		p->color ? C_EVENT : "", e->event, p->color ? C_RESET : "", "-", "-");
	tr_print_clean(f, e->detail);
	fputc('\n', f);
}

static void text_header(tr_printer *p, const Ortmk__Trace__Header *h)
{
	char when[64] = "?";
	time_t t = (time_t)(h->start_unix_ns / 1000000000u);
	struct tm tm;

	if (h->has_start_unix_ns && localtime_r(&t, &tm))
		strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", &tm);
	fprintf(p->out, "%s# trace of `", p->color ? C_DIM : "");
	tr_print_clean(p->out, h->program);
	fprintf(p->out, "` (pid %u) on ", h->core_pid);
	tr_print_clean(p->out, h->host);
	fprintf(p->out, ", started %s, IPC protocol %u, trace format %u%s\n", when,
		h->protocol_version, h->format_version, p->color ? C_RESET : "");
}

/* ---- JSON output --------------------------------------------------------- */

static void json_u(FILE *f, const char *key, bool has, uint64_t v)
{
	if (has)
		fprintf(f, ",\"%s\":%llu", key, (unsigned long long)v);
}

static void json_tensor(FILE *f, const tr_names *names, const Ortmk__Trace__Message *m,
			const Ortmk__Trace__Tensor *t)
{
	const char *name = t->has_value ? tr_names_find(names, m, t->value) : NULL;

	fprintf(f, "{\"value\":%u,\"name\":", t->value);
	if (name)
		tr_json_str(f, name);
	else
		fputs("null", f);
	fprintf(f, ",\"dtype\":\"%s\",\"dims\":[", tr_dtype_name(t->dtype));
	for (size_t i = 0; i < t->n_dims; i++)
		fprintf(f, "%s%lld", i ? "," : "", (long long)t->dims[i]);
	fprintf(f, "],\"nbytes\":%llu,\"segment\":%llu,\"offset\":%llu,\"dynamic\":%s,\"external\":%s",
		(unsigned long long)t->nbytes, (unsigned long long)t->segment,
		(unsigned long long)t->offset, t->dynamic ? "true" : "false",
		t->external ? "true" : "false");
	if (t->has_buffer)
		fprintf(f, ",\"buffer\":%llu", (unsigned long long)t->buffer);
	fputc('}', f);
}

static void json_message(tr_printer *p, const Ortmk__Trace__Message *m, const char *kind,
			 const char *summary)
{
	FILE *f = p->out;
	char rk[32];

	fprintf(f, "{\"record\":%llu,\"type\":\"message\",\"t_ns\":%llu,\"t\":%.9f,\"dir\":\"%s\",\"provider\":",
		(unsigned long long)p->index, (unsigned long long)m->t_ns, rel_s(p, m->t_ns),
		m->dir == ORTMK__TRACE__DIRECTION__TO_PROVIDER ? "to_provider" : "from_provider");
	tr_json_str(f, m->provider);
	fprintf(f, ",\"kind\":\"%s\",\"transport\":\"%s\"", kind, m->ring ? "ring" : "nng");
	json_u(f, "pid", m->has_pid, m->pid);
	json_u(f, "core_pid", m->has_core_pid, m->core_pid);
	json_u(f, "session", m->has_session, m->session);
	json_u(f, "stream", m->has_stream, m->stream);
	json_u(f, "seq", m->has_seq, m->seq);
	json_u(f, "reply_to", m->has_reply_to, m->reply_to);
	json_u(f, "size", m->has_size, m->size);
	json_u(f, "latency_ns", m->has_latency_ns, m->latency_ns);
	if (m->has_request_kind)
		fprintf(f, ",\"request_kind\":\"%s\"", tr_kind_name(m->request_kind, rk, sizeof(rk)));
	json_u(f, "subgraph_id", m->has_subgraph_id, m->subgraph_id);
	json_u(f, "run_id", m->has_run_id, m->run_id);
	if (m->has_status)
		fprintf(f, ",\"status\":\"%s\"", tr_status_name(m->status));
	if (m->error) {
		fputs(",\"error\":", f);
		tr_json_str(f, m->error);
	}
	fputs(",\"tensors\":[", f);
	for (size_t i = 0; i < m->n_tensors; i++) {
		fputs(i ? "," : "", f);
		json_tensor(f, &p->names, m, m->tensors[i]);
	}
	fputs("],\"fences\":[", f);
	for (size_t i = 0; i < m->n_fences; i++)
		fprintf(f, "%s{\"id\":%llu,\"value\":%llu,\"signal\":%s}", i ? "," : "",
			(unsigned long long)m->fences[i]->id, (unsigned long long)m->fences[i]->value,
			m->fences[i]->signal ? "true" : "false");
	fputs("],\"summary\":", f);
	tr_json_str(f, summary);
	fputs("}\n", f);
}

static void json_event(tr_printer *p, const Ortmk__Trace__Event *e)
{
	FILE *f = p->out;

	fprintf(f, "{\"record\":%llu,\"type\":\"event\",\"t_ns\":%llu,\"t\":%.9f,\"event\":",
		(unsigned long long)p->index, (unsigned long long)e->t_ns, rel_s(p, e->t_ns));
	tr_json_str(f, e->event);
	fputs(",\"provider\":", f);
	tr_json_str(f, e->provider);
	json_u(f, "pid", e->has_pid, e->pid);
	json_u(f, "core_pid", e->has_core_pid, e->core_pid);
	fputs(",\"detail\":", f);
	tr_json_str(f, e->detail);
	fputs("}\n", f);
}

static void json_header(tr_printer *p, const Ortmk__Trace__Header *h)
{
	FILE *f = p->out;

	fprintf(f, "{\"record\":%llu,\"type\":\"header\",\"format_version\":%u,\"protocol_version\":%u,"
		"\"core_pid\":%u,\"start_ns\":%llu,\"start_unix_ns\":%llu,\"program\":",
		(unsigned long long)p->index, h->format_version, h->protocol_version, h->core_pid,
		(unsigned long long)h->start_ns, (unsigned long long)h->start_unix_ns);
	tr_json_str(f, h->program);
	fputs(",\"host\":", f);
	tr_json_str(f, h->host);
	fputs("}\n", f);
}

/* ---- profiling records --------------------------------------------------- */

static void json_spans(FILE *f, const Ortmk__Trace__ProviderRun *pr)
{
	for (size_t i = 0; i < pr->n_spans; i++) {
		const Ortmk__Trace__NodeSpan *s = pr->spans[i];

		fprintf(f, "%s{\"node\":%u,\"name\":", i ? "," : "", s->node);
		tr_json_str(f, s->name);
		fputs(",\"op_type\":", f);
		tr_json_str(f, s->op_type);
		fprintf(f, ",\"start_ns\":%llu,\"dur_ns\":%llu,\"tid\":%u,\"depth\":%u,\"fused\":%u",
			(unsigned long long)s->start_ns, (unsigned long long)s->dur_ns, s->tid, s->depth,
			s->fused);
		json_u(f, "parent", s->has_parent, s->parent);
		fputc('}', f);
	}
}

static void json_provider_run(tr_printer *p, const Ortmk__Trace__ProviderRun *pr)
{
	FILE *f = p->out;

	fprintf(f, "{\"record\":%llu,\"type\":\"provider_run\",\"t_ns\":%llu,\"t\":%.9f,\"provider\":",
		(unsigned long long)p->index, (unsigned long long)pr->t_ns, rel_s(p, pr->t_ns));
	tr_json_str(f, pr->provider);
	json_u(f, "pid", pr->has_pid, pr->pid);
	json_u(f, "core_pid", pr->has_core_pid, pr->core_pid);
	json_u(f, "session", pr->has_session, pr->session);
	json_u(f, "run_id", pr->has_run_id, pr->run_id);
	json_u(f, "seq", pr->has_seq, pr->seq);
	json_u(f, "start_ns", pr->has_start_ns, pr->start_ns);
	json_u(f, "dur_ns", pr->has_dur_ns, pr->dur_ns);
	json_u(f, "tid", pr->has_tid, pr->tid);
	json_u(f, "spans_dropped", pr->has_spans_dropped, pr->spans_dropped);
	fputs(",\"spans\":[", f);
	json_spans(f, pr);
	fputs("]}\n", f);
}

static void json_session_run(tr_printer *p, const Ortmk__Trace__SessionRun *sr)
{
	fprintf(p->out, "{\"record\":%llu,\"type\":\"session_run\",\"t_ns\":%llu,\"t\":%.9f",
		(unsigned long long)p->index, (unsigned long long)sr->start_ns, rel_s(p, sr->start_ns));
	json_u(p->out, "start_ns", sr->has_start_ns, sr->start_ns);
	json_u(p->out, "dur_ns", sr->has_dur_ns, sr->dur_ns);
	json_u(p->out, "core_pid", sr->has_core_pid, sr->core_pid);
	json_u(p->out, "tid", sr->has_tid, sr->tid);
	json_u(p->out, "session", sr->has_session, sr->session);
	fprintf(p->out, ",\"status\":%d}\n", sr->status);
}

/* In the text listing (and for the filters) a profiling record reads as an
 * event: "profile" for a provider's run, "session_run" for the
 * application's. */
static void profile_record(tr_printer *p, const Ortmk__Trace__Record *r)
{
	Ortmk__Trace__Event ev = ORTMK__TRACE__EVENT__INIT;
	char detail[256], b[32];

	if (r->body_case == ORTMK__TRACE__RECORD__BODY_PROVIDER_RUN) {
		const Ortmk__Trace__ProviderRun *pr = r->provider_run;

		ev.t_ns = pr->t_ns;
		ev.event = "profile";
		ev.provider = pr->provider;
		ev.has_pid = pr->has_pid;
		ev.pid = pr->pid;
		snprintf(detail, sizeof(detail), "run %llu | %zu node spans%s over %s on thread %u",
			 (unsigned long long)pr->run_id, pr->n_spans,
			 pr->spans_dropped ? " (more dropped)" : "",
			 fmt_ns(pr->dur_ns, b, sizeof(b)), pr->tid);
	} else {
		const Ortmk__Trace__SessionRun *sr = r->session_run;

		ev.t_ns = sr->start_ns + sr->dur_ns;
		ev.event = "session_run";
		ev.provider = "app";
		ev.has_pid = 1;
		ev.pid = sr->core_pid;
		snprintf(detail, sizeof(detail), "session %llu | %s on thread %u%s",
			 (unsigned long long)sr->session, fmt_ns(sr->dur_ns, b, sizeof(b)), sr->tid,
			 sr->status ? ", failed" : "");
	}
	ev.detail = detail;
	if (!pass_event(&p->filter, &ev))
		return;
	if (!p->json)
		text_event(p, &ev);
	else if (r->body_case == ORTMK__TRACE__RECORD__BODY_PROVIDER_RUN)
		json_provider_run(p, r->provider_run);
	else
		json_session_run(p, r->session_run);
}

/* ---- the printer --------------------------------------------------------- */

void tr_printer_init(tr_printer *p, FILE *out, bool json, bool color, const tr_filter *f)
{
	memset(p, 0, sizeof(*p));
	p->out = out;
	p->json = json;
	p->color = color && !json;
	if (f)
		p->filter = *f;
}

static void print_message(tr_printer *p, const Ortmk__Trace__Message *m)
{
	char kbuf[32], summary[2048];
	const char *kind = m->invalid ? "invalid" : tr_kind_name(m->kind, kbuf, sizeof(kbuf));

	tr_names_note(&p->names, m);
	tr_summary(&p->names, m, summary, sizeof(summary));
	if (!pass_message(&p->filter, m, kind, summary))
		return;
	if (p->json)
		json_message(p, m, kind, summary);
	else
		text_message(p, m, kind, summary);
}

void tr_printer_record(tr_printer *p, const Ortmk__Trace__Record *r)
{
	p->index++;
	switch (r->body_case) {
	case ORTMK__TRACE__RECORD__BODY_HEADER:
		if (!p->have_base && r->header->has_start_ns) {
			p->base_ns = r->header->start_ns;
			p->have_base = true;
		}
		if (p->json)
			json_header(p, r->header);
		else
			text_header(p, r->header);
		break;
	case ORTMK__TRACE__RECORD__BODY_MESSAGE:
		print_message(p, r->message);
		break;
	case ORTMK__TRACE__RECORD__BODY_EVENT:
		if (!pass_event(&p->filter, r->event))
			break;
		if (p->json)
			json_event(p, r->event);
		else
			text_event(p, r->event);
		break;
	case ORTMK__TRACE__RECORD__BODY_PROVIDER_RUN:
	case ORTMK__TRACE__RECORD__BODY_SESSION_RUN:
		profile_record(p, r);
		break;
	default:
		break;            /* a record type from a newer format: skipped */
	}
	if (p->live)
		fflush(p->out);
}

void tr_printer_fini(tr_printer *p)
{
	tr_names_fini(&p->names);
}

int tr_cmd_show(const char *file, bool json, bool color, const tr_filter *f)
{
	FILE *in = tr_open(file);
	Ortmk__Trace__Record *r;
	tr_reader rd;
	tr_printer p;
	int rc;

	if (!in)
		return 1;
	tr_reader_init(&rd, in, file);
	tr_printer_init(&p, stdout, json, color, f);
	while ((rc = tr_read(&rd, &r)) > 0) {
		tr_printer_record(&p, r);
		ortmk__trace__record__free_unpacked(r, NULL);
	}
	if (rc < 0)
		fprintf(stderr, "ort-trace: %s\n", rd.err);
	tr_printer_fini(&p);
	tr_reader_fini(&rd);
	if (in != stdin)
		fclose(in);
	return rc < 0 ? 1 : 0;
}
