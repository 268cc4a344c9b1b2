/*
 * Unit tests for onnxrules/sysio's huge-page helpers: sys_huge_advise
 * faults a buffer in without changing a byte of it (a buffer some
 * allocator handed back already filled, or filled before the touch),
 * leaves the choice on when the pages came cheap or off when one did
 * not, and sys_huge_reset turns it back on.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#include <cmocka.h>

#include "sysio.h"

#define HUGE ((size_t)2 << 20)

static void test_touch_keeps_bytes(void **state)
{
	size_t n = 4 * HUGE;
	uint8_t *map = mmap(NULL, n + HUGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
			    -1, 0);
	uint8_t *a;

	(void)state;
	assert_true(map != MAP_FAILED);
	a = (uint8_t *)(((uintptr_t)map + HUGE - 1) & ~(uintptr_t)(HUGE - 1));
	/* half written before (the bytes must stay), half fresh (zero) */
	for (size_t i = 0; i < 2 * HUGE; i++)
		a[i] = (uint8_t)(i * 7 + 3);
	sys_huge_reset();
	assert_int_equal(sys_huge_cheap(), 1);
	sys_huge_advise(a, n);
	for (size_t i = 0; i < 2 * HUGE; i++)
		if (a[i] != (uint8_t)(i * 7 + 3))
			fail_msg("byte %zu changed", i);
	for (size_t i = 2 * HUGE; i < n; i++)
		if (a[i])
			fail_msg("fresh byte %zu is %d", i, a[i]);
	/* whatever the pages cost here, a reset asks for huge pages again */
	sys_huge_reset();
	assert_int_equal(sys_huge_cheap(), 1);
	munmap(map, n + HUGE);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_touch_keeps_bytes),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
