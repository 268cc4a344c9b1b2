/*
 * ort_run.h: what ort-run's files share (ort_run.c: the command line,
 * inputs and the run loop; ort_run_report.c: the text and JSON reports and
 * the output files).
 */
#ifndef ORTMK_TOOLS_ORT_RUN_H
#define ORTMK_TOOLS_ORT_RUN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <ortmk/ortmk.h>
#include "npy.h"
#include "sysio.h"

#define MAX_ARGS 64       /* of each of --input, --dim, --shape */
#define MAX_RANK NPY_MAX_RANK

typedef struct name_value {
	const char *name;
	const char *value;
	bool used;
} name_value;

typedef struct options {
	const char *model;
	const char *provider;
	const char *outdir;
	const char *threads;      /* NULL: the library's default */
	long iters, warmup;
	uint64_t seed;
	bool json, retry, keep_going, save_prepacked, strict, profile;
	const char *opt_level;    /* NULL: the library's default */
	const char *timeout_ms;   /* NULL: no deadline */
	long swap_every;          /* 0: no hot swaps */
	const char *swap_binary;  /* NULL: the provider's own binary */
	const char *bind;         /* --bind DEVICE: IO binding, NULL: none */
	/* results */
	long runs, failed_runs, timed;
	name_value inputs[MAX_ARGS], dims[MAX_ARGS], shapes[MAX_ARGS];
	size_t n_inputs, n_dims, n_shapes;
} options;

/* "ort-run: <message>" on stderr, one line. */
void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* CLOCK_MONOTONIC in ms: sys_now_ms (onnxrules/sysio.h). */
/* "[1,3,224,224]" into buf. */
void format_dims(char *buf, size_t len, const int64_t *dims, size_t rank);
/* qsort comparator of doubles. */
int cmp_double(const void *a, const void *b);

/* ort_run_report.c: times[] holds o->timed sorted latencies (ms). */
void print_json(ortmk_env *env, ortmk_session *s, const options *o, double create_ms,
		const double *times);
void print_text(ortmk_session *s, const options *o, const char **onames, ortmk_value **outs,
		size_t nout, const double *times);
/* Sequences of maps (ort_run_maps.c): whether v is one, its first maps
 * on stdout, all of them as a JSON file (false after fail()). */
bool is_map_sequence(const ortmk_value *v);
void print_map_sequence(const char *name, const ortmk_value *v);
bool write_map_sequence(const char *path, const ortmk_value *v);
/* Each output as DIR/<name>.npy (DIR made if missing), a sequence of maps
 * as DIR/<name>.json; false after fail(). */
bool write_outputs(const char *dir, const char **onames, ortmk_value **outs, size_t nout);

#endif
