/*
 * test_sandbox: the provider's system-call filter (providers/host/
 * ep_sandbox.c, docs/SECURITY.md).  A running provider is confined
 * (/proc/PID/status: Seccomp 2, NoNewPrivs 1; no core files); a provider
 * that tries open("/etc/passwd"), socket(AF_INET) or execve mid-run
 * (ORTMK_EP_FAULT=open-after:run:2, ...) or sets the application's CPUs
 * (affinity-after) is killed by SIGSYS, the run
 * fails with ORTMK_ERR_PROVIDER_DIED naming the sandbox violation, and the
 * restarted provider runs the next one correctly.  ortmk_env_options.
 * disable_sandbox leaves the provider unconfined (and the same probe then
 * gets through), a batch of 32 runs confined, and a bad ORTMK_SANDBOX
 * value is refused.
 * With PROVIDER (vulkan, cuda): that provider's driver filter
 * (ep_sandbox_policy.driver): confined the same way, socket(AF_INET) and
 * execve killed and reported, open() let through (the drivers open files
 * after start; docs/SECURITY.md).
 * Usage: test_sandbox MODEL [PROVIDER] (the example CNN)
 */
#include <stdlib.h>

#include "fault_util.h"

static const char *model, *provider = "cpu";
static ortmk_value *reference;

static ortmk_session *open_session(ortmk_env **env, const char *fault, int disable)
{
	ortmk_env_options eo = {.struct_size = sizeof(eo), .log_severity = ORTMK_LOG_ERROR,
				.disable_sandbox = disable};
	ortmk_session_options *o = NULL;
	ortmk_session *s = NULL;

	if (fault)
		setenv("ORTMK_EP_FAULT", fault, 1);
	else
		unsetenv("ORTMK_EP_FAULT");
	if (ortmk_env_create_with_options(&eo, env))
		return fprintf(stderr, "env: %s\n", ortmk_last_error()), NULL;
	/* strict: the nodes stay on PROVIDER, so its process is the one probed */
	if (ortmk_session_options_create(&o) || ortmk_session_options_set(o, "providers", provider) ||
	    ortmk_session_options_set(o, "strict_placement", "1") ||
	    ortmk_session_create(*env, model, o, &s))
		fprintf(stderr, "session on %s: %s\n", provider, ortmk_last_error());
	ortmk_session_options_destroy(o);
	return s;
}

static void close_session(ortmk_env *env, ortmk_session *s)
{
	unsetenv("ORTMK_EP_FAULT");
	ortmk_session_destroy(s);
	ortmk_env_destroy(env);
}

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

/* The value of "Key:" in /proc/PID/FILE (its first number), or -1. */
static long proc_field(int pid, const char *file, const char *key)
{
	char path[64], line[256];
	long v = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/%s", pid, file);
	f = fopen(path, "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, key, strlen(key)) == 0) {
			const char *p = line + strlen(key);

			while (*p && (*p < '0' || *p > '9'))
				p++;
			v = *p ? strtol(p, NULL, 10) : -1;
			break;
		}
	}
	fclose(f);
	return v;
}

static void test_confined(int disable)
{
	ortmk_env *env;
	ortmk_session *s = open_session(&env, NULL, disable);
	ortmk_value *x = s ? fu_input(env) : NULL;
	ortmk_provider_status ps = {.struct_size = sizeof(ps)};
	const char *how = disable ? "disable_sandbox=1" : "default";

	if (!x) {
		CHECK(0, "%s: no session", how);
		return;
	}
	run_check(s, x, ORTMK_OK, how);
	CHECK(ortmk_session_provider_status(s, 0, &ps) == ORTMK_OK && ps.pid > 0, "%s: no pid", how);
	CHECK(proc_field(ps.pid, "status", "Seccomp:") == (disable ? 0 : 2),
	      "%s: Seccomp %ld", how, proc_field(ps.pid, "status", "Seccomp:"));
	CHECK(proc_field(ps.pid, "status", "NoNewPrivs:") == (disable ? 0 : 1),
	      "%s: NoNewPrivs %ld", how, proc_field(ps.pid, "status", "NoNewPrivs:"));
	if (!disable)
		CHECK(proc_field(ps.pid, "limits", "Max core file size") == 0,
		      "core files allowed: %ld", proc_field(ps.pid, "limits", "Max core file size"));
	ortmk_value_destroy(x);
	close_session(env, s);
}

/* The second run's provider tries what it must not; the third runs on the
 * restarted one. */
static void test_violation(const char *fault)
{
	ortmk_env *env;
	ortmk_session *s = open_session(&env, fault, 0);
	ortmk_value *x = s ? fu_input(env) : NULL;
	ortmk_provider_status ps = {.struct_size = sizeof(ps)};

	if (!x) {
		CHECK(0, "%s: no session", fault);
		return;
	}
	run_check(s, x, ORTMK_OK, fault);
	if (run_check(s, x, ORTMK_ERR_PROVIDER_DIED, fault) == ORTMK_ERR_PROVIDER_DIED)
		CHECK(strstr(ortmk_last_error(), "SIGSYS") && strstr(ortmk_last_error(), "sandbox violation"),
		      "%s: message does not name the sandbox: %s", fault, ortmk_last_error());
	run_check(s, x, ORTMK_OK, fault);
	ortmk_session_provider_status(s, 0, &ps);
	CHECK(ps.failures == 1 && ps.restarts == 1, "%s: failures %u restarts %u", fault,
	      ps.failures, ps.restarts);
	CHECK(strstr(ps.last_failure, "SIGSYS") != NULL, "%s: last failure %s", fault, ps.last_failure);
	ortmk_value_destroy(x);
	close_session(env, s);
}

