/*
 * test_api: the public API's descriptive calls and options (issue 20),
 * against what tests/integration/gen_api_model.py wrote into the model:
 * version, available providers, sessions from memory with external data
 * resolved against a given directory, input/output metadata (symbolic
 * names, scalar vs unknown rank, sequences), model metadata, struct_size,
 * the graph optimisation level, the log callback and strict placement of
 * an unavailable provider.
 * Usage: test_api DIR (holding api.onnx and api.bin)
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ortmk/ortmk.h"

#define CHECK_LAST_ERROR
#include "../check.h"

static char model[4096], model_dir[4096];

struct log_seen {
	int lines, warnings;
	char last[1024];
};

static void on_log(void *user, ortmk_log_severity sev, const char *line)
{
	struct log_seen *seen = user;

	seen->lines++;
	seen->warnings += sev == ORTMK_LOG_WARNING;
	snprintf(seen->last, sizeof(seen->last), "%s", line);
}

static void *read_file(const char *path, size_t *n)
{
	FILE *f = fopen(path, "rb");
	void *buf = NULL;
	long len;

	if (!f)
		return NULL;
	if (fseek(f, 0, SEEK_END) == 0 && (len = ftell(f)) > 0 && fseek(f, 0, SEEK_SET) == 0 &&
	    (buf = malloc((size_t)len)) && fread(buf, 1, (size_t)len, f) != (size_t)len) {
		free(buf);
		buf = NULL;
	}
	*n = buf ? (size_t)len : 0;
	fclose(f);
	return buf;
}

static void test_version(void)
{
	const char *names[8];
	size_t n = ortmk_available_providers(names, 8), i, cpu = 0;

	CHECK(strcmp(ortmk_version(), ORTMK_VERSION_STRING) == 0, "version %s", ortmk_version());
	CHECK(ortmk_api_version() >= ORTMK_API_VERSION, "api version %d", ortmk_api_version());
	for (i = 0; i < n && i < 8; i++)
		cpu += strcmp(names[i], "cpu") == 0;
	CHECK(cpu == 1, "cpu among %zu available providers", n);
	CHECK(ortmk_available_providers(NULL, 0) == n, "count without a buffer");
}

/* y = x * w with w = 1, 2, 3 from api.bin, for a batch of 2. */
static void check_run(ortmk_env *env, ortmk_session *s, const char *what)
{
	int64_t xs[2] = {2, 3}, ss[1] = {0};
	float xv[6] = {1, 2, 3, -4, 5, 0.5f}, sv = 1.5f;
	ortmk_value *x = NULL, *sc = NULL, *q = NULL, *o = NULL, *out[2] = {NULL, NULL};
	const char *in_names[] = {"x", "s", "q", "o"}, *out_names[] = {"y", "z"};

	if (ortmk_value_create_copy(env, ORTMK_FLOAT, xs, 2, xv, sizeof(xv), &x) ||
	    ortmk_value_create_copy(env, ORTMK_FLOAT, ss, 0, &sv, sizeof(sv), &sc) ||
	    ortmk_value_create_copy(env, ORTMK_FLOAT, xs, 1, xv, 2 * sizeof(float), &q) ||
	    ortmk_value_create_copy(env, ORTMK_FLOAT, (int64_t[]){1, 2}, 2, xv, 2 * sizeof(float), &o)) {
		CHECK(0, "%s: inputs", what);
		goto out;
	}
	CHECK(ortmk_session_run(s, in_names, (const ortmk_value *const[]){x, sc, q, o}, 4,
				out_names, 2, out) == ORTMK_OK, "%s: run", what);
	if (out[0] && out[1]) {
		const float *y = ortmk_value_data_const(out[0]), *z = ortmk_value_data_const(out[1]);

		for (int i = 0; i < 6; i++)
			CHECK(y[i] == xv[i] * (float)(i % 3 + 1), "%s: y[%d] = %g", what, i, y[i]);
		CHECK(ortmk_value_rank(out[1]) == 0 && z[0] == 3.0f, "%s: z", what);
	}
out:
	ortmk_value_destroy(out[0]);
	ortmk_value_destroy(out[1]);
	ortmk_value_destroy(x);
	ortmk_value_destroy(sc);
	ortmk_value_destroy(q);
	ortmk_value_destroy(o);
}

