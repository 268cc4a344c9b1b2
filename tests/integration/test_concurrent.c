/*
 * test_concurrent: several runs in flight (issue 21, part 1) give the
 * outputs runs one after another give, bit for bit:
 *  - 8 threads run one session (1 intra-op thread, the default 4 slots)
 *    on 6 inputs of 3 batch sizes (so plans of several shapes and slots of
 *    several sizes are in use at once);
 *  - two sessions of the model on one provider process, 2 threads each;
 *  - max_concurrent_runs 1: 4 threads take turns on the session's one slot.
 * The references are the same session's runs made sequentially first.
 * Usage: test_concurrent MODEL
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "ortmk/ortmk.h"

#define CHECK_LAST_ERROR
#include "../check.h"
#include "../concurrent_util.h"

#define K 6                   /* inputs */
#define THREADS 8
#define RUNS 12               /* per thread */

static ortmk_value *inputs[K], *refs[K];

struct worker {
	ortmk_session *s;
	int id, runs;
	int bad, failed;          /* read by main after join */
	char err[256];
};

static void *work(void *arg)
{
	struct worker *w = arg;

	for (int r = 0; r < w->runs; r++) {
		int k = (w->id * 5 + r) % K;
		ortmk_value *y = NULL;
		ortmk_status st = cu_run(w->s, inputs[k], &y);

		if (st) {
			if (!w->failed++)
				snprintf(w->err, sizeof(w->err), "%s", ortmk_last_error());
		} else if (!cu_same(y, refs[k])) {
			w->bad++;
		}
		ortmk_value_destroy(y);
	}
	return NULL;
}

/* n threads on the sessions ss[i % n_s]; the failures and mismatches. */
static void hammer(ortmk_session **ss, int n_s, int n, int runs, const char *what)
{
	struct worker w[THREADS];
	pthread_t t[THREADS];
	int bad = 0, failed = 0;
	double t0 = cu_now_ms();

	for (int i = 0; i < n; i++) {
		w[i] = (struct worker){.s = ss[i % n_s], .id = i, .runs = runs};
		pthread_create(&t[i], NULL, work, &w[i]);
	}
	for (int i = 0; i < n; i++) {
		pthread_join(t[i], NULL);
		bad += w[i].bad;
		failed += w[i].failed;
		if (w[i].failed)
			fprintf(stderr, "%s: thread %d: %s\n", what, i, w[i].err);
	}
	CHECK(failed == 0, "%s: %d of %d runs failed", what, failed, n * runs);
	CHECK(bad == 0, "%s: %d of %d runs differ from the sequential run", what, bad, n * runs);
	printf("%s: %d threads x %d runs in %.0f ms\n", what, n, runs, cu_now_ms() - t0);
}

static ortmk_session *open_session(ortmk_env *env, const char *model, const char *slots)
{
	ortmk_session_options *o = NULL;
	ortmk_session *s = NULL;

	ortmk_session_options_create(&o);
	ortmk_session_options_set(o, "threads", "1");
	if (slots)
		ortmk_session_options_set(o, "max_concurrent_runs", slots);
	CHECK(ortmk_session_create(env, model, o, &s) == ORTMK_OK, "session create");
	ortmk_session_options_destroy(o);
	return s;
}

int main(int argc, char **argv)
{
	ortmk_env *env = NULL;
	ortmk_session *s = NULL, *s2 = NULL, *one = NULL;
	int pid1 = -1, pid2 = -2;

	if (argc != 2) {
		fprintf(stderr, "usage: test_concurrent MODEL\n");
		return 2;
	}
	if (ortmk_env_create(&env)) {
		fprintf(stderr, "env: %s\n", ortmk_last_error());
		return 1;
	}
	s = open_session(env, argv[1], NULL);
	s2 = open_session(env, argv[1], NULL);
	one = open_session(env, argv[1], "1");
	if (!s || !s2 || !one)
		return 1;
	for (int k = 0; k < K; k++) {
		CHECK(cu_input(env, s, 1 + k % 3, 100u + (uint32_t)k, &inputs[k]) == ORTMK_OK, "input %d", k);
		CHECK(inputs[k] && cu_run(s, inputs[k], &refs[k]) == ORTMK_OK, "reference run %d", k);
	}
	if (failures)
		return 1;
	hammer(&s, 1, THREADS, RUNS, "one session, 8 threads");
	ortmk_session_provider_pid(s, 0, &pid1);
	ortmk_session_provider_pid(s2, 0, &pid2);
	CHECK(pid1 == pid2, "two sessions of one env on one provider process (%d, %d)", pid1, pid2);
	hammer((ortmk_session *[]){s, s2}, 2, 4, RUNS, "two sessions, 2 threads each");
	hammer(&one, 1, 4, RUNS / 2, "one slot, 4 threads");
	for (int k = 0; k < K; k++) {
		ortmk_value_destroy(inputs[k]);
		ortmk_value_destroy(refs[k]);
	}
	ortmk_session_destroy(one);
	ortmk_session_destroy(s2);
	ortmk_session_destroy(s);
	ortmk_env_destroy(env);
	printf("%s\n", failures ? "FAILED" : "ok");
	return failures != 0;
}
