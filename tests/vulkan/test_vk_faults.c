/*
 * test_vk_faults: supervision of ort-ep-vulkan (docs/SUPERVISION.md) in a
 * session with providers "vulkan,cpu".
 *   - SIGKILL of the vulkan process mid-run: the run fails with
 *     ORTMK_ERR_PROVIDER_DIED naming 'vulkan' and the signal; the next run
 *     restarts it and gives the same output;
 *   - the same with retry=1: no run fails;
 *   - a crash loop (ORTMK_EP_FAULT=vulkan/crash-after:run:1 with
 *     crash_loop_n=2): two runs fail, then the session has re-partitioned
 *     onto cpu, reports vulkan "disabled" and its outputs match cpu's;
 *   - ORTMK_EP_FAULT=cpu/... leaves the vulkan process alone.
 * Outputs are compared with a cpu-only session within rtol 1e-3.
 * Usage: test_vk_faults SLOW_MODEL EXAMPLE_MODEL; exit 77 without a device.
 */
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ortmk/ortmk.h"

#include "../check.h"

typedef struct model {
	const char *path, *in, *out;
	int64_t dims[4];
	size_t rank;
} model;

static model slow = {NULL, "x", "y", {256, 256}, 2};
static model cnn = {NULL, "image", "probs", {1, 3, 32, 32}, 4};

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static ortmk_session *open_session(ortmk_env **env, const model *m, const char *const *opts)
{
	ortmk_session_options *o;
	ortmk_session *s = NULL;

	ortmk_env_create(env);
	ortmk_session_options_create(&o);
	for (int i = 0; opts && opts[i]; i += 2)
		ortmk_session_options_set(o, opts[i], opts[i + 1]);
	if (ortmk_session_create(*env, m->path, o, &s))
		fprintf(stderr, "session on %s: %s\n", m->path, ortmk_last_error());
	ortmk_session_options_destroy(o);
	return s;
}

static ortmk_value *make_input(ortmk_env *env, const model *m)
{
	ortmk_value *x = NULL;
	size_t n = 1;

	if (ortmk_value_create(env, ORTMK_FLOAT, m->dims, m->rank, &x))
		return NULL;
	for (size_t i = 0; i < m->rank; i++)
		n *= (size_t)m->dims[i];
	for (size_t i = 0; i < n; i++)
		((float *)ortmk_value_data(x))[i] = (float)((i * 37) % 101) / 50.0f - 1.0f;
	return x;
}

static ortmk_status run(ortmk_session *s, const model *m, const ortmk_value *x, ortmk_value **y)
{
	return ortmk_session_run(s, &m->in, (const ortmk_value *const[]){x}, 1, &m->out, 1, y);
}

/* An output copied out of its value (which the env owns). */
typedef struct ref {
	float *v;
	size_t n;
} ref;

/* y equals r within rtol 1e-3 (atol 1e-5). */
static int close_to(const ortmk_value *y, const ref *r)
{
	const float *a;

	if (!y || !r->v || ortmk_value_nbytes(y) != r->n * sizeof(float))
		return 0;
	a = ortmk_value_data_const(y);
	for (size_t i = 0; i < r->n; i++)
		if (!(fabsf(a[i] - r->v[i]) <= 1e-5f + 1e-3f * fabsf(r->v[i])))
			return 0;
	return 1;
}

/* The model's output on a cpu-only session. */
static ref cpu_reference(const model *m)
{
	const char *opts[] = {"providers", "cpu", NULL};
	ortmk_env *env;
	ortmk_session *s = open_session(&env, m, opts);
	ortmk_value *x = make_input(env, m), *y = NULL;
	ref r = {NULL, 0};

	if (!s || !x || run(s, m, x, &y)) {
		fprintf(stderr, "cpu reference of %s: %s\n", m->path, ortmk_last_error());
	} else {
		r.n = ortmk_value_nbytes(y) / sizeof(float);
		r.v = malloc(ortmk_value_nbytes(y));
		if (r.v)
			memcpy(r.v, ortmk_value_data_const(y), ortmk_value_nbytes(y));
	}
	ortmk_value_destroy(y);
	ortmk_value_destroy(x);
	ortmk_session_destroy(s);
	ortmk_env_destroy(env);
	return r;
}