static void test_buffer(ortmk_env *env)
{
	ortmk_session_options *o = NULL;
	ortmk_session *s = NULL;
	size_t n;
	void *bytes = read_file(model, &n);

	CHECK(bytes != NULL, "read %s", model);
	if (!bytes)
		return;
	CHECK(ortmk_session_create_from_buffer(env, bytes, n, model_dir, NULL, &s) == ORTMK_OK,
	      "session from memory");
	free(bytes);    /* the session keeps its own copy */
	if (s)
		check_run(env, s, "from memory");
	ortmk_session_destroy(s);
	bytes = read_file(model, &n);
	s = NULL;
	CHECK(ortmk_session_create_from_buffer(env, bytes, n, NULL, NULL, &s) == ORTMK_ERR_MODEL &&
	      strstr(ortmk_last_error(), "api.bin"), "external data refused without a directory");
	ortmk_session_destroy(s);
	s = NULL;
	ortmk_session_options_create(&o);
	ortmk_session_options_set(o, "save_prepacked", "1");
	CHECK(ortmk_session_create_from_buffer(env, bytes, n, model_dir, o, &s) ==
	      ORTMK_ERR_INVALID_ARGUMENT && strstr(ortmk_last_error(), "save_prepacked"),
	      "no pre-pack cache for a model from memory");
	ortmk_session_destroy(s);
	ortmk_session_options_destroy(o);
	free(bytes);
}

static int name_is(const char *got, const char *want)
{
	return want ? got && strcmp(got, want) == 0 : got == NULL;
}

static void test_meta(ortmk_session *s)
{
	ortmk_io_info x = {.struct_size = sizeof(x)}, sc = {.struct_size = sizeof(sc)};
	ortmk_io_info q = {.struct_size = sizeof(q)}, y = {.struct_size = sizeof(y)};
	ortmk_io_info seq = {.struct_size = sizeof(seq)}, o = {.struct_size = sizeof(o)};
	ortmk_model_metadata m = {.struct_size = sizeof(m)};

	CHECK(ortmk_session_input_meta(s, 0, &x) == ORTMK_OK && strcmp(x.name, "x") == 0 &&
	      x.kind == ORTMK_VALUE_TENSOR && !x.optional && x.dtype == ORTMK_FLOAT &&
	      x.rank_known && x.rank == 2 && x.dims[0] == -1 && x.dims[1] == 3 &&
	      name_is(x.dim_names[0], "batch") && name_is(x.dim_names[1], NULL), "input x");
	CHECK(ortmk_session_input_meta(s, 1, &sc) == ORTMK_OK && sc.rank_known && sc.rank == 0,
	      "input s is a scalar");
	CHECK(ortmk_session_input_meta(s, 2, &q) == ORTMK_OK && !q.rank_known && q.rank == 0 &&
	      !q.dims && q.dtype == ORTMK_FLOAT, "input q has no rank");
	CHECK(ortmk_session_input_meta(s, 3, &o) == ORTMK_OK && o.optional && o.kind == ORTMK_VALUE_TENSOR &&
	      o.dtype == ORTMK_FLOAT && o.rank_known && o.rank == 2 && o.dims[0] == -1 && o.dims[1] == 2 &&
	      name_is(o.dim_names[0], "k"), "input o: optional(tensor(float)) [k, 2]");
	CHECK(ortmk_session_input_meta(s, 4, &q) == ORTMK_ERR_INVALID_ARGUMENT, "input 4 out of range");
	CHECK(ortmk_session_output_meta(s, 0, &y) == ORTMK_OK && strcmp(y.name, "y") == 0 &&
	      y.rank == 2 && name_is(y.dim_names[0], "batch") && y.dims[1] == 3, "output y");
	CHECK(ortmk_session_output_meta(s, 3, &seq) == ORTMK_OK && strcmp(seq.name, "seq") == 0 &&
	      seq.kind == ORTMK_VALUE_SEQUENCE && seq.dtype == ORTMK_FLOAT, "output seq");
	CHECK(ortmk_session_model_metadata(s, &m) == ORTMK_OK, "model metadata");
	CHECK(strcmp(m.producer_name, "api-test") == 0 && strcmp(m.producer_version, "1.2") == 0 &&
	      strcmp(m.domain, "org.ortmk.test") == 0 && strcmp(m.description, "model description") == 0 &&
	      strcmp(m.graph_name, "api_graph") == 0 &&
	      strcmp(m.graph_description, "graph description") == 0 && m.version == 7,
	      "metadata fields: %s %s %s", m.producer_name, m.domain, m.graph_name);
	CHECK(m.n_props == 2, "two metadata_props, got %zu", m.n_props);
	for (size_t i = 0; i < m.n_props && i < 2; i++)
		CHECK((strcmp(m.prop_keys[i], "author") == 0 && strcmp(m.prop_values[i], "ortmk tests") == 0) ||
		      (strcmp(m.prop_keys[i], "license") == 0 && strcmp(m.prop_values[i], "MIT") == 0),
		      "prop %s=%s", m.prop_keys[i], m.prop_values[i]);
}

