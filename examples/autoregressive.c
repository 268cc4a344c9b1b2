/*
 * autoregressive: an autoregressive loop with IO binding (issue #9).
 *
 * The model (tools/models/gen_autoregressive.py) is one decoding step:
 * (x [1,H], cache [1,T,H]) -> (y [1,H], new_cache [1,T+1,H]); y is fed back
 * as x and new_cache as cache, so the cache grows by one row per step and
 * its shape is unknown until the step has run.  The loop runs twice:
 *
 *   unbound  ortmk_session_run: the inputs go from host memory to the
 *            provider and the outputs come back to the host every step;
 *   bound    the state lives on the device of the first provider of the
 *            list: copied there once (ortmk_copy_tensors), the outputs are
 *            bound to that device (bind_output_to_device: allocated there
 *            whatever their shape) and bound as the next step's inputs, and
 *            only the final y and cache are read back.
 *
 * Both must give the same outputs; it prints both timings.  On a provider
 * list without device memory (cpu) the same code runs on host values.
 *
 * usage: autoregressive MODEL.onnx [--provider LIST] [--steps N] [--prefill T]
 *                       [--mode both|bound|unbound] [--repeat R]
 *                       [--dump DIR] [--json]
 *   --prefill T the cache starts with T rows (a prompt already decoded;
 *               default 1024)
 *   --repeat R  run each loop R times (in turn), report the fastest
 *   --dump DIR  write DIR/y.bin and DIR/cache.bin (raw float32) of the
 *               bound loop (of the unbound one with --mode unbound)
 * Exit status: 0 when the outputs match, 1 on a mismatch or an error.
 */
#include <math.h>
#include <ortmk/ortmk.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct opts {
	const char *model, *providers, *mode, *dump;
	int steps, repeat, json;
	int64_t prefill;
} opts;

/* The final state of one loop, on the host. */
typedef struct result {
	ortmk_value *y, *cache;
	double ms;
	char where[32];         /* where the bound loop's state lived */
} result;

