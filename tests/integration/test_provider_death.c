/*
 * test_provider_death: the application survives its provider.  Through the
 * public API: the provider process is a child of the application; killing
 * it (SIGKILL) during a run makes that run fail with
 * ORTMK_ERR_PROVIDER_DIED and a message naming the provider and the signal,
 * promptly, with no crash or hang; host values survive; the next run
 * restarts the provider, replays its state and gives the same output.
 * Usage: test_provider_death SLOW_MODEL
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ortmk/ortmk.h"

#include "../check.h"

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int parent_of(int pid)
{
	char path[64], buf[512];
	FILE *f;
	int ppid = -1;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	f = fopen(path, "r");
	if (!f)
		return -1;
	if (fgets(buf, sizeof(buf), f)) {
		char *p = strrchr(buf, ')');

		if (p)
			sscanf(p + 2, "%*c %d", &ppid);
	}
	fclose(f);
	return ppid;
}

struct killer {
	int pid;
	int delay_ms;
};

static void *kill_later(void *arg)
{
	struct killer *k = arg;

	usleep((useconds_t)k->delay_ms * 1000);
	kill(k->pid, SIGKILL);
	return NULL;
}

int main(int argc, char **argv)
{
	ortmk_env *env;
	ortmk_session *s;
	ortmk_value *x, *y = NULL, *first = NULL;
	int64_t dims[2] = {256, 256};
	const char *in[] = {"x"}, *out[] = {"y"};
	struct killer k;
	pthread_t t;
	double t0, ms;
	ortmk_status st;
	int pid;

	if (argc != 2) {
		fprintf(stderr, "usage: %s SLOW_MODEL\n", argv[0]);
		return 2;
	}
	if (ortmk_env_create(&env) || ortmk_session_create(env, argv[1], NULL, &s)) {
		fprintf(stderr, "setup failed: %s\n", ortmk_last_error());
		return 1;
	}
	ortmk_value_create(env, ORTMK_FLOAT, dims, 2, &x);
	for (int i = 0; i < 256 * 256; i++)
		((float *)ortmk_value_data(x))[i] = (float)((i % 17) - 8) / 8.0f;
	ortmk_session_provider_pid(s, 0, &pid);
	CHECK(pid > 0 && parent_of(pid) == getpid(), "ort-ep-cpu (pid %d) is not our child", pid);

	t0 = now_ms();
	st = ortmk_session_run(s, in, (const ortmk_value *const[]){x}, 1, out, 1, &y);
	ms = now_ms() - t0;
	CHECK(st == ORTMK_OK, "first run failed: %s", ortmk_last_error());
	first = y;
	y = NULL;
	fprintf(stderr, "one run takes %.1f ms\n", ms);

	k.pid = pid;
	k.delay_ms = (int)(ms / 3) + 1;
	pthread_create(&t, NULL, kill_later, &k);
	/* Run until the kill lands: on a loaded machine the killer thread may
	 * fire after the first run, but it fires during one of these. */
	for (int i = 0; i < 100; i++) {
		t0 = now_ms();
		st = ortmk_session_run(s, in, (const ortmk_value *const[]){x}, 1, out, 1, &y);
		ms = now_ms() - t0;
		if (st != ORTMK_OK)
			break;
		ortmk_value_destroy(y);
		y = NULL;
	}
	pthread_join(t, NULL);
	CHECK(st == ORTMK_ERR_PROVIDER_DIED, "run during kill: status %s (%s)",
	      ortmk_status_name(st), ortmk_last_error());
	CHECK(strstr(ortmk_last_error(), "provider 'cpu'") && strstr(ortmk_last_error(), "signal 9"),
	      "message does not name the provider and signal: %s", ortmk_last_error());
	CHECK(y == NULL, "output set by a failed run");
	CHECK(ms < 5000, "death noticed only after %.0f ms", ms);
	fprintf(stderr, "run failed after %.1f ms: %s\n", ms, ortmk_last_error());

	/* The next run restarts the provider and works, with the same output. */
	st = ortmk_session_run(s, in, (const ortmk_value *const[]){x}, 1, out, 1, &y);
	CHECK(st == ORTMK_OK, "run after death: %s (%s)", ortmk_status_name(st), ortmk_last_error());
	if (st == ORTMK_OK) {
		ortmk_provider_status ps = {.struct_size = sizeof(ps)};

		CHECK(memcmp(ortmk_value_data(y), ortmk_value_data(first), 256 * 256 * 4) == 0,
		      "output after restart differs");
		ortmk_session_provider_status(s, 0, &ps);
		CHECK(ps.restarts == 1 && ps.pid > 0 && ps.pid != pid && !strcmp(ps.state, "running"),
		      "status after restart: restarts %u pid %d state %s", ps.restarts, ps.pid, ps.state);
		CHECK(strstr(ps.last_failure, "signal 9") != NULL, "last failure: %s", ps.last_failure);
		fprintf(stderr, "restarted as pid %d, crash-to-ready %.1f ms\n", ps.pid, ps.last_restart_ms);
		ortmk_value_destroy(y);
	}
	ortmk_value_destroy(first);
	/* Host values survive the provider. */
	CHECK(((float *)ortmk_value_data(x))[9] == (float)((9 % 17) - 8) / 8.0f, "input corrupted");

	ortmk_session_destroy(s);
	ortmk_value_destroy(x);
	ortmk_env_destroy(env);
	printf("%d passed, %d failed\n", failures ? 0 : 1, failures ? 1 : 0);
	return failures ? 1 : 0;
}
