/* ort-serve: per-model statistics and GET /metrics in Prometheus text
 * format.  Statistics are kept by model name, so they survive a reload;
 * the provider counters of a retired model version are folded in when it
 * closes (srv_stats_retired), those of the loaded one read at scrape time.
 * Written by serve_sched.c and serve_http.c, read by serve_http.c. */
#include "serve.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const double lat_bounds[] = { 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01,
				     0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10 };
#define N_LAT (sizeof(lat_bounds) / sizeof(lat_bounds[0]))
static const double batch_bounds[] = { 1, 2, 4, 8, 16, 32, 64, 128 };
#define N_BATCH (sizeof(batch_bounds) / sizeof(batch_bounds[0]))

struct srv_stats {
	srv_stats *next;
	char name[SRV_NAME_MAX];
	unsigned long ok, failed;
	unsigned long lat[N_LAT + 1];
	double lat_sum;
	unsigned long queue_n;
	double queue_sum;
	unsigned long batch[N_BATCH + 1];
	unsigned long batch_n, batch_sum;
	unsigned long dropped;                 /* clients gone before the run */
	unsigned long restarts, failed_runs;   /* of retired versions */
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static srv_stats *all;

srv_stats *srv_stats_get(const char *name)
{
	pthread_mutex_lock(&mu);
	srv_stats *s = all;
	while (s && strcmp(s->name, name) != 0)
		s = s->next;
	if (!s && (s = calloc(1, sizeof(*s)))) {
		snprintf(s->name, sizeof(s->name), "%s", name);
		s->next = all;
		all = s;
	}
	pthread_mutex_unlock(&mu);
	return s;
}

static void bucket(unsigned long *b, const double *bounds, size_t n, double v)
{
	size_t i = 0;
	while (i < n && v > bounds[i])
		i++;
	b[i]++;
}

void srv_stats_request(srv_stats *st, int ok, double seconds)
{
	if (!st)
		return;
	pthread_mutex_lock(&mu);
	if (ok)
		st->ok++;
	else
		st->failed++;
	bucket(st->lat, lat_bounds, N_LAT, seconds);
	st->lat_sum += seconds;
	pthread_mutex_unlock(&mu);
}

void srv_stats_queue(srv_stats *st, double seconds)
{
	if (!st)
		return;
	pthread_mutex_lock(&mu);
	st->queue_n++;
	st->queue_sum += seconds;
	pthread_mutex_unlock(&mu);
}

void srv_stats_batch(srv_stats *st, size_t size)
{
	if (!st)
		return;
	pthread_mutex_lock(&mu);
	bucket(st->batch, batch_bounds, N_BATCH, (double)size);
	st->batch_n++;
	st->batch_sum += size;
	pthread_mutex_unlock(&mu);
}

void srv_stats_dropped(srv_stats *st)
{
	if (!st)
		return;
	pthread_mutex_lock(&mu);
	st->dropped++;
	pthread_mutex_unlock(&mu);
}

void srv_stats_retired(srv_stats *st, unsigned restarts, unsigned failed_runs)
{
	if (!st)
		return;
	pthread_mutex_lock(&mu);
	st->restarts += restarts;
	st->failed_runs += failed_runs;
	pthread_mutex_unlock(&mu);
}

static void histogram(srv_buf *b, const char *metric, const char *model, const unsigned long *c,
		      const double *bounds, size_t n, double sum)
{
	unsigned long cum = 0;
	for (size_t i = 0; i < n; i++) {
		cum += c[i];
		srv_buf_printf(b, "%s_bucket{model=\"%s\",le=\"%g\"} %lu\n", metric, model,
			       bounds[i], cum);
	}
	cum += c[n];
	srv_buf_printf(b, "%s_bucket{model=\"%s\",le=\"+Inf\"} %lu\n", metric, model, cum);
	srv_buf_printf(b, "%s_sum{model=\"%s\"} %.9g\n%s_count{model=\"%s\"} %lu\n", metric, model,
		       sum, metric, model, cum);
}

static void one_model(srv_buf *b, const srv_stats *s)
{
	unsigned restarts = 0, failed = 0;
	srv_model *m = srv_model_get(s->name, NULL);
	if (m) {
		srv_model_provider_counts(m, &restarts, &failed);
		srv_model_put(m);
	}
	srv_buf_printf(b, "ortserve_requests_total{model=\"%s\",result=\"success\"} %lu\n",
		       s->name, s->ok);
	srv_buf_printf(b, "ortserve_requests_total{model=\"%s\",result=\"failure\"} %lu\n",
		       s->name, s->failed);
	histogram(b, "ortserve_request_duration_seconds", s->name, s->lat, lat_bounds, N_LAT,
		  s->lat_sum);
	srv_buf_printf(b, "ortserve_queue_duration_seconds_sum{model=\"%s\"} %.9g\n", s->name,
		       s->queue_sum);
	srv_buf_printf(b, "ortserve_queue_duration_seconds_count{model=\"%s\"} %lu\n", s->name,
		       s->queue_n);
	histogram(b, "ortserve_batch_size", s->name, s->batch, batch_bounds, N_BATCH,
		  (double)s->batch_sum);
	srv_buf_printf(b, "ortserve_provider_restarts_total{model=\"%s\"} %lu\n", s->name,
		       s->restarts + restarts);
	srv_buf_printf(b, "ortserve_failed_runs_total{model=\"%s\"} %lu\n", s->name,
		       s->failed_runs + failed);
	srv_buf_printf(b, "ortserve_dropped_total{model=\"%s\"} %lu\n", s->name, s->dropped);
}

void srv_metrics_text(srv_buf *b)
{
	srv_buf_printf(b, "# TYPE ortserve_requests_total counter\n"
		       "# TYPE ortserve_request_duration_seconds histogram\n"
		       "# TYPE ortserve_queue_duration_seconds summary\n"
		       "# TYPE ortserve_batch_size histogram\n"
		       "# TYPE ortserve_provider_restarts_total counter\n"
		       "# TYPE ortserve_failed_runs_total counter\n"
		       "# TYPE ortserve_dropped_total counter\n");
	pthread_mutex_lock(&mu);
	size_t n = 0;
	for (srv_stats *s = all; s; s = s->next)
		n++;
	srv_stats *copy = calloc(n ? n : 1, sizeof(*copy)), *s = all;
	for (size_t i = 0; copy && i < n; i++, s = s->next)
		copy[i] = *s;
	pthread_mutex_unlock(&mu);
	/* provider counters take the repository lock: not under ours */
	for (size_t i = 0; copy && i < n; i++)
		one_model(b, &copy[i]);
	if (!copy)
		b->oom = 1;
	free(copy);
	int open;
	unsigned long refused;
	srv_conn_counts(&open, &refused);
	srv_buf_printf(b, "# TYPE ortserve_connections gauge\nortserve_connections %d\n"
		       "# TYPE ortserve_connections_refused_total counter\n"
		       "ortserve_connections_refused_total %lu\n", open, refused);
}
