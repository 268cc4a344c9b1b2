/*
 * Fences: 64-bit timeline counters in shared memory.
 *
 * A provider signals a fence when the work for a given value is done; the
 * core (or another provider) waits for it.  Both sides may be different
 * processes mapping the same MAP_SHARED segment, which is why the futex
 * calls below use the shared (non-PRIVATE) operations: private futexes are
 * keyed by the virtual address in one process and would never see a wake
 * from another one.
 *
 * The futex word is `wake`, a 32-bit counter bumped on every signal or
 * failure, rather than `value` itself: futexes compare 32 bits and the value
 * is 64.  A waiter reads `wake` before `value`, so a signal landing between
 * its check and its sleep changes `wake` and the kernel refuses to sleep.
 */
#include "shm.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* Long enough to catch a signal that is microseconds away without paying
 * for a syscall, short enough not to burn a core while a kernel runs. */
#define SHM_SPIN_ITERS 2000

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield" ::: "memory");
#endif
}

uint64_t shm_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * UINT64_C(1000000000) + (uint64_t)ts.tv_nsec;
}

static void futex_wake_all(shm_fence *f)
{
	syscall(SYS_futex, (uint32_t *)&f->wake, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

/* Sleeps while `wake` still equals `seen`, until the absolute monotonic
 * deadline.  Spurious returns are fine: the caller re-checks everything. */
static void futex_wait_until(shm_fence *f, uint32_t seen, uint64_t deadline_ns)
{
	struct timespec ts;
	struct timespec *tsp = NULL;

	if (deadline_ns != UINT64_MAX) {
		ts.tv_sec = (time_t)(deadline_ns / UINT64_C(1000000000));
		ts.tv_nsec = (long)(deadline_ns % UINT64_C(1000000000));
		tsp = &ts;
	}
	/* FUTEX_WAIT_BITSET takes an absolute CLOCK_MONOTONIC time, so
	 * repeated wake-ups never stretch the total wait. */
	syscall(SYS_futex, (uint32_t *)&f->wake, FUTEX_WAIT_BITSET, seen, tsp,
		NULL, FUTEX_BITSET_MATCH_ANY);
}

void shm_fence_init(shm_fence *f, uint64_t value)
{
	atomic_store(&f->value, value & ~SHM_FENCE_FAILED);
	atomic_store(&f->wake, 0);
	f->pad = 0;
}

void shm_fence_signal(shm_fence *f, uint64_t value)
{
	uint64_t old = atomic_load(&f->value);
	uint64_t want;

	/* Keep the value monotonic and never clear a failure: a late signal
	 * from a half-dead peer must not hide that the fence failed. */
	do {
		uint64_t cur = old & ~SHM_FENCE_FAILED;
		uint64_t v = value & ~SHM_FENCE_FAILED;

		want = (v > cur ? v : cur) | (old & SHM_FENCE_FAILED);
		if (want == old)
			break;
	} while (!atomic_compare_exchange_weak(&f->value, &old, want));
	atomic_fetch_add(&f->wake, 1);
	futex_wake_all(f);
}

void shm_fence_fail(shm_fence *f)
{
	atomic_fetch_or(&f->value, SHM_FENCE_FAILED);
	atomic_fetch_add(&f->wake, 1);
	futex_wake_all(f);
}

uint64_t shm_fence_read(const shm_fence *f)
{
	return atomic_load((_Atomic uint64_t *)&f->value);
}

/* 0 reached, -EPIPE failed, -EAGAIN not yet. */
static int fence_check(shm_fence *f, uint64_t target)
{
	uint64_t v = atomic_load(&f->value);

	if (v & SHM_FENCE_FAILED)
		return -EPIPE;
	return v >= target ? 0 : -EAGAIN;
}

/* Spins until `wake` moves away from `seen`; 1 if it did. */
static int spin_for_change(shm_fence *f, uint32_t seen)
{
	for (int i = 0; i < SHM_SPIN_ITERS; i++) {
		cpu_relax();
		if (atomic_load_explicit(&f->wake, memory_order_relaxed) != seen)
			return 1;
	}
	return 0;
}

int shm_fence_wait(shm_fence *f, uint64_t target, uint64_t deadline_ns)
{
	int spun = 0;

	for (;;) {
		uint32_t seen = atomic_load(&f->wake);
		int ret = fence_check(f, target);

		if (ret != -EAGAIN)
			return ret;
		if (deadline_ns == 0 || shm_now_ns() >= deadline_ns)
			return -ETIMEDOUT;
		/* Spin once per wait: after a wake-up that was not ours the
		 * next signal is unlikely to be imminent. */
		if (!spun) {
			spun = 1;
			if (spin_for_change(f, seen))
				continue;
		}
		futex_wait_until(f, seen, deadline_ns);
	}
}