/* A caller built against an older, smaller struct gets only its fields. */
static void test_struct_size(ortmk_session *s)
{
	ortmk_provider_status ps;
	ortmk_session_stats st = {.struct_size = 0};

	memset(&ps, 0x5a, sizeof(ps));
	ps.struct_size = offsetof(ortmk_provider_status, pid);
	CHECK(ortmk_session_provider_status(s, 0, &ps) == ORTMK_OK && strcmp(ps.name, "cpu") == 0,
	      "status with an older size");
	CHECK(ps.pid == 0x5a5a5a5a && ps.struct_size == offsetof(ortmk_provider_status, pid),
	      "fields past struct_size untouched");
	CHECK(ortmk_session_get_stats(s, &st) == ORTMK_ERR_INVALID_ARGUMENT, "struct_size 0 refused");
}

static size_t cpu_nodes(ortmk_env *env, const char *level)
{
	ortmk_session_options *o = NULL;
	ortmk_session *s = NULL;
	size_t nodes = 0;
	const char *name;

	ortmk_session_options_create(&o);
	CHECK(ortmk_session_options_set(o, "graph_optimization_level", level) == ORTMK_OK, "level %s", level);
	CHECK(ortmk_session_create(env, model, o, &s) == ORTMK_OK, "session at level %s", level);
	if (s) {
		check_run(env, s, level);
		ortmk_session_provider_nodes(s, 0, &name, &nodes);
	}
	ortmk_session_destroy(s);
	ortmk_session_options_destroy(o);
	return nodes;
}

static void test_opt_level(ortmk_env *env)
{
	ortmk_session_options *o = NULL;
	size_t off = cpu_nodes(env, "disable"), basic = cpu_nodes(env, "basic"), all = cpu_nodes(env, "all");

	/* Shape(w) is known at load time: folded from "basic" on. */
	CHECK(off == 7 && basic == 6 && all == 6, "nodes run: disable %zu, basic %zu, all %zu", off, basic, all);
	ortmk_session_options_create(&o);
	CHECK(ortmk_session_options_set(o, "graph_optimization_level", "fast") == ORTMK_ERR_INVALID_ARGUMENT &&
	      strstr(ortmk_last_error(), "fast"), "bad level named");
	ortmk_session_options_destroy(o);
}

/* vulkan with a device name nothing matches: the provider starts, finds no
 * device and says so in HELLO (or has no binary: unavailable too). */
