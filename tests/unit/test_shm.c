/*
 * Unit tests for shm/: sealed segments, the planner's offset arena, and
 * fences, including fences shared between two processes (the case the core
 * and a provider process depend on).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "shm.h"

#define MS(x) ((uint64_t)(x) * UINT64_C(1000000))

static size_t page_size(void)
{
	return (size_t)sysconf(_SC_PAGESIZE);
}

static int fd_is_open(int fd)
{
	return fcntl(fd, F_GETFD) >= 0 || errno != EBADF;
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

/* ---- segments ---------------------------------------------------------- */

/* Stands in for libc's fallocate (tools/check-layers/layers.txt:
 * interpose) so the tests can make it fail as a machine out of memory
 * would; 0 passes through to the kernel. */
static int fallocate_errno;

int fallocate(int fd, int mode, off_t offset, off_t len)
{
	if (fallocate_errno) {
		errno = fallocate_errno;
		return -1;
	}
	return (int)syscall(SYS_fallocate, fd, mode, offset, len);
}

/* The lowest free descriptor: a leak on an error path moves it. */
static int next_fd(void)
{
	int fd = dup(0);

	close(fd);
	return fd;
}

/* Every page is allocated at creation, not at first touch. */
static void test_segment_backed(void **state)
{
	size_t size = 64 * page_size();
	shm_segment s;
	struct stat st;
	(void)state;

	assert_int_equal(shm_segment_create("t", size, 1, &s), 0);
	assert_int_equal(fstat(s.fd, &st), 0);
	assert_true((uint64_t)st.st_blocks * 512 >= size);
	shm_segment_destroy(&s);
}

/* No memory behind the segment: -ENOMEM at creation, nothing left open. */
static void test_segment_no_memory(void **state)
{
	static const int errs[] = {ENOSPC, ENOMEM};
	int fd0 = next_fd();
	shm_segment s;
	(void)state;

	for (int i = 0; i < 2; i++) {
		memset(&s, 0, sizeof(s));
		fallocate_errno = errs[i];
		assert_int_equal(shm_segment_create("t", 1 << 20, 1, &s), -ENOMEM);
		fallocate_errno = 0;
		assert_null(s.base);
		assert_int_equal(next_fd(), fd0);
	}
	/* Another failure is passed on as it is. */
	fallocate_errno = EIO;
	assert_int_equal(shm_segment_create("t", 1 << 20, 1, &s), -EIO);
	fallocate_errno = 0;
	assert_int_equal(next_fd(), fd0);
	/* A file system without fallocate: pages come at first touch. */
	fallocate_errno = EOPNOTSUPP;
	assert_int_equal(shm_segment_create("t", 1 << 20, 1, &s), 0);
	fallocate_errno = 0;
	memset(s.base, 1, s.size);
	shm_segment_destroy(&s);
}

static void test_segment_create_sizes(void **state)
{
	shm_segment s;
	(void)state;

	assert_int_equal(shm_segment_create("t", 1, 7, &s), 0);
	assert_int_equal(s.size, page_size());
	assert_int_equal(s.id, 7);
	assert_non_null(s.base);
	assert_true(fcntl(s.fd, F_GETFD) & FD_CLOEXEC);
	memset(s.base, 0xab, s.size);
	shm_segment_destroy(&s);
	assert_int_equal(s.fd, -1);
	assert_null(s.base);
	shm_segment_destroy(&s); /* idempotent */

	assert_int_equal(shm_segment_create(NULL, page_size(), 0, &s), 0);
	assert_int_equal(s.size, page_size());
	shm_segment_destroy(&s);
	assert_int_equal(shm_segment_create("t", page_size() + 1, 0, &s), 0);
	assert_int_equal(s.size, 2 * page_size());
	shm_segment_destroy(&s);

	assert_int_equal(shm_segment_create("t", 0, 0, &s), -EINVAL);
	assert_int_equal(shm_segment_create("t", SIZE_MAX, 0, &s), -EINVAL);
}

