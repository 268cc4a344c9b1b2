/*
 * ort-run: run an ONNX model through ortmk from the command line.
 *
 * Loads a model with the public API only (ortmk.h), feeds inputs from .npy
 * files or seeded random data, times a number of runs, prints or writes the
 * outputs, and reports latency, memory and how the graph was partitioned.
 * The integration tests (tests/integration/) drive it with --json and
 * --output-dir; people use it to try a model and to benchmark.
 *
 * Every error is one line "ort-run: <message>" on stderr and exit status 1;
 * a bad command line exits 2.
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <ortmk/ortmk.h>
#include "npy.h"
#include "ort_run.h"
#include "ort_run_bind.h"
#include "onnx_dims.h"
#include "tensor_fill.h"


static void usage(FILE *f)
{
	fputs(
"usage: ort-run MODEL [options]\n"
"  --provider LIST       providers in priority order (default: cpu); one\n"
"                        that cannot run here (no binary, no device) is\n"
"                        skipped with a warning naming it and why\n"
"  --strict              ... or fails the session (strict placement)\n"
"  --opt-level LEVEL     graph optimisation: disable, basic, extended, all\n"
"                        (default all)\n"
"  --input NAME=FILE.npy feed input NAME from a .npy file (repeatable);\n"
"                        its dtype must be the model's\n"
"  --dim NAME=VALUE      value of the symbolic dimension NAME (repeatable)\n"
"  --shape NAME=AxBxC    shape of generated input NAME (repeatable)\n"
"  --output-dir DIR      write each output to DIR/<output name>.npy\n"
"                        (characters other than [A-Za-z0-9._-] become '_';\n"
"                        a sequence of maps, ZipMap's, to DIR/<name>.json)\n"
"  --iters N             timed runs (default 1)\n"
"  --bind DEVICE         run through an IO binding: inputs copied to DEVICE's\n"
"                        memory once, outputs bound to DEVICE (docs/DEVICE.md)\n"
"  --warmup W            untimed runs before them (default 0)\n"
"  --threads T           intra-op threads per provider (default: cores)\n"
"  --seed S              seed of generated inputs (default 1)\n"
"  --json                print one JSON object of results and timings\n"
"  --retry               rerun once a run whose provider died or hung\n"
"  --save-prepacked      write pre-packed weights to a cache beside the model\n"
"  --profile             time every node of every run into the trace (run\n"
"                        under ort-trace record or ORTMK_TRACE; docs/TRACE.md)\n"
"  --timeout-ms MS       deadline of one run; a provider past it is killed\n"
"  --keep-going          count failed runs and go on instead of stopping\n"
"  --swap-every N        hot-swap the first provider every N runs\n"
"  --swap-binary PATH    the binary to swap to (default: the same one)\n"
"  --version             print ortmk's version and the providers found\n"
"  -h, --help            this text\n"
"Inputs not given with --input are generated from the seed: floating types\n"
"uniform in [-1, 1), integer types uniform in [0, 8) (valid as indices of\n"
"small axes), bool uniform.  Dynamic dims are 1 unless --dim or --shape\n"
"says otherwise.\n", f);
}

static void print_version(void)
{
	const char *names[8];
	size_t n = ortmk_available_providers(names, 8);

	printf("ortmk %s (API %d); providers found:", ortmk_version(), ortmk_api_version());
	for (size_t i = 0; i < n && i < 8; i++)
		printf(" %s", names[i]);
	printf("\n");
}

void fail(const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	/* Library messages are one line by contract; make sure of it. */
	for (char *c = msg; *c; c++)
		if (*c == '\n' || *c == '\r')
			*c = ' ';
	fprintf(stderr, "ort-run: %s\n", msg);
}

/* ---- command line ---------------------------------------------------- */

static bool parse_long(const char *s, long min, long *out)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < min)
		return false;
	*out = v;
	return true;
}

static bool add_pair(name_value *tab, size_t *n, const char *arg)
{
	const char *eq = strchr(arg, '=');
	if (!eq || eq == arg || !eq[1] || *n >= MAX_ARGS)
		return false;
	char *name = strndup(arg, (size_t)(eq - arg));
	if (!name)
		return false;
	tab[*n] = (name_value){ name, eq + 1, false };
	(*n)++;
	return true;
}

