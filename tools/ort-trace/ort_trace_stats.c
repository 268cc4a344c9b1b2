/*
 * ort-trace stats: totals from a trace.  Per message kind: count, bytes on
 * the wire and latency (median, p99).  A reply's latency is the time from
 * its request being sent to the reply being received; it is counted under
 * the reply's kind and under the request's kind, so "RUN" reads as the
 * round trip of a run.  Per provider: messages and bytes each way,
 * host<->device transfers, restarts and deaths (events), invalid messages.
 * Transfers are COPY ops by direction (h2d, d2h, d2d; count and bytes) and
 * the uploads and downloads providers report in RESULT (bindings that were
 * in host memory), with the runs that had any: "runs with transfers 1 of
 * 100, last run 1" is a loop that stays on the device after its first step.
 * Profiled runs add a PROFILE section (ort_trace_profile.c).
 */
#include "ort_trace.h"

#include <stdlib.h>
#include <string.h>

#include "ortmk_ipc.pb-c.h"

#define MAX_PIDS 16

typedef struct kind_stat {
	char name[32];
	uint64_t count, bytes;
	uint64_t *lat;
	size_t n_lat, cap_lat;
} kind_stat;

typedef struct prov_stat {
	char name[32];
	uint32_t pids[MAX_PIDS];
	size_t n_pids;
	uint64_t msgs_to, bytes_to, msgs_from, bytes_from;
	uint64_t restarts, deaths, invalid, errors;
	/* transfers: COPY ops (h2d, d2h, d2d) and RESULT's uploads/downloads */
	uint64_t copy_ops[3], copy_bytes[3];
	uint64_t uploads, upload_bytes, downloads, download_bytes;
	uint64_t results, results_with_transfers, last_result_with_transfers;
} prov_stat;

typedef struct stats {
	kind_stat *kinds;
	size_t n_kinds;
	prov_stat *provs;
	size_t n_provs;
	kind_stat *events;        /* count only */
	size_t n_events;
	uint64_t records, first_ns, last_ns;
	tr_prof *prof;            /* profiled runs (ort_trace_profile.c) */
} stats;

/* Finds or adds the entry named `name` in a table of structs whose first
 * member is a char[32] name. */
static void *table_get(void **tab, size_t *n, size_t size, const char *name)
{
	char *p = *tab;
	void *grown;

	for (size_t i = 0; i < *n; i++)
		if (strncmp(p + i * size, name, 31) == 0)
			return p + i * size;
	grown = realloc(*tab, (*n + 1) * size);
	if (!grown)
		return NULL;
	*tab = grown;
	p = (char *)grown + *n * size;
	memset(p, 0, size);
	snprintf(p, 32, "%s", name);
	(*n)++;
	return p;
}

static void add_latency(kind_stat *k, uint64_t ns)
{
	if (k->n_lat == k->cap_lat) {
		size_t cap = k->cap_lat ? 2 * k->cap_lat : 16;
		uint64_t *p = realloc(k->lat, cap * sizeof(*p));

		if (!p)
			return;
		k->lat = p;
		k->cap_lat = cap;
	}
	k->lat[k->n_lat++] = ns;
}

static void add_pid(prov_stat *p, uint32_t pid)
{
	for (size_t i = 0; i < p->n_pids; i++)
		if (p->pids[i] == pid)
			return;
	if (p->n_pids < MAX_PIDS)
		p->pids[p->n_pids++] = pid;
}

static void count_transfers(prov_stat *p, const Ortmk__Trace__Message *m)
{
	if (m->invalid || !m->has_kind)
		return;
	if (m->kind == ORTMK__KIND__COPY && m->dir == ORTMK__TRACE__DIRECTION__TO_PROVIDER) {
		p->copy_ops[0] += m->h2d;
		p->copy_bytes[0] += m->h2d_bytes;
		p->copy_ops[1] += m->d2h;
		p->copy_bytes[1] += m->d2h_bytes;
		p->copy_ops[2] += m->d2d;
		p->copy_bytes[2] += m->d2d_bytes;
	} else if (m->kind == ORTMK__KIND__RESULT) {
		p->results++;
		p->uploads += m->h2d;
		p->upload_bytes += m->h2d_bytes;
		p->downloads += m->d2h;
		p->download_bytes += m->d2h_bytes;
		if (m->h2d || m->d2h) {
			p->results_with_transfers++;
			p->last_result_with_transfers = p->results;
		}
	}
}

