/*
 * threadpool: the CPU provider's intra-op thread pool.  A fixed set of
 * workers (threads - 1 of them: the calling thread is the last member)
 * parked on a futex; cpu_pool_for hands them a range of task indices that
 * every member, caller included, claims one at a time.  Between jobs a
 * worker spins briefly (so back-to-back ops do not pay a wake-up) and then
 * sleeps (longer while a run is in flight: cpu_pool_run).  Each member owns a scratch buffer the GEMM packs into.
 *
 * One job at a time: cpu_pool_try_begin/cpu_pool_end bracket a user
 * (the GEMM driver), and a second user (another thread, or a task of the
 * running job calling back in) gets 0 from try_begin and runs alone.
 */
#ifndef ORTMK_CPU_THREADPOOL_H
#define ORTMK_CPU_THREADPOOL_H

#include <stddef.h>
#include <stdint.h>

typedef struct cpu_pool cpu_pool;

/* fn(arg, task, member): member in [0, cpu_pool_threads). */
typedef void cpu_task_fn(void *arg, int64_t task, int member);

/* threads <= 0: one per online CPU.  0 or -ENOMEM / -EAGAIN. */
int cpu_pool_create(int threads, cpu_pool **out);
/* Online CPUs (at least 1), read once: glibc reads them from /sys, which a
 * sandboxed provider cannot open, so its init asks before the filter. */
int cpu_pool_cores(void);
void cpu_pool_destroy(cpu_pool *pool);
/* Members, caller included; 1 for a NULL pool. */
int cpu_pool_threads(const cpu_pool *pool);

/* Exclusive use of the pool: 1 when taken, 0 when it is busy. */
int cpu_pool_try_begin(cpu_pool *pool);
void cpu_pool_end(cpu_pool *pool);
/* Grows every member's scratch to at least bytes (64-byte aligned). Call
 * between try_begin and end.  0 or -ENOMEM. */
int cpu_pool_reserve(cpu_pool *pool, size_t bytes);
void *cpu_pool_scratch(cpu_pool *pool, int member);
/* A run of the pool's user starts (+1) or ends (-1): while exactly one is
 * in flight, workers spin longer between jobs before they sleep. */
void cpu_pool_run(cpu_pool *pool, int delta);
/* Workers asleep now, and how many times one woke up so far (the tests
 * watch the wake-up of cpu_pool_run). */
int cpu_pool_sleepers(cpu_pool *pool);
uint32_t cpu_pool_wakes(cpu_pool *pool);

/* Runs fn for tasks [0, ntasks) on up to `width` members (<= 0: all) and
 * returns when all are done.  Call between try_begin and end. */
void cpu_pool_for(cpu_pool *pool, int width, int64_t ntasks, cpu_task_fn *fn, void *arg);

#endif
