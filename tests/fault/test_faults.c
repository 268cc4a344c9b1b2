/*
 * test_faults: supervision under injected faults (ORTMK_EP_FAULT, see
 * providers/host/ep_host.c).  A hung provider fails the run with a timeout
 * within deadline + 1 s and is restarted; one that answers garbage, a
 * reply to another request, or a tensor outside every segment is rejected,
 * counted and restarted; retry hides a crash; a crash loop disables the
 * provider for the session and then runs fail with a clear error; a
 * provider that exits is reported with its exit status.  Outputs after
 * every recovery equal those of a clean run.
 * Usage: test_faults MODEL (the example CNN)
 */
#include <stdlib.h>

#include "fault_util.h"

static const char *model;
static ortmk_value *reference;

static ortmk_session *open_session(ortmk_env **env, const char *fault, const char *const *opts)
{
	ortmk_session_options *o;
	ortmk_session *s = NULL;

	if (fault)
		setenv("ORTMK_EP_FAULT", fault, 1);
	else
		unsetenv("ORTMK_EP_FAULT");
	ortmk_env_create(env);
	ortmk_session_options_create(&o);
	for (int i = 0; opts && opts[i]; i += 2)
		ortmk_session_options_set(o, opts[i], opts[i + 1]);
	if (ortmk_session_create(*env, model, o, &s))
		fprintf(stderr, "session: %s\n", ortmk_last_error());
	ortmk_session_options_destroy(o);
	return s;
}

/* The fault stays in the environment until here, so restarted providers
 * inherit it too. */
static void close_session(ortmk_env *env, ortmk_session *s)
{
	unsetenv("ORTMK_EP_FAULT");
	ortmk_session_destroy(s);
	ortmk_env_destroy(env);
}

/* Runs once; checks status and, when OK, the output. */
static ortmk_status run_check(ortmk_session *s, ortmk_value *x, ortmk_status want, const char *what)
{
	ortmk_value *y = NULL;
	ortmk_status st = fu_run(s, x, &y);

	CHECK(st == want, "%s: got %s (%s), want %s", what, ortmk_status_name(st),
	      ortmk_last_error(), ortmk_status_name(want));
	if (st == ORTMK_OK)
		CHECK(fu_same(y, reference), "%s: output differs from the clean run", what);
	ortmk_value_destroy(y);
	return st;
}

static void test_hang(void)
{
	const char *opts[] = {"run_timeout_ms", "500", NULL};
	ortmk_env *env;
	ortmk_session *s = open_session(&env, "hang-after:run:2", opts);
	ortmk_value *x = fu_input(env);
	double t0;

	run_check(s, x, ORTMK_OK, "hang: run 1");
	t0 = fu_now_ms();
	run_check(s, x, ORTMK_ERR_TIMEOUT, "hang: run 2");
	CHECK(fu_now_ms() - t0 < 1500, "hang: timeout took %.0f ms", fu_now_ms() - t0);
	run_check(s, x, ORTMK_OK, "hang: run 3 after restart");
	ortmk_value_destroy(x);
	close_session(env, s);
}

static void test_hang_retry(void)
{
	const char *opts[] = {"run_timeout_ms", "300", "retry", "1", NULL};
	ortmk_env *env;
	ortmk_session *s = open_session(&env, "hang-after:run:2", opts);
	ortmk_value *x = fu_input(env);
	ortmk_session_stats st = {.struct_size = sizeof(st)};
	double t0 = fu_now_ms();

	for (int i = 0; i < 4; i++)
		run_check(s, x, ORTMK_OK, "hang+retry");
	CHECK(fu_now_ms() - t0 < 4000, "hang+retry took %.0f ms", fu_now_ms() - t0);
	ortmk_session_get_stats(s, &st);
	CHECK(st.retried_runs >= 1 && st.failed_runs == 0, "hang+retry: retried %u failed %u",
	      st.retried_runs, st.failed_runs);
	ortmk_value_destroy(x);
	close_session(env, s);
}

