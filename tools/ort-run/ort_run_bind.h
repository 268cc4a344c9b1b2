/*
 * ort-run --bind DEVICE (ort_run_bind.c): the timed runs with IO binding.
 * The inputs are copied into DEVICE's memory once, every output is bound to
 * DEVICE, and the runs are ortmk_session_run_binding(); the last run's
 * outputs are copied back to host values for printing and writing.
 */
#ifndef ORT_RUN_BIND_H
#define ORT_RUN_BIND_H

#include <stdbool.h>
#include <stddef.h>

#include "ortmk/ortmk.h"

/* warmup + iters runs; times (iters entries, unsorted) and outs (host
 * values the caller destroys).  false with err set on failure. */
bool ort_run_bound(ortmk_env *env, ortmk_session *s, const char *device, long warmup, long iters,
		   const char **inames, ortmk_value **ins, size_t nin, const char **onames,
		   ortmk_value **outs, size_t nout, double *times, char *err, size_t errlen);

#endif
