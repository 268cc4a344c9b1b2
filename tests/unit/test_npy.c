/*
 * Unit tests for tools/common/npy: round trips for every dtype and shape form,
 * files written by numpy (tests/data/gen_npy_fixtures.py, values checked by
 * the formulas documented there), byte-for-byte agreement with np.save, and
 * the corrupt or unsupported files ort-run must refuse with a message.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "npy.h"

enum {
	T_FLOAT = 1, T_UINT8 = 2, T_INT8 = 3, T_UINT16 = 4, T_INT16 = 5,
	T_INT32 = 6, T_INT64 = 7, T_BOOL = 9, T_FLOAT16 = 10, T_DOUBLE = 11,
	T_UINT32 = 12, T_UINT64 = 13,
};

typedef struct dtype_case {
	const char *fixture;   /* tests/data/npy/<fixture>.npy */
	int32_t dtype;
	size_t elsize;
} dtype_case;

static const dtype_case all_dtypes[] = {
	{ "f4", T_FLOAT, 4 },  { "u1", T_UINT8, 1 },  { "i1", T_INT8, 1 },
	{ "u2", T_UINT16, 2 }, { "i2", T_INT16, 2 },  { "i4", T_INT32, 4 },
	{ "i8", T_INT64, 8 },  { "b1", T_BOOL, 1 },   { "f2", T_FLOAT16, 2 },
	{ "f8", T_DOUBLE, 8 }, { "u4", T_UINT32, 4 }, { "u8", T_UINT64, 8 },
};

#define N_DTYPES (sizeof(all_dtypes) / sizeof(all_dtypes[0]))

static char tmpdir[] = "/tmp/ortmk-test-npy-XXXXXX";

static int setup_tmpdir(void **state)
{
	(void)state;
	return mkdtemp(tmpdir) ? 0 : -1;
}

static int remove_tmpdir(void **state)
{
	char cmd[128];
	(void)state;

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	return system(cmd) == 0 ? 0 : -1;
}

static void tmp_path(char *buf, size_t len, const char *name)
{
	snprintf(buf, len, "%s/%s", tmpdir, name);
}

static void fixture_path(char *buf, size_t len, const char *name)
{
	const char *dir = getenv("TEST_DATA_DIR");

	snprintf(buf, len, "%s/npy/%s.npy", dir ? dir : "tests/data", name);
}

static size_t slurp(const char *path, unsigned char *buf, size_t cap)
{
	FILE *f = fopen(path, "rb");
	size_t n;

	assert_non_null(f);
	n = fread(buf, 1, cap, f);
	fclose(f);
	return n;
}

static void write_bytes(const char *path, const void *buf, size_t n)
{
	FILE *f = fopen(path, "wb");

	assert_non_null(f);
	assert_int_equal(fwrite(buf, 1, n, f), n);
	assert_int_equal(fclose(f), 0);
}

/* ---- round trips ------------------------------------------------------- */

static void roundtrip(int32_t dtype, size_t elsize, int rank, const int64_t *dims)
{
	unsigned char file[4096];
	char path[256], err[256];
	size_t n = 1, nbytes, fsize;
	unsigned char *data;
	npy_array a;

	for (int i = 0; i < rank; i++)
		n *= (size_t)dims[i];
	nbytes = n * elsize;
	data = malloc(nbytes + 1);
	assert_non_null(data);
	for (size_t i = 0; i < nbytes; i++)
		data[i] = (unsigned char)(i * 37 + 1);
	tmp_path(path, sizeof(path), "rt.npy");
	assert_int_equal(npy_write(path, dtype, rank, dims, data, nbytes, err, sizeof(err)), 0);

	/* np.save's layout: the data starts on a 64-byte boundary after '\n'. */
	fsize = slurp(path, file, sizeof(file));
	assert_true(fsize >= nbytes + 64);
	assert_int_equal((fsize - nbytes) % 64, 0);
	assert_int_equal(file[fsize - nbytes - 1], '\n');

	assert_int_equal(npy_read(path, &a, err, sizeof(err)), 0);
	assert_int_equal(a.dtype, dtype);
	assert_int_equal(a.rank, rank);
	for (int i = 0; i < rank; i++)
		assert_int_equal(a.dims[i], dims[i]);
	assert_int_equal(a.nbytes, nbytes);
	assert_non_null(a.data);
	assert_memory_equal(a.data, data, nbytes);
	npy_free(&a);
	assert_null(a.data);
	free(data);
}