/* Applies "--key value"; false when the value is bad (or the key unknown). */
static bool set_option(options *o, const char *key, const char *val)
{
	long n;

	if (!strcmp(key, "--provider"))
		o->provider = val;
	else if (!strcmp(key, "--output-dir"))
		o->outdir = val;
	else if (!strcmp(key, "--input"))
		return add_pair(o->inputs, &o->n_inputs, val);
	else if (!strcmp(key, "--dim"))
		return add_pair(o->dims, &o->n_dims, val) &&
		       parse_long(o->dims[o->n_dims - 1].value, 0, &n);
	else if (!strcmp(key, "--shape"))
		return add_pair(o->shapes, &o->n_shapes, val);
	else if (!strcmp(key, "--bind"))
		o->bind = val;
	else if (!strcmp(key, "--iters"))
		return parse_long(val, 1, &o->iters);
	else if (!strcmp(key, "--warmup"))
		return parse_long(val, 0, &o->warmup);
	else if (!strcmp(key, "--timeout-ms")) {
		o->timeout_ms = val;
		return parse_long(val, 1, &n);
	} else if (!strcmp(key, "--swap-every"))
		return parse_long(val, 1, &o->swap_every);
	else if (!strcmp(key, "--swap-binary"))
		o->swap_binary = val;
	else if (!strcmp(key, "--opt-level"))
		o->opt_level = val;
	else if (!strcmp(key, "--threads")) {
		o->threads = val;
		return parse_long(val, 1, &n);
	} else if (!strcmp(key, "--seed")) {
		if (!parse_long(val, 0, &n))
			return false;
		o->seed = (uint64_t)n;
	} else
		return false;
	return true;
}

static bool is_value_option(const char *key)
{
	static const char *const keys[] = {
		"--provider", "--output-dir", "--input", "--dim", "--shape",
		"--iters", "--bind", "--warmup", "--threads", "--seed", "--timeout-ms",
		"--swap-every", "--swap-binary", "--opt-level",
	};
	for (size_t i = 0; i < sizeof keys / sizeof *keys; i++)
		if (!strcmp(key, keys[i]))
			return true;
	return false;
}

/* Returns 0 to go on, 1 for --help, 2 on a usage error, 3 for --version. */
static int parse_args(int argc, char **argv, options *o)
{
	*o = (options){ .provider = "cpu", .iters = 1, .warmup = 0, .seed = 1 };
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *val;
		char key[32] = "";
		if (!strcmp(a, "-h") || !strcmp(a, "--help"))
			return 1;
		if (a[0] != '-') {
			if (o->model) {
				fail("unexpected argument '%s' (try --help)", a);
				return 2;
			}
			o->model = a;
			continue;
		}
		if (!strcmp(a, "--version"))
			return 3;
		if (!strcmp(a, "--json") || !strcmp(a, "--retry") || !strcmp(a, "--keep-going") ||
		    !strcmp(a, "--save-prepacked") || !strcmp(a, "--strict") ||
		    !strcmp(a, "--profile")) {
			o->strict |= !strcmp(a, "--strict");
			o->profile |= !strcmp(a, "--profile");
			o->save_prepacked |= !strcmp(a, "--save-prepacked");
			o->json |= !strcmp(a, "--json");
			o->retry |= !strcmp(a, "--retry");
			o->keep_going |= !strcmp(a, "--keep-going");
			continue;
		}
		/* Every other option takes a value: "--key value" or "--key=value". */
		const char *eq = strchr(a, '=');
		size_t klen = eq ? (size_t)(eq - a) : strlen(a);
		if (klen < sizeof key)
			memcpy(key, a, klen);
		if (klen >= sizeof key || !is_value_option(key)) {
			fail("unknown option '%s' (try --help)", a);
			return 2;
		}
		if (eq)
			val = eq + 1;
		else if (i + 1 < argc)
			val = argv[++i];
		else {
			fail("option %s needs a value", key);
			return 2;
		}
		if (!set_option(o, key, val)) {
			fail("bad value '%s' for %s", val, key);
			return 2;
		}
	}
	if (!o->model) {
		fail("no model given (try --help)");
		return 2;
	}
	return 0;
}

static void free_options(options *o)
{
	for (size_t i = 0; i < o->n_inputs; i++)
		free((char *)o->inputs[i].name);
	for (size_t i = 0; i < o->n_dims; i++)
		free((char *)o->dims[i].name);
	for (size_t i = 0; i < o->n_shapes; i++)
		free((char *)o->shapes[i].name);
}

