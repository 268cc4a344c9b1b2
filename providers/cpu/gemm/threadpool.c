/*
 * threadpool: persistent workers for the CPU provider's intra-op
 * parallelism (see threadpool.h).
 *
 * Hand-off: the caller publishes a job (fn, arg, ntasks), resets the task
 * counter and bumps `gen`, the futex word the workers watch.  Workers that
 * are still spinning see the bump within a few hundred nanoseconds; the
 * futex is only woken when one has gone to sleep (`sleepers`).  Completion
 * is the mirror image: every worker decrements `pending`, and the last one
 * wakes the caller only if the caller went to sleep on it.  Both sleep
 * decisions follow "announce, then re-check the word" with sequentially
 * consistent atomics, and FUTEX_WAIT re-checks the value in the kernel, so
 * no wake-up is lost.
 */
#include "threadpool.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define cpu_relax() _mm_pause()
#else
#define cpu_relax() ((void)0)
#endif

/* How long a worker (or the waiting caller) spins before it sleeps: long
 * enough to bridge the gap between two GEMMs of one network, short enough
 * not to burn a core while the provider idles. */
enum { SPIN_NS = 100000 };

typedef struct member {
	void *scratch;
	size_t scratch_size;
	pthread_t thread;
	gemm_pool *pool;
	int id;
} member;

struct gemm_pool {
	int n;                          /* members, caller included */
	member *m;                      /* n entries; m[0] is the caller */
	pthread_mutex_t use;            /* try_begin/end */

	/* The job. Written by the caller before gen is bumped. */
	gemm_task_fn *fn;
	void *arg;
	int64_t ntasks;
	int width;
	int stop;

	_Atomic uint32_t gen;           /* futex: a new job (or stop) */
	_Atomic int sleepers;           /* workers asleep on gen */
	_Atomic int64_t next;           /* next task index to claim */
	_Atomic uint32_t pending;       /* futex: workers still in the job */
	_Atomic int caller_sleeping;
};

static void futex_wait(_Atomic uint32_t *word, uint32_t val)
{
	syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
}