static size_t nodes_on(const ortmk_session *s, const char *provider)
{
	for (size_t i = 0; i < ortmk_session_provider_count(s); i++) {
		const char *name;
		size_t n;

		if (ortmk_session_provider_nodes(s, i, &name, &n) == ORTMK_OK && !strcmp(name, provider))
			return n;
	}
	return 0;
}

struct killer {
	int pid, delay_ms;
};

static void *kill_later(void *arg)
{
	struct killer *k = arg;

	usleep((useconds_t)k->delay_ms * 1000);
	kill(k->pid, SIGKILL);
	return NULL;
}

/* Kills the vulkan process a third into a run; returns the status of the
 * run it landed in (or of the last run when it landed between runs). */
static ortmk_status kill_mid_run(ortmk_session *s, const ortmk_value *x, double run_ms,
				 const ref *r, int *pid, int *runs)
{
	struct killer k = {.delay_ms = (int)(run_ms / 3) + 1};
	ortmk_status st = ORTMK_OK;
	pthread_t t;

	ortmk_session_provider_pid(s, 0, &k.pid);
	*pid = k.pid;
	pthread_create(&t, NULL, kill_later, &k);
	for (*runs = 0; *runs < 20; (*runs)++) {
		ortmk_value *y = NULL;

		st = run(s, &slow, x, &y);
		CHECK(st != ORTMK_OK || close_to(y, r), "output after a kill differs from cpu's");
		ortmk_value_destroy(y);
		if (st != ORTMK_OK || kill(k.pid, 0) != 0)
			break;
	}
	pthread_join(t, NULL);
	return st;
}

static void test_kill(const ref *r, int retry)
{
	const char *opts[] = {"providers", "vulkan,cpu", "retry", retry ? "1" : "0", NULL};
	ortmk_env *env;
	ortmk_session *s = open_session(&env, &slow, opts);
	ortmk_value *x = make_input(env, &slow), *y = NULL;
	ortmk_provider_status ps = {.struct_size = sizeof(ps)};
	double t0 = now_ms(), ms;
	int pid, runs;
	ortmk_status st = run(s, &slow, x, &y);

	ms = now_ms() - t0;
	CHECK(st == ORTMK_OK && close_to(y, r), "first run: %s", ortmk_last_error());
	ortmk_value_destroy(y);
	st = kill_mid_run(s, x, ms, r, &pid, &runs);
	if (retry) {
		CHECK(st == ORTMK_OK, "retry=1: run failed: %s", ortmk_last_error());
	} else {
		CHECK(st == ORTMK_ERR_PROVIDER_DIED, "kill: status %s (%s)", ortmk_status_name(st),
		      ortmk_last_error());
		CHECK(strstr(ortmk_last_error(), "provider 'vulkan'") &&
		      strstr(ortmk_last_error(), "signal 9"), "message: %s", ortmk_last_error());
	}
	y = NULL;
	st = run(s, &slow, x, &y);
	CHECK(st == ORTMK_OK && close_to(y, r), "run after the kill: %s", ortmk_last_error());
	ortmk_value_destroy(y);
	ortmk_session_provider_status(s, 0, &ps);
	CHECK(!strcmp(ps.name, "vulkan") && ps.restarts >= 1 && ps.pid > 0 && ps.pid != pid &&
	      !strcmp(ps.state, "running"), "status: %s restarts %u pid %d state %s", ps.name,
	      ps.restarts, ps.pid, ps.state);
	fprintf(stderr, "kill (retry=%d) after %d runs: restarted as pid %d in %.1f ms\n", retry,
		runs, ps.pid, ps.last_restart_ms);
	ortmk_value_destroy(x);
	ortmk_session_destroy(s);
	ortmk_env_destroy(env);
}