static name_value *find_pair(name_value *tab, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(tab[i].name, name)) {
			tab[i].used = true;
			return &tab[i];
		}
	return NULL;
}

/* "1x3x224x224" -> dims; "" or "scalar" is rank 0. */
static bool parse_shape(const char *s, int64_t *dims, size_t *rank)
{
	*rank = 0;
	if (!*s || !strcmp(s, "scalar"))
		return true;
	for (;;) {
		char *end;
		errno = 0;
		long long v = strtoll(s, &end, 10);
		if (errno || end == s || v < 0 || *rank >= MAX_RANK)
			return false;
		dims[(*rank)++] = v;
		if (!*end)
			return true;
		if (*end != 'x')
			return false;
		s = end + 1;
	}
}

/* ---- inputs ------------------------------------------------------------ */

void format_dims(char *buf, size_t len, const int64_t *dims, size_t rank)
{
	size_t off = 0;
	buf[0] = '\0';
	off += (size_t)snprintf(buf, len, "[");
	for (size_t i = 0; i < rank && off < len; i++)
		off += (size_t)snprintf(buf + off, len - off, "%s%lld",
					i ? "," : "", (long long)dims[i]);
	if (off < len)
		snprintf(buf + off, len - off, "]");
}

/* Whether given dims fit the model's (dynamic dims match anything). */
static bool dims_fit(const int64_t *want, size_t want_rank,
		     const int64_t *have, size_t have_rank)
{
	if (want_rank != have_rank)
		return false;
	for (size_t i = 0; i < want_rank; i++)
		if (want[i] >= 0 && want[i] != have[i])
			return false;
	return true;
}

static bool check_shape(const char *name, const char *what, const int64_t *mdims,
			size_t mrank, const int64_t *dims, size_t rank)
{
	char m[256], g[256];
	if (dims_fit(mdims, mrank, dims, rank))
		return true;
	format_dims(m, sizeof m, mdims, mrank);
	format_dims(g, sizeof g, dims, rank);
	fail("input '%s': %s has shape %s but the model expects %s "
	     "(-1 is any size)", name, what, g, m);
	return false;
}

static ortmk_value *input_from_npy(ortmk_env *env, const char *name,
				   const char *path, ortmk_dtype dtype,
				   const int64_t *mdims, size_t mrank)
{
	npy_array a;
	char err[256];
	ortmk_value *v = NULL;

	if (npy_read(path, &a, err, sizeof err)) {
		/* npy names the file itself when open() fails. */
		if (!strncmp(err, path, strlen(path)))
			fail("input '%s': %s", name, err);
		else
			fail("input '%s': cannot read %s: %s", name, path, err);
		return NULL;
	}
	if ((ortmk_dtype)a.dtype != dtype)
		fail("input '%s': %s has dtype %s but the model expects %s", name,
		     path, ortmk_dtype_name((ortmk_dtype)a.dtype), ortmk_dtype_name(dtype));
	else if (check_shape(name, path, mdims, mrank, a.dims, (size_t)a.rank) &&
		 ortmk_value_create_copy(env, dtype, a.dims, (size_t)a.rank, a.data,
					 a.nbytes, &v))
		fail("input '%s': %s", name, ortmk_last_error());
	npy_free(&a);
	return v;
}

static ortmk_value *input_generated(ortmk_env *env, options *o, const onnx_dims *syms,
				    const char *name, ortmk_dtype dtype,
				    const int64_t *mdims, size_t mrank, uint64_t *rng)
{
	int64_t dims[MAX_RANK];
	size_t rank = mrank;
	ortmk_value *v = NULL;
	name_value *shape = find_pair(o->shapes, o->n_shapes, name);

	if (shape) {
		if (!parse_shape(shape->value, dims, &rank)) {
			fail("--shape %s=%s: not a shape like 1x3x224x224", name, shape->value);
			return NULL;
		}
		if (!check_shape(name, "--shape", mdims, mrank, dims, rank))
			return NULL;
	} else {
		if (mrank > MAX_RANK) {
			fail("input '%s': rank %zu is more than ort-run handles", name, mrank);
			return NULL;
		}
		for (size_t i = 0; i < mrank; i++) {
			const char *sym = mdims[i] < 0 ? onnx_dims_lookup(syms, name, i) : NULL;
			name_value *d = sym ? find_pair(o->dims, o->n_dims, sym) : NULL;
			dims[i] = mdims[i] >= 0 ? mdims[i] : d ? atol(d->value) : 1;
		}
	}
	if (ortmk_value_create(env, dtype, dims, rank, &v)) {
		fail("input '%s': %s", name, ortmk_last_error());
		return NULL;
	}
	size_t size = ortmk_dtype_size(dtype);
	if (!size || !tfill_random(ortmk_value_data(v), dtype,
				  ortmk_value_nbytes(v) / size, rng)) {
		fail("input '%s': cannot generate values of type %s (give it with --input)",
		     name, ortmk_dtype_name(dtype));
		ortmk_value_destroy(v);
		return NULL;
	}
	return v;
}

