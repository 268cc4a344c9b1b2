/*
 * handoff: what one hand-over between two processes costs on this machine
 * (docs/PERFORMANCE.md, "Concurrent runs": the floor under a run that an
 * application thread hands to a provider's thread and gets back).  Two
 * processes pass a counter back and forth through a shared word, each
 * sleeping on a futex until it is its turn: once both on CPU 0 (each
 * hand-over a context switch), once on CPUs 0 and 1 (each a wake-up of
 * the other CPU).  Prints the round trip (two hand-overs) in microseconds.
 *
 *   gcc -O2 tools/bench/handoff.c -o /tmp/handoff && /tmp/handoff
 */
#define _GNU_SOURCE
#include <linux/futex.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { ROUNDS = 50000 };

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void pin(int cpu)
{
	cpu_set_t s;

	CPU_ZERO(&s);
	CPU_SET(cpu, &s);
	sched_setaffinity(0, sizeof(s), &s);
}

/* Waits until *w is no longer v. */
static void wait_not(atomic_uint *w, unsigned v)
{
	while (atomic_load(w) == v)
		syscall(SYS_futex, w, FUTEX_WAIT, v, NULL, NULL, 0);
}

static void set_wake(atomic_uint *w, unsigned v)
{
	atomic_store(w, v);
	syscall(SYS_futex, w, FUTEX_WAKE, 1, NULL, NULL, 0);
}

/* The round trip in microseconds with the second process on `other`. */
static double round_trip(int other)
{
	atomic_uint *w = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	double t0, t;
	pid_t p;

	if (w == MAP_FAILED)
		return -1;
	atomic_store(w, 0);
	p = fork();
	if (p == 0) {
		pin(other);
		/* odd values are the parent's requests, even ones the answers */
		for (unsigned i = 0; i < ROUNDS; i++) {
			wait_not(w, 2 * i);
			set_wake(w, 2 * i + 2);
		}
		_exit(0);
	}
	pin(0);
	t0 = now();
	for (unsigned i = 0; i < ROUNDS; i++) {
		set_wake(w, 2 * i + 1);
		wait_not(w, 2 * i + 1);
	}
	t = now() - t0;
	waitpid(p, NULL, 0);
	munmap(w, 4096);
	return t / ROUNDS * 1e6;
}

int main(void)
{
	printf("round trip, both on CPU 0: %.1f us\n", round_trip(0));
	if (sysconf(_SC_NPROCESSORS_ONLN) > 1)
		printf("round trip, CPUs 0 and 1:  %.1f us\n", round_trip(1));
	return 0;
}