static void test_segment_seals(void **state)
{
	shm_segment s;
	int seals;
	(void)state;

	assert_int_equal(shm_segment_create("seals", 10000, 1, &s), 0);
	seals = fcntl(s.fd, F_GET_SEALS);
	assert_true(seals >= 0);
	assert_int_equal(seals & (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL),
			 F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL);
	assert_int_equal(ftruncate(s.fd, (off_t)s.size * 2), -1);
	assert_int_equal(errno, EPERM);
	assert_int_equal(ftruncate(s.fd, 0), -1);
	assert_int_equal(errno, EPERM);
	/* F_SEAL_SEAL: the peer cannot add a write seal behind our back. */
	assert_int_equal(fcntl(s.fd, F_ADD_SEALS, F_SEAL_WRITE), -1);
	shm_segment_destroy(&s);
}

static void test_segment_map_fd_take(void **state)
{
	shm_segment a, b;
	(void)state;

	assert_int_equal(shm_segment_create("share", 5000, 3, &a), 0);
	/* The peer announces the requested size; the file is page-rounded. */
	assert_int_equal(shm_segment_map_fd_take(dup(a.fd), 5000, 3, &b), 0);
	assert_int_equal(b.size, a.size);
	assert_int_equal(b.id, 3);
	assert_ptr_not_equal(a.base, b.base);
	memcpy(a.base, "hello", 6);
	assert_string_equal((char *)b.base, "hello");
	((char *)b.base)[a.size - 1] = 'z';
	assert_int_equal(((char *)a.base)[a.size - 1], 'z');
	shm_segment_destroy(&b);
	shm_segment_destroy(&a);
}

static void test_segment_refuse_unsealed(void **state)
{
	shm_segment s;
	int fd;
	(void)state;

	/* Sealable but never sealed. */
	fd = memfd_create("unsealed", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, 4096), 0);
	assert_int_equal(shm_segment_map_fd_take(fd, 4096, 0, &s), -EINVAL);
	assert_false(fd_is_open(fd));

	/* Only shrink sealed: growing is still possible, also refused. */
	fd = memfd_create("half", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, 4096), 0);
	assert_int_equal(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK), 0);
	assert_int_equal(shm_segment_map_fd_take(fd, 4096, 0, &s), -EINVAL);
	assert_false(fd_is_open(fd));

	/* Not sealable at all. */
	fd = memfd_create("nosealing", MFD_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, 4096), 0);
	assert_int_equal(shm_segment_map_fd_take(fd, 4096, 0, &s), -EINVAL);
	assert_false(fd_is_open(fd));
}

static void test_segment_refuse_regular_file(void **state)
{
	char path[] = "/tmp/ortmk-test-shm-XXXXXX";
	shm_segment s;
	int fd;
	(void)state;

	fd = mkstemp(path);
	assert_true(fd >= 0);
	unlink(path);
	assert_int_equal(ftruncate(fd, 4096), 0);
	assert_int_equal(shm_segment_map_fd_take(fd, 4096, 0, &s), -EINVAL);
	assert_false(fd_is_open(fd));

	fd = open("/dev/null", O_RDWR);
	assert_true(fd >= 0);
	assert_int_equal(shm_segment_map_fd_take(fd, 4096, 0, &s), -EINVAL);
	assert_false(fd_is_open(fd));

	assert_int_equal(shm_segment_map_fd_take(-1, 4096, 0, &s), -EBADF);
}

static void test_segment_refuse_too_small(void **state)
{
	shm_segment a, b;
	int fd;
	(void)state;

	assert_int_equal(shm_segment_create("small", page_size(), 0, &a), 0);
	fd = dup(a.fd);
	assert_int_equal(shm_segment_map_fd_take(fd, page_size() + 1, 0, &b), -EINVAL);
	assert_false(fd_is_open(fd));
	fd = dup(a.fd);
	assert_int_equal(shm_segment_map_fd_take(fd, 0, 0, &b), -EINVAL);
	assert_false(fd_is_open(fd));
	shm_segment_destroy(&a);
}

static void test_segment_contains(void **state)
{
	shm_segment s;
	uint64_t n;
	(void)state;

	assert_int_equal(shm_segment_create("c", page_size(), 0, &s), 0);
	n = s.size;
	assert_true(shm_segment_contains(&s, 0, n));
	assert_true(shm_segment_contains(&s, n, 0));
	assert_true(shm_segment_contains(&s, n - 1, 1));
	assert_false(shm_segment_contains(&s, n, 1));
	assert_false(shm_segment_contains(&s, 0, n + 1));
	assert_false(shm_segment_contains(&s, 1, UINT64_MAX));
	assert_false(shm_segment_contains(&s, UINT64_MAX, 2));
	assert_false(shm_segment_contains(&s, UINT64_MAX - 1, 2));
	shm_segment_destroy(&s);
	assert_false(shm_segment_contains(&s, 0, 0));
}