/* Makes one value per model input; false (and a message) on failure. */
static bool make_inputs(ortmk_env *env, ortmk_session *s, options *o,
			const char **names, ortmk_value **values)
{
	size_t n = ortmk_session_input_count(s);
	uint64_t rng = o->seed;
	onnx_dims syms = { 0 };
	bool ok = false;

	if (o->n_dims)
		onnx_dims_load(o->model, &syms);
	for (size_t k = 0; k < o->n_dims; k++) {
		if (!onnx_dims_has(&syms, o->dims[k].name)) {
			fail("--dim: no input dimension of the model is named '%s'",
			     o->dims[k].name);
			goto out;
		}
	}
	for (size_t i = 0; i < n; i++) {
		ortmk_dtype dtype;
		const int64_t *dims;
		size_t rank;
		if (ortmk_session_input_info(s, i, &names[i], &dtype, &dims, &rank)) {
			fail("%s", ortmk_last_error());
			goto out;
		}
		name_value *file = find_pair(o->inputs, o->n_inputs, names[i]);
		values[i] = file ? input_from_npy(env, names[i], file->value, dtype, dims, rank)
				 : input_generated(env, o, &syms, names[i], dtype, dims, rank, &rng);
		if (!values[i])
			goto out;
	}
	/* A name that matched nothing is most likely a typo: say so. */
	for (size_t i = 0; i < o->n_inputs + o->n_shapes; i++) {
		bool is_input = i < o->n_inputs;
		name_value *nv = is_input ? &o->inputs[i] : &o->shapes[i - o->n_inputs];
		if (!nv->used) {
			fail("%s: the model has no input '%s'",
			     is_input ? "--input" : "--shape", nv->name);
			goto out;
		}
	}
	ok = true;
out:
	onnx_dims_free(&syms);
	return ok;
}

/* ---- main ---------------------------------------------------------------- */

static void destroy_values(ortmk_value **v, size_t n)
{
	for (size_t i = 0; v && i < n; i++) {
		ortmk_value_destroy(v[i]);
		v[i] = NULL;
	}
}

static bool swap_provider(ortmk_env *env, const options *o)
{
	char name[64];
	ortmk_provider_status ps = {.struct_size = sizeof(ps)};
	const char *bin = o->swap_binary;

	snprintf(name, sizeof name, "%.*s", (int)strcspn(o->provider, ","), o->provider);
	if (!bin) {
		for (size_t i = 0; i < ortmk_env_provider_count(env); i++)
			if (!ortmk_env_provider_status(env, i, &ps) && !strcmp(ps.name, name))
				bin = ps.binary;
	}
	if (!bin || ortmk_env_swap_provider(env, name, bin)) {
		fail("swap of provider '%s' failed: %s", name, bin ? ortmk_last_error() : "unknown");
		return false;
	}
	return true;
}

/* Warm-up and timed runs; the last good run's outputs stay in outs. */
static bool run_all(ortmk_env *env, ortmk_session *s, options *o, const char **inames,
		    ortmk_value **ins, size_t nin, const char **onames,
		    ortmk_value **outs, size_t nout, double *times)
{
	long total = o->warmup + o->iters;
	ortmk_value **tmp = calloc(nout + 1, sizeof *tmp);

	if (!tmp)
		return fail("out of memory"), false;
	for (long r = 0; r < total; r++) {
		if (o->swap_every && r > 0 && r % o->swap_every == 0 && !swap_provider(env, o))
			return free(tmp), false;
		double t0 = sys_now_ms();
		o->runs++;
		if (ortmk_session_run(s, inames, (const ortmk_value *const *)ins, nin,
				      onames, nout, tmp)) {
			o->failed_runs++;
			if (!o->keep_going) {
				fail("run failed: %s", ortmk_last_error());
				return free(tmp), false;
			}
			continue;
		}
		if (r >= o->warmup)
			times[o->timed++] = sys_now_ms() - t0;
		destroy_values(outs, nout);
		memcpy(outs, tmp, nout * sizeof *outs);
	}
	free(tmp);
	qsort(times, (size_t)o->timed, sizeof *times, cmp_double);
	if (!outs[0] && nout) {
		fail("every run failed; last error: %s", ortmk_last_error());
		return false;
	}
	return true;
}