static void test_bad_replies(void)
{
	const char *faults[] = {"garbage-after:run:2", "badseq-after:run:2", "badref-after:run:2"};

	for (int f = 0; f < 3; f++) {
		ortmk_env *env;
		ortmk_session *s = open_session(&env, faults[f], NULL);
		ortmk_value *x = fu_input(env);
		ortmk_provider_status ps = {.struct_size = sizeof(ps)};

		run_check(s, x, ORTMK_OK, faults[f]);
		run_check(s, x, ORTMK_ERR_PROTOCOL, faults[f]);
		run_check(s, x, ORTMK_OK, faults[f]);
		ortmk_session_provider_status(s, 0, &ps);
		CHECK(ps.failures == 1 && ps.restarts == 1, "%s: failures %u restarts %u", faults[f],
		      ps.failures, ps.restarts);
		ortmk_value_destroy(x);
		close_session(env, s);
	}
}

static void test_retry_crash(void)
{
	const char *opts[] = {"retry", "1", "crash_loop_n", "100", NULL};
	ortmk_env *env;
	ortmk_session *s = open_session(&env, "crash-after:run:2", opts);
	ortmk_value *x = fu_input(env);
	ortmk_session_stats st = {.struct_size = sizeof(st)};

	for (int i = 0; i < 6; i++)
		run_check(s, x, ORTMK_OK, "crash+retry");
	ortmk_session_get_stats(s, &st);
	CHECK(st.runs == 6 && st.failed_runs == 0 && st.retried_runs >= 2,
	      "crash+retry: runs %u failed %u retried %u", st.runs, st.failed_runs, st.retried_runs);
	ortmk_value_destroy(x);
	close_session(env, s);
}

static void test_crash_loop(void)
{
	const char *opts[] = {"crash_loop_n", "3", "crash_loop_window_ms", "60000", NULL};
	ortmk_env *env;
	ortmk_session *s = open_session(&env, "crash-after:run:1", opts);
	ortmk_value *x = fu_input(env);
	ortmk_provider_status ps = {.struct_size = sizeof(ps)};

	for (int i = 0; i < 3; i++)
		run_check(s, x, ORTMK_ERR_PROVIDER_DIED, "crash loop");
	run_check(s, x, ORTMK_ERR_PROVIDER, "crash loop: after disable");
	CHECK(strstr(ortmk_last_error(), "no provider left") != NULL, "message: %s", ortmk_last_error());
	ortmk_session_provider_status(s, 0, &ps);
	CHECK(!strcmp(ps.state, "disabled"), "state %s", ps.state);
	ortmk_value_destroy(x);
	close_session(env, s);
}

static void test_exit(void)
{
	ortmk_env *env;
	ortmk_session *s = open_session(&env, "exit-after:run:1", NULL);
	ortmk_value *x = fu_input(env);

	run_check(s, x, ORTMK_ERR_PROVIDER_DIED, "exit");
	CHECK(strstr(ortmk_last_error(), "exited with status 3") != NULL, "message: %s",
	      ortmk_last_error());
	ortmk_value_destroy(x);
	close_session(env, s);
}

int main(int argc, char **argv)
{
	ortmk_env *env;
	ortmk_session *s;
	ortmk_value *x;

	if (argc != 2)
		return fprintf(stderr, "usage: %s MODEL\n", argv[0]), 2;
	model = argv[1];
	s = open_session(&env, NULL, NULL);
	x = fu_input(env);
	if (!s || !x || fu_run(s, x, &reference))
		return fprintf(stderr, "clean run failed: %s\n", ortmk_last_error()), 1;
	test_hang();
	test_hang_retry();
	test_bad_replies();
	test_retry_crash();
	test_crash_loop();
	test_exit();
	ortmk_value_destroy(x);
	ortmk_session_destroy(s);
	/* reference belongs to env's lifetime only as a value: destroy first */
	ortmk_value_destroy(reference);
	ortmk_env_destroy(env);
	printf("%d passed, %d failed\n", failures ? 0 : 1, failures ? 1 : 0);
	return failures ? 1 : 0;
}
