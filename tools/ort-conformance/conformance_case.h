/*
 * conformance_case: runs one ONNX backend test case (a directory holding
 * model.onnx and test_data_set_N/{input,output}_K.pb) through the public
 * API and compares the outputs with the expected ones.  ort-conformance
 * calls it, usually in a forked worker so that a crash or a hang costs one
 * case, not the run.
 */
#ifndef ORTMK_CONFORMANCE_CASE_H
#define ORTMK_CONFORMANCE_CASE_H

#include <stddef.h>

#include <ortmk/ortmk.h>

typedef enum conf_result {
	CONF_PASS = 0,
	CONF_FAIL = 1,   /* ran, but an output differs from the expected one */
	CONF_ERROR = 2,  /* could not run: unsupported input, session or run error */
} conf_result;

typedef struct conf_settings {
	const char *providers;  /* session option "providers"; NULL: default */
	const char *threads;    /* session option "threads"; NULL: default */
} conf_settings;

/* Runs every data set of the case in `case_dir` in a session of `env`.
 * The reason of a fail or an error (one line) is written to `reason`. */
conf_result conf_run_case(ortmk_env *env, const char *case_dir,
			  const conf_settings *set, char *reason, size_t cap);

/* "pass", "fail", "error". */
const char *conf_result_name(conf_result r);

#endif
