/*
 * soak: runs a model many times while the provider is killed (SIGKILL) at
 * random moments and/or hot-swapped, and checks the promises of
 * supervision: the application never crashes; with --retry every run
 * returns the clean output; without it, only runs in flight at a kill fail,
 * each with ORTMK_ERR_PROVIDER_DIED; swaps fail no run.
 *
 * Usage: ort-soak MODEL [--runs N] [--kills K] [--swaps S] [--retry]
 *                       [--swap-binary PATH] [--seed S] [--provider LIST]
 * MODEL is the example CNN (input "image" [1,3,32,32], output "probs").
 * --provider LIST sets the session's providers; kills and swaps go to the
 * first of them (`--provider cuda,cpu` kills ort-ep-cuda).
 * CI runs a short version (tests/meson.build); docs/SUPERVISION.md gives
 * the long one.
 */
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include "fault_util.h"

typedef struct soak {
	ortmk_env *env;
	ortmk_session *s;
	const char *swap_binary;
	unsigned seed;
	double run_ms;
} soak;

typedef struct job {
	soak *k;
	int kill;                 /* 1: kill the provider; 0: swap it */
	unsigned delay_us;
} job;

static void *do_job(void *arg)
{
	job *j = arg;
	ortmk_provider_status ps = {.struct_size = sizeof(ps)};

	usleep(j->delay_us);
	if (j->kill) {
		if (ortmk_session_provider_status(j->k->s, 0, &ps) == ORTMK_OK && ps.pid > 0)
			kill(ps.pid, SIGKILL);
	} else if (ortmk_session_provider_status(j->k->s, 0, &ps) ||
		   ortmk_env_swap_provider(j->k->env, ps.name, j->k->swap_binary)) {
		fprintf(stderr, "swap failed: %s\n", ortmk_last_error());
		failures++;
	}
	return NULL;
}

static int is_at(int i, int runs, int count, int phase)
{
	/* count events spread over the runs, offset by phase. */
	return count > 0 && runs / count > 0 && i % (runs / count) == phase % (runs / count);
}

int main(int argc, char **argv)
{
	int runs = 1000, kills = 20, swaps = 0, retry = 0, failed = 0, bad_status = 0, wrong = 0;
	soak k = {.seed = 1};
	char *own_binary = NULL;
	const char *providers = NULL;
	ortmk_session_options *o;
	ortmk_value *x, *ref = NULL;
	ortmk_provider_status ps = {.struct_size = sizeof(ps)};
	ortmk_session_stats st = {.struct_size = sizeof(st)};
	double t0;

	if (argc < 2)
		return fprintf(stderr, "usage: %s MODEL [--runs N] [--kills K] [--swaps S] [--retry] "
			       "[--swap-binary PATH] [--seed S] [--provider LIST]\n", argv[0]), 2;
	for (int i = 2; i < argc; i++) {
		if (!strcmp(argv[i], "--runs") && i + 1 < argc) runs = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--kills") && i + 1 < argc) kills = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--swaps") && i + 1 < argc) swaps = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--swap-binary") && i + 1 < argc) k.swap_binary = argv[++i];
		else if (!strcmp(argv[i], "--seed") && i + 1 < argc) k.seed = (unsigned)atoi(argv[++i]);
		else if (!strcmp(argv[i], "--provider") && i + 1 < argc) providers = argv[++i];
		else if (!strcmp(argv[i], "--retry")) retry = 1;
		else return fprintf(stderr, "soak: unknown option %s\n", argv[i]), 2;
	}
	srand(k.seed);
	ortmk_env_create(&k.env);
	ortmk_session_options_create(&o);
	ortmk_session_options_set(o, "retry", retry ? "1" : "0");
	/* Kills from outside are the test, not a crash loop to give up on. */
	ortmk_session_options_set(o, "crash_loop_n", "1000");
	if (providers)
		ortmk_session_options_set(o, "providers", providers);
	if (ortmk_session_create(k.env, argv[1], o, &k.s))
		return fprintf(stderr, "soak: %s\n", ortmk_last_error()), 1;
	ortmk_session_options_destroy(o);
	if (!k.swap_binary && swaps) {
		ortmk_session_provider_status(k.s, 0, &ps);
		k.swap_binary = own_binary = strdup(ps.binary);
	}
	x = fu_input(k.env);
	t0 = fu_now_ms();
	if (fu_run(k.s, x, &ref))
		return fprintf(stderr, "soak: clean run failed: %s\n", ortmk_last_error()), 1;
	k.run_ms = fu_now_ms() - t0;
	for (int i = 0; i < runs; i++) {
		pthread_t th[2];
		job jobs[2];
		int n = 0;
		ortmk_value *y = NULL;
		ortmk_status rc;

		if (is_at(i, runs, kills, 3))
			jobs[n++] = (job){&k, 1, (unsigned)(rand() % (int)(k.run_ms * 1500 + 1))};
		if (is_at(i, runs, swaps, 7))
			jobs[n++] = (job){&k, 0, (unsigned)(rand() % (int)(k.run_ms * 1500 + 1))};
		for (int j = 0; j < n; j++)
			pthread_create(&th[j], NULL, do_job, &jobs[j]);
		rc = fu_run(k.s, x, &y);
		if (rc != ORTMK_OK) {
			failed++;
			bad_status += rc != ORTMK_ERR_PROVIDER_DIED;
			if (rc != ORTMK_ERR_PROVIDER_DIED)
				fprintf(stderr, "run %d: %s: %s\n", i, ortmk_status_name(rc), ortmk_last_error());
		} else {
			wrong += !fu_same(y, ref);
		}
		ortmk_value_destroy(y);
		for (int j = 0; j < n; j++)
			pthread_join(th[j], NULL);
	}
	ortmk_session_get_stats(k.s, &st);
	ortmk_session_provider_status(k.s, 0, &ps);
	printf("{\"runs\": %d, \"kills\": %d, \"swaps_asked\": %d, \"retry\": %d, \"failed_runs\": %d, "
	       "\"wrong_outputs\": %d, \"other_status\": %d, \"retried_runs\": %u, \"restarts\": %u, "
	       "\"swaps\": %u, \"last_restart_ms\": %.2f, \"one_run_ms\": %.2f, \"provider\": \"%s\"}\n",
	       runs, kills, swaps, retry, failed, wrong, bad_status, st.retried_runs, ps.restarts,
	       ps.swaps, ps.last_restart_ms, k.run_ms, ps.name);
	CHECK(wrong == 0, "%d runs returned a wrong output", wrong);
	CHECK(bad_status == 0, "%d runs failed with another status than PROVIDER_DIED", bad_status);
	CHECK(!retry || failed == 0, "with --retry %d runs failed", failed);
	CHECK(failed <= kills, "%d runs failed for %d kills", failed, kills);
	CHECK((int)ps.swaps == swaps, "%u swaps done of %d", ps.swaps, swaps);
	ortmk_value_destroy(x);
	ortmk_value_destroy(ref);
	ortmk_session_destroy(k.s);
	ortmk_env_destroy(k.env);
	free(own_binary);
	printf("%d passed, %d failed\n", failures ? 0 : 1, failures ? 1 : 0);
	return failures ? 1 : 0;
}
