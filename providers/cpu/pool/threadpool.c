/*
 * threadpool: persistent workers for the CPU provider's intra-op
 * parallelism (see threadpool.h).
 *
 * Hand-off: the caller publishes a job (fn, arg, ntasks, width) and its
 * number in `claim` (job number in the high 32 bits, the tasks claimed so
 * far in the low 32), then bumps `gen`, the futex word the workers watch.
 * Workers still spinning see the bump within a few hundred nanoseconds; the futex
 * is woken only when one has gone to sleep (`sleepers`).  A task is taken
 * by a compare-and-swap on `claim` that names the job, so a worker that
 * wakes late, after the job is over or a newer one is out, claims nothing
 * and never runs a task twice.  The caller takes tasks too and returns
 * when `done` reaches ntasks: it never waits for a worker that did no
 * work.  A claim counts tasks; which task it runs depends on who claimed:
 * the caller takes them in order from the first, the workers from the
 * last down (`front`, `back`: the claims number ntasks, so the two runs
 * never meet).  Consecutive nodes split alike (cpu_par_for's chunks of
 * the same tensor sizes) then leave each part of a value in the cache of
 * the core that wrote it, where tasks taken in turns from one counter
 * read half of it from the other core: at 2 threads (Xeon, 6 processes
 * each, interleaved) resnet18 0.958, svtr 0.961, regnet_y_400mf 0.971,
 * efficientnet_b0 0.976-0.983, mobilenet_v2 0.979, mnasnet1_0 0.981-1.01,
 * densenet121 0.985, inception_v3 0.991, googlenet and convnext 1.00 of
 * the time with one counter.  The counters are reset before the job is
 * published and only moved after a claim of it succeeds, and a job ends
 * only when its tasks are done, so no task of a later job is counted in
 * an earlier one's.  Sleep decisions follow "announce, then re-check the
 * word" with sequentially consistent atomics, and FUTEX_WAIT re-checks the
 * value in the kernel, so no wake-up is lost.
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
 * not to burn a core while the provider idles.  While the only run in
 * flight is computing, a worker spins up to RUN_SPIN_NS: a run's serial
 * stretches (a decoder step's small nodes before its vocabulary MatMul)
 * outlast SPIN_NS, and the wake-up of a sleeping worker costs 40-70 us on
 * these VMs, which the caller then waits for (gpt_decode_step's head at 2
 * threads: 74 us with the worker asleep, 22 spinning, 39 on one thread).
 * The spin ends when the run does (cpu_pool_run), so an idle provider
 * burns no CPU; with two runs in flight their threads already share the
 * CPUs, and a spinning worker would take one from the other run. */
enum { SPIN_NS = 100000, RUN_SPIN_NS = 2000000 };

typedef struct pool_member {
	void *scratch;
	size_t scratch_size;
	pthread_t thread;
	cpu_pool *pool;
	int id;
} pool_member;

struct cpu_pool {
	int n;                          /* members, caller included */
	pool_member *m;                 /* n entries; m[0] is the caller */
	pthread_mutex_t use;            /* try_begin/end */

	/* The job: written by the caller before gen is bumped, read by
	 * workers (atomically, as a late one may read the next job's). */
	_Atomic(cpu_task_fn *) fn;
	_Atomic(void *) arg;
	_Atomic uint32_t ntasks;
	_Atomic int width;
	_Atomic int stop;