static void test_roundtrip_dtypes(void **state)
{
	const int64_t dims[3] = { 2, 3, 4 };
	(void)state;

	for (size_t i = 0; i < N_DTYPES; i++)
		roundtrip(all_dtypes[i].dtype, all_dtypes[i].elsize, 3, dims);
}

static void test_roundtrip_shapes(void **state)
{
	const int64_t vec[1] = { 7 };
	const int64_t empty[2] = { 0, 3 };
	int64_t ones[NPY_MAX_RANK];
	(void)state;

	for (int i = 0; i < NPY_MAX_RANK; i++)
		ones[i] = 1;
	ones[NPY_MAX_RANK - 1] = 2;
	roundtrip(T_FLOAT, 4, 0, NULL);
	roundtrip(T_DOUBLE, 8, 1, vec);
	roundtrip(T_INT64, 8, 2, empty);
	roundtrip(T_UINT8, 1, NPY_MAX_RANK, ones);
}

/* ---- fixtures written by numpy ----------------------------------------- */

/* Enough of IEEE half for the fixture values (zero and normal numbers). */
static float half_to_float(uint16_t h)
{
	uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 31, mant = h & 1023;
	uint32_t bits;
	float f;

	assert_true(exp != 31 && (exp != 0 || mant == 0));
	bits = exp == 0 ? sign : sign | (exp - 15 + 127) << 23 | mant << 13;
	memcpy(&f, &bits, sizeof(f));
	return f;
}

static double elem_float(const npy_array *a, size_t i)
{
	const unsigned char *p = a->data;
	uint16_t h;
	float f;
	double d;

	switch (a->dtype) {
	case T_FLOAT16: memcpy(&h, p + 2 * i, 2); return half_to_float(h);
	case T_FLOAT:   memcpy(&f, p + 4 * i, 4); return f;
	default:        memcpy(&d, p + 8 * i, 8); return d;
	}
}

static int64_t elem_int(const npy_array *a, size_t i)
{
	const unsigned char *p = a->data;
	union { int8_t i8; uint8_t u8; int16_t i16; uint16_t u16; int32_t i32;
		uint32_t u32; int64_t i64; uint64_t u64; } v;

	switch (a->dtype) {
	case T_INT8:   memcpy(&v, p + i, 1); return v.i8;
	case T_UINT8:  memcpy(&v, p + i, 1); return v.u8;
	case T_BOOL:   memcpy(&v, p + i, 1); return v.u8;
	case T_INT16:  memcpy(&v, p + 2 * i, 2); return v.i16;
	case T_UINT16: memcpy(&v, p + 2 * i, 2); return v.u16;
	case T_INT32:  memcpy(&v, p + 4 * i, 4); return v.i32;
	case T_UINT32: memcpy(&v, p + 4 * i, 4); return v.u32;
	case T_INT64:  memcpy(&v, p + 8 * i, 8); return v.i64;
	default:       memcpy(&v, p + 8 * i, 8); return (int64_t)v.u64;
	}
}

/* The formulas of gen_npy_fixtures.py. */
static int64_t expected_int(int32_t dtype, int64_t i)
{
	switch (dtype) {
	case T_BOOL:   return i % 3 == 0;
	case T_INT64:  return (i - 12) * INT64_C(1000000000000);
	case T_UINT64: return i * INT64_C(100000000000000000);
	case T_INT8: case T_INT16: case T_INT32: return i - 12;
	default:       return i * 10;
	}
}

static void check_fixture_values(const npy_array *a)
{
	for (size_t i = 0; i < 24; i++) {
		if (a->dtype == T_FLOAT || a->dtype == T_DOUBLE || a->dtype == T_FLOAT16)
			assert_true(elem_float(a, i) == ((double)i - 8) * 0.5);
		else
			assert_int_equal(elem_int(a, i), expected_int(a->dtype, (int64_t)i));
	}
}