/* ---- arena ------------------------------------------------------------- */

static void test_arena_basic(void **state)
{
	shm_arena a;
	uint64_t o1, o2, o3;
	(void)state;

	assert_int_equal(shm_arena_init(&a, 4096), 0);
	assert_int_equal(shm_arena_alloc(&a, 1, &o1), 0);
	assert_int_equal(o1, 0);
	assert_int_equal(shm_arena_alloc(&a, 100, &o2), 0);
	assert_int_equal(o2, 64);
	assert_int_equal(shm_arena_alloc(&a, 0, &o3), 0);
	assert_int_equal(o3, 192);
	assert_int_equal(a.high_water, 256);
	assert_int_equal(shm_arena_alloc(&a, 4096, &o3), -ENOMEM);
	assert_int_equal(shm_arena_alloc(&a, UINT64_MAX, &o3), -ENOMEM);
	assert_int_equal(shm_arena_free(&a, o2), 0);
	assert_int_equal(a.high_water, 256);
	shm_arena_fini(&a);

	assert_int_equal(shm_arena_init(&a, 0), -EINVAL);
	assert_int_equal(shm_arena_init(&a, 63), -EINVAL);
}

static void test_arena_coalesce(void **state)
{
	shm_arena a;
	uint64_t x, y, z, w;
	(void)state;

	assert_int_equal(shm_arena_init(&a, 192), 0);
	assert_int_equal(shm_arena_alloc(&a, 64, &x), 0);
	assert_int_equal(shm_arena_alloc(&a, 64, &y), 0);
	assert_int_equal(shm_arena_alloc(&a, 64, &z), 0);
	assert_int_equal(shm_arena_alloc(&a, 1, &w), -ENOMEM);
	assert_int_equal(shm_arena_free(&a, x), 0);
	assert_int_equal(shm_arena_free(&a, z), 0);
	/* 128 bytes free, but in two pieces. */
	assert_int_equal(shm_arena_alloc(&a, 128, &w), -ENOMEM);
	assert_int_equal(a.n, 3);
	assert_int_equal(shm_arena_free(&a, y), 0);
	assert_int_equal(a.n, 1);
	assert_int_equal(a.blocks[0].size, 192);
	assert_int_equal(shm_arena_alloc(&a, 192, &w), 0);
	assert_int_equal(w, 0);
	shm_arena_fini(&a);
}

static void test_arena_best_fit(void **state)
{
	shm_arena a;
	uint64_t h0, h1, h2, s, o;
	(void)state;

	assert_int_equal(shm_arena_init(&a, 1024), 0);
	assert_int_equal(shm_arena_alloc(&a, 128, &h0), 0); /* [0,128) */
	assert_int_equal(shm_arena_alloc(&a, 64, &s), 0);   /* [128,192) */
	assert_int_equal(shm_arena_alloc(&a, 64, &h1), 0);  /* [192,256) */
	assert_int_equal(shm_arena_alloc(&a, 64, &s), 0);   /* [256,320) */
	assert_int_equal(shm_arena_alloc(&a, 128, &h2), 0); /* [320,448) */
	assert_int_equal(shm_arena_alloc(&a, 64, &s), 0);   /* [448,512) */
	assert_int_equal(shm_arena_free(&a, h0), 0);
	assert_int_equal(shm_arena_free(&a, h1), 0);
	assert_int_equal(shm_arena_free(&a, h2), 0);
	/* Holes: 128@0, 64@192, 128@320, 512@512. */
	assert_int_equal(shm_arena_alloc(&a, 10, &o), 0);
	assert_int_equal(o, 192);       /* smallest that fits */
	assert_int_equal(shm_arena_alloc(&a, 100, &o), 0);
	assert_int_equal(o, 0);         /* tie on size: lowest offset */
	assert_int_equal(shm_arena_alloc(&a, 65, &o), 0);
	assert_int_equal(o, 320);
	assert_int_equal(shm_arena_alloc(&a, 129, &o), 0);
	assert_int_equal(o, 512);
	assert_int_equal(a.high_water, 512 + 192);
	shm_arena_fini(&a);
}

