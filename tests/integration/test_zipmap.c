/*
 * test_zipmap: the public API's maps (issue 19), on the models
 * gen_zipmap_model.py wrote: ZipMap's output comes back as a sequence
 * whose elements are ORTMK_VALUE_MAP values, read with ortmk_value_map_info,
 * _map_count, _map_int64_keys, _map_string_key and _map_values; the
 * output's signature says seq(map(key, float)); the accessors refuse what
 * is not a map; a model whose X does not fit its labels is refused at load;
 * a map is not taken as an input.
 * Usage: test_zipmap DIR
 */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "ortmk/ortmk.h"

#define CHECK_LAST_ERROR
#include "../check.h"

#define ROWS 4
#define COLS 3

static const float X[ROWS * COLS] = {
	0.1f, 0.2f, 0.7f,  1.0f, 0.0f, 0.0f,  -3.5f, 1e30f, 0.25f,  0.5f, 0.5f, 0.0f,
};
static const int64_t INT_LABELS[COLS] = {5, -2, 40};
static const char *const STR_LABELS[COLS] = {"a", "", "long label"};

/* ZipMap over `rows` rows of X; NULL after a failed check. */
static ortmk_value *run_zipmap(ortmk_env *env, ortmk_session *s, int64_t rows)
{
	ortmk_value *x = NULL, *out = NULL;
	int64_t dims[2] = {rows, COLS};

	CHECK(ortmk_value_create_copy(env, ORTMK_FLOAT, dims, 2, X,
				      (size_t)rows * COLS * sizeof(float), &x) == ORTMK_OK, "x");
	if (!x)
		return NULL;
	CHECK(ortmk_session_run(s, (const char *const[]){"x"}, (const ortmk_value *const[]){x}, 1,
				(const char *const[]){"probs"}, 1, &out) == ORTMK_OK, "run");
	ortmk_value_destroy(x);
	return out;
}

static void check_signature(ortmk_session *s, ortmk_dtype key)
{
	ortmk_io_info io = {.struct_size = sizeof(io)};

	CHECK(ortmk_session_output_meta(s, 0, &io) == ORTMK_OK, "output meta");
	CHECK(io.kind == ORTMK_VALUE_SEQUENCE && io.dtype == ORTMK_FLOAT && io.map_key_dtype == key,
	      "seq(map) signature: kind %d dtype %d key %d", io.kind, io.dtype, io.map_key_dtype);
}

/* Map `row` of a run's output against X and the labels. */
static void check_map(const ortmk_value *m, int64_t row, ortmk_dtype key)
{
	ortmk_map_info info = {.struct_size = sizeof(info)};
	const int64_t *ik = ortmk_value_map_int64_keys(m);
	const float *v = ortmk_value_map_values(m);

	CHECK(ortmk_value_kind_of(m) == ORTMK_VALUE_MAP, "row %lld: a map", (long long)row);
	CHECK(ortmk_value_map_info(m, &info) == ORTMK_OK && info.key_dtype == key &&
	      info.value_dtype == ORTMK_FLOAT && info.count == COLS, "row %lld: map info",
	      (long long)row);
	CHECK(ortmk_value_map_count(m) == COLS, "row %lld: count", (long long)row);
	CHECK(v && memcmp(v, X + row * COLS, sizeof(float) * COLS) == 0, "row %lld: values",
	      (long long)row);
	for (int k = 0; k < COLS; k++) {
		const char *sk = ortmk_value_map_string_key(m, (size_t)k);

		if (key == ORTMK_INT64)
			CHECK(ik && ik[k] == INT_LABELS[k] && !sk, "row %lld key %d", (long long)row, k);
		else
			CHECK(!ik && sk && strcmp(sk, STR_LABELS[k]) == 0, "row %lld key %d",
			      (long long)row, k);
	}
	CHECK(!ortmk_value_map_string_key(m, COLS), "string key out of range");
}

static void test_model(ortmk_env *env, const char *dir, const char *file, ortmk_dtype key)
{
	char path[4096];
	ortmk_session *s = NULL;
	ortmk_value *out;

	snprintf(path, sizeof(path), "%s/%s", dir, file);
	CHECK(ortmk_session_create(env, path, NULL, &s) == ORTMK_OK, "session %s", file);
	if (!s)
		return;
	check_signature(s, key);
	if ((out = run_zipmap(env, s, ROWS))) {
		ortmk_value *m = NULL;

		CHECK(ortmk_value_kind_of(out) == ORTMK_VALUE_SEQUENCE, "a sequence");
		CHECK(ortmk_value_dtype(out) == ORTMK_UNDEFINED, "a sequence of maps has no dtype");
		CHECK(ortmk_value_sequence_length(out) == ROWS, "one map a row");
		for (int64_t r = 0; r < ROWS; r++) {
			CHECK(ortmk_value_sequence_get(out, (size_t)r, &m) == ORTMK_OK, "map %lld",
			      (long long)r);
			if (m)
				check_map(m, r, key);
			ortmk_value_destroy(m);
			m = NULL;
		}
		CHECK(ortmk_value_sequence_get(out, ROWS, &m) == ORTMK_ERR_INVALID_ARGUMENT,
		      "no map past the end");
		/* The sequence itself is no map. */
		CHECK(ortmk_value_map_count(out) == 0 && !ortmk_value_map_values(out) &&
		      !ortmk_value_map_int64_keys(out), "a sequence is no map");
		ortmk_value_destroy(out);
	}
	if ((out = run_zipmap(env, s, 0))) {
		CHECK(ortmk_value_sequence_length(out) == 0, "no rows: no maps");
		ortmk_value_destroy(out);
	}
	ortmk_session_destroy(s);
}

