/*
 * ort-trace stats, the profiling part: what the ProviderRun and SessionRun
 * records of a profiled session (docs/TRACE.md, "Profiling") add up to.
 * Per op type: spans, total time (a Loop's includes its body), mean, and
 * the share of the providers' run time spent in the op itself (self time:
 * a span less its nested spans, so the shares add up to the coverage).
 * Per node (by provider, depth and name): the same, the top N by self
 * time.  Coverage: the step's own node spans over the providers' run
 * time; the providers' run time over the application's wall time of its
 * runs (SessionRun).  Called by ort_trace_stats.c.
 */
#include "ort_trace.h"

#include <stdlib.h>
#include <string.h>

#define TOP_NODES 10

typedef struct prof_row {
	char key[96];                 /* op type, or "provider/name" */
	char op_type[48];
	char provider[16];
	uint32_t depth, fused;
	uint64_t count, total_ns, self_ns;
} prof_row;

struct tr_prof {
	prof_row *ops, *nodes;
	size_t n_ops, n_nodes, cap_ops, cap_nodes;
	size_t hint;                  /* runs repeat their nodes in order */
	uint64_t runs, run_ns, span_ns, dropped;
	uint64_t session_runs, session_ns;
	uint64_t *self;               /* scratch: per span of one record */
	size_t cap_self;
};

tr_prof *tr_prof_new(void)
{
	return calloc(1, sizeof(tr_prof));
}

void tr_prof_free(tr_prof *p)
{
	if (!p)
		return;
	free(p->ops);
	free(p->nodes);
	free(p->self);
	free(p);
}

static prof_row *row_get(prof_row **tab, size_t *n, size_t *cap, size_t *hint, const char *key)
{
	prof_row *r;

	if (hint && *hint < *n && strcmp((*tab)[*hint].key, key) == 0)
		return &(*tab)[(*hint)++];
	for (size_t i = 0; i < *n; i++)
		if (strcmp((*tab)[i].key, key) == 0) {
			if (hint)
				*hint = i + 1;
			return &(*tab)[i];
		}
	if (*n == *cap) {
		size_t c = *cap ? *cap * 2 : 32;
		prof_row *g = realloc(*tab, c * sizeof(*g));

		if (!g)
			return NULL;
		*tab = g;
		*cap = c;
	}
	r = &(*tab)[(*n)++];
	memset(r, 0, sizeof(*r));
	snprintf(r->key, sizeof(r->key), "%s", key);
	if (hint)
		*hint = *n;
	return r;
}


/* Self time per span: its duration less its children's. */
static int self_times(tr_prof *p, const Ortmk__Trace__ProviderRun *pr)
{
	if (pr->n_spans > p->cap_self) {
		uint64_t *g = realloc(p->self, pr->n_spans * sizeof(*g));

		if (!g)
			return -1;
		p->self = g;
		p->cap_self = pr->n_spans;
	}
	for (size_t i = 0; i < pr->n_spans; i++)
		p->self[i] = pr->spans[i]->dur_ns;
	for (size_t i = 0; i < pr->n_spans; i++) {
		const Ortmk__Trace__NodeSpan *s = pr->spans[i];
		uint64_t *up = s->has_parent && s->parent < i ? &p->self[s->parent] : NULL;

		if (up)
			*up = *up > s->dur_ns ? *up - s->dur_ns : 0;
	}
	return 0;
}

static void add_span(tr_prof *p, const char *provider, const Ortmk__Trace__NodeSpan *s,
		     uint64_t self)
{
	const char *op = s->op_type && s->op_type[0] ? s->op_type : "?";
	char key[96];
	prof_row *r = row_get(&p->ops, &p->n_ops, &p->cap_ops, NULL, op);

	if (r) {
		snprintf(r->op_type, sizeof(r->op_type), "%s", op);
		r->count++;
		r->total_ns += s->dur_ns;
		r->self_ns += self;
		r->fused += s->fused;
	}
	snprintf(key, sizeof(key), "%s/%u/%s", provider, s->depth, s->name ? s->name : "");
	r = row_get(&p->nodes, &p->n_nodes, &p->cap_nodes, &p->hint, key);
	if (r) {
		snprintf(r->op_type, sizeof(r->op_type), "%s", op);
		snprintf(r->provider, sizeof(r->provider), "%s", provider);
		r->depth = s->depth;
		r->fused = s->fused;
		r->count++;
		r->total_ns += s->dur_ns;
		r->self_ns += self;
	}
}

void tr_prof_add(tr_prof *p, const Ortmk__Trace__Record *r)
{
	if (r->body_case == ORTMK__TRACE__RECORD__BODY_SESSION_RUN) {
		p->session_runs++;
		p->session_ns += r->session_run->dur_ns;
		return;
	}
	if (r->body_case != ORTMK__TRACE__RECORD__BODY_PROVIDER_RUN)
		return;
	const Ortmk__Trace__ProviderRun *pr = r->provider_run;

	p->runs++;
	p->run_ns += pr->dur_ns;
	p->dropped += pr->spans_dropped;
	p->hint = 0;
	if (self_times(p, pr))
		return;
	for (size_t i = 0; i < pr->n_spans; i++) {
		if (!pr->spans[i]->has_parent)
			p->span_ns += pr->spans[i]->dur_ns;
		add_span(p, pr->provider ? pr->provider : "?", pr->spans[i], p->self[i]);
	}
}