static void futex_wake(_Atomic uint32_t *word)
{
	syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

static int64_t now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* Spins until *word != val or SPIN_NS pass; returns the last value read. */
static uint32_t spin_while(_Atomic uint32_t *word, uint32_t val)
{
	int64_t deadline = 0;
	uint32_t v;

	for (unsigned i = 0;; i++) {
		v = atomic_load_explicit(word, memory_order_acquire);
		if (v != val)
			return v;
		if ((i & 255) == 0) {
			int64_t t = now_ns();
			if (!deadline)
				deadline = t + SPIN_NS;
			else if (t > deadline)
				return v;
		}
		cpu_relax();
	}
}

static void run_tasks(gemm_pool *p, int id)
{
	int64_t i;

	if (id >= p->width)
		return;
	while ((i = atomic_fetch_add_explicit(&p->next, 1, memory_order_relaxed)) < p->ntasks)
		p->fn(p->arg, i, id);
}

static void *worker_main(void *arg)
{
	member *self = arg;
	gemm_pool *p = self->pool;
	/* gen was 0 when the pool was created; reading it here instead
	 * would skip a job published before this thread got to run. */
	uint32_t seen = 0;

	for (;;) {
		uint32_t g = spin_while(&p->gen, seen);
		while (g == seen) {
			atomic_fetch_add(&p->sleepers, 1);
			futex_wait(&p->gen, seen);
			atomic_fetch_sub(&p->sleepers, 1);
			g = atomic_load(&p->gen);
		}
		seen = g;
		if (p->stop)
			return NULL;
		run_tasks(p, self->id);
		if (atomic_fetch_sub(&p->pending, 1) == 1 && atomic_load(&p->caller_sleeping))
			futex_wake(&p->pending);
	}
}

int gemm_pool_create(int threads, gemm_pool **out)
{
	gemm_pool *p;
	int started = 0, rc = 0;

	*out = NULL;
	if (threads <= 0) {
		long c = sysconf(_SC_NPROCESSORS_ONLN);
		threads = c > 0 ? (int)(c < 256 ? c : 256) : 1;
	}
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->m = calloc((size_t)threads, sizeof(*p->m));
	if (!p->m) {
		free(p);
		return -ENOMEM;
	}
	p->n = threads;
	pthread_mutex_init(&p->use, NULL);
	atomic_init(&p->gen, 0);
	atomic_init(&p->sleepers, 0);
	atomic_init(&p->next, 0);
	atomic_init(&p->pending, 0);
	atomic_init(&p->caller_sleeping, 0);
	for (int i = 0; i < threads; i++) {
		p->m[i].pool = p;
		p->m[i].id = i;
	}
	for (started = 1; started < threads; started++) {
		rc = pthread_create(&p->m[started].thread, NULL, worker_main, &p->m[started]);
		if (rc)
			break;
	}
	if (rc) {
		p->n = started;   /* destroy joins the ones that did start */
		gemm_pool_destroy(p);
		return -EAGAIN;
	}
	*out = p;
	return 0;
}

void gemm_pool_destroy(gemm_pool *p)
{
	if (!p)
		return;
	p->stop = 1;
	atomic_fetch_add(&p->gen, 1);
	futex_wake(&p->gen);
	for (int i = 1; i < p->n; i++)
		pthread_join(p->m[i].thread, NULL);
	for (int i = 0; i < p->n; i++)
		free(p->m[i].scratch);
	pthread_mutex_destroy(&p->use);
	free(p->m);
	free(p);
}

int gemm_pool_threads(const gemm_pool *p)
{
	return p ? p->n : 1;
}

int gemm_pool_try_begin(gemm_pool *p)
{
	return p && pthread_mutex_trylock(&p->use) == 0;
}

void gemm_pool_end(gemm_pool *p)
{
	pthread_mutex_unlock(&p->use);
}

static int grow(void **buf, size_t *size, size_t bytes)
{
	void *q;

	if (*size >= bytes)
		return 0;
	bytes = (bytes + 4095) & ~(size_t)4095;
	q = aligned_alloc(64, bytes);
	if (!q)
		return -ENOMEM;
	free(*buf);
	*buf = q;
	*size = bytes;
	return 0;
}

int gemm_pool_reserve(gemm_pool *p, size_t bytes)
{
	for (int i = 0; i < p->n; i++)
		if (grow(&p->m[i].scratch, &p->m[i].scratch_size, bytes))
			return -ENOMEM;
	return 0;
}

void *gemm_pool_scratch(gemm_pool *p, int member)
{
	return p->m[member].scratch;
}

void gemm_pool_for(gemm_pool *p, int width, int64_t ntasks, gemm_task_fn *fn, void *arg)
{
	uint32_t left;

	if (width <= 0 || width > p->n)
		width = p->n;
	if (width > ntasks)
		width = (int)ntasks;
	if (width <= 1) {
		for (int64_t i = 0; i < ntasks; i++)
			fn(arg, i, 0);
		return;
	}
	p->fn = fn;
	p->arg = arg;
	p->ntasks = ntasks;
	p->width = width;
	atomic_store(&p->next, 0);
	atomic_store(&p->pending, (uint32_t)(p->n - 1));
	atomic_fetch_add(&p->gen, 1);            /* publishes the job (seq_cst) */
	if (atomic_load(&p->sleepers) > 0)
		futex_wake(&p->gen);
	run_tasks(p, 0);

	left = atomic_load(&p->pending);
	while (left != 0) {
		uint32_t v = spin_while(&p->pending, left);
		if (v != left) {
			left = v;
			continue;
		}
		atomic_store(&p->caller_sleeping, 1);
		if (atomic_load(&p->pending) == left)
			futex_wait(&p->pending, left);
		atomic_store(&p->caller_sleeping, 0);
		left = atomic_load(&p->pending);
	}
}
