/*
 * alloc_sweep: the allocation-failure sweep (SQLite style).  This program
 * defines malloc, calloc, realloc, posix_memalign, aligned_alloc and
 * memalign itself, so every allocation of the application process goes
 * through them: libortmk's, nng's (its I/O threads too), protobuf-c's and
 * the C library's own (fopen, ...); strdup and strndup are defined here
 * too, since ASan intercepts them with its own allocator.  They count every call and
 * make the Nth fail (return NULL); the real allocator (the C library's, or
 * ASan's in the sanitizer build) is found with dlsym(RTLD_NEXT).
 *
 * For each model, after one clean cycle (session create, a run, outputs
 * compared with the clean ones, destroy), the cycle is repeated with the
 * 1st, 2nd, ... Nth allocation after its start failing, until a cycle ends
 * with the failure never reached.  Each cycle must end with an error
 * status and a message, or succeed with the clean outputs (an allocation
 * whose failure is absorbed, e.g. a trace buffer); no crash, and (in the
 * ASan build) no leak when the process exits.  The provider processes are
 * separate and not swept.  Each cycle has a fresh environment, created
 * and destroyed unarmed (its provider is started inside the cycle, so
 * spawn and handshake are swept too).
 * Usage: alloc_sweep MODEL...
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <nng/nng.h>
#include <nng/protocol/pair1/pair.h>

#include "ortmk/ortmk.h"

/* ---- the interposed allocator ------------------------------------------ */

static void *(*real_malloc)(size_t);
static void *(*real_calloc)(size_t, size_t);
static void *(*real_realloc)(void *, size_t);
static void (*real_free)(void *);
static int (*real_posix_memalign)(void **, size_t, size_t);
static void *(*real_aligned_alloc)(size_t, size_t);
static void *(*real_memalign)(size_t, size_t);

/* dlsym allocates before the real functions are known: from here. */
static _Alignas(64) unsigned char boot[8192];
static size_t boot_used;

static atomic_ulong calls, fail_at, fired;

static void *boot_alloc(size_t n)
{
	size_t at = (boot_used + 63) & ~(size_t)63;

	if (at + n > sizeof(boot))
		return NULL;
	boot_used = at + n;
	return boot + at;
}

static int is_boot(const void *p)
{
	return (const unsigned char *)p >= boot && (const unsigned char *)p < boot + sizeof(boot);
}

static void find_real(void)
{
	static int busy;

	if (real_free || busy)
		return;
	busy = 1;
	real_malloc = (void *(*)(size_t))dlsym(RTLD_NEXT, "malloc");
	real_calloc = (void *(*)(size_t, size_t))dlsym(RTLD_NEXT, "calloc");
	real_realloc = (void *(*)(void *, size_t))dlsym(RTLD_NEXT, "realloc");
	real_posix_memalign = (int (*)(void **, size_t, size_t))dlsym(RTLD_NEXT, "posix_memalign");
	real_aligned_alloc = (void *(*)(size_t, size_t))dlsym(RTLD_NEXT, "aligned_alloc");
	real_memalign = (void *(*)(size_t, size_t))dlsym(RTLD_NEXT, "memalign");
	real_free = (void (*)(void *))dlsym(RTLD_NEXT, "free");
	busy = 0;
}

/* Where the failure fires: `break sweep_fired` in gdb shows who. */
__attribute__((noinline)) void sweep_fired(unsigned long n);
__attribute__((noinline)) void sweep_fired(unsigned long n)
{
	__asm__ volatile("" : : "r"(n) : "memory");
}

/* Allocations made inside nng_pair1_open are neither counted nor failed:
 * nng 1.5.2 (Debian's) corrupts its own heap when one of them fails (a
 * later nng_pair1_open aborts in free(): invalid pointer; found by this
 * sweep, see docs/SECURITY.md).  Nothing else is spared. */
static _Thread_local int sparing;

int nng_pair1_open(nng_socket *s)
{
	static int (*real)(nng_socket *);
	int rv;

	if (!real)
		real = (int (*)(nng_socket *))dlsym(RTLD_NEXT, "nng_pair1_open");
	sparing++;
	rv = real(s);
	sparing--;
	return rv;
}

/* 1 when this call is the one to fail. */
static int injected(void)
{
	unsigned long n;

	if (sparing)
		return 0;
	n = atomic_fetch_add(&calls, 1) + 1;

	if (n != atomic_load(&fail_at))
		return 0;
	sweep_fired(n);
	atomic_fetch_add(&fired, 1);
	errno = ENOMEM;
	return 1;
}

void *malloc(size_t n)
{
	find_real();
	if (!real_malloc)
		return boot_alloc(n);
	return injected() ? NULL : real_malloc(n);
}

void *calloc(size_t k, size_t n)
{
	find_real();
	if (!real_calloc)
		return n && k > SIZE_MAX / n ? NULL : boot_alloc(k * n);  /* boot is zeroed */
	return injected() ? NULL : real_calloc(k, n);
}