static void test_unavailable(void)
{
	struct log_seen seen = {0};
	ortmk_env_options eo = {.struct_size = sizeof(eo), .log_severity = ORTMK_LOG_WARNING,
				.log_fn = on_log, .log_user = &seen};
	ortmk_session_options *o = NULL;
	ortmk_session *s = NULL;
	ortmk_env *env = NULL;
	const char *name = NULL;

	setenv("ORTMK_VULKAN_DEVICE", "no-such-device-anywhere", 1);
	CHECK(ortmk_env_create_with_options(&eo, &env) == ORTMK_OK, "env with options");
	if (!env)
		return;
	ortmk_session_options_create(&o);
	ortmk_session_options_set(o, "providers", "vulkan,cpu");
	CHECK(ortmk_session_create(env, model, o, &s) == ORTMK_OK, "an unavailable provider is skipped");
	CHECK(seen.warnings >= 1 && strstr(seen.last, "vulkan") && strstr(seen.last, "unavailable"),
	      "warning through the callback: %d lines, last '%s'", seen.lines, seen.last);
	CHECK(s && ortmk_session_provider_count(s) == 1 &&
	      ortmk_session_provider_nodes(s, 0, &name, NULL) == ORTMK_OK && strcmp(name, "cpu") == 0,
	      "only cpu serves the session");
	ortmk_session_destroy(s);
	s = NULL;
	ortmk_session_options_set(o, "strict_placement", "1");
	CHECK(ortmk_session_create(env, model, o, &s) == ORTMK_ERR_UNAVAILABLE &&
	      strstr(ortmk_last_error(), "vulkan"), "strict placement fails");
	ortmk_session_options_set(o, "providers", "nope");
	CHECK(ortmk_session_create(env, model, o, &s) == ORTMK_ERR_INVALID_ARGUMENT &&
	      strstr(ortmk_last_error(), "unknown provider 'nope'"), "an unknown name is an error");
	ortmk_session_destroy(s);
	ortmk_session_options_destroy(o);
	ortmk_env_destroy(env);
	unsetenv("ORTMK_VULKAN_DEVICE");
	eo.log_severity = (ortmk_log_severity)9;
	CHECK(ortmk_env_create_with_options(&eo, &env) == ORTMK_ERR_INVALID_ARGUMENT, "bad severity");
}

/* Shared memory past the limit fails before it is taken: a value of 8 TiB
 * against the machine's memory, 2 MiB against a 1 MiB limit.  (Weights and
 * a run's plan segments go through the same check.) */
static void test_memory_limit(void)
{
	ortmk_env_options eo = {.struct_size = sizeof(eo), .memory_limit_mb = 1};
	int64_t huge[2] = {2147483648LL, 1024}, two_mb[1] = {512 * 1024}, xs[1] = {1000};
	ortmk_env *env = NULL;
	ortmk_value *v = NULL, *x = NULL;

	CHECK(ortmk_env_create(&env) == ORTMK_OK, "env");
	CHECK(ortmk_value_create(env, ORTMK_FLOAT, huge, 2, &v) == ORTMK_ERR_NO_MEMORY &&
	      strstr(ortmk_last_error(), "memory available"), "8 TiB value refused");
	ortmk_env_destroy(env);
	env = NULL;
	CHECK(ortmk_env_create_with_options(&eo, &env) == ORTMK_OK, "env with a 1 MiB limit");
	if (!env)
		return;
	CHECK(ortmk_value_create(env, ORTMK_FLOAT, two_mb, 1, &v) == ORTMK_ERR_NO_MEMORY &&
	      strstr(ortmk_last_error(), "memory_limit_mb"), "2 MiB value over a 1 MiB limit");
	CHECK(ortmk_value_create(env, ORTMK_FLOAT, xs, 1, &x) == ORTMK_OK, "a small value fits");
	ortmk_value_destroy(x);
	ortmk_env_destroy(env);
}

int main(int argc, char **argv)
{
	ortmk_env *env = NULL;
	ortmk_session *s = NULL;

	if (argc != 2) {
		fprintf(stderr, "usage: test_api DIR\n");
		return 2;
	}
	snprintf(model_dir, sizeof(model_dir), "%s", argv[1]);
	snprintf(model, sizeof(model), "%s/api.onnx", argv[1]);
	test_version();
	CHECK(ortmk_env_create(&env) == ORTMK_OK, "env");
	if (!env)
		return 1;
	CHECK(ortmk_session_create(env, model, NULL, &s) == ORTMK_OK, "session");
	if (s) {
		check_run(env, s, "from a path");
		test_meta(s);
		test_struct_size(s);
	}
	ortmk_session_destroy(s);
	test_buffer(env);
	test_opt_level(env);
	ortmk_env_destroy(env);
	test_unavailable();
	test_memory_limit();
	printf("%s\n", failures ? "FAILED" : "all passed");
	return failures ? 1 : 0;
}
