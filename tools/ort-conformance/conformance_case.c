/*
 * conformance_case: one ONNX backend test case through the public API.
 *
 * A case is model.onnx plus data sets test_data_set_N/ holding input_K.pb
 * and output_K.pb: a serialized onnx.TensorProto, or a SequenceProto or
 * OptionalProto where the model declares a sequence or an optional
 * (conformance_value.c reads, feeds and compares them).  Inputs map to the
 * session's inputs by position: the test data follows the graph input
 * order, less the initializers, which is what ortmk_session_input_info
 * reports.
 *
 * Outputs must match the expected ones in kind, dtype and shape, and in
 * value within the ONNX backend test runner's default tolerances (rtol
 * 1e-3, atol 1e-7; strings exactly).
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "conformance_case.h"
#include "conformance_value.h"
#include "onnx.pb-c.h"

#define MAX_IO 64       /* inputs or outputs of one model */

/* ---- the model's signature ---------------------------------------------- */

static bool is_initializer(const Onnx__GraphProto *g, const char *name)
{
	for (size_t i = 0; i < g->n_initializer; i++)
		if (g->initializer[i]->name && strcmp(g->initializer[i]->name, name) == 0)
			return true;
	return false;
}

/* Finds inputs and outputs whose type the API cannot carry (maps, sparse
 * tensors, complex numbers...): those cases are errors before any session. */
static bool model_check(const Onnx__GraphProto *g, char *reason, size_t cap)
{
	char buf[64];
	const char *bad;

	for (size_t i = 0; i < g->n_input; i++) {
		const Onnx__ValueInfoProto *v = g->input[i];

		if (is_initializer(g, v->name))
			continue;
		if ((bad = conf_type_unsupported(v->type, buf, sizeof buf))) {
			snprintf(reason, cap, "unsupported input type %s (input '%s')", bad, v->name);
			return false;
		}
	}
	for (size_t i = 0; i < g->n_output; i++) {
		if ((bad = conf_type_unsupported(g->output[i]->type, buf, sizeof buf))) {
			snprintf(reason, cap, "unsupported output type %s (output '%s')", bad,
				 g->output[i]->name);
			return false;
		}
	}
	return true;
}

/* The parsed model (kept for the declared types), or NULL with a reason. */
static Onnx__ModelProto *load_model(const char *model_path, char *reason, size_t cap)
{
	uint8_t *buf;
	size_t len;
	Onnx__ModelProto *m;

	if (!conf_read_file(model_path, &buf, &len)) {
		snprintf(reason, cap, "cannot read %s", model_path);
		return NULL;
	}
	m = onnx__model_proto__unpack(NULL, len, buf);
	free(buf);
	if (!m || !m->graph) {
		snprintf(reason, cap, "%s is not an ONNX model", model_path);
		if (m)
			onnx__model_proto__free_unpacked(m, NULL);
		return NULL;
	}
	if (!model_check(m->graph, reason, cap)) {
		onnx__model_proto__free_unpacked(m, NULL);
		return NULL;
	}
	return m;
}

/* The declared type of the graph input or output called name, or NULL. */
static const Onnx__TypeProto *declared_type(const Onnx__GraphProto *g, int output,
					    const char *name)
{
	size_t n = output ? g->n_output : g->n_input;

	for (size_t i = 0; name && i < n; i++) {
		const Onnx__ValueInfoProto *v = output ? g->output[i] : g->input[i];

		if (v->name && strcmp(v->name, name) == 0)
			return v->type;
	}
	return NULL;
}

/* ---- running ------------------------------------------------------------ */

typedef struct data_set {
	conf_value in[MAX_IO], out[MAX_IO];
	size_t n_in, n_out;
	ortmk_value *vin[MAX_IO], *vout[MAX_IO];
} data_set;

static void data_set_free(data_set *d)
{
	for (size_t i = 0; i < d->n_in; i++) {
		conf_value_free(&d->in[i]);
		ortmk_value_destroy(d->vin[i]);
	}
	for (size_t i = 0; i < d->n_out; i++) {
		conf_value_free(&d->out[i]);
		ortmk_value_destroy(d->vout[i]);
	}
}

static bool file_exists(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0;
}

static size_t count_files(const char *dir, const char *prefix)
{
	char path[4200];
	size_t n;

	for (n = 0; n <= MAX_IO; n++) {
		snprintf(path, sizeof path, "%.4096s/%s_%zu.pb", dir, prefix, n);
		if (!file_exists(path))
			break;
	}
	return n;
}

/* Loads <dir>/<prefix>_K.pb for K < n as the types the model declares for
 * names[K]. */
static bool load_values(const Onnx__GraphProto *g, const char *dir, const char *prefix,
			const char *const *names, conf_value *v, size_t n, char *reason, size_t cap)
{
	char path[4096], err[512];
	int output = strcmp(prefix, "output") == 0;

	for (size_t k = 0; k < n; k++) {
		snprintf(path, sizeof path, "%s/%s_%zu.pb", dir, prefix, k);
		if (!conf_value_load(path, declared_type(g, output, names[k]), &v[k], err, sizeof err)) {
			snprintf(reason, cap, "%s %zu: %s", prefix, k, err);
			return false;
		}
	}
	return true;
}