void *realloc(void *p, size_t n)
{
	find_real();
	if (is_boot(p) || !real_realloc)
		return NULL;
	/* realloc(p, 0) frees: failing it would only leak p. */
	return n && injected() ? NULL : real_realloc(p, n);
}

void free(void *p)
{
	find_real();
	if (p && !is_boot(p) && real_free)
		real_free(p);
}

int posix_memalign(void **out, size_t align, size_t n)
{
	find_real();
	return injected() ? ENOMEM : real_posix_memalign(out, align, n);
}

void *aligned_alloc(size_t align, size_t n)
{
	find_real();
	return injected() ? NULL : real_aligned_alloc(align, n);
}

void *memalign(size_t align, size_t n)
{
	find_real();
	return injected() ? NULL : real_memalign(align, n);
}

/* ASan intercepts strdup and strndup with its own allocator: here they go
 * through malloc above in every build. */
char *strdup(const char *str)
{
	size_t n = strlen(str) + 1;
	char *p = malloc(n);

	return p ? memcpy(p, str, n) : NULL;
}

char *strndup(const char *str, size_t max)
{
	size_t n = strnlen(str, max);
	char *p = malloc(n + 1);

	if (!p)
		return NULL;
	memcpy(p, str, n);
	p[n] = 0;
	return p;
}

/* Arms the failure of the nth allocation from now (0: none). */
static void arm(unsigned long n)
{
	atomic_store(&fail_at, n ? atomic_load(&calls) + n : 0);
}

/* ---- the cycle --------------------------------------------------------- */

static int failures;

#define CHECK(cond, ...) do { \
	if (!(cond)) { \
		fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
		fprintf(stderr, __VA_ARGS__); \
		fprintf(stderr, "\n"); \
		failures++; \
	} \
} while (0)

#define MAX_IO 8

/* A cycle's outputs, kept from the clean run to compare. */
typedef struct outs {
	size_t n;
	ortmk_value *v[MAX_IO];
} outs;

static int same(const ortmk_value *a, const ortmk_value *b)
{
	return a && b && ortmk_value_nbytes(a) == ortmk_value_nbytes(b) &&
	       memcmp(ortmk_value_data_const(a), ortmk_value_data_const(b), ortmk_value_nbytes(a)) == 0;
}

/* Inputs of the declared types, unknown dims 1, a fixed pattern. */
static ortmk_status make_inputs(ortmk_env *env, ortmk_session *s, const char **names,
				ortmk_value **in, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		const int64_t *d;
		int64_t dims[16];
		size_t rank;
		ortmk_dtype dt;
		ortmk_status st = ortmk_session_input_info(s, i, &names[i], &dt, &d, &rank);

		for (size_t k = 0; k < rank && k < 16 && st == ORTMK_OK; k++)
			dims[k] = d[k] > 0 ? d[k] : 1;
		if (st == ORTMK_OK)
			st = ortmk_value_create(env, dt, dims, rank, &in[i]);
		if (st)
			return st;
		for (size_t b = 0; b < ortmk_value_nbytes(in[i]); b++)
			((unsigned char *)ortmk_value_data(in[i]))[b] = dt == ORTMK_FLOAT ?
				(b % 4 == 3 ? 0x3f : 0) : (unsigned char)(b % 3);
	}
	return ORTMK_OK;
}

/* Session create, one run, destroy.  Outputs go to *got (caller frees). */
static ortmk_status cycle(ortmk_env *env, const char *model, outs *got)
{
	const char *in_names[MAX_IO] = {0}, *out_names[MAX_IO] = {0};
	ortmk_value *in[MAX_IO] = {0};
	ortmk_session_options *o = NULL;
	ortmk_session *s = NULL;
	size_t n_in = 0;
	ortmk_status st = ortmk_session_options_create(&o);

	if (st == ORTMK_OK)
		st = ortmk_session_options_set(o, "run_timeout_ms", "5000");
	if (st == ORTMK_OK)
		st = ortmk_session_create(env, model, o, &s);
	if (st == ORTMK_OK) {
		n_in = ortmk_session_input_count(s);
		got->n = ortmk_session_output_count(s);
		if (n_in > MAX_IO || got->n > MAX_IO)
			return fprintf(stderr, "%s: more than %d inputs or outputs\n", model, MAX_IO), ORTMK_ERR_INVALID_ARGUMENT;
		st = make_inputs(env, s, in_names, in, n_in);
	}
	for (size_t i = 0; i < got->n && st == ORTMK_OK; i++)
		st = ortmk_session_output_info(s, i, &out_names[i], NULL, NULL, NULL);
	if (st == ORTMK_OK)
		st = ortmk_session_run(s, in_names, (const ortmk_value *const *)in, n_in, out_names,
				       got->n, got->v);
	for (size_t i = 0; i < n_in; i++)
		ortmk_value_destroy(in[i]);
	ortmk_session_destroy(s);
	ortmk_session_options_destroy(o);
	return st;
}