static void test_arena_bad_free(void **state)
{
	shm_arena a;
	uint64_t x, y;
	(void)state;

	assert_int_equal(shm_arena_init(&a, 4096), 0);
	assert_int_equal(shm_arena_alloc(&a, 256, &x), 0);
	assert_int_equal(shm_arena_alloc(&a, 64, &y), 0);
	assert_int_equal(shm_arena_free(&a, x + 64), -EINVAL); /* inside */
	assert_int_equal(shm_arena_free(&a, 1000), -EINVAL);   /* free space */
	assert_int_equal(shm_arena_free(&a, 1 << 20), -EINVAL);
	assert_int_equal(shm_arena_free(&a, x), 0);
	assert_int_equal(shm_arena_free(&a, x), -EINVAL);      /* double */
	assert_int_equal(shm_arena_free(&a, y), 0);
	assert_int_equal(shm_arena_free(&a, y), -EINVAL);
	assert_int_equal(a.n, 1);
	shm_arena_fini(&a);
}

static void test_arena_unbounded(void **state)
{
	shm_arena a;
	uint64_t o, last = 0;
	(void)state;

	assert_int_equal(shm_arena_init(&a, UINT64_MAX / 2), 0);
	for (int i = 0; i < 100; i++) {
		assert_int_equal(shm_arena_alloc(&a, (uint64_t)1 << 32, &o), 0);
		last = o;
	}
	assert_int_equal(last, (uint64_t)99 << 32);
	assert_int_equal(a.high_water, (uint64_t)100 << 32);
	assert_int_equal(shm_arena_alloc(&a, UINT64_MAX / 2, &o), -ENOMEM);
	shm_arena_fini(&a);
}

/* The model: live blocks sorted by offset.  Free space is the gaps between
 * them, so best fit can be computed independently of the arena. */
#define STRESS_MAX 512

typedef struct live_block {
	uint64_t off, size;
} live_block;

static uint64_t model_best_fit(const live_block *live, int n, uint64_t cap,
			       uint64_t need)
{
	uint64_t best = UINT64_MAX, best_size = UINT64_MAX, pos = 0;

	for (int i = 0; i <= n; i++) {
		uint64_t end = i < n ? live[i].off : cap;
		uint64_t gap = end - pos;

		if (gap >= need && gap < best_size) {
			best = pos;
			best_size = gap;
		}
		if (i < n)
			pos = live[i].off + live[i].size;
	}
	return best;
}

static void model_insert(live_block *live, int *n, uint64_t off, uint64_t size)
{
	int i = *n;

	while (i > 0 && live[i - 1].off > off) {
		live[i] = live[i - 1];
		i--;
	}
	live[i] = (live_block){ off, size };
	(*n)++;
}

static void check_arena(const shm_arena *a, const live_block *live, int n)
{
	uint64_t pos = 0;
	int used = 0;

	for (size_t i = 0; i < a->n; i++) {
		assert_int_equal(a->blocks[i].off, pos);
		assert_true(a->blocks[i].size > 0);
		if (i > 0)
			assert_false(!a->blocks[i].used && !a->blocks[i - 1].used);
		used += a->blocks[i].used;
		pos += a->blocks[i].size;
	}
	assert_int_equal(pos, a->capacity);
	assert_int_equal(used, n);
	for (int i = 0; i < n; i++) {
		assert_int_equal(live[i].off % SHM_ALIGN, 0);
		assert_true(live[i].off + live[i].size <= a->capacity);
		if (i > 0)
			assert_true(live[i - 1].off + live[i - 1].size <= live[i].off);
	}
}

