/*
 * Shared-memory segments: sealed memfds mapped read-write.
 *
 * The core creates segments for weights, activations and I/O and sends the
 * descriptors to provider processes, which map them with
 * shm_segment_map_fd_take.  Sealing against shrink and grow is what makes
 * the sharing safe: without it a misbehaving peer could truncate the file
 * and turn every access by the other side into a SIGBUS.  Every page is
 * backed at creation (fallocate) for the same reason: a memfd that only
 * has a size gets its pages on first touch, and when the machine (or the
 * shared-memory limit) has none left then, the toucher dies of SIGBUS in
 * the middle of a run; allocated up front, the shortage is an error here.
 */
#include "shm.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define SHM_REQUIRED_SEALS (F_SEAL_SHRINK | F_SEAL_GROW)

static int round_to_page(size_t size, size_t *out)
{
	long page = sysconf(_SC_PAGESIZE);
	size_t p = page > 0 ? (size_t)page : 4096;

	if (size == 0 || size > SIZE_MAX - (p - 1))
		return -EINVAL;
	*out = (size + p - 1) / p * p;
	return 0;
}

static int map_segment(int fd, size_t size, uint64_t id, shm_segment *out)
{
	void *base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);

	if (base == MAP_FAILED)
		return -errno;
	out->fd = fd;
	out->base = base;
	out->size = size;
	out->id = id;
	return 0;
}

/* 0, -ENOMEM when the pages cannot be had, or another -errno.  A file
 * system without fallocate keeps the ftruncate'd file (pages on touch). */
static int back_pages(int fd, size_t size)
{
	int rc;

	do
		rc = fallocate(fd, 0, 0, (off_t)size);
	while (rc < 0 && errno == EINTR);
	if (rc == 0 || errno == EOPNOTSUPP || errno == ENOSYS)
		return 0;
	return errno == ENOSPC || errno == ENOMEM ? -ENOMEM : -errno;
}

int shm_segment_create(const char *name, size_t size, uint64_t id, shm_segment *out)
{
	size_t rounded;
	int fd = -1;
	int ret;

	if (!out)
		return -EINVAL;
	ret = round_to_page(size, &rounded);
	if (ret < 0)
		return ret;
	if ((uint64_t)rounded > (uint64_t)INT64_MAX)
		return -EINVAL;
	fd = memfd_create(name ? name : "ortmk", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return -errno;
	if (ftruncate(fd, (off_t)rounded) < 0)
		goto fail_errno;
	ret = back_pages(fd, rounded);
	if (ret < 0)
		goto fail;
	if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0)
		goto fail_errno;
	ret = map_segment(fd, rounded, id, out);
	if (ret < 0)
		goto fail;
	return 0;

fail_errno:
	ret = -errno;
fail:
	close(fd);
	return ret;
}

/*
 * `size` is what the peer announced; the sealed file must be at least that
 * big (the creator rounds up to a page, so the file may be larger).  We map
 * the file's real size, which the seals guarantee can no longer change.
 */
int shm_segment_map_fd_take(int fd, size_t size, uint64_t id, shm_segment *out)
{
	struct stat st;
	int seals;
	int ret = -EINVAL;

	if (fd < 0)
		return -EBADF;
	if (!out || size == 0)
		goto fail;
	seals = fcntl(fd, F_GET_SEALS);
	if (seals < 0 || (seals & SHM_REQUIRED_SEALS) != SHM_REQUIRED_SEALS)
		goto fail;
	if (fstat(fd, &st) < 0) {
		ret = -errno;
		goto fail;
	}
	if (!S_ISREG(st.st_mode) || st.st_size <= 0 ||
	    (uint64_t)st.st_size < (uint64_t)size ||
	    (uint64_t)st.st_size > (uint64_t)SIZE_MAX)
		goto fail;
	ret = map_segment(fd, (size_t)st.st_size, id, out);
	if (ret < 0)
		goto fail;
	return 0;

fail:
	close(fd);
	return ret;
}

void shm_segment_destroy(shm_segment *s)
{
	/* A segment that was never mapped owns nothing; checking base (not only
	 * fd) keeps a zero-initialised struct from closing descriptor 0. */
	if (!s || !s->base)
		return;
	munmap(s->base, s->size);
	if (s->fd >= 0)
		close(s->fd);
	s->base = NULL;
	s->fd = -1;
	s->size = 0;
	s->id = 0;
}

int shm_segment_contains(const shm_segment *s, uint64_t off, uint64_t len)
{
	if (!s || !s->base)
		return 0;
	/* Written as two comparisons so off + len can never wrap. */
	return off <= (uint64_t)s->size && len <= (uint64_t)s->size - off;
}