static void outs_free(outs *o)
{
	for (size_t i = 0; i < MAX_IO; i++)
		ortmk_value_destroy(o->v[i]);
	memset(o, 0, sizeof(*o));
}

static long clock_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* Every N from 1 until three cycles in a row never reach it. */
static ortmk_env *env_new(void)
{
	ortmk_env_options eo = {.struct_size = sizeof(eo), .log_severity = ORTMK_LOG_FATAL};
	ortmk_env *env = NULL;

	if (ortmk_env_create_with_options(&eo, &env))
		fprintf(stderr, "env: %s\n", ortmk_last_error());
	return env;
}

static void sweep(const char *model)
{
	/* The clean outputs live in the clean cycle's environment: it stays
	 * until they are destroyed. */
	ortmk_env *clean_env = env_new(), *env = clean_env;
	outs ref = {0};
	unsigned long n, absorbed = 0, clean_calls;
	int past = 0;
	double t0 = (double)clock() / CLOCKS_PER_SEC;
	struct timespec w0, w1;
	ortmk_status st;

	clock_gettime(CLOCK_MONOTONIC, &w0);
	clean_calls = atomic_load(&calls);
	st = cycle(env, model, &ref);
	clean_calls = atomic_load(&calls) - clean_calls;
	CHECK(st == ORTMK_OK, "%s: the clean cycle failed: %s", model, ortmk_last_error());
	if (st) {
		outs_free(&ref);
		ortmk_env_destroy(clean_env);
		return;
	}
	/* ORTMK_TEST_SWEEP_FROM=N starts there (to look at one failure). */
	unsigned long from = getenv("ORTMK_TEST_SWEEP_FROM") ?
		strtoul(getenv("ORTMK_TEST_SWEEP_FROM"), NULL, 10) : 1;

	for (n = from; past < 3; n++) {
		outs got = {0};
		unsigned long before = atomic_load(&fired);
		int hit;

		/* A fresh environment each time (created and destroyed unarmed):
		 * the restart back-off of the last cycle's failures (up to 2 s)
		 * does not slow the next one. */
		if (!(env = env_new()))
			break;
		arm(n);
		st = cycle(env, model, &got);
		arm(0);
		hit = atomic_load(&fired) != before;
		past = hit ? 0 : past + 1;
		if (getenv("ORTMK_TEST_SWEEP_VERBOSE"))
			printf("%.3f N=%lu %s%s %s\n", (double)clock_ms() / 1e3, n, hit ? "" : "(not reached) ", ortmk_status_name(st),
			       st ? ortmk_last_error() : ""), fflush(stdout);
		if (st) {
			CHECK(hit, "%s, N=%lu: %s without an injected failure: %s", model, n,
			      ortmk_status_name(st), ortmk_last_error());
			CHECK(ortmk_last_error()[0], "%s, N=%lu: %s with no message", model, n,
			      ortmk_status_name(st));
		} else {
			absorbed += hit;
			for (size_t i = 0; i < ref.n; i++)
				CHECK(same(got.v[i], ref.v[i]), "%s, N=%lu: success with a wrong output %zu",
				      model, n, i);
		}
		outs_free(&got);
		ortmk_env_destroy(env);
	}
	clock_gettime(CLOCK_MONOTONIC, &w1);
	printf("%s: %lu allocations in the clean cycle, %lu failure points swept, %lu absorbed, "
	       "%.1f s (%.1f s CPU)\n", model, clean_calls, n - from - 3, absorbed,
	       (double)(w1.tv_sec - w0.tv_sec) + (w1.tv_nsec - w0.tv_nsec) / 1e9,
	       (double)clock() / CLOCKS_PER_SEC - t0);
	outs_free(&ref);
	ortmk_env_destroy(clean_env);
}

/* The interposition must see every kind of call, or the sweep proves
 * nothing: each one is made to fail once here. */
static void self_test(void)
{
	void *p = NULL;
	char *volatile dup;

	arm(1);
	CHECK(malloc(16) == NULL, "malloc is not interposed");
	arm(1);
	CHECK(calloc(2, 8) == NULL, "calloc is not interposed");
	arm(1);
	CHECK(realloc(NULL, 16) == NULL, "realloc is not interposed");
	arm(1);
	CHECK(posix_memalign(&p, 64, 64) == ENOMEM, "posix_memalign is not interposed");
	arm(1);
	CHECK(aligned_alloc(64, 64) == NULL, "aligned_alloc is not interposed");
	arm(1);
	dup = strdup("the C library's own allocations");
	CHECK(dup == NULL, "strdup's malloc is not interposed");
	free(dup);
	arm(0);
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: %s MODEL...\n", argv[0]);
		return 2;
	}
	self_test();
	for (int i = 1; i < argc; i++)
		sweep(argv[i]);
	printf("%d failed checks\n", failures);
	return failures ? 1 : 0;
}