static void test_arena_stress(void **state)
{
	static live_block live[STRESS_MAX];
	const uint64_t cap = 64 * 1024 + 17;
	uint64_t high = 0;
	shm_arena a;
	int n = 0;
	(void)state;

	srand(12345);
	assert_int_equal(shm_arena_init(&a, cap), 0);
	for (int step = 0; step < 20000; step++) {
		if (n > 0 && (n == STRESS_MAX || rand() % 100 < 45)) {
			int k = rand() % n;

			assert_int_equal(shm_arena_free(&a, live[k].off), 0);
			memmove(&live[k], &live[k + 1], (size_t)(n - k - 1) * sizeof(*live));
			n--;
		} else {
			uint64_t req = (uint64_t)(rand() % 3000);
			uint64_t need = req == 0 ? 64 : (req + 63) / 64 * 64;
			uint64_t want = model_best_fit(live, n, cap, need);
			uint64_t off;
			int ret = shm_arena_alloc(&a, req, &off);

			if (want == UINT64_MAX) {
				assert_int_equal(ret, -ENOMEM);
			} else {
				assert_int_equal(ret, 0);
				assert_int_equal(off, want);
				model_insert(live, &n, off, need);
				if (off + need > high)
					high = off + need;
			}
		}
		check_arena(&a, live, n);
		assert_int_equal(a.high_water, high);
	}
	shm_arena_fini(&a);
}

/* ---- fences, one process ----------------------------------------------- */

static void test_fence_basic(void **state)
{
	shm_fence f;
	(void)state;

	shm_fence_init(&f, 3);
	assert_int_equal(shm_fence_read(&f), 3);
	assert_int_equal(shm_fence_wait(&f, 3, 0), 0);
	assert_int_equal(shm_fence_wait(&f, 0, 0), 0);
	assert_int_equal(shm_fence_wait(&f, 4, 0), -ETIMEDOUT);
	shm_fence_signal(&f, 5);
	assert_int_equal(shm_fence_wait(&f, 4, 0), 0);
	shm_fence_signal(&f, 2); /* values only grow */
	assert_int_equal(shm_fence_read(&f), 5);
	assert_int_equal(shm_fence_wait(&f, 5, UINT64_MAX), 0);

	shm_fence_fail(&f);
	assert_int_equal(shm_fence_wait(&f, 6, UINT64_MAX), -EPIPE);
	assert_int_equal(shm_fence_wait(&f, 1, 0), -EPIPE);
	shm_fence_signal(&f, 9); /* a late signal does not hide the failure */
	assert_int_equal(shm_fence_wait(&f, 9, 0), -EPIPE);
	assert_int_equal(shm_fence_read(&f) & ~SHM_FENCE_FAILED, 9);
}

static void test_fence_timeout(void **state)
{
	shm_fence f;
	uint64_t t0, dt;
	(void)state;

	shm_fence_init(&f, 0);
	t0 = shm_now_ns();
	assert_int_equal(shm_fence_wait(&f, 1, t0 + MS(100)), -ETIMEDOUT);
	dt = shm_now_ns() - t0;
	assert_true(dt >= MS(100));
	assert_true(dt < MS(600));
	/* A deadline already past is just a check. */
	assert_int_equal(shm_fence_wait(&f, 1, t0), -ETIMEDOUT);
}

typedef struct waiter_arg {
	shm_fence *f;
	uint64_t target;
	int ret;
} waiter_arg;

static void *waiter_thread(void *p)
{
	waiter_arg *w = p;

	w->ret = shm_fence_wait(w->f, w->target, UINT64_MAX);
	return NULL;
}

static void test_fence_threads(void **state)
{
	shm_fence f;
	pthread_t th[4];
	waiter_arg w[4];
	(void)state;

	shm_fence_init(&f, 0);
	for (int i = 0; i < 4; i++) {
		w[i] = (waiter_arg){ &f, (uint64_t)(i % 2) + 1, 1 };
		assert_int_equal(pthread_create(&th[i], NULL, waiter_thread, &w[i]), 0);
	}
	sleep_ms(30);
	shm_fence_signal(&f, 1);
	sleep_ms(10);
	shm_fence_signal(&f, 2);
	for (int i = 0; i < 4; i++) {
		assert_int_equal(pthread_join(th[i], NULL), 0);
		assert_int_equal(w[i].ret, 0);
	}
}

/* ---- fences across processes ------------------------------------------- */

/* Layout of the shared page: the fence, then a flag the child raises just
 * before it waits so the parent signals a child that is (about to be)
 * asleep in the kernel rather than one that has not started yet. */
