/*
 * test_value_map: value_codec's maps (issue 19, ZipMap's sequence of
 * maps): int64 and string keys round-trip through ipc_map_encode and
 * ipc_map_check, a sequence whose element is a map passes ipc_seq_check,
 * and every malformed map blob (truncated, bad magic, bad dtypes, values
 * that do not fill the blob, string offsets out of order, a count larger
 * than the bytes, a misaligned blob, an entry whose count disagrees) is
 * refused before a pointer is made from it.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "value_codec.h"

#define FLOAT_DTYPE 1

static _Alignas(64) uint8_t buf[4096];

static const int64_t IKEYS[3] = {5, -2, 40};
static const char *const SKEYS[3] = {"a", "", "long label"};
static const float VALS[3] = {0.25f, 0.5f, 0.25f};

static uint64_t encode_int(void)
{
	uint64_t n = ipc_map_size(IPC_INT64_DTYPE, FLOAT_DTYPE, 3, IKEYS);

	assert_true(n <= sizeof(buf));
	memset(buf, 0xee, sizeof(buf));
	assert_int_equal(ipc_map_encode(buf, n, IPC_INT64_DTYPE, FLOAT_DTYPE, 3, IKEYS, VALS), 0);
	return n;
}

static void test_round_trip(void **state)
{
	ipc_map_view v;
	const char *k[3];
	uint64_t n = encode_int();

	(void)state;
	assert_int_equal(ipc_map_check(buf, n, &v), 0);
	assert_int_equal(v.key_dtype, IPC_INT64_DTYPE);
	assert_int_equal(v.count, 3);
	assert_memory_equal(v.keys, IKEYS, sizeof(IKEYS));
	assert_memory_equal(v.values, VALS, sizeof(VALS));
	n = ipc_map_size(IPC_STRING_DTYPE, FLOAT_DTYPE, 3, SKEYS);
	assert_int_equal(ipc_map_encode(buf, n - 1, IPC_STRING_DTYPE, FLOAT_DTYPE, 3, SKEYS, VALS),
			 -ENOSPC);
	assert_int_equal(ipc_map_encode(buf, n, IPC_STRING_DTYPE, FLOAT_DTYPE, 3, SKEYS, VALS), 0);
	assert_int_equal(ipc_map_check(buf, n, &v), 0);
	assert_int_equal(ipc_strings_decode(v.keys, v.keys_nbytes, 3, k), 0);
	for (int i = 0; i < 3; i++)
		assert_string_equal(k[i], SKEYS[i]);
	assert_memory_equal(v.values, VALS, sizeof(VALS));
	/* An empty map. */
	n = ipc_map_size(IPC_INT64_DTYPE, FLOAT_DTYPE, 0, NULL);
	assert_int_equal(ipc_map_encode(buf, n, IPC_INT64_DTYPE, FLOAT_DTYPE, 0, NULL, NULL), 0);
	assert_int_equal(ipc_map_check(buf, n, &v), 0);
	assert_int_equal(v.count, 0);
}

static void test_bad_types(void **state)
{
	(void)state;
	/* Float keys, string values and unknown value types are no maps. */
	assert_int_equal(ipc_map_encode(buf, sizeof(buf), FLOAT_DTYPE, FLOAT_DTYPE, 3, VALS, VALS),
			 -EINVAL);
	assert_int_equal(ipc_map_encode(buf, sizeof(buf), IPC_INT64_DTYPE, IPC_STRING_DTYPE, 3,
					IKEYS, SKEYS), -EINVAL);
	assert_int_equal(ipc_map_encode(buf, sizeof(buf), IPC_INT64_DTYPE, 999, 3, IKEYS, VALS),
			 -EINVAL);
}

/* Overwrites the u64 or i32/u32 at `off` of an encoded int map and checks
 * that the blob is refused. */
static void refused_with(size_t off, const void *val, size_t size, uint64_t n)
{
	ipc_map_view v;

	encode_int();
	memcpy(buf + off, val, size);
	assert_int_equal(ipc_map_check(buf, n, &v), -EPROTO);
}