	_Atomic uint32_t gen;           /* futex: a new job (or stop) */
	_Atomic int sleepers;           /* workers asleep on gen */
	_Atomic uint64_t claim;         /* job number << 32 | tasks claimed */
	_Atomic uint32_t front, back;   /* tasks taken from either end */
	_Atomic uint32_t done;          /* futex: tasks finished */
	_Atomic int caller_sleeping;
	_Atomic int runs;               /* cpu_pool_run: runs in flight */
	_Atomic int jobs;               /* jobs for the workers since a run began */
	_Atomic uint32_t wakes;         /* workers' returns from sleep (tests) */
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

/* Spins until *word != val or SPIN_NS pass (a worker: RUN_SPIN_NS while
 * one run is in flight); returns the last value read. */
static uint32_t spin_while(cpu_pool *p, _Atomic uint32_t *word, uint32_t val, int worker)
{
	int64_t start = 0;
	uint32_t v;

	for (unsigned i = 0;; i++) {
		v = atomic_load_explicit(word, memory_order_acquire);
		if (v != val)
			return v;
		if ((i & 255) == 0) {
			int64_t t = now_ns();
			int64_t limit = worker && atomic_load_explicit(&p->runs, memory_order_relaxed) == 1 ?
					RUN_SPIN_NS : SPIN_NS;

			if (!start)
				start = t;
			else if (t - start > limit)
				return v;
		}
		cpu_relax();
	}
}

/* Claims and runs tasks of job `job` until none is left.  The job's fields
 * are read before the claim word: if that word still names `job`, the
 * caller had not yet closed it for a newer job (cpu_pool_for stores the
 * new number before the new fields), so the fields read were this job's;
 * and a claim only succeeds while the word names `job`. */
static void run_tasks(cpu_pool *p, uint32_t job, int id)
{
	cpu_task_fn *fn = atomic_load(&p->fn);
	void *arg = atomic_load(&p->arg);
	uint32_t ntasks = atomic_load(&p->ntasks);
	uint64_t c = atomic_load(&p->claim);

	if (id >= atomic_load(&p->width))
		return;
	for (;;) {
		uint32_t i = (uint32_t)c;
		if ((uint32_t)(c >> 32) != job || i >= ntasks)
			return;
		if (!atomic_compare_exchange_weak(&p->claim, &c, c + 1))
			continue;   /* c now holds the current value */
		/* the i-th claim: the caller takes the next task from the
		 * front, the workers from the back (see the file comment) */
		i = id == 0 ? atomic_fetch_add(&p->front, 1) :
			      ntasks - 1 - atomic_fetch_add(&p->back, 1);
		fn(arg, i, id);
		if (atomic_fetch_add(&p->done, 1) + 1 == ntasks && atomic_load(&p->caller_sleeping))
			futex_wake(&p->done);
		c = atomic_load(&p->claim);
	}
}

static void *worker_main(void *arg)
{
	pool_member *self = arg;
	cpu_pool *p = self->pool;
	/* gen was 0 when the pool was created; reading it here instead
	 * would skip a job published before this thread got to run. */
	uint32_t seen = 0;

	for (;;) {
		uint32_t g = spin_while(p, &p->gen, seen, 1);
		while (g == seen) {
			atomic_fetch_add(&p->sleepers, 1);
			futex_wait(&p->gen, seen);
			atomic_fetch_sub(&p->sleepers, 1);
			atomic_fetch_add_explicit(&p->wakes, 1, memory_order_relaxed);
			g = atomic_load(&p->gen);
		}
		seen = g;
		if (atomic_load(&p->stop))
			return NULL;
		run_tasks(p, g, self->id);
	}
}

static int cores;
static pthread_once_t cores_once = PTHREAD_ONCE_INIT;

static void cores_read(void)
{
	long c = sysconf(_SC_NPROCESSORS_ONLN);

	cores = c > 0 ? (int)(c < 4096 ? c : 4096) : 1;
}

int cpu_pool_cores(void)
{
	pthread_once(&cores_once, cores_read);
	return cores;
}

int cpu_pool_create(int threads, cpu_pool **out)
{
	cpu_pool *p;
	int started = 0, rc = 0;

	*out = NULL;
	if (threads <= 0)
		threads = cpu_pool_cores() < 256 ? cpu_pool_cores() : 256;
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
	atomic_init(&p->fn, NULL);
	atomic_init(&p->arg, NULL);
	atomic_init(&p->ntasks, 0);
	atomic_init(&p->width, 0);
	atomic_init(&p->stop, 0);
	atomic_init(&p->gen, 0);
	atomic_init(&p->sleepers, 0);
	atomic_init(&p->claim, 0);
	atomic_init(&p->front, 0);
	atomic_init(&p->back, 0);
	atomic_init(&p->done, 0);
	atomic_init(&p->caller_sleeping, 0);
	atomic_init(&p->runs, 0);
	atomic_init(&p->jobs, 0);
	atomic_init(&p->wakes, 0);
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
		cpu_pool_destroy(p);
		return -EAGAIN;
	}
	*out = p;
	return 0;
}

