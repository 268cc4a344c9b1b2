/*
 * check.h: the counting CHECK of the standalone test programs (those not
 * on cmocka: they report "N passed, M failed" or an exit status from
 * `failures`).  A failed check prints "FAIL file:line: <message>" and
 * goes on.  Define CHECK_LAST_ERROR before including it (after ortmk.h)
 * to append ortmk_last_error() to each message.
 */
#ifndef ORTMK_TESTS_CHECK_H
#define ORTMK_TESTS_CHECK_H

#include <stdio.h>

static int failures;

#ifdef CHECK_LAST_ERROR
#define CHECK_TAIL() fprintf(stderr, " (%s)\n", ortmk_last_error())
#else
#define CHECK_TAIL() fprintf(stderr, "\n")
#endif

#define CHECK(cond, ...) do { \
	if (!(cond)) { \
		fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
		fprintf(stderr, __VA_ARGS__); \
		CHECK_TAIL(); \
		failures++; \
	} \
} while (0)

#endif
