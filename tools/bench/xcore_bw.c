/*
 * xcore_bw: how fast one core reads what the other wrote, against what it
 * wrote itself (docs/PERFORMANCE.md, the fifth session's run: why 2-thread
 * NCHW kernels scale less than ONNX Runtime's on this VM).  A buffer of
 * 256 KiB to 4 MiB is written on CPU 0 and summed on CPU 0 (same core) or
 * CPU 1 (other core), 300 times each; prints GB/s of the sums.
 *
 *   gcc -O3 -ffast-math -march=native -pthread tools/bench/xcore_bw.c -o /tmp/xcore_bw
 *   /tmp/xcore_bw
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

enum { ROUNDS = 300 };

static int n;
static float *buf;
static _Atomic int phase;
static double other_s;

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
	pthread_setaffinity_np(pthread_self(), sizeof(s), &s);
}

static float sum(void)
{
	float s = 0;

	for (int i = 0; i < n; i++)
		s += buf[i];
	return s;
}

static void fill(int it)
{
	for (int i = 0; i < n; i++)
		buf[i] = (float)(i + it);
}

static void *writer(void *arg)
{
	(void)arg;
	pin(0);
	for (int it = 0; it < ROUNDS; it++) {
		while (atomic_load(&phase) != 0)
			;
		fill(it);
		atomic_store(&phase, 1);
	}
	return NULL;
}

static void *reader(void *arg)
{
	double t = 0;
	float s = 0;

	(void)arg;
	pin(1);
	for (int it = 0; it < ROUNDS; it++) {
		while (atomic_load(&phase) != 1)
			;
		double t0 = now();

		s += sum();
		t += now() - t0;
		atomic_store(&phase, 0);
	}
	other_s = t / ROUNDS;
	return s == 1.0f ? arg : NULL;   /* keep the sums */
}

int main(void)
{
	for (int kb = 256; kb <= 4096; kb *= 2) {
		double t = 0;
		float s = 0;
		pthread_t a, b;

		n = kb * 256;
		buf = aligned_alloc(64, (size_t)n * sizeof(float));
		if (!buf)
			return 1;
		pin(0);
		for (int it = 0; it < ROUNDS; it++) {
			fill(it);
			double t0 = now();

			s += sum();
			t += now() - t0;
		}
		atomic_store(&phase, 0);
		pthread_create(&a, NULL, writer, NULL);
		pthread_create(&b, NULL, reader, NULL);
		pthread_join(a, NULL);
		pthread_join(b, NULL);
		printf("%5d KiB: same core %.1f GB/s, other core %.1f GB/s%s\n", kb,
		       kb / 1024.0 / (t / ROUNDS) / 1e3, kb / 1024.0 / other_s / 1e3, s == 1.0f ? " " : "");
		free(buf);
	}
	return 0;
}