static void test_crash_loop(const ref *r)
{
	const char *opts[] = {"providers", "vulkan,cpu", "crash_loop_n", "2",
			      "crash_loop_window_ms", "60000", NULL};
	ortmk_env *env;
	ortmk_session *s;
	ortmk_value *x, *y = NULL;
	ortmk_provider_status ps = {.struct_size = sizeof(ps)};
	ortmk_status st;

	setenv("ORTMK_EP_FAULT", "vulkan/crash-after:run:1", 1);
	s = open_session(&env, &cnn, opts);
	x = make_input(env, &cnn);
	CHECK(s && nodes_on(s, "vulkan") > 0, "nothing runs on vulkan");
	for (int i = 0; i < 2; i++) {
		st = run(s, &cnn, x, &y);
		CHECK(st == ORTMK_ERR_PROVIDER_DIED, "crash %d: %s (%s)", i, ortmk_status_name(st),
		      ortmk_last_error());
	}
	st = run(s, &cnn, x, &y);
	CHECK(st == ORTMK_OK && close_to(y, r), "after the crash loop: %s (%s)",
	      ortmk_status_name(st), ortmk_last_error());
	ortmk_value_destroy(y);
	ortmk_session_provider_status(s, 0, &ps);
	CHECK(!strcmp(ps.name, "vulkan") && !strcmp(ps.state, "disabled"), "%s is %s", ps.name,
	      ps.state);
	CHECK(nodes_on(s, "vulkan") == 0 && nodes_on(s, "cpu") > 0, "not re-partitioned: vulkan %zu cpu %zu",
	      nodes_on(s, "vulkan"), nodes_on(s, "cpu"));
	unsetenv("ORTMK_EP_FAULT");
	ortmk_value_destroy(x);
	ortmk_session_destroy(s);
	ortmk_env_destroy(env);
}

/* A fault aimed at cpu does not touch vulkan, which runs every node. */
static void test_fault_prefix(const ref *r)
{
	const char *opts[] = {"providers", "vulkan,cpu", NULL};
	ortmk_env *env;
	ortmk_session *s;
	ortmk_value *x, *y = NULL;

	setenv("ORTMK_EP_FAULT", "cpu/crash-after:run:1", 1);
	s = open_session(&env, &cnn, opts);
	x = make_input(env, &cnn);
	for (int i = 0; i < 3; i++) {
		ortmk_status st = run(s, &cnn, x, &y);

		CHECK(st == ORTMK_OK && close_to(y, r), "cpu/ fault hit vulkan: %s", ortmk_last_error());
		ortmk_value_destroy(y);
		y = NULL;
	}
	unsetenv("ORTMK_EP_FAULT");
	ortmk_value_destroy(x);
	ortmk_session_destroy(s);
	ortmk_env_destroy(env);
}

int main(int argc, char **argv)
{
	ref ref_slow, ref_cnn;
	ortmk_env *env;
	ortmk_session *s;

	if (argc != 3)
		return fprintf(stderr, "usage: %s SLOW_MODEL EXAMPLE_MODEL\n", argv[0]), 2;
	slow.path = argv[1];
	cnn.path = argv[2];
	unsetenv("ORTMK_EP_FAULT");
	s = open_session(&env, &cnn, (const char *[]){"providers", "vulkan,cpu", NULL});
	if (!s || nodes_on(s, "vulkan") == 0) {
		printf("skip: no node runs on vulkan (no Vulkan device?)\n");
		return 77;
	}
	ortmk_session_destroy(s);
	ortmk_env_destroy(env);
	ref_slow = cpu_reference(&slow);
	ref_cnn = cpu_reference(&cnn);
	if (!ref_slow.v || !ref_cnn.v)
		return 1;
	test_kill(&ref_slow, 0);
	test_kill(&ref_slow, 1);
	test_crash_loop(&ref_cnn);
	test_fault_prefix(&ref_cnn);
	free(ref_slow.v);
	free(ref_cnn.v);
	printf("%d passed, %d failed\n", failures ? 0 : 1, failures ? 1 : 0);
	return failures ? 1 : 0;
}