static void add_message(stats *s, const Ortmk__Trace__Message *m)
{
	char kb[32], rb[32];
	const char *kind = m->invalid ? "invalid" : tr_kind_name(m->kind, kb, sizeof(kb));
	kind_stat *k = table_get((void **)&s->kinds, &s->n_kinds, sizeof(kind_stat), kind);
	prov_stat *p = table_get((void **)&s->provs, &s->n_provs, sizeof(prov_stat),
				 m->provider && m->provider[0] ? m->provider : "?");

	if (k) {
		k->count++;
		k->bytes += m->size;
		if (m->has_latency_ns)
			add_latency(k, m->latency_ns);
	}
	if (m->has_latency_ns && m->has_request_kind) {
		kind_stat *rk = table_get((void **)&s->kinds, &s->n_kinds, sizeof(kind_stat),
					  tr_kind_name(m->request_kind, rb, sizeof(rb)));
		if (rk)
			add_latency(rk, m->latency_ns);
	}
	if (!p)
		return;
	if (m->has_pid)
		add_pid(p, m->pid);
	if (m->dir == ORTMK__TRACE__DIRECTION__TO_PROVIDER) {
		p->msgs_to++;
		p->bytes_to += m->size;
	} else {
		p->msgs_from++;
		p->bytes_from += m->size;
	}
	p->invalid += m->invalid;
	p->errors += !m->invalid && m->kind == ORTMK__KIND__ERROR;
	count_transfers(p, m);
}

static void add_event(stats *s, const Ortmk__Trace__Event *e)
{
	kind_stat *k = table_get((void **)&s->events, &s->n_events, sizeof(kind_stat), e->event);
	prov_stat *p = table_get((void **)&s->provs, &s->n_provs, sizeof(prov_stat),
				 e->provider && e->provider[0] ? e->provider : "?");

	if (k)
		k->count++;
	if (!p)
		return;
	if (e->has_pid)
		add_pid(p, e->pid);
	p->restarts += strcmp(e->event, "restart") == 0;
	p->deaths += strcmp(e->event, "died") == 0;
}