typedef struct xproc_page {
	shm_fence fence;
	_Atomic uint32_t child_ready;
	uint64_t child_wait_ns;
} xproc_page;

/* Runs in the child: maps the segment afresh from a dup'd descriptor (a
 * different address than the parent's) and waits.  Exit status = -ret. */
static void child_wait(int fd, size_t size, uint64_t target, uint64_t timeout_ns)
{
	shm_segment s;
	xproc_page *pg;
	uint64_t t0;
	int ret;

	if (shm_segment_map_fd_take(fd, size, 1, &s) < 0)
		_exit(200); /* not an errno value */
	pg = s.base;
	atomic_store(&pg->child_ready, 1);
	t0 = shm_now_ns();
	ret = shm_fence_wait(&pg->fence, target,
			     timeout_ns == UINT64_MAX ? UINT64_MAX : t0 + timeout_ns);
	pg->child_wait_ns = shm_now_ns() - t0;
	shm_segment_destroy(&s);
	_exit(-ret);
}

/* Forks a waiter, lets it block, runs `act` on the fence (NULL: nothing) and
 * returns the child's wait result. */
static int run_xproc(uint64_t target, uint64_t timeout_ns,
		     void (*act)(shm_fence *), uint64_t *child_wait_ns)
{
	shm_segment s;
	xproc_page *pg;
	pid_t pid;
	int status;

	assert_int_equal(shm_segment_create("xproc", sizeof(*pg), 9, &s), 0);
	pg = s.base;
	shm_fence_init(&pg->fence, 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		child_wait(dup(s.fd), sizeof(*pg), target, timeout_ns);
	while (!atomic_load(&pg->child_ready))
		sleep_ms(1);
	sleep_ms(50); /* past the spin: the child is in FUTEX_WAIT now */
	if (act)
		act(&pg->fence);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	*child_wait_ns = pg->child_wait_ns;
	shm_segment_destroy(&s);
	return -WEXITSTATUS(status);
}

static void signal_one(shm_fence *f)
{
	shm_fence_signal(f, 1);
}

static void signal_two_steps(shm_fence *f)
{
	shm_fence_signal(f, 1); /* wakes the child, which must sleep again */
	sleep_ms(50);
	shm_fence_signal(f, 2);
}

static void test_fence_xproc_signal(void **state)
{
	uint64_t dt;
	(void)state;

	assert_int_equal(run_xproc(1, MS(10000), signal_one, &dt), 0);
	assert_true(dt < MS(5000));
	assert_int_equal(run_xproc(2, MS(10000), signal_two_steps, &dt), 0);
	assert_true(dt >= MS(50));
}

static void test_fence_xproc_fail(void **state)
{
	uint64_t dt;
	(void)state;

	assert_int_equal(run_xproc(1, MS(10000), shm_fence_fail, &dt), -EPIPE);
	assert_true(dt < MS(5000));
}

static void test_fence_xproc_timeout(void **state)
{
	uint64_t dt;
	(void)state;

	assert_int_equal(run_xproc(1, MS(150), NULL, &dt), -ETIMEDOUT);
	assert_true(dt >= MS(150));
	assert_true(dt < MS(1000));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_segment_create_sizes),
		cmocka_unit_test(test_segment_backed),
		cmocka_unit_test(test_segment_no_memory),
		cmocka_unit_test(test_segment_seals),
		cmocka_unit_test(test_segment_map_fd_take),
		cmocka_unit_test(test_segment_refuse_unsealed),
		cmocka_unit_test(test_segment_refuse_regular_file),
		cmocka_unit_test(test_segment_refuse_too_small),
		cmocka_unit_test(test_segment_contains),
		cmocka_unit_test(test_arena_basic),
		cmocka_unit_test(test_arena_coalesce),
		cmocka_unit_test(test_arena_best_fit),
		cmocka_unit_test(test_arena_bad_free),
		cmocka_unit_test(test_arena_unbounded),
		cmocka_unit_test(test_arena_stress),
		cmocka_unit_test(test_fence_basic),
		cmocka_unit_test(test_fence_timeout),
		cmocka_unit_test(test_fence_threads),
		cmocka_unit_test(test_fence_xproc_signal),
		cmocka_unit_test(test_fence_xproc_fail),
		cmocka_unit_test(test_fence_xproc_timeout),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
