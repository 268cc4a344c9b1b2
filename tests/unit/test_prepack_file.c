/*
 * Unit tests for onnxrules/prepack_file (and the sysio helpers it writes
 * with): a cache written and read back hits, a changed source is stale, a
 * key not there misses; a truncated, foreign-identity, other-model or
 * zeroed file is ignored (read as empty), never trusted; blobs sit at page
 * boundaries; the header has the provider's identity strings in order.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

#include "prepack_file.h"
#include "sysio.h"

static const pack_ident ident = {
	.who = "test_prepack_file", .magic = "ORTMKTS", .version = 1, .n_ident = 2,
	.ident = {"isa-x", "kernel-y"}, .ident_name = {"ISA", "kernel version"}, .model_id = 42,
};

static pack_entry entry(const char *key, const void *src, size_t n, uint64_t size)
{
	pack_entry e = {.src_hash = pack_hash(src, n), .size = size};

	snprintf(e.key, sizeof(e.key), "%s", key);
	return e;
}

/* A cache of two blobs in a memfd; its size in *size. */
static int write_cache(uint64_t *size)
{
	static const char a[] = "source a", b[] = "source bb";
	static const uint8_t pa[100] = {1, 2, 3}, pb[5000] = {9};
	pack_file *f = pack_file_open(&ident, -1, 0);
	pack_entry ea = entry("n#1#fmt", a, sizeof(a), sizeof(pa));
	pack_entry eb = entry("m#0#fmt", b, sizeof(b), sizeof(pb));
	int fd = memfd_create("pack", 0);

	assert_non_null(f);
	assert_true(fd >= 0);
	assert_int_equal(pack_file_add(f, &ea, pa, NULL), 0);
	assert_int_equal(pack_file_add(f, &eb, pb, NULL), 0);
	assert_int_equal(pack_file_write(f, fd), 0);
	pack_file_close(f);
	*size = (uint64_t)lseek(fd, 0, SEEK_END);
	return fd;
}

static void test_round_trip(void **state)
{
	uint64_t size;
	int fd = write_cache(&size);
	pack_file *f = pack_file_open(&ident, fd, size);
	pack_entry want = entry("m#0#fmt", "source bb", 10, 5000);
	const void *data = NULL;
	long page = sysconf(_SC_PAGESIZE);

	(void)state;
	assert_non_null(f->map);
	assert_int_equal(f->n_entries, 2);
	assert_int_equal(pack_file_lookup(f, &want, &data), PACK_HIT);
	assert_int_equal(((const uint8_t *)data)[0], 9);
	assert_int_equal((size_t)((const uint8_t *)data - f->map) % (size_t)page, 0);
	/* an edited source, or another size: stale */
	want.src_hash ^= 1;
	assert_int_equal(pack_file_lookup(f, &want, &data), PACK_STALE);
	want = entry("m#0#fmt", "source bb", 10, 4999);
	assert_int_equal(pack_file_lookup(f, &want, &data), PACK_STALE);
	want = entry("x#0#fmt", "source bb", 10, 5000);
	assert_int_equal(pack_file_lookup(f, &want, &data), PACK_MISS);
	/* header: magic, version, count, identity strings, model, size */
	assert_memory_equal(f->map, "ORTMKTS\0", 8);
	assert_string_equal((const char *)f->map + 16, "isa-x");
	assert_string_equal((const char *)f->map + 48, "kernel-y");
	assert_int_equal(*(const uint64_t *)(f->map + 80), 42);
	assert_int_equal(*(const uint64_t *)(f->map + 88), size);
	pack_file_close(f);
	close(fd);
}

/* Opens the cache as `id` after `spoil` changed bytes [at, at + n). */
static int opens_valid(const pack_ident *id, size_t at, const void *bytes, size_t n, int cut)
{
	uint64_t size;
	int fd = write_cache(&size), ok;
	pack_file *f;

	if (n)
		assert_int_equal(sys_write_all(fd, bytes, n, (int64_t)at), 0);
	f = pack_file_open(id, fd, cut ? size / 2 : size);
	ok = f->map != NULL;
	assert_true(ok || f->n_entries == 0);
	pack_file_close(f);
	close(fd);
	return ok;
}

static void test_never_trusted(void **state)
{
	pack_ident other = ident;
	uint8_t zeros[96] = {0}, version = 2, bad_off[8] = {0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0};

	(void)state;
	assert_true(opens_valid(&ident, 0, NULL, 0, 0));
	assert_false(opens_valid(&ident, 0, NULL, 0, 1));           /* truncated */
	assert_false(opens_valid(&ident, 0, zeros, sizeof(zeros), 0));
	assert_false(opens_valid(&ident, 8, &version, 1, 0));
	other.ident[0] = "isa-z";
	assert_false(opens_valid(&other, 0, NULL, 0, 0));
	other = ident;
	other.ident[1] = "kernel-z";
	assert_false(opens_valid(&other, 0, NULL, 0, 0));
	other = ident;
	other.model_id = 43;
	assert_false(opens_valid(&other, 0, NULL, 0, 0));
	/* an entry whose blob lies outside the file */
	assert_false(opens_valid(&ident, 96 + 120, bad_off, sizeof(bad_off), 0));
	/* one identity string fewer: another layout, another file */
	other = ident;
	other.n_ident = 1;
	assert_false(opens_valid(&other, 0, NULL, 0, 0));
}

static void test_sysio(void **state)
{
	int p[2];
	char buf[8] = {0};
	double t0 = sys_now_ms();
	uint64_t n0 = sys_now_ns();

	(void)state;
	assert_int_equal(pipe(p), 0);
	assert_int_equal(sys_write_all(p[1], "abcdef", 6, -1), 0);
	assert_int_equal(read(p[0], buf, sizeof(buf)), 6);
	assert_string_equal(buf, "abcdef");
	close(p[0]);
	/* no reader: EPIPE (SIGPIPE ignored) */
	signal(SIGPIPE, SIG_IGN);
	assert_int_equal(sys_write_all(p[1], "x", 1, -1), -EPIPE);
	/* at an offset of a pipe: ESPIPE */
	assert_int_equal(sys_write_all(p[1], "x", 1, 0), -ESPIPE);
	close(p[1]);
	assert_true(sys_now_ms() >= t0);
	assert_true(sys_now_ns() >= n0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_round_trip),
		cmocka_unit_test(test_never_trusted),
		cmocka_unit_test(test_sysio),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
