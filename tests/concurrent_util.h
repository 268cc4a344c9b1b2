/*
 * concurrent_util.h: what the concurrency tests share (integration/
 * test_concurrent.c, fault/test_concurrent_faults.c): deterministic inputs
 * for a model's first input (its dynamic dims set to a batch), one run by
 * name, a bit-exact comparison with a reference run, and a clock.
 */
#ifndef ORTMK_TESTS_CONCURRENT_UTIL_H
#define ORTMK_TESTS_CONCURRENT_UTIL_H

#include <stdint.h>
#include <string.h>
#include <time.h>

#include "ortmk/ortmk.h"

static inline double cu_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Input `seed` of s's first input (float), dynamic dims = batch. */
static inline ortmk_status cu_input(ortmk_env *env, ortmk_session *s, int64_t batch,
				    uint32_t seed, ortmk_value **out)
{
	const char *name;
	ortmk_dtype dt;
	const int64_t *dims;
	int64_t d[8];
	size_t rank;
	ortmk_status st = ortmk_session_input_info(s, 0, &name, &dt, &dims, &rank);
	float *x;

	if (st || rank > 8)
		return st ? st : ORTMK_ERR_INVALID_ARGUMENT;
	for (size_t i = 0; i < rank; i++)
		d[i] = dims[i] < 0 ? batch : dims[i];
	if ((st = ortmk_value_create(env, ORTMK_FLOAT, d, rank, out)))
		return st;
	x = ortmk_value_data(*out);
	for (size_t i = 0; i < ortmk_value_nbytes(*out) / sizeof(float); i++) {
		seed = seed * 1664525u + 1013904223u;
		x[i] = (float)(seed >> 8) / (float)(1u << 24) * 2.0f - 1.0f;
	}
	return ORTMK_OK;
}

/* Runs s on x: *y is its first output. */
static inline ortmk_status cu_run(ortmk_session *s, const ortmk_value *x, ortmk_value **y)
{
	const char *in, *out;
	ortmk_dtype dt;
	const int64_t *dims;
	size_t rank;

	*y = NULL;
	ortmk_session_input_info(s, 0, &in, &dt, &dims, &rank);
	ortmk_session_output_info(s, 0, &out, &dt, &dims, &rank);
	return ortmk_session_run(s, &in, (const ortmk_value *const[]){x}, 1, &out, 1, y);
}

/* 1 when a and b hold the same bytes. */
static inline int cu_same(const ortmk_value *a, const ortmk_value *b)
{
	return a && b && ortmk_value_nbytes(a) == ortmk_value_nbytes(b) &&
	       memcmp(ortmk_value_data_const(a), ortmk_value_data_const(b), ortmk_value_nbytes(a)) == 0;
}

#endif