static int by_self(const void *a, const void *b)
{
	const prof_row *x = a, *y = b;

	return x->self_ns < y->self_ns ? 1 : x->self_ns > y->self_ns ? -1 : 0;
}

/* Heaviest first; a trace without profile records has nothing to sort
 * (and qsort must not be handed a NULL array). */
static void sort_by_self(tr_prof *p)
{
	if (p->n_ops)
		qsort(p->ops, p->n_ops, sizeof(*p->ops), by_self);
	if (p->n_nodes)
		qsort(p->nodes, p->n_nodes, sizeof(*p->nodes), by_self);
}

static double share(const tr_prof *p, uint64_t ns)
{
	return p->run_ns ? (double)ns / (double)p->run_ns : 0;
}

static double ratio(uint64_t a, uint64_t b)
{
	return b ? (double)a / (double)b : 0;
}

static void text_rows(const tr_prof *p, const prof_row *rows, size_t n, int nodes)
{
	for (size_t i = 0; i < n; i++) {
		const prof_row *r = &rows[i];
		const char *name = nodes ? strchr(strchr(r->key, '/') + 1, '/') + 1 : r->key;

		printf("%-28.28s %-18.18s %5u %8llu %10.3f %10.2f %6.1f%%\n", name,
		       nodes ? r->op_type : "", nodes ? r->depth : r->fused,
		       (unsigned long long)r->count, (double)r->total_ns / 1e6,
		       (double)r->total_ns / 1e3 / (double)(r->count ? r->count : 1),
		       100.0 * share(p, r->self_ns));
	}
}

void tr_prof_print_text(tr_prof *p)
{
	if (!p->runs && !p->session_runs)
		return;
	sort_by_self(p);
	printf("\nPROFILE  %llu provider runs, %.3f ms; node spans cover %.1f%% of them "
	       "(%llu dropped); %llu application runs, %.3f ms (provider runs %.1f%% of it)\n",
	       (unsigned long long)p->runs, (double)p->run_ns / 1e6,
	       100.0 * ratio(p->span_ns, p->run_ns), (unsigned long long)p->dropped,
	       (unsigned long long)p->session_runs, (double)p->session_ns / 1e6,
	       100.0 * ratio(p->run_ns, p->session_ns));
	printf("%-28s %-18s %5s %8s %10s %10s %7s\n", "OP TYPE", "", "FUSED", "COUNT", "TOTAL(ms)",
	       "MEAN(us)", "SHARE");
	text_rows(p, p->ops, p->n_ops, 0);
	printf("%-28s %-18s %5s %8s %10s %10s %7s\n", "NODE (top 10)", "OP TYPE", "DEPTH", "COUNT",
	       "TOTAL(ms)", "MEAN(us)", "SHARE");
	text_rows(p, p->nodes, p->n_nodes < TOP_NODES ? p->n_nodes : TOP_NODES, 1);
}

static void json_rows(const tr_prof *p, const prof_row *rows, size_t n, int nodes)
{
	for (size_t i = 0; i < n; i++) {
		const prof_row *r = &rows[i];

		printf("%s{", i ? "," : "");
		if (nodes) {
			printf("\"provider\":");
			tr_json_str(stdout, r->provider);
			printf(",\"name\":");
			tr_json_str(stdout, strchr(strchr(r->key, '/') + 1, '/') + 1);
			printf(",\"depth\":%u,", r->depth);
		}
		printf("\"op_type\":");
		tr_json_str(stdout, r->op_type);
		printf(",\"fused\":%u,\"count\":%llu,\"total_ns\":%llu,\"self_ns\":%llu,"
		       "\"mean_ns\":%.0f,\"share\":%.6f}", r->fused, (unsigned long long)r->count,
		       (unsigned long long)r->total_ns, (unsigned long long)r->self_ns,
		       (double)r->total_ns / (double)(r->count ? r->count : 1), share(p, r->self_ns));
	}
}

void tr_prof_print_json(tr_prof *p)
{
	sort_by_self(p);
	printf(",\"profile\":{\"provider_runs\":%llu,\"provider_run_ns\":%llu,\"span_ns\":%llu,"
	       "\"coverage\":%.6f,\"spans_dropped\":%llu,\"session_runs\":%llu,"
	       "\"session_run_ns\":%llu,\"provider_share_of_session\":%.6f,\"op_types\":[",
	       (unsigned long long)p->runs, (unsigned long long)p->run_ns,
	       (unsigned long long)p->span_ns, ratio(p->span_ns, p->run_ns),
	       (unsigned long long)p->dropped, (unsigned long long)p->session_runs,
	       (unsigned long long)p->session_ns, ratio(p->run_ns, p->session_ns));
	json_rows(p, p->ops, p->n_ops, 0);
	printf("],\"nodes\":[");
	json_rows(p, p->nodes, p->n_nodes < TOP_NODES ? p->n_nodes : TOP_NODES, 1);
	printf("]}");
}
