/*
 * fault_util: helpers shared by the fault tests: a deterministic input for
 * the example CNN, running it, comparing outputs (CHECK: tests/check.h).
 */
#ifndef ORTMK_FAULT_UTIL_H
#define ORTMK_FAULT_UTIL_H

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "ortmk/ortmk.h"

#include "../check.h"

static inline double fu_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* The example CNN's input: image [1,3,32,32]. */
static inline ortmk_value *fu_input(ortmk_env *env)
{
	int64_t dims[4] = {1, 3, 32, 32};
	ortmk_value *x = NULL;

	if (ortmk_value_create(env, ORTMK_FLOAT, dims, 4, &x))
		return NULL;
	for (int i = 0; i < 3 * 32 * 32; i++)
		((float *)ortmk_value_data(x))[i] = (float)((i * 37) % 101) / 50.0f - 1.0f;
	return x;
}

static inline ortmk_status fu_run(ortmk_session *s, const ortmk_value *x, ortmk_value **y)
{
	const char *in[] = {"image"}, *out[] = {"probs"};

	return ortmk_session_run(s, in, (const ortmk_value *const[]){x}, 1, out, 1, y);
}

static inline int fu_same(const ortmk_value *a, const ortmk_value *b)
{
	return a && b && ortmk_value_nbytes(a) == ortmk_value_nbytes(b) &&
	       memcmp(ortmk_value_data_const(a), ortmk_value_data_const(b), ortmk_value_nbytes(a)) == 0;
}

#endif
