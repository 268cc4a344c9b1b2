/*
 * concurrency_bench: throughput and latency of N application threads
 * calling ortmk_session_run on one session (issue 21, part 1;
 * docs/PERFORMANCE.md, "Concurrent runs").  A measurement, not a test:
 *
 *   build/tools/bench/concurrency_bench MODEL [--threads 1,2,4,8]
 *       [--seconds S] [--provider-threads T] [--batch B]
 *
 * For each thread count N: one environment and one session (intra-op
 * threads T, default 1; max_concurrent_runs N), a warm-up run per thread,
 * then N threads run it for S seconds (default 3) on inputs of the model's
 * first input (float, dynamic dims = B, default 1).  It prints runs per
 * second, the speed-up over N = 1, and the p50 / p99 latency of single
 * runs, one line per N.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ortmk/ortmk.h"

#define MAX_THREADS 64
#define MAX_LAT 200000

typedef struct worker {
	ortmk_session *s;
	const ortmk_value *x;
	const char *in, *out;
	double until;
	double *lat;
	size_t n;
	int failed;
} worker;

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int run_once(worker *w)
{
	ortmk_value *y = NULL;
	ortmk_status st = ortmk_session_run(w->s, &w->in, &w->x, 1, &w->out, 1, &y);

	ortmk_value_destroy(y);
	return st != ORTMK_OK;
}

static void *work(void *arg)
{
	worker *w = arg;

	while (now_s() < w->until && w->n < MAX_LAT && !w->failed) {
		double t0 = now_s();

		w->failed = run_once(w);
		w->lat[w->n++] = now_s() - t0;
	}
	return NULL;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static ortmk_status make_input(ortmk_env *env, ortmk_session *s, int64_t batch, ortmk_value **x,
			       const char **in, const char **out)
{
	ortmk_dtype dt;
	const int64_t *dims;
	int64_t d[16];
	size_t rank;
	ortmk_status st = ortmk_session_input_info(s, 0, in, &dt, &dims, &rank);
	uint32_t seed = 1;
	float *p;

	if (st == ORTMK_OK)
		st = ortmk_session_output_info(s, 0, out, &dt, &(const int64_t *){0}, &(size_t){0});
	if (st || rank > 16)
		return st ? st : ORTMK_ERR_INVALID_ARGUMENT;
	for (size_t i = 0; i < rank; i++)
		d[i] = dims[i] < 0 ? batch : dims[i];
	if ((st = ortmk_value_create(env, ORTMK_FLOAT, d, rank, x)))
		return st;
	p = ortmk_value_data(*x);
	for (size_t i = 0; i < ortmk_value_nbytes(*x) / sizeof(float); i++) {
		seed = seed * 1664525u + 1013904223u;
		p[i] = (float)(seed >> 8) / (float)(1u << 24) * 2.0f - 1.0f;
	}
	return ORTMK_OK;
}

/* One thread count: a table row (speed-up against *base, which the first
 * row sets); 0, or 1 on a failure. */
static int measure(const char *model, int n, double seconds, const char *pthreads, int64_t batch,
		   double *base)
{
	ortmk_env *env = NULL;
	ortmk_session_options *o = NULL;
	ortmk_session *s = NULL;
	ortmk_value *x = NULL;
	worker w[MAX_THREADS];
	pthread_t t[MAX_THREADS];
	char slots[16];
	double *all, t0, wall, rate;
	size_t total = 0;
	int failed = 0;
	const char *in = NULL, *out = NULL;

	snprintf(slots, sizeof(slots), "%d", n);
	if (ortmk_env_create(&env) || ortmk_session_options_create(&o) ||
	    ortmk_session_options_set(o, "threads", pthreads) ||
	    ortmk_session_options_set(o, "max_concurrent_runs", slots) ||
	    ortmk_session_create(env, model, o, &s) || make_input(env, s, batch, &x, &in, &out)) {
		fprintf(stderr, "concurrency_bench: %s\n", ortmk_last_error());
		return 1;
	}
	for (int i = 0; i < n; i++) {
		w[i] = (worker){.s = s, .x = x, .in = in, .out = out,
				.lat = malloc(MAX_LAT * sizeof(double))};
		if (!w[i].lat || run_once(&w[i]))
			return fprintf(stderr, "concurrency_bench: warm-up: %s\n", ortmk_last_error()), 1;
	}
	t0 = now_s();
	for (int i = 0; i < n; i++) {
		w[i].until = t0 + seconds;
		pthread_create(&t[i], NULL, work, &w[i]);
	}
	for (int i = 0; i < n; i++) {
		pthread_join(t[i], NULL);
		total += w[i].n;
		failed |= w[i].failed;
	}
	wall = now_s() - t0;
	all = malloc((total + 1) * sizeof(double));
	for (int i = 0, k = 0; all && i < n; i++)
		for (size_t j = 0; j < w[i].n; j++)
			all[k++] = w[i].lat[j];
	qsort(all, total, sizeof(double), cmp);
	rate = (double)total / wall;
	if (*base <= 0)
		*base = rate;
	printf("| %d | %zu | %.1f | %.2fx | %.3f | %.3f |\n", n, total, rate, rate / *base, all ? all[total / 2] * 1e3 : 0,
	       all ? all[(size_t)((double)total * 0.99)] * 1e3 : 0);
	fflush(stdout);
	for (int i = 0; i < n; i++)
		free(w[i].lat);
	free(all);
	ortmk_value_destroy(x);
	ortmk_session_destroy(s);
	ortmk_session_options_destroy(o);
	ortmk_env_destroy(env);
	if (failed)
		fprintf(stderr, "concurrency_bench: a run failed: %s\n", ortmk_last_error());
	return failed;
}

int main(int argc, char **argv)
{
	const char *model = NULL, *list = "1,2,4,8", *pthreads = "1";
	double seconds = 3, base = 0;
	int64_t batch = 1;
	char buf[256], *tok, *save;
	int rc = 0;

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc)
			list = argv[++i];
		else if (strcmp(argv[i], "--seconds") == 0 && i + 1 < argc)
			seconds = atof(argv[++i]);
		else if (strcmp(argv[i], "--provider-threads") == 0 && i + 1 < argc)
			pthreads = argv[++i];
		else if (strcmp(argv[i], "--batch") == 0 && i + 1 < argc)
			batch = atoll(argv[++i]);
		else if (argv[i][0] != '-' && !model)
			model = argv[i];
		else
			model = NULL, i = argc;
	}
	if (!model) {
		fprintf(stderr, "usage: concurrency_bench MODEL [--threads 1,2,4,8] [--seconds S] "
			"[--provider-threads T] [--batch B]\n");
		return 2;
	}
	printf("| threads | runs | runs/s | vs 1 | p50 ms | p99 ms |\n|---|---|---|---|---|---|\n");
	snprintf(buf, sizeof(buf), "%s", list);
	for (tok = strtok_r(buf, ",", &save); tok && !rc; tok = strtok_r(NULL, ",", &save)) {
		int n = atoi(tok);

		if (n < 1 || n > MAX_THREADS)
			return fprintf(stderr, "concurrency_bench: bad thread count '%s'\n", tok), 2;
		rc = measure(model, n, seconds, pthreads, batch, &base);
	}
	return rc;
}