/* Without the filter the probe gets through and the run succeeds: what
 * test_violation sees is the filter's doing.  The driver filter lets the
 * open through as well (disable 0 there). */
static void test_open_allowed(int disable)
{
	ortmk_env *env;
	ortmk_session *s = open_session(&env, "open-after:run:1", disable);
	ortmk_value *x = s ? fu_input(env) : NULL;
	ortmk_provider_status ps = {.struct_size = sizeof(ps)};

	if (!x) {
		CHECK(0, "open probe: no session");
		return;
	}
	run_check(s, x, ORTMK_OK, disable ? "unconfined open" : "open under the driver filter");
	ortmk_session_provider_status(s, 0, &ps);
	CHECK(ps.failures == 0, "open probe: %u failures (%s)", ps.failures, ps.last_failure);
	ortmk_value_destroy(x);
	close_session(env, s);
}

static void test_bad_value(void)
{
	ortmk_env *env = NULL;
	ortmk_status st;

	setenv("ORTMK_SANDBOX", "yes", 1);
	st = ortmk_env_create(&env);
	unsetenv("ORTMK_SANDBOX");
	CHECK(st == ORTMK_ERR_INVALID_ARGUMENT && strstr(ortmk_last_error(), "ORTMK_SANDBOX=yes"),
	      "ORTMK_SANDBOX=yes: %s (%s)", ortmk_status_name(st), ortmk_last_error());
	if (st == ORTMK_OK)
		ortmk_env_destroy(env);
}

/* A batch of 32 on the pool: the workers' malloc arenas grow and shrink
 * with the large intermediates, and glibc opens /proc/sys/vm/
 * overcommit_memory the first time a thread arena shrinks unless the
 * provider keeps one arena (ep_sandbox_prepare): without it this run was
 * killed by the filter. */
static void test_batch(void)
{
	int64_t dims[4] = {32, 3, 32, 32};
	ortmk_env *env = NULL;
	ortmk_session *s = open_session(&env, NULL, 0);
	ortmk_value *x = NULL, *y = NULL;
	const char *in[] = {"image"}, *out[] = {"probs"};

	CHECK(s && ortmk_value_create(env, ORTMK_FLOAT, dims, 4, &x) == ORTMK_OK, "batch: setup");
	for (int r = 0; x && r < 3; r++) {
		ortmk_status st;

		for (int i = 0; i < 32 * 3 * 32 * 32; i++)
			((float *)ortmk_value_data(x))[i] = (float)((i * 37 + r) % 101) / 50.0f - 1.0f;
		st = ortmk_session_run(s, in, (const ortmk_value *const[]){x}, 1, out, 1, &y);
		CHECK(st == ORTMK_OK, "batch 32, run %d: %s (%s)", r, ortmk_status_name(st),
		      ortmk_last_error());
		ortmk_value_destroy(y);
		y = NULL;
	}
	ortmk_value_destroy(x);
	close_session(env, s);
}

int main(int argc, char **argv)
{
	ortmk_env *env;
	ortmk_session *s;
	ortmk_value *x;

	if (argc != 2 && argc != 3)
		return fprintf(stderr, "usage: %s MODEL [PROVIDER]\n", argv[0]), 2;
	model = argv[1];
	provider = argc == 3 ? argv[2] : "cpu";
	unsetenv("ORTMK_SANDBOX");
	s = open_session(&env, NULL, 0);
	x = s ? fu_input(env) : NULL;
	if (!x || fu_run(s, x, &reference))
		return fprintf(stderr, "clean run failed: %s\n", ortmk_last_error()), 1;
	test_confined(0);
	test_confined(1);
	if (strcmp(provider, "cpu") == 0)
		test_violation("open-after:run:2");
	test_violation("socket-after:run:2");
	test_violation("exec-after:run:2");
	/* the CPU provider's filter lets a thread set its own CPUs only; the
	 * driver filter (allow by default) does not look at this call */
	if (strcmp(provider, "cpu") == 0)
		test_violation("affinity-after:run:2");
	test_open_allowed(1);
	if (strcmp(provider, "cpu") == 0) {
		test_batch();
		test_bad_value();
	} else {
		test_open_allowed(0);
	}
	ortmk_value_destroy(x);
	ortmk_session_destroy(s);
	ortmk_value_destroy(reference);
	ortmk_env_destroy(env);
	printf("%d passed, %d failed\n", failures ? 0 : 1, failures ? 1 : 0);
	return failures ? 1 : 0;
}