static int fail(const char *what)
{
	fprintf(stderr, "autoregressive: %s: %s\n", what, ortmk_last_error());
	return 1;
}

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* x[i] = 0.5 sin(0.37 i), cache[0,r,i] = 0.5 cos(0.11 i + 0.7 r) for the
 * `prefill` rows r (the generator's --reference starts from the same state). */
static int initial_state(ortmk_env *env, int64_t h, int64_t prefill, ortmk_value **x,
			 ortmk_value **cache)
{
	int64_t xd[2] = {1, h}, cd[3] = {1, prefill, h};
	float *px, *pc;

	if (ortmk_value_create(env, ORTMK_FLOAT, xd, 2, x))
		return fail("x");
	if (ortmk_value_create(env, ORTMK_FLOAT, cd, 3, cache)) {
		ortmk_value_destroy(*x);
		return fail("cache");
	}
	px = ortmk_value_data(*x);
	pc = ortmk_value_data(*cache);
	for (int64_t i = 0; i < h; i++)
		px[i] = (float)(0.5 * sin(0.37 * (double)i));
	for (int64_t r = 0; r < prefill; r++)
		for (int64_t i = 0; i < h; i++)
			pc[r * h + i] = (float)(0.5 * cos(0.11 * (double)i + 0.7 * (double)r));
	return 0;
}

static int loop_unbound(ortmk_session *s, ortmk_env *env, int64_t h, const opts *op, result *r)
{
	int steps = op->steps;
	const char *in[] = {"x", "cache"}, *out[] = {"y", "new_cache"};
	ortmk_value *x, *cache, *o[2];
	double t0 = now_ms();

	if (initial_state(env, h, op->prefill, &x, &cache))
		return 1;
	for (int k = 0; k < steps; k++) {
		if (ortmk_session_run(s, in, (const ortmk_value *const[]){x, cache}, 2, out, 2, o)) {
			ortmk_value_destroy(x);
			ortmk_value_destroy(cache);
			return fail("unbound run");
		}
		ortmk_value_destroy(x);
		ortmk_value_destroy(cache);
		x = o[0];
		cache = o[1];
	}
	r->ms = now_ms() - t0;
	r->y = x;
	r->cache = cache;
	return 0;
}

/* A host value with v's dtype and shape, v copied into it. */
static int read_back(ortmk_env *env, const ortmk_value *v, ortmk_value **out)
{
	if (ortmk_value_create(env, ortmk_value_dtype(v), ortmk_value_dims(v), ortmk_value_rank(v),
			       out))
		return fail("host value");
	if (ortmk_copy_tensors(env, (const ortmk_value *const[]){v}, (ortmk_value *const[]){*out}, 1,
			       NULL)) {
		ortmk_value_destroy(*out);
		return fail("read back");
	}
	return 0;
}

/* Steps with the state on `dev`'s device; the steps themselves copy
 * nothing between host and device. */
static int bound_steps(ortmk_session *s, ortmk_io_binding *b, ortmk_value *xd, ortmk_value *cd,
		       int steps)
{
	if (ortmk_io_binding_bind_input(b, "x", xd) || ortmk_io_binding_bind_input(b, "cache", cd))
		return fail("bind inputs");
	for (int k = 0; k < steps; k++) {
		if (ortmk_session_run_binding(s, b))
			return fail("bound run");
		/* This step's outputs (still on the device) are the next
		 * step's inputs: no copy. */
		if (ortmk_io_binding_bind_input(b, "x", ortmk_io_binding_output(b, "y")) ||
		    ortmk_io_binding_bind_input(b, "cache", ortmk_io_binding_output(b, "new_cache")))
			return fail("rebind");
	}
	return 0;
}

static int loop_bound(ortmk_session *s, ortmk_env *env, const char *dev, int64_t h,
		      const opts *op, result *r)
{
	int64_t xdims[2] = {1, h}, cdims[3] = {1, op->prefill, h};
	ortmk_value *x = NULL, *cache = NULL, *xd = NULL, *cd = NULL;
	ortmk_io_binding *b = NULL;
	double t0 = now_ms();
	int rc = 1;

	if (initial_state(env, h, op->prefill, &x, &cache))
		return 1;
	if (ortmk_value_create_on(env, dev, ORTMK_FLOAT, xdims, 2, &xd) ||
	    ortmk_value_create_on(env, dev, ORTMK_FLOAT, cdims, 3, &cd)) {
		fail("device values");
		goto out;
	}
	if (ortmk_copy_tensors(env, (const ortmk_value *const[]){x, cache},
			       (ortmk_value *const[]){xd, cd}, 2, NULL)) {
		fail("copy to the device");
		goto out;
	}
	/* "host" when the provider has no device memory (cpu, or vulkan
	 * without a device): the same code then runs on host values. */
	snprintf(r->where, sizeof(r->where), "%s", ortmk_value_location(xd));
	if (ortmk_io_binding_create(s, &b) ||
	    ortmk_io_binding_bind_output_to_device(b, "y", dev) ||
	    ortmk_io_binding_bind_output_to_device(b, "new_cache", dev)) {
		fail("binding");
		goto out;
	}
	if (bound_steps(s, b, xd, cd, op->steps))
		goto out;
	if (read_back(env, ortmk_io_binding_output(b, "y"), &r->y))
		goto out;
	if (read_back(env, ortmk_io_binding_output(b, "new_cache"), &r->cache)) {
		ortmk_value_destroy(r->y);
		goto out;
	}
	r->ms = now_ms() - t0;
	rc = 0;
out:
	ortmk_io_binding_destroy(b);
	ortmk_value_destroy(xd);
	ortmk_value_destroy(cd);
	ortmk_value_destroy(x);
	ortmk_value_destroy(cache);
	return rc;
}

static double max_diff(const ortmk_value *a, const ortmk_value *b)
{
	const float *pa = ortmk_value_data_const(a), *pb = ortmk_value_data_const(b);
	size_t n = ortmk_value_nbytes(a) / sizeof(float);
	double m = 0;

	if (ortmk_value_nbytes(a) != ortmk_value_nbytes(b))
		return INFINITY;
	for (size_t i = 0; i < n; i++)
		if (!(fabs((double)pa[i] - pb[i]) <= m))
			m = fabs((double)pa[i] - pb[i]);
	return m;
}

static int dump(const char *dir, const result *r)
{
	const ortmk_value *v[2] = {r->y, r->cache};
	const char *names[2] = {"y.bin", "cache.bin"};

	for (int i = 0; i < 2; i++) {
		char path[4096];
		FILE *f;

		snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
		f = fopen(path, "wb");
		if (!f || fwrite(ortmk_value_data_const(v[i]), 1, ortmk_value_nbytes(v[i]), f) !=
			  ortmk_value_nbytes(v[i])) {
			if (f)
				fclose(f);
			fprintf(stderr, "autoregressive: cannot write %s\n", path);
			return 1;
		}
		fclose(f);
	}
	return 0;
}

/* Keeps r in *best when it is the first or the fastest so far. */
static void keep_best(result *best, result *r)
{
	if (best->y && r->ms >= best->ms) {
		ortmk_value_destroy(r->y);
		ortmk_value_destroy(r->cache);
		return;
	}
	ortmk_value_destroy(best->y);
	ortmk_value_destroy(best->cache);
	*best = *r;
}

/* Runs the loops `repeat` times, unbound and bound in turn (so that a
 * change of load on the machine hits both), keeping the fastest of each. */
static int best_of(ortmk_session *s, ortmk_env *env, const char *dev, int64_t h, const opts *o,
		   result *u, result *b)
{
	for (int i = 0; i < o->repeat; i++) {
		result r;

		if (strcmp(o->mode, "bound")) {
			if (loop_unbound(s, env, h, o, &r))
				return 1;
			keep_best(u, &r);
		}
		if (strcmp(o->mode, "unbound")) {
			if (loop_bound(s, env, dev, h, o, &r))
				return 1;
			keep_best(b, &r);
		}
	}
	return 0;
}

static int parse(int argc, char **argv, opts *o)
{
	*o = (opts){.providers = "vulkan,cpu", .mode = "both", .steps = 100, .repeat = 1,
		  .prefill = 1024};
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (strcmp(a, "--json") == 0) {
			o->json = 1;
			continue;
		}
		if (a[0] != '-') {
			o->model = a;
			continue;
		}
		if (!v)
			return fprintf(stderr, "autoregressive: %s needs a value\n", a), 1;
		i++;
		if (strcmp(a, "--provider") == 0)
			o->providers = v;
		else if (strcmp(a, "--steps") == 0)
			o->steps = atoi(v);
		else if (strcmp(a, "--prefill") == 0)
			o->prefill = atoll(v);
		else if (strcmp(a, "--repeat") == 0)
			o->repeat = atoi(v);
		else if (strcmp(a, "--mode") == 0)
			o->mode = v;
		else if (strcmp(a, "--dump") == 0)
			o->dump = v;
		else
			return fprintf(stderr, "autoregressive: unknown option %s\n", a), 1;
	}
	if (!o->model || o->steps < 1 || o->repeat < 1 || o->prefill < 1 ||
	    (strcmp(o->mode, "both") && strcmp(o->mode, "bound") && strcmp(o->mode, "unbound")))
		return fprintf(stderr, "usage: autoregressive MODEL.onnx [--provider LIST] [--steps N] "
			       "[--prefill T] [--mode both|bound|unbound] [--repeat R] [--dump DIR] [--json]\n"), 1;
	return 0;
}