static void test_malformed(void **state)
{
	ipc_map_view v;
	uint64_t n = encode_int(), big = UINT64_MAX / 2, four = 4, odd = 33;
	uint32_t bad_magic = 0x31514553u;
	int32_t f = FLOAT_DTYPE, s = IPC_STRING_DTYPE;

	(void)state;
	for (uint64_t cut = 0; cut < n; cut++)
		assert_int_equal(ipc_map_check(buf, cut, &v), -EPROTO);
	assert_int_equal(ipc_map_check(buf, n + 4, &v), -EPROTO);     /* values do not fill */
	assert_int_equal(ipc_map_check(buf + 4, n, &v), -EPROTO);     /* misaligned */
	refused_with(offsetof(ipc_map_header, magic), &bad_magic, 4, n);
	refused_with(offsetof(ipc_map_header, key_dtype), &f, 4, n);
	refused_with(offsetof(ipc_map_header, value_dtype), &s, 4, n);
	refused_with(offsetof(ipc_map_header, count), &big, 8, n);
	refused_with(offsetof(ipc_map_header, count), &four, 8, n);
	refused_with(offsetof(ipc_map_header, values_offset), &big, 8, n);
	refused_with(offsetof(ipc_map_header, values_offset), &odd, 8, n);
	/* String keys whose offsets go backwards. */
	n = ipc_map_size(IPC_STRING_DTYPE, FLOAT_DTYPE, 3, SKEYS);
	assert_int_equal(ipc_map_encode(buf, n, IPC_STRING_DTYPE, FLOAT_DTYPE, 3, SKEYS, VALS), 0);
	memcpy(buf + sizeof(ipc_map_header) + 8 + 8 * 2, &big, 8);
	assert_int_equal(ipc_map_check(buf, n, &v), -EPROTO);
}

/* A sequence of one map, as the CPU provider encodes ZipMap's output. */
static uint64_t seq_of_one_map(ipc_seq_entry *e)
{
	ipc_seq_header h = {IPC_SEQ_MAGIC, 1, IPC_MAP_DTYPE, 0};
	uint64_t at = ipc_seq_header_size(1);
	uint64_t n = ipc_map_size(IPC_INT64_DTYPE, FLOAT_DTYPE, 3, IKEYS);

	memset(buf, 0, sizeof(buf));
	memcpy(buf, &h, sizeof(h));
	memset(e, 0, sizeof(*e));
	e->dtype = IPC_MAP_DTYPE;
	e->rank = 1;
	e->dims[0] = 3;
	e->offset = at;
	e->nbytes = n;
	assert_int_equal(ipc_map_encode(buf + at, n, IPC_INT64_DTYPE, FLOAT_DTYPE, 3, IKEYS, VALS), 0);
	memcpy(buf + sizeof(h), e, sizeof(*e));
	return at + n;
}

static void test_sequence_of_maps(void **state)
{
	const ipc_seq_entry *entries;
	ipc_seq_entry e;
	uint32_t count;
	uint64_t n = seq_of_one_map(&e);

	(void)state;
	assert_int_equal(ipc_seq_check(buf, n, &count, &entries), 0);
	assert_int_equal(count, 1);
	assert_int_equal(entries[0].dtype, IPC_MAP_DTYPE);
	/* The entry's count must be the map's. */
	e.dims[0] = 2;
	memcpy(buf + sizeof(ipc_seq_header), &e, sizeof(e));
	assert_int_equal(ipc_seq_check(buf, n, &count, &entries), -EPROTO);
	/* A map entry is rank 1. */
	n = seq_of_one_map(&e);
	e.rank = 2;
	e.dims[1] = 1;
	memcpy(buf + sizeof(ipc_seq_header), &e, sizeof(e));
	assert_int_equal(ipc_seq_check(buf, n, &count, &entries), -EPROTO);
	/* A corrupt map inside the sequence. */
	n = seq_of_one_map(&e);
	buf[e.offset] ^= 1;
	assert_int_equal(ipc_seq_check(buf, n, &count, &entries), -EPROTO);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_round_trip),
		cmocka_unit_test(test_bad_types),
		cmocka_unit_test(test_malformed),
		cmocka_unit_test(test_sequence_of_maps),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