static void read_fixture(const char *name, npy_array *a)
{
	char path[512], err[256] = "";

	fixture_path(path, sizeof(path), name);
	if (npy_read(path, a, err, sizeof(err)) != 0)
		fail_msg("%s: %s", path, err);
}

static void test_numpy_fixtures(void **state)
{
	npy_array a;
	(void)state;

	for (size_t k = 0; k < N_DTYPES; k++) {
		read_fixture(all_dtypes[k].fixture, &a);
		assert_int_equal(a.dtype, all_dtypes[k].dtype);
		assert_int_equal(a.rank, 3);
		assert_int_equal(a.dims[0], 2);
		assert_int_equal(a.dims[1], 3);
		assert_int_equal(a.dims[2], 4);
		assert_int_equal(a.nbytes, 24 * all_dtypes[k].elsize);
		check_fixture_values(&a);
		npy_free(&a);
	}
}

static void test_numpy_shapes_and_versions(void **state)
{
	npy_array a;
	float f;
	(void)state;

	read_fixture("scalar_f4", &a);
	assert_int_equal(a.rank, 0);
	assert_int_equal(a.nbytes, 4);
	memcpy(&f, a.data, 4);
	assert_true(f == 3.5f);
	npy_free(&a);

	read_fixture("vec_i4", &a);
	assert_int_equal(a.dtype, T_INT32);
	assert_int_equal(a.rank, 1);
	assert_int_equal(a.dims[0], 5);
	for (size_t i = 0; i < 5; i++)
		assert_int_equal(elem_int(&a, i), (int64_t)i);
	npy_free(&a);

	read_fixture("empty_f4", &a);
	assert_int_equal(a.rank, 2);
	assert_int_equal(a.dims[0], 0);
	assert_int_equal(a.dims[1], 3);
	assert_int_equal(a.nbytes, 0);
	npy_free(&a);

	read_fixture("v2_f4", &a);
	assert_int_equal(a.dtype, T_FLOAT);
	check_fixture_values(&a);
	npy_free(&a);
	read_fixture("v3_i8", &a);
	assert_int_equal(a.dtype, T_INT64);
	check_fixture_values(&a);
	npy_free(&a);
}

/* Our writer must produce exactly what np.save does. */
static void test_write_matches_numpy(void **state)
{
	static const char *names[] = { "f4", "b1", "u8", "scalar_f4", "vec_i4", "empty_f4" };
	unsigned char want[1024], got[1024];
	char path[512], out[256], err[256];
	npy_array a;
	(void)state;

	tmp_path(out, sizeof(out), "same.npy");
	for (size_t k = 0; k < sizeof(names) / sizeof(names[0]); k++) {
		size_t nw, ng;

		read_fixture(names[k], &a);
		assert_int_equal(npy_write(out, a.dtype, a.rank, a.dims, a.data,
					   a.nbytes, err, sizeof(err)), 0);
		npy_free(&a);
		fixture_path(path, sizeof(path), names[k]);
		nw = slurp(path, want, sizeof(want));
		ng = slurp(out, got, sizeof(got));
		assert_int_equal(ng, nw);
		assert_memory_equal(got, want, nw);
	}
}

/* ---- refusals ---------------------------------------------------------- */

static void expect_refusal(const char *path, const char *needle)
{
	char err[256] = "";
	npy_array a;

	assert_int_equal(npy_read(path, &a, err, sizeof(err)), -1);
	assert_null(a.data);
	assert_null(strchr(err, '\n'));
	if (!strstr(err, needle))
		fail_msg("%s: error \"%s\" does not mention \"%s\"", path, err, needle);
}

static void test_numpy_refused(void **state)
{
	char path[512];
	(void)state;

	fixture_path(path, sizeof(path), "fortran_f4");
	expect_refusal(path, "Fortran");
	fixture_path(path, sizeof(path), "bigendian_f4");
	expect_refusal(path, "big-endian");
	expect_refusal("/nonexistent/x.npy", "/nonexistent/x.npy");
}

/* Writes a crafted file: magic, version `major`.0, `dict` padded the way
 * np.save pads it, then `data`. */