static void report(const opts *o, int64_t h, const result *u, const result *b, double diff)
{
	const char *dev = b->y ? b->where : "-";

	if (o->json) {
		printf("{\"steps\": %d, \"hidden\": %lld, \"prefill\": %lld, \"provider\": \"%s\", "
		       "\"device\": \"%s\"", o->steps, (long long)h, (long long)o->prefill,
		       o->providers, dev);
		if (u->y)
			printf(", \"unbound_ms\": %.3f", u->ms);
		if (b->y)
			printf(", \"bound_ms\": %.3f", b->ms);
		if (u->y && b->y)
			printf(", \"max_abs_diff\": %g", diff);
		printf("}\n");
		return;
	}
	printf("autoregressive: %d steps, H=%lld, cache %lld -> %lld rows, providers %s, bound "
	       "state on %s\n", o->steps, (long long)h, (long long)o->prefill,
	       (long long)(o->prefill + o->steps), o->providers, dev);
	if (u->y)
		printf("  unbound: %9.3f ms (%.3f ms/step)\n", u->ms, u->ms / o->steps);
	if (b->y)
		printf("  bound:   %9.3f ms (%.3f ms/step)\n", b->ms, b->ms / o->steps);
	if (u->y && b->y)
		printf("  bound is %.2fx the speed of unbound; outputs %s: max |bound - unbound| = %g\n",
		       u->ms / b->ms, diff <= 1e-5 ? "match" : "DIFFER", diff);
}

int main(int argc, char **argv)
{
	opts o;
	ortmk_env *env = NULL;
	ortmk_session_options *so = NULL;
	ortmk_session *s = NULL;
	result u = {0}, b = {0};
	const int64_t *dims;
	size_t rank;
	char dev[64];
	double diff = 0;
	int rc = 1;

	if (parse(argc, argv, &o))
		return 2;
	/* Device values go to the first provider of the list. */
	snprintf(dev, sizeof(dev), "%.*s", (int)strcspn(o.providers, ","), o.providers);
	if (ortmk_env_create(&env) || ortmk_session_options_create(&so) ||
	    ortmk_session_options_set(so, "providers", o.providers) ||
	    ortmk_session_create(env, o.model, so, &s)) {
		fail("session");
		goto out;
	}
	if (ortmk_session_input_info(s, 0, NULL, NULL, &dims, &rank) || rank != 2 || dims[1] < 1) {
		fprintf(stderr, "autoregressive: %s is not the autoregressive model (x [1, H])\n",
			o.model);
		goto out;
	}
	if (best_of(s, env, dev, dims[1], &o, &u, &b))
		goto out;
	if (u.y && b.y)
		diff = fmax(max_diff(u.y, b.y), max_diff(u.cache, b.cache));
	report(&o, dims[1], &u, &b, diff);
	if (o.dump && dump(o.dump, b.y ? &b : &u))
		goto out;
	rc = diff <= 1e-5 ? 0 : 1;
out:
	ortmk_value_destroy(u.y);
	ortmk_value_destroy(u.cache);
	ortmk_value_destroy(b.y);
	ortmk_value_destroy(b.cache);
	ortmk_session_destroy(s);
	ortmk_session_options_destroy(so);
	ortmk_env_destroy(env);
	return rc;
}
