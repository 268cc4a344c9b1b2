/*
 * test_hostile: the core against a provider that lies (ort-ep-hostile,
 * hostile_ep.c and hostile_lie.c list the modes).  For each mode a fresh
 * hostile process is swapped in; its first RUN is honest (the output is
 * checked), its second lies: the run must fail with ORTMK_ERR_PROTOCOL
 * (or ORTMK_ERR_TIMEOUT for a provider that goes silent mid-message)
 * naming the provider, within the run deadline plus a second; the next
 * run goes to a restarted process and is correct again.  Meanwhile a
 * second session of the same environment runs the example CNN on the real
 * CPU provider in another thread, and every one of its outputs must equal
 * a clean run's.
 * The core finds the binary as for any provider: "hostile" in the
 * session's providers, ort-ep-hostile in $ORTMK_EP_DIR.  The mode reaches
 * every hostile process through ORTMK_TEST_HOSTILE, here the path of a
 * file holding it (so the environment is set once, before any thread).
 * Usage: test_hostile HOSTILE_MODEL CNN_MODEL DIR_OF_ORT_EP_HOSTILE [MODE...]
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#include "fault_util.h"

#define RUN_TIMEOUT_MS 700

typedef struct lie {
	const char *mode;
	ortmk_status want;
} lie;

static const lie lies[] = {
	{"big-shape", ORTMK_ERR_PROTOCOL}, {"past-end", ORTMK_ERR_PROTOCOL},
	{"neg-dim", ORTMK_ERR_PROTOCOL}, {"rank", ORTMK_ERR_PROTOCOL},
	{"overflow", ORTMK_ERR_PROTOCOL}, {"dtype", ORTMK_ERR_PROTOCOL},
	{"kind", ORTMK_ERR_PROTOCOL}, {"not-given", ORTMK_ERR_PROTOCOL},
	{"dup", ORTMK_ERR_PROTOCOL}, {"wrong-run", ORTMK_ERR_PROTOCOL},
	{"oversize", ORTMK_ERR_PROTOCOL}, {"partial", ORTMK_ERR_TIMEOUT},
	{"flood", ORTMK_ERR_PROTOCOL}, {"garbage", ORTMK_ERR_PROTOCOL},
	{"garbage-frame", ORTMK_ERR_PROTOCOL}, {"silence", ORTMK_ERR_TIMEOUT},
	{"ring-close", ORTMK_ERR_PROTOCOL}, {"ring-corrupt", ORTMK_ERR_PROTOCOL},
	{"ring-garbage", ORTMK_ERR_PROTOCOL},
};

static char mode_file[64], binary[4096];

/* The CPU session running alongside. */
typedef struct bystander {
	ortmk_session *s;
	ortmk_value *x, *ref;
	atomic_int stop;
	unsigned runs, bad;
	char first_bad[512];
} bystander;

static void *bystander_main(void *arg)
{
	bystander *b = arg;

	while (!atomic_load(&b->stop)) {
		ortmk_value *y = NULL;
		ortmk_status st = fu_run(b->s, b->x, &y);

		if (st != ORTMK_OK || !fu_same(y, b->ref)) {
			if (!b->bad++)
				snprintf(b->first_bad, sizeof(b->first_bad), "run %u: %s (%s)", b->runs,
					 ortmk_status_name(st), st ? ortmk_last_error() : "output differs");
		}
		b->runs++;
		ortmk_value_destroy(y);
	}
	return NULL;
}

static void set_mode(const char *mode)
{
	FILE *f = fopen(mode_file, "w");

	CHECK(f, "cannot write %s", mode_file);
	if (f) {
		fprintf(f, "%s\n", mode);
		fclose(f);
	}
}

static ortmk_value *hostile_input(ortmk_env *env)
{
	int64_t dims[1] = {4};
	ortmk_value *x = NULL;

	if (ortmk_value_create(env, ORTMK_FLOAT, dims, 1, &x) == ORTMK_OK)
		memcpy(ortmk_value_data(x), (float[4]){1, 0, 2, 3}, 4 * sizeof(float));
	return x;
}

/* One run of the hostile session, checked. */
static void hostile_run(ortmk_session *s, ortmk_value *x, const char *mode, ortmk_status want,
		       const char *what)
{
	const char *in[] = {"x"}, *out[] = {"nz"};
	ortmk_value *y = NULL;
	double t0 = fu_now_ms(), ms;
	ortmk_status st = ortmk_session_run(s, in, (const ortmk_value *const[]){x}, 1, out, 1, &y);
	const char *msg = st ? ortmk_last_error() : "";

	ms = fu_now_ms() - t0;
	CHECK(st == want, "%s, %s: got %s (%s), want %s", mode, what, ortmk_status_name(st), msg,
		   ortmk_status_name(want));
	if (st == ORTMK_OK) {
		const int64_t *d = ortmk_value_dims(y);
		const int64_t *v = ortmk_value_data_const(y);

		CHECK(ortmk_value_dtype(y) == ORTMK_INT64 && ortmk_value_rank(y) == 2 && d[0] == 1 &&
			    d[1] == 3 && v[0] == 0 && v[1] == 2 && v[2] == 3,
			    "%s, %s: wrong NonZero output", mode, what);
	} else {
		CHECK(strstr(msg, "'hostile'") != NULL, "%s, %s: the error does not name the provider: %s",
			    mode, what, msg);
		CHECK(ms < RUN_TIMEOUT_MS + 1000, "%s, %s: took %.0f ms", mode, what, ms);
		printf("  %-14s %s in %4.0f ms: %s\n", mode, ortmk_status_name(st), ms, msg);
	}
	ortmk_value_destroy(y);
}