static void craft(const char *name, int major, const char *dict,
		  const void *data, size_t ndata, char *path, size_t plen)
{
	unsigned char buf[2048];
	size_t hl = strlen(dict), pre = major == 1 ? 10 : 12, n;
	size_t total = (pre + hl + 1 + 63) / 64 * 64;

	memcpy(buf, "\x93NUMPY", 6);
	buf[6] = (unsigned char)major;
	buf[7] = 0;
	n = total - pre;
	for (size_t i = 0; i < 4; i++)
		buf[8 + i] = (unsigned char)(n >> (8 * i));
	memset(buf + pre, ' ', n);
	memcpy(buf + pre, dict, hl);
	buf[total - 1] = '\n';
	memcpy(buf + total, data, ndata);
	tmp_path(path, plen, name);
	write_bytes(path, buf, total + ndata);
}

static void expect_crafted_refusal(const char *dict, size_t ndata, const char *needle)
{
	static const unsigned char zeros[64];
	char path[256];

	craft("bad.npy", 1, dict, zeros, ndata, path, sizeof(path));
	expect_refusal(path, needle);
}

static void test_refuse_bad_headers(void **state)
{
	(void)state;

	expect_crafted_refusal("{'descr': '<c8', 'fortran_order': False, 'shape': (2,), }", 16, "dtype");
	expect_crafted_refusal("{'descr': '<U3', 'fortran_order': False, 'shape': (2,), }", 24, "dtype");
	expect_crafted_refusal("{'descr': '|f4', 'fortran_order': False, 'shape': (2,), }", 8, "dtype");
	expect_crafted_refusal("{'descr': '>i4', 'fortran_order': False, 'shape': (2,), }", 8, "big-endian");
	expect_crafted_refusal("{'descr': '<f4', 'fortran_order': True, 'shape': (2,), }", 8, "Fortran");
	expect_crafted_refusal("{'descr': '<f4', 'shape': (2,), }", 8, "header");
	expect_crafted_refusal("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2,)}", 8, "header");
	expect_crafted_refusal("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}", 8, "header");
	expect_crafted_refusal("{'descr': '<f4', 'fortran_order': False, 'shape': (2,) } junk", 8, "header");
	expect_crafted_refusal("{'descr': '<f4', 'fortran_order': False, 'shape': (-2,), }", 8, "header");
	expect_crafted_refusal("{'descr': '<f4', 'fortran_order': False, 'shape': (2 3), }", 24, "header");
	expect_crafted_refusal("{'descr': '<f4', 'fortran_order': False, 'shape': (2,", 8, "header");
	expect_crafted_refusal("{'descr': '<f4, 'fortran_order': False, 'shape': (2,), }", 8, "header");
	expect_crafted_refusal("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,), }", 8, "header");
	expect_crafted_refusal("not a dict at all", 0, "header");
	expect_crafted_refusal("{'descr': '<f4', 'fortran_order': False, 'shape': "
			       "(1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1), }", 4, "rank");
	expect_crafted_refusal("{'descr': '<f4', 'fortran_order': False, 'shape': "
			       "(4294967296, 4294967296), }", 0, "too large");
	expect_crafted_refusal("{'descr': '<f8', 'fortran_order': False, 'shape': "
			       "(2305843009213693952,), }", 0, "too large");
	expect_crafted_refusal("{'descr': '<f4', 'fortran_order': False, 'shape': "
			       "(99999999999999999999,), }", 0, "header");
}

static void test_refuse_truncated(void **state)
{
	unsigned char buf[1024];
	char src[512], path[256];
	size_t n;
	(void)state;

	fixture_path(src, sizeof(src), "f4");
	n = slurp(src, buf, sizeof(buf));
	tmp_path(path, sizeof(path), "trunc.npy");
	write_bytes(path, buf, n - 1);
	expect_refusal(path, "truncated data");
	write_bytes(path, buf, 100);
	expect_refusal(path, "truncated header");
	write_bytes(path, buf, 9);
	expect_refusal(path, "truncated header");
	write_bytes(path, buf, 3);
	expect_refusal(path, "magic");
	write_bytes(path, buf, 0);
	expect_refusal(path, "magic");

	buf[n] = 0;
	write_bytes(path, buf, n + 1);
	expect_refusal(path, "trailing");
}