void cpu_pool_destroy(cpu_pool *p)
{
	if (!p)
		return;
	atomic_store(&p->stop, 1);
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

int cpu_pool_threads(const cpu_pool *p)
{
	return p ? p->n : 1;
}

int cpu_pool_try_begin(cpu_pool *p)
{
	return p && pthread_mutex_trylock(&p->use) == 0;
}

void cpu_pool_end(cpu_pool *p)
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

int cpu_pool_reserve(cpu_pool *p, size_t bytes)
{
	for (int i = 0; i < p->n; i++)
		if (grow(&p->m[i].scratch, &p->m[i].scratch_size, bytes))
			return -ENOMEM;
	return 0;
}

int cpu_pool_sleepers(cpu_pool *p)
{
	return p ? atomic_load(&p->sleepers) : 0;
}

uint32_t cpu_pool_wakes(cpu_pool *p)
{
	return p ? atomic_load(&p->wakes) : 0;
}

void cpu_pool_run(cpu_pool *p, int delta)
{
	uint32_t job;

	if (!p || p->n < 2 || atomic_fetch_add(&p->runs, delta) + delta != 1 || delta < 0)
		return;
	/* The only run starts.  If the last one gave the workers jobs, wake
	 * them now, while this one's first nodes run on the caller: a job
	 * that names no task (its claim word is closed), so they only start
	 * to spin.  Under the pool's lock, as cpu_pool_for numbers jobs. */
	if (!atomic_exchange(&p->jobs, 0) || atomic_load(&p->sleepers) == 0 ||
	    !cpu_pool_try_begin(p))
		return;
	job = atomic_load(&p->gen) + 1;
	atomic_store(&p->claim, (uint64_t)job << 32 | UINT32_MAX);
	atomic_store(&p->gen, job);
	futex_wake(&p->gen);
	cpu_pool_end(p);
}

void *cpu_pool_scratch(cpu_pool *p, int member)
{
	return p->m[member].scratch;
}

void cpu_pool_for(cpu_pool *p, int width, int64_t ntasks, cpu_task_fn *fn, void *arg)
{
	uint32_t job, left;

	if (width <= 0 || width > p->n)
		width = p->n;
	if (width > ntasks)
		width = (int)ntasks;
	if (width <= 1 || ntasks > UINT32_MAX / 2) {
		for (int64_t i = 0; i < ntasks; i++)
			fn(arg, i, 0);
		return;
	}
	job = atomic_load(&p->gen) + 1;
	/* Close the claim word under the new number first: a late worker
	 * that read the fields below before this store holds an older
	 * number and can no longer claim; one that reads them after sees
	 * only the new job's (see run_tasks). */
	atomic_store(&p->claim, (uint64_t)job << 32 | UINT32_MAX);
	atomic_store(&p->fn, fn);
	atomic_store(&p->arg, arg);
	atomic_store(&p->ntasks, (uint32_t)ntasks);
	atomic_store(&p->width, width);
	atomic_store(&p->done, 0);
	atomic_store(&p->front, 0);
	atomic_store(&p->back, 0);
	atomic_store(&p->claim, (uint64_t)job << 32);
	atomic_store(&p->gen, job);             /* publishes the job */
	atomic_store_explicit(&p->jobs, 1, memory_order_relaxed);
	if (atomic_load(&p->sleepers) > 0)
		futex_wake(&p->gen);
	run_tasks(p, job, 0);

	while ((left = atomic_load(&p->done)) != (uint32_t)ntasks) {
		uint32_t v = spin_while(p, &p->done, left, 0);
		if (v != left)
			continue;
		atomic_store(&p->caller_sleeping, 1);
		if (atomic_load(&p->done) == left)
			futex_wait(&p->done, left);
		atomic_store(&p->caller_sleeping, 0);
	}
}
