/*
 * threadpool: the CPU provider's intra-op thread pool.  A fixed set of
 * workers (threads - 1 of them: the calling thread is the last member)
 * parked on a futex; gemm_pool_for hands them a range of task indices that
 * every member, caller included, claims one at a time.  Between jobs a
 * worker spins briefly (so back-to-back ops do not pay a wake-up) and then
 * sleeps.  Each member owns a scratch buffer the GEMM packs into.
 *
 * One job at a time: gemm_pool_try_begin/gemm_pool_end bracket a user
 * (the GEMM driver), and a second user (another thread, or a task of the
 * running job calling back in) gets 0 from try_begin and runs alone.
 */
#ifndef ORTMK_GEMM_THREADPOOL_H
#define ORTMK_GEMM_THREADPOOL_H

#include <stddef.h>
#include <stdint.h>

typedef struct gemm_pool gemm_pool;

/* fn(arg, task, member): member in [0, gemm_pool_threads). */
typedef void gemm_task_fn(void *arg, int64_t task, int member);

/* threads <= 0: one per online CPU.  0 or -ENOMEM / -EAGAIN. */
int gemm_pool_create(int threads, gemm_pool **out);
void gemm_pool_destroy(gemm_pool *pool);
/* Members, caller included; 1 for a NULL pool. */
int gemm_pool_threads(const gemm_pool *pool);

/* Exclusive use of the pool: 1 when taken, 0 when it is busy. */
int gemm_pool_try_begin(gemm_pool *pool);
void gemm_pool_end(gemm_pool *pool);
/* Grows every member's scratch to at least bytes (64-byte aligned). Call
 * between try_begin and end.  0 or -ENOMEM. */
int gemm_pool_reserve(gemm_pool *pool, size_t bytes);
void *gemm_pool_scratch(gemm_pool *pool, int member);

/* Runs fn for tasks [0, ntasks) on up to `width` members (<= 0: all) and
 * returns when all are done.  Call between try_begin and end. */
void gemm_pool_for(gemm_pool *pool, int width, int64_t ntasks, gemm_task_fn *fn, void *arg);

#endif