/* Feeds the inputs of one data set, runs, compares. */
static conf_result run_data_set(ortmk_env *env, ortmk_session *s, const Onnx__GraphProto *g,
				const char *dir, data_set *d, char *reason, size_t cap)
{
	const char *in_names[MAX_IO], *out_names[MAX_IO];
	size_t n_in = ortmk_session_input_count(s), n_out = ortmk_session_output_count(s);
	char err[512];

	d->n_in = count_files(dir, "input");
	d->n_out = count_files(dir, "output");
	if (d->n_in != n_in || d->n_out > n_out || n_out > MAX_IO) {
		snprintf(reason, cap, "the data set has %zu inputs and %zu outputs, the session %zu and %zu",
			 d->n_in, d->n_out, n_in, n_out);
		d->n_in = d->n_out = 0;
		return CONF_ERROR;
	}
	for (size_t i = 0; i < n_in; i++)
		ortmk_session_input_info(s, i, &in_names[i], NULL, NULL, NULL);
	for (size_t i = 0; i < n_out; i++)
		ortmk_session_output_info(s, i, &out_names[i], NULL, NULL, NULL);
	if (!load_values(g, dir, "input", in_names, d->in, d->n_in, reason, cap) ||
	    !load_values(g, dir, "output", out_names, d->out, d->n_out, reason, cap))
		return CONF_ERROR;
	for (size_t i = 0; i < n_in; i++) {
		if (!conf_value_make(env, &d->in[i], &d->vin[i], err, sizeof err)) {
			snprintf(reason, cap, "input %zu: %s", i, err);
			return CONF_ERROR;
		}
	}
	if (ortmk_session_run(s, in_names, (const ortmk_value *const *)d->vin, n_in,
			      out_names, n_out, d->vout)) {
		memset(d->vout, 0, sizeof d->vout);
		snprintf(reason, cap, "run: %s", ortmk_last_error());
		return CONF_ERROR;
	}
	for (size_t k = 0; k < d->n_out; k++)
		if (!conf_value_compare(k, out_names[k], d->vout[k], &d->out[k], reason, cap))
			return CONF_FAIL;
	return CONF_PASS;
}

static conf_result run_sets(ortmk_env *env, ortmk_session *s, const Onnx__GraphProto *g,
			    const char *case_dir, char *reason, size_t cap)
{
	char dir[4096], why[1024];
	conf_result r = CONF_PASS;
	size_t n;

	for (n = 0; r == CONF_PASS; n++) {
		data_set *d;

		snprintf(dir, sizeof dir, "%s/test_data_set_%zu", case_dir, n);
		if (!file_exists(dir))
			break;
		d = calloc(1, sizeof *d);
		if (!d) {
			snprintf(reason, cap, "out of memory");
			return CONF_ERROR;
		}
		r = run_data_set(env, s, g, dir, d, why, sizeof why);
		/* every returned value is destroyed, compared or not */
		d->n_out = ortmk_session_output_count(s) < MAX_IO ? ortmk_session_output_count(s) : MAX_IO;
		data_set_free(d);
		free(d);
		if (r != CONF_PASS && n == 0)
			snprintf(reason, cap, "%s", why);
		else if (r != CONF_PASS)
			snprintf(reason, cap, "data set %zu: %s", n, why);
	}
	if (n == 0) {
		snprintf(reason, cap, "no test_data_set_0");
		return CONF_ERROR;
	}
	return r;
}

/* A passing case's reason says where its nodes ran ("nodes cuda 3 cpu 1"),
 * so a run on a device provider that quietly fell back to cpu shows. */
static void placement(ortmk_session *s, char *reason, size_t cap)
{
	size_t len = (size_t)snprintf(reason, cap, "nodes");

	for (size_t i = 0; i < ortmk_session_provider_count(s) && len < cap; i++) {
		const char *prov;
		size_t nodes;

		if (!ortmk_session_provider_nodes(s, i, &prov, &nodes))
			len += (size_t)snprintf(reason + len, cap - len, " %s %zu", prov, nodes);
	}
}

conf_result conf_run_case(ortmk_env *env, const char *case_dir,
			  const conf_settings *set, char *reason, size_t cap)
{
	char model[4096];
	ortmk_session_options *opts = NULL;
	ortmk_session *s = NULL;
	Onnx__ModelProto *m;
	conf_result r;

	reason[0] = '\0';
	snprintf(model, sizeof model, "%s/model.onnx", case_dir);
	if (!(m = load_model(model, reason, cap)))
		return CONF_ERROR;
	if (ortmk_session_options_create(&opts) ||
	    (set->providers && ortmk_session_options_set(opts, "providers", set->providers)) ||
	    (set->threads && ortmk_session_options_set(opts, "threads", set->threads)) ||
	    ortmk_session_create(env, model, opts, &s)) {
		snprintf(reason, cap, "%s", ortmk_last_error());
		r = CONF_ERROR;
		goto out;
	}
	r = run_sets(env, s, m->graph, case_dir, reason, cap);
	if (r == CONF_PASS)
		placement(s, reason, cap);
out:
	ortmk_session_destroy(s);
	ortmk_session_options_destroy(opts);
	onnx__model_proto__free_unpacked(m, NULL);
	return r;
}

const char *conf_result_name(conf_result r)
{
	switch (r) {
	case CONF_PASS: return "pass";
	case CONF_FAIL: return "fail";
	default: return "error";
	}
}