static void test_refuse_bad_preamble(void **state)
{
	unsigned char buf[1024];
	char src[512], path[256];
	size_t n;
	(void)state;

	fixture_path(src, sizeof(src), "f4");
	n = slurp(src, buf, sizeof(buf));
	tmp_path(path, sizeof(path), "pre.npy");
	buf[1] = 'M';
	write_bytes(path, buf, n);
	expect_refusal(path, "magic");
	buf[1] = 'N';
	buf[6] = 4;
	write_bytes(path, buf, n);
	expect_refusal(path, "version");
	buf[6] = 1;
	buf[8] = buf[9] = 0;
	write_bytes(path, buf, n);
	expect_refusal(path, "header length");
	buf[8] = buf[9] = 0xff;
	write_bytes(path, buf, n);
	expect_refusal(path, "truncated header");
}

static void test_accept_descr_spellings(void **state)
{
	static const char *dicts[] = {
		"{'descr': '<?', 'fortran_order': False, 'shape': (2,), }",
		"{'descr': '|?', 'fortran_order': False, 'shape': (2,), }",
		"{'descr': '<b1', 'fortran_order': False, 'shape': (2,), }",
		"{\"descr\": \"|b1\", \"fortran_order\": False, \"shape\": (2,)}",
		"{'shape': (2L,), 'fortran_order': False, 'descr': '|b1'}",
	};
	const unsigned char data[2] = { 1, 0 };
	char path[256], err[256];
	npy_array a;
	(void)state;

	for (size_t k = 0; k < sizeof(dicts) / sizeof(dicts[0]); k++) {
		craft("ok.npy", k % 2 ? 2 : 1, dicts[k], data, 2, path, sizeof(path));
		if (npy_read(path, &a, err, sizeof(err)) != 0)
			fail_msg("%s: %s", dicts[k], err);
		assert_int_equal(a.dtype, T_BOOL);
		assert_int_equal(a.rank, 1);
		assert_int_equal(a.dims[0], 2);
		assert_memory_equal(a.data, data, 2);
		npy_free(&a);
	}
	craft("ok.npy", 1, "{'descr': '<i1', 'fortran_order': False, 'shape': (2,), }",
	      data, 2, path, sizeof(path));
	assert_int_equal(npy_read(path, &a, err, sizeof(err)), 0);
	assert_int_equal(a.dtype, T_INT8);
	npy_free(&a);
}

static void test_write_errors(void **state)
{
	const int64_t dims[2] = { 2, 3 };
	const int64_t neg[1] = { -1 };
	float data[6] = { 0 };
	char path[256], err[256];
	(void)state;

	tmp_path(path, sizeof(path), "w.npy");
	assert_int_equal(npy_write(path, 8 /* STRING */, 2, dims, data, 24, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "dtype"));
	assert_int_equal(npy_write(path, T_FLOAT, 2, dims, data, 20, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "bytes"));
	assert_int_equal(npy_write(path, T_FLOAT, 1, neg, data, 0, err, sizeof(err)), -1);
	assert_int_equal(npy_write(path, T_FLOAT, NPY_MAX_RANK + 1, dims, data, 24, err, sizeof(err)), -1);
	assert_int_equal(npy_write(path, T_FLOAT, -1, dims, data, 24, err, sizeof(err)), -1);
	assert_int_equal(access(path, F_OK), -1); /* nothing left behind */
	assert_int_equal(npy_write("/nonexistent/dir/w.npy", T_FLOAT, 2, dims, data, 24,
				   err, sizeof(err)), -1);
	assert_non_null(strstr(err, "/nonexistent/dir/w.npy"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_roundtrip_dtypes),
		cmocka_unit_test(test_roundtrip_shapes),
		cmocka_unit_test(test_numpy_fixtures),
		cmocka_unit_test(test_numpy_shapes_and_versions),
		cmocka_unit_test(test_write_matches_numpy),
		cmocka_unit_test(test_numpy_refused),
		cmocka_unit_test(test_refuse_bad_headers),
		cmocka_unit_test(test_refuse_truncated),
		cmocka_unit_test(test_refuse_bad_preamble),
		cmocka_unit_test(test_accept_descr_spellings),
		cmocka_unit_test(test_write_errors),
	};

	return cmocka_run_group_tests(tests, setup_tmpdir, remove_tmpdir);
}