int main(int argc, char **argv)
{
	options o;
	ortmk_env *env = NULL;
	ortmk_session_options *so = NULL;
	ortmk_session *s = NULL;
	const char **inames = NULL, **onames = NULL;
	ortmk_value **ins = NULL, **outs = NULL;
	double *times = NULL;
	size_t nin = 0, nout = 0;
	double t0, create_ms;
	int rc = parse_args(argc, argv, &o);

	if (rc) {
		if (rc == 1)
			usage(stdout);
		if (rc == 3)
			print_version();
		free_options(&o);
		return rc == 2 ? 2 : 0;
	}
	rc = 1;
	if (ortmk_env_create(&env) || ortmk_session_options_create(&so) ||
	    ortmk_session_options_set(so, "providers", o.provider) ||
	    (o.threads && ortmk_session_options_set(so, "threads", o.threads)) ||
	    (o.timeout_ms && ortmk_session_options_set(so, "run_timeout_ms", o.timeout_ms)) ||
	    (o.retry && ortmk_session_options_set(so, "retry", "1")) ||
	    (o.save_prepacked && ortmk_session_options_set(so, "save_prepacked", "1")) ||
	    (o.profile && ortmk_session_options_set(so, "enable_profiling", "1")) ||
	    (o.strict && ortmk_session_options_set(so, "strict_placement", "1")) ||
	    (o.opt_level && ortmk_session_options_set(so, "graph_optimization_level", o.opt_level))) {
		fail("%s", ortmk_last_error());
		goto out;
	}
	t0 = sys_now_ms();
	if (ortmk_session_create(env, o.model, so, &s)) {
		fail("%s: %s", o.model, ortmk_last_error());
		goto out;
	}
	create_ms = sys_now_ms() - t0;

	nin = ortmk_session_input_count(s);
	nout = ortmk_session_output_count(s);
	inames = calloc(nin + 1, sizeof *inames);
	ins = calloc(nin + 1, sizeof *ins);
	onames = calloc(nout + 1, sizeof *onames);
	outs = calloc(nout + 1, sizeof *outs);
	times = calloc((size_t)o.iters, sizeof *times);
	if (!inames || !ins || !onames || !outs || !times) {
		fail("out of memory");
		goto out;
	}
	for (size_t i = 0; i < nout; i++) {
		ortmk_dtype t;
		const int64_t *d;
		size_t r;
		if (ortmk_session_output_info(s, i, &onames[i], &t, &d, &r)) {
			fail("%s", ortmk_last_error());
			goto out;
		}
	}
	if (!make_inputs(env, s, &o, inames, ins))
		goto out;
	if (o.bind) {
		char err[1200];

		if (!ort_run_bound(env, s, o.bind, o.warmup, o.iters, inames, ins, nin, onames, outs,
				   nout, times, err, sizeof(err))) {
			fail("--bind %s: %s", o.bind, err);
			goto out;
		}
		o.runs = o.warmup + o.iters;
		o.timed = o.iters;
		qsort(times, (size_t)o.timed, sizeof *times, cmp_double);
	} else if (!run_all(env, s, &o, inames, ins, nin, onames, outs, nout, times)) {
		goto out;
	}
	if (o.outdir && !write_outputs(o.outdir, onames, outs, nout))
		goto out;
	if (o.json)
		print_json(env, s, &o, create_ms, times);
	else
		print_text(s, &o, onames, outs, nout, times);
	rc = fflush(stdout) ? 1 : 0;
	if (rc)
		fail("cannot write to stdout: %s", strerror(errno));
	else if (o.failed_runs)
		rc = 1;
out:
	destroy_values(outs, nout);
	destroy_values(ins, nin);
	free(times);
	free(outs);
	free(onames);
	free(ins);
	free(inames);
	ortmk_session_destroy(s);
	ortmk_session_options_destroy(so);
	ortmk_env_destroy(env);
	free_options(&o);
	return rc;
}