static void one_mode(ortmk_env *env, ortmk_session *s, ortmk_value *x, const lie *l)
{
	ortmk_status st;

	set_mode(l->mode);
	/* A fresh process reads the mode (and, for ring-*, takes the ring). */
	st = ortmk_env_swap_provider(env, "hostile", binary);
	CHECK(st == ORTMK_OK, "%s: swap: %s", l->mode, ortmk_last_error());
	if (st)
		return;
	hostile_run(s, x, l->mode, ORTMK_OK, "its first (honest) run");
	hostile_run(s, x, l->mode, l->want, "the lie");
	hostile_run(s, x, l->mode, ORTMK_OK, "the run after the restart");
}

static ortmk_session *open_session(ortmk_env *env, const char *model, const char *providers)
{
	ortmk_session_options *o = NULL;
	ortmk_session *s = NULL;
	char timeout[16];

	snprintf(timeout, sizeof(timeout), "%d", RUN_TIMEOUT_MS);
	ortmk_session_options_create(&o);
	ortmk_session_options_set(o, "providers", providers);
	ortmk_session_options_set(o, "run_timeout_ms", timeout);
	ortmk_session_options_set(o, "crash_loop_n", "1000");
	CHECK(ortmk_session_create(env, model, o, &s) == ORTMK_OK, "session of %s on %s: %s", model,
	      providers, ortmk_last_error());
	ortmk_session_options_destroy(o);
	return s;
}

static int run_all(ortmk_env *env, const char *hostile_model, int argc, char **argv)
{
	ortmk_session *s;
	ortmk_value *x = hostile_input(env);
	int ran = 0;

	set_mode("none");
	s = open_session(env, hostile_model, "hostile");

	if (!s || !x) {
		ortmk_value_destroy(x);
		ortmk_session_destroy(s);
		return 0;
	}
	hostile_run(s, x, "none", ORTMK_OK, "run 1");
	hostile_run(s, x, "none", ORTMK_OK, "run 2");
	for (size_t i = 0; i < sizeof(lies) / sizeof(lies[0]); i++) {
		int wanted = argc == 0;

		for (int a = 0; a < argc; a++)
			wanted |= strcmp(argv[a], lies[i].mode) == 0;
		if (wanted) {
			one_mode(env, s, x, &lies[i]);
			ran++;
		}
	}
	ortmk_value_destroy(x);
	ortmk_session_destroy(s);
	return ran;
}

int main(int argc, char **argv)
{
	bystander b = {0};
	ortmk_env *env = NULL;
	pthread_t t;
	int fd, ran;

	if (argc < 4) {
		fprintf(stderr, "usage: %s HOSTILE_MODEL CNN_MODEL DIR_OF_ORT_EP_HOSTILE [MODE...]\n", argv[0]);
		return 2;
	}
	snprintf(binary, sizeof(binary), "%s/ort-ep-hostile", argv[3]);
	snprintf(mode_file, sizeof(mode_file), "/tmp/ortmk-hostile-XXXXXX");
	fd = mkstemp(mode_file);
	if (fd < 0)
		return 2;
	close(fd);
	setenv("ORTMK_TEST_HOSTILE", mode_file, 1);
	setenv("ORTMK_EP_DIR", argv[3], 1);
	if (ortmk_env_create(&env))
		return 2;
	b.s = open_session(env, argv[2], "cpu");
	b.x = fu_input(env);
	if (b.s && b.x && fu_run(b.s, b.x, &b.ref) == ORTMK_OK) {
		pthread_create(&t, NULL, bystander_main, &b);
		ran = run_all(env, argv[1], argc - 4, argv + 4);
		atomic_store(&b.stop, 1);
		pthread_join(t, NULL);
		CHECK(ran > 0, "no mode ran");
		CHECK(b.bad == 0, "the CPU session beside failed %u of %u runs, first: %s", b.bad, b.runs,
		      b.first_bad);
		printf("%d modes; the CPU session beside ran %u times, %u wrong\n", ran, b.runs, b.bad);
	} else {
		CHECK(0, "the CPU session: %s", ortmk_last_error());
	}
	ortmk_value_destroy(b.ref);
	ortmk_value_destroy(b.x);
	ortmk_session_destroy(b.s);
	ortmk_env_destroy(env);
	unlink(mode_file);
	printf("%d failed checks\n", failures);
	return failures ? 1 : 0;
}