/* The accessors on values that are not maps, and a bad struct_size. */
static void test_not_maps(ortmk_env *env)
{
	ortmk_map_info info = {.struct_size = sizeof(info)};
	ortmk_value *t = NULL;
	int64_t dims[1] = {COLS};

	CHECK(ortmk_value_create_copy(env, ORTMK_FLOAT, dims, 1, X, sizeof(float) * COLS, &t) ==
	      ORTMK_OK, "tensor");
	CHECK(ortmk_value_map_info(t, &info) == ORTMK_ERR_INVALID_ARGUMENT, "a tensor is no map");
	CHECK(ortmk_value_map_count(t) == 0 && !ortmk_value_map_values(t) &&
	      !ortmk_value_map_int64_keys(t) && !ortmk_value_map_string_key(t, 0), "tensor accessors");
	CHECK(ortmk_value_map_info(NULL, &info) == ORTMK_ERR_INVALID_ARGUMENT, "NULL value");
	CHECK(ortmk_value_map_info(t, NULL) == ORTMK_ERR_INVALID_ARGUMENT, "NULL out");
	CHECK(ortmk_value_map_count(NULL) == 0 && !ortmk_value_map_values(NULL), "NULL accessors");
	ortmk_value_destroy(t);
}

static void test_struct_size(ortmk_env *env, const char *dir)
{
	char path[4096];
	ortmk_session *s = NULL;
	ortmk_value *out, *m = NULL;

	snprintf(path, sizeof(path), "%s/zipmap_int.onnx", dir);
	if (ortmk_session_create(env, path, NULL, &s) || !(out = run_zipmap(env, s, 1))) {
		CHECK(0, "session for struct_size");
		ortmk_session_destroy(s);
		return;
	}
	if (ortmk_value_sequence_get(out, 0, &m) == ORTMK_OK) {
		/* An older caller's struct: only the fields it has are written. */
		struct { size_t struct_size; ortmk_dtype key_dtype; int canary; } old =
			{offsetof(ortmk_map_info, value_dtype), 0, 77};
		ortmk_map_info zero = {0};

		CHECK(ortmk_value_map_info(m, (ortmk_map_info *)&old) == ORTMK_OK &&
		      old.key_dtype == ORTMK_INT64 && old.canary == 77, "smaller struct_size");
		CHECK(ortmk_value_map_info(m, &zero) == ORTMK_ERR_INVALID_ARGUMENT,
		      "struct_size 0 refused");
	}
	ortmk_value_destroy(m);
	ortmk_value_destroy(out);
	ortmk_session_destroy(s);
}

/* A map from zipmap_int.onnx's run fed to zipmap_map_in.onnx's map input:
 * refused, naming the kind. */
static void test_map_input(ortmk_env *env, const char *dir)
{
	char path[4096];
	ortmk_session *s = NULL, *s_in = NULL;
	ortmk_value *x = NULL, *out = NULL, *m = NULL, *res = NULL;

	snprintf(path, sizeof(path), "%s/zipmap_int.onnx", dir);
	CHECK(ortmk_session_create(env, path, NULL, &s) == ORTMK_OK, "session");
	snprintf(path, sizeof(path), "%s/zipmap_map_in.onnx", dir);
	CHECK(ortmk_session_create(env, path, NULL, &s_in) == ORTMK_OK, "session with a map input");
	if (s && s_in && (out = run_zipmap(env, s, 1)) &&
	    ortmk_value_sequence_get(out, 0, &m) == ORTMK_OK) {
		int64_t dims[2] = {1, COLS};

		CHECK(ortmk_value_create_copy(env, ORTMK_FLOAT, dims, 2, X, sizeof(float) * COLS,
					      &x) == ORTMK_OK, "x");
		CHECK(ortmk_session_run(s_in, (const char *const[]){"x", "m"},
					(const ortmk_value *const[]){x, m}, 2,
					(const char *const[]){"probs"}, 1, &res) == ORTMK_ERR_INPUT &&
		      strstr(ortmk_last_error(), "a map"), "a map input is refused");
	} else {
		CHECK(0, "a map to feed");
	}
	ortmk_value_destroy(res);
	ortmk_value_destroy(x);
	ortmk_value_destroy(m);
	ortmk_value_destroy(out);
	ortmk_session_destroy(s_in);
	ortmk_session_destroy(s);
}

int main(int argc, char **argv)
{
	ortmk_env *env = NULL;
	ortmk_session *s = NULL;
	char path[4096];

	if (argc != 2) {
		fprintf(stderr, "usage: test_zipmap DIR\n");
		return 2;
	}
	CHECK(ortmk_env_create(&env) == ORTMK_OK, "env");
	if (!env)
		return 1;
	test_model(env, argv[1], "zipmap_int.onnx", ORTMK_INT64);
	test_model(env, argv[1], "zipmap_str.onnx", ORTMK_STRING);
	test_not_maps(env);
	test_struct_size(env, argv[1]);
	test_map_input(env, argv[1]);
	snprintf(path, sizeof(path), "%s/zipmap_bad.onnx", argv[1]);
	CHECK(ortmk_session_create(env, path, NULL, &s) != ORTMK_OK &&
	      strstr(ortmk_last_error(), "4 columns for 3 labels"), "X wider than the labels");
	ortmk_session_destroy(s);
	ortmk_env_destroy(env);
	printf("%s\n", failures ? "FAILED" : "all passed");
	return failures ? 1 : 0;
}