static void add_record(stats *s, const Ortmk__Trace__Record *r)
{
	uint64_t t = 0;

	s->records++;
	if (r->body_case == ORTMK__TRACE__RECORD__BODY_MESSAGE) {
		add_message(s, r->message);
		t = r->message->t_ns;
	} else if (r->body_case == ORTMK__TRACE__RECORD__BODY_EVENT) {
		add_event(s, r->event);
		t = r->event->t_ns;
	} else if (r->body_case == ORTMK__TRACE__RECORD__BODY_HEADER && r->header->has_start_ns) {
		t = r->header->start_ns;
	} else if (s->prof) {
		tr_prof_add(s->prof, r);
	}
	if (t && (!s->first_ns || t < s->first_ns))
		s->first_ns = t;
	if (t > s->last_ns)
		s->last_ns = t;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Nearest rank: the smallest value with at least q of the samples at or
 * below it. */
static uint64_t quantile(const kind_stat *k, double q)
{
	size_t rank = (size_t)(q * (double)k->n_lat + 0.999999);

	if (rank < 1)
		rank = 1;
	return k->lat[rank > k->n_lat ? k->n_lat - 1 : rank - 1];
}

static void print_ms(FILE *f, const kind_stat *k, double q)
{
	if (k->n_lat)
		fprintf(f, " %11.3f", (double)quantile(k, q) / 1e6);
	else
		fprintf(f, " %11s", "-");
}

/* Where the H2D/D2H/D2D columns come from, per provider that had any. */
static void print_transfers(const stats *s, const char *bold, const char *reset)
{
	int header = 0;

	for (size_t i = 0; i < s->n_provs; i++) {
		const prov_stat *p = &s->provs[i];
		char b[5][32];

		if (!p->copy_ops[0] && !p->copy_ops[1] && !p->copy_ops[2] && !p->uploads && !p->downloads)
			continue;
		if (!header++)
			printf("\n%sTRANSFERS%s\n", bold, reset);
		printf("%-10s COPY h2d %llu (%s), d2h %llu (%s), d2d %llu (%s); in runs: uploads %llu (%s), "
		       "downloads %llu (%s); runs with transfers %llu of %llu",
		       p->name, (unsigned long long)p->copy_ops[0], tr_bytes(p->copy_bytes[0], b[0], 32),
		       (unsigned long long)p->copy_ops[1], tr_bytes(p->copy_bytes[1], b[1], 32),
		       (unsigned long long)p->copy_ops[2], tr_bytes(p->copy_bytes[2], b[2], 32),
		       (unsigned long long)p->uploads, tr_bytes(p->upload_bytes, b[3], 32),
		       (unsigned long long)p->downloads, tr_bytes(p->download_bytes, b[4], 32),
		       (unsigned long long)p->results_with_transfers, (unsigned long long)p->results);
		if (p->results_with_transfers)
			printf(", last run %llu", (unsigned long long)p->last_result_with_transfers);
		putchar('\n');
	}
}

static void print_text(const stats *s, bool color)
{
	const char *dim = color ? "\033[2m" : "", *bold = color ? "\033[1m" : "",
		*reset = color ? "\033[0m" : "";
	char b1[32], b2[32];

	printf("%s# %llu records, %zu providers, %.3f s%s\n", dim, (unsigned long long)s->records,
	       s->n_provs, s->last_ns > s->first_ns ? (double)(s->last_ns - s->first_ns) / 1e9 : 0.0, reset);
	printf("%s%-18s %8s %10s %11s %11s%s\n", bold, "KIND", "COUNT", "BYTES", "MEDIAN(ms)",
	       "P99(ms)", reset);
	for (size_t i = 0; i < s->n_kinds; i++) {
		const kind_stat *k = &s->kinds[i];

		if (!k->count && !k->n_lat)
			continue;
		printf("%-18s %8llu %10s", k->name, (unsigned long long)k->count,
		       tr_bytes(k->bytes, b1, sizeof(b1)));
		print_ms(stdout, k, 0.5);
		print_ms(stdout, k, 0.99);
		putchar('\n');
	}
	printf("\n%s%-10s %-14s %7s %10s %7s %10s %7s %7s %7s %8s %6s %7s %6s%s\n", bold, "PROVIDER", "PIDS",
	       "MSGS->", "BYTES->", "MSGS<-", "BYTES<-", "H2D", "D2H", "D2D", "RESTARTS", "DEATHS",
	       "INVALID", "ERRORS", reset);
	for (size_t i = 0; i < s->n_provs; i++) {
		const prov_stat *p = &s->provs[i];
		char pids[32] = "-";

		/* The first process, and how many replaced it (--json lists all). */
		if (p->n_pids == 1)
			snprintf(pids, sizeof(pids), "%u", p->pids[0]);
		else if (p->n_pids > 1)
			snprintf(pids, sizeof(pids), "%u+%zu", p->pids[0], p->n_pids - 1);
		printf("%-10s %-14s %7llu %10s %7llu %10s %7llu %7llu %7llu %8llu %6llu %7llu %6llu\n", p->name, pids,
		       (unsigned long long)p->msgs_to, tr_bytes(p->bytes_to, b1, sizeof(b1)),
		       (unsigned long long)p->msgs_from, tr_bytes(p->bytes_from, b2, sizeof(b2)),
		       (unsigned long long)(p->copy_ops[0] + p->uploads),
		       (unsigned long long)(p->copy_ops[1] + p->downloads),
		       (unsigned long long)p->copy_ops[2],
		       (unsigned long long)p->restarts, (unsigned long long)p->deaths,
		       (unsigned long long)p->invalid, (unsigned long long)p->errors);
	}
	print_transfers(s, bold, reset);
	if (s->n_events) {
		printf("\n%sEVENTS%s", bold, reset);
		for (size_t i = 0; i < s->n_events; i++)
			printf("  %s %llu", s->events[i].name, (unsigned long long)s->events[i].count);
		putchar('\n');
	}
	if (s->prof)
		tr_prof_print_text(s->prof);
}

static void json_kind(const kind_stat *k, bool first)
{
	printf("%s", first ? "" : ",");
	tr_json_str(stdout, k->name);
	printf(":{\"count\":%llu,\"bytes\":%llu,\"latency_samples\":%zu", (unsigned long long)k->count,
	       (unsigned long long)k->bytes, k->n_lat);
	if (k->n_lat)
		printf(",\"latency_median_ns\":%llu,\"latency_p99_ns\":%llu",
		       (unsigned long long)quantile(k, 0.5), (unsigned long long)quantile(k, 0.99));
	printf("}");
}

static void json_provider(const prov_stat *p, bool first)
{
	printf("%s", first ? "" : ",");
	tr_json_str(stdout, p->name);
	printf(":{\"pids\":[");
	for (size_t j = 0; j < p->n_pids; j++)
		printf("%s%u", j ? "," : "", p->pids[j]);
	printf("],\"messages_to\":%llu,\"bytes_to\":%llu,\"messages_from\":%llu,\"bytes_from\":%llu,"
	       "\"copies_h2d\":%llu,\"copies_d2h\":%llu,\"restarts\":%llu,\"deaths\":%llu,"
	       "\"invalid\":%llu,\"errors\":%llu,",
	       (unsigned long long)p->msgs_to, (unsigned long long)p->bytes_to,
	       (unsigned long long)p->msgs_from, (unsigned long long)p->bytes_from,
	       (unsigned long long)(p->copy_ops[0] + p->uploads),
	       (unsigned long long)(p->copy_ops[1] + p->downloads),
	       (unsigned long long)p->restarts, (unsigned long long)p->deaths,
	       (unsigned long long)p->invalid, (unsigned long long)p->errors);
	printf("\"transfers\":{\"copy_h2d\":%llu,\"copy_h2d_bytes\":%llu,\"copy_d2h\":%llu,"
	       "\"copy_d2h_bytes\":%llu,\"copy_d2d\":%llu,\"copy_d2d_bytes\":%llu,"
	       "\"run_uploads\":%llu,\"run_upload_bytes\":%llu,\"run_downloads\":%llu,"
	       "\"run_download_bytes\":%llu,\"runs\":%llu,\"runs_with_transfers\":%llu,"
	       "\"last_run_with_transfers\":%llu}}",
	       (unsigned long long)p->copy_ops[0], (unsigned long long)p->copy_bytes[0],
	       (unsigned long long)p->copy_ops[1], (unsigned long long)p->copy_bytes[1],
	       (unsigned long long)p->copy_ops[2], (unsigned long long)p->copy_bytes[2],
	       (unsigned long long)p->uploads, (unsigned long long)p->upload_bytes,
	       (unsigned long long)p->downloads, (unsigned long long)p->download_bytes,
	       (unsigned long long)p->results, (unsigned long long)p->results_with_transfers,
	       (unsigned long long)p->last_result_with_transfers);
}

static void print_json(const stats *s)
{
	printf("{\"records\":%llu,\"duration_ns\":%llu,\"kinds\":{", (unsigned long long)s->records,
	       (unsigned long long)(s->last_ns > s->first_ns ? s->last_ns - s->first_ns : 0));
	for (size_t i = 0; i < s->n_kinds; i++)
		json_kind(&s->kinds[i], i == 0);
	printf("},\"providers\":{");
	for (size_t i = 0; i < s->n_provs; i++)
		json_provider(&s->provs[i], i == 0);
	printf("},\"events\":{");
	for (size_t i = 0; i < s->n_events; i++) {
		printf("%s", i ? "," : "");
		tr_json_str(stdout, s->events[i].name);
		printf(":%llu", (unsigned long long)s->events[i].count);
	}
	printf("}");
	if (s->prof)
		tr_prof_print_json(s->prof);
	printf("}\n");
}

static void stats_free(stats *s)
{
	for (size_t i = 0; i < s->n_kinds; i++)
		free(s->kinds[i].lat);
	free(s->kinds);
	free(s->provs);
	free(s->events);
	tr_prof_free(s->prof);
}

int tr_cmd_stats(const char *file, bool json, bool color)
{
	FILE *in = tr_open(file);
	Ortmk__Trace__Record *r;
	stats s = {0};
	tr_reader rd;
	int rc;

	if (!in)
		return 1;
	tr_reader_init(&rd, in, file);
	s.prof = tr_prof_new();
	while ((rc = tr_read(&rd, &r)) > 0) {
		add_record(&s, r);
		ortmk__trace__record__free_unpacked(r, NULL);
	}
	if (rc < 0) {
		fprintf(stderr, "ort-trace: %s\n", rd.err);
	} else {
		for (size_t i = 0; i < s.n_kinds; i++)
			if (s.kinds[i].n_lat)
				qsort(s.kinds[i].lat, s.kinds[i].n_lat, sizeof(uint64_t), cmp_u64);
		if (json)
			print_json(&s);
		else
			print_text(&s, color);
	}
	stats_free(&s);
	tr_reader_fini(&rd);
	if (in != stdin)
		fclose(in);
	return rc < 0 ? 1 : 0;
}
