/*
 * test_device: device values, IO binding, copies, streams and fences
 * through the public API (docs/DEVICE.md), against real provider
 * processes.  Reference values come from numpy (gen_device_model.py).
 *
 * Usage: test_device MODEL_DIR DEVICE PROVIDERS
 *   DEVICE     the provider whose memory values are put in ("vulkan", or
 *              "cpu": host values, or emulated device memory when the
 *              environment has ORTMK_EP_EMULATE_DEVICE=cpu)
 *   PROVIDERS  the session's provider list ("vulkan,cpu")
 * Exits 77 (skip) when DEVICE cannot be started.  With a DEVICE that has no
 * device memory every check still runs: values are host values, copies
 * memcpy, fences complete at once.
 *
 * Also: test_device MODEL_DIR DEVICE PROVIDERS --bench N prints the median
 * latency of N runs of small.onnx bound vs unbound (docs/DEVICE.md), and
 * --hang checks a provider hanging in COPY (10 s device deadline);
 * --loop N runs small.onnx N times with y fed back as x on the device and
 * checks the result against numpy (the trace of it shows the transfers:
 * device_trace_test.py).
 */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "npy.h"
#include "ortmk/ortmk.h"

#define CHECK_LAST_ERROR
#include "../check.h"
static const char *dir, *dev, *providers;
static int on_device;       /* DEVICE has memory of its own */


#define OK(call) do { \
	ortmk_status st_ = (call); \
	if (st_ != ORTMK_OK) { \
		fprintf(stderr, "FAIL %s:%d: %s -> %s: %s\n", __FILE__, __LINE__, #call, \
			ortmk_status_name(st_), ortmk_last_error()); \
		exit(1); \
	} \
} while (0)

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static ortmk_value *load_npy(ortmk_env *env, const char *name)
{
	char path[1024], err[256];
	npy_array a;
	ortmk_value *v;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	if (npy_read(path, &a, err, sizeof(err))) {
		fprintf(stderr, "FAIL: %s\n", err);
		exit(1);
	}
	OK(ortmk_value_create_copy(env, (ortmk_dtype)a.dtype, a.dims, (size_t)a.rank, a.data,
				   a.nbytes, &v));
	npy_free(&a);
	return v;
}

/* A host copy of any value (device values through copy_tensors). */
static ortmk_value *to_host(ortmk_env *env, const ortmk_value *v)
{
	ortmk_value *h;

	OK(ortmk_value_create(env, ortmk_value_dtype(v), ortmk_value_dims(v), ortmk_value_rank(v), &h));
	OK(ortmk_copy_tensors(env, &v, &h, 1, NULL));
	return h;
}

static int same_shape(const ortmk_value *a, const ortmk_value *b)
{
	return ortmk_value_rank(a) == ortmk_value_rank(b) &&
	       memcmp(ortmk_value_dims(a), ortmk_value_dims(b), ortmk_value_rank(a) * 8) == 0;
}

/* |a - b| <= 1e-5 elementwise (tanh differs from numpy's by an ulp). */
static void check_close(ortmk_env *env, const ortmk_value *got, const ortmk_value *ref,
			const char *what)
{
	ortmk_value *h = to_host(env, got);
	const float *a = ortmk_value_data_const(h), *b = ortmk_value_data_const(ref);
	size_t n = ortmk_value_nbytes(ref) / 4;
	double worst = 0;

	CHECK(same_shape(h, ref), "%s: shape differs from numpy's", what);
	for (size_t i = 0; same_shape(h, ref) && i < n; i++)
		worst = fmax(worst, fabs((double)a[i] - (double)b[i]));
	CHECK(worst <= 1e-5, "%s: differs from numpy by %g", what, worst);
	ortmk_value_destroy(h);
}

static void check_identical(ortmk_env *env, const ortmk_value *a, const ortmk_value *b,
			    const char *what)
{
	ortmk_value *ha = to_host(env, a), *hb = to_host(env, b);

	CHECK(same_shape(ha, hb) && ortmk_value_nbytes(ha) == ortmk_value_nbytes(hb) &&
	      memcmp(ortmk_value_data(ha), ortmk_value_data(hb), ortmk_value_nbytes(ha)) == 0,
	      "%s: not bit-identical", what);
	ortmk_value_destroy(ha);
	ortmk_value_destroy(hb);
}

static ortmk_session *open_model(ortmk_env *env, const char *file)
{
	ortmk_session_options *o;
	ortmk_session *s;
	char path[1024];

	snprintf(path, sizeof(path), "%s/%s", dir, file);
	OK(ortmk_session_options_create(&o));
	OK(ortmk_session_options_set(o, "providers", providers));
	OK(ortmk_session_create(env, path, o, &s));
	ortmk_session_options_destroy(o);
	return s;
}

static ortmk_session *open_step(ortmk_env *env)
{
	return open_model(env, "step.onnx");
}

/* SIGKILLs the process serving `name`; -1 when there is none (never
 * kill(-1, ...), which would signal every process we may signal). */
static int kill_provider(ortmk_env *env, const char *name);

static int provider_pid(ortmk_env *env, const char *name)
{
	for (size_t i = 0; i < ortmk_env_provider_count(env); i++) {
		ortmk_provider_status ps = {.struct_size = sizeof(ps)};

		if (ortmk_env_provider_status(env, i, &ps) == ORTMK_OK && strcmp(ps.name, name) == 0)
			return ps.pid;
	}
	return -1;
}

/* 1 once pid has exited (gone, or a zombie the core has not reaped). */
static int exited(int pid)
{
	char path[64], buf[256], *p;
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	if (!(f = fopen(path, "r")))
		return 1;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	p = strrchr(buf, ')');
	return !p || p[1] == 0 || p[2] == 'Z' || p[2] == 'X';
}

/* SIGKILL, then up to 5 s for the process to be gone: on a loaded machine
 * its exit can lag the signal, and a request sent meanwhile fails instead
 * of restarting the provider. */
static int kill_provider(ortmk_env *env, const char *name)
{
	int pid = provider_pid(env, name);

	if (pid <= 0 || kill(pid, SIGKILL))
		return -1;
	for (int i = 0; i < 500 && !exited(pid); i++)
		usleep(10000);
	return 0;
}

/* host -> device -> host, bit-exact, on a stream with a fence, and
 * synchronously; device -> device. */
static void test_copy_roundtrip(ortmk_env *env)
{
	int64_t dims[2] = {37, 129};
	ortmk_value *h, *d, *d2, *back;
	ortmk_stream *st;
	ortmk_fence *f;
	uint8_t *p;

	OK(ortmk_value_create(env, ORTMK_FLOAT, dims, 2, &h));
	p = ortmk_value_data(h);
	/* Every byte pattern, NaNs and denormals included: bits, not floats. */
	for (size_t i = 0; i < ortmk_value_nbytes(h); i++)
		p[i] = (uint8_t)(i * 2654435761u >> 13);
	OK(ortmk_value_create_on(env, dev, ORTMK_FLOAT, dims, 2, &d));
	OK(ortmk_value_create_on(env, dev, ORTMK_FLOAT, dims, 2, &d2));
	OK(ortmk_value_create(env, ORTMK_FLOAT, dims, 2, &back));
	CHECK(strcmp(ortmk_value_location(d), on_device ? dev : "host") == 0,
	      "location '%s'", ortmk_value_location(d));
	CHECK(on_device == (ortmk_value_data(d) == NULL), "device data pointer");
	OK(ortmk_stream_create(env, dev, &st));
	OK(ortmk_copy_tensors(env, (const ortmk_value *const[]){h}, (ortmk_value *const[]){d}, 1, st));
	OK(ortmk_copy_tensors(env, (const ortmk_value *const[]){d}, (ortmk_value *const[]){d2}, 1, st));
	OK(ortmk_copy_tensors(env, (const ortmk_value *const[]){d2}, (ortmk_value *const[]){back}, 1, st));
	OK(ortmk_stream_fence(st, &f));
	OK(ortmk_fence_wait(f, 10000));
	CHECK(memcmp(ortmk_value_data(h), ortmk_value_data(back), ortmk_value_nbytes(h)) == 0,
	      "host -> device -> device -> host is not bit-exact");
	ortmk_fence_destroy(f);
	memset(ortmk_value_data(back), 0, ortmk_value_nbytes(back));
	OK(ortmk_copy_tensors(env, (const ortmk_value *const[]){d}, (ortmk_value *const[]){back}, 1, NULL));
	CHECK(memcmp(ortmk_value_data(h), ortmk_value_data(back), ortmk_value_nbytes(h)) == 0,
	      "synchronous device -> host is not bit-exact");
	OK(ortmk_stream_synchronize(st, 1000));
	/* Wrong sizes and types are refused with a message. */
	{
		int64_t other[1] = {5};
		ortmk_value *small;

		OK(ortmk_value_create(env, ORTMK_FLOAT, other, 1, &small));
		CHECK(ortmk_copy_tensors(env, (const ortmk_value *const[]){small},
					 (ortmk_value *const[]){d}, 1, st) == ORTMK_ERR_INVALID_ARGUMENT &&
		      strstr(ortmk_last_error(), "bytes"), "size mismatch accepted");
		ortmk_value_destroy(small);
	}
	/* A device value cannot be put in a (host) sequence directly. */
	if (on_device) {
		ortmk_value *seq = NULL;

		CHECK(ortmk_value_create_sequence(env, ORTMK_FLOAT, (const ortmk_value *const[]){d}, 1,
						  &seq) == ORTMK_ERR_INVALID_ARGUMENT &&
		      strstr(ortmk_last_error(), "copy it to a host value"), "sequence of a device value");
		ortmk_value_destroy(seq);
	}
	ortmk_stream_destroy(st);
	ortmk_value_destroy(h);
	ortmk_value_destroy(d);
	ortmk_value_destroy(d2);
	ortmk_value_destroy(back);
}

/* The loop: outputs bound to the device, fed back as the next inputs
 * without a copy; the cache grows (planned per step), `pos` has a
 * data-dependent shape (bound to the device, allocated by the provider). */
static void test_bind_loop(ortmk_env *env)
{
	ortmk_session *s = open_step(env);
	ortmk_value *x = load_npy(env, "x0.npy"), *past = load_npy(env, "past0.npy");
	ortmk_value *ry = load_npy(env, "y_final.npy"), *rp = load_npy(env, "present_final.npy");
	ortmk_value *rpos = load_npy(env, "pos_final.npy"), *y1 = load_npy(env, "y_1.npy");
	ortmk_value *outs[3], *hy, *taken = NULL;
	const char *in_names[] = {"x", "past"}, *out_names[] = {"y", "present", "pos"};
	ortmk_io_binding *b;

	OK(ortmk_io_binding_create(s, &b));
	CHECK(ortmk_session_run_binding(s, b) == ORTMK_ERR_INPUT &&
	      strstr(ortmk_last_error(), "not bound"), "run with nothing bound");
	OK(ortmk_io_binding_bind_input(b, "x", x));
	OK(ortmk_io_binding_bind_input(b, "past", past));
	CHECK(ortmk_io_binding_bind_output_to_device(b, "nope", dev) == ORTMK_ERR_INPUT, "unknown output");
	for (int i = 0; i < 3; i++)
		OK(ortmk_io_binding_bind_output_to_device(b, out_names[i], dev));
	CHECK(ortmk_io_binding_output(b, "y") == NULL, "an output before the first run");
	for (int step = 1; step <= 5; step++) {
		OK(ortmk_session_run_binding(s, b));
		for (int i = 0; i < 3; i++)
			CHECK(strcmp(ortmk_value_location(ortmk_io_binding_output(b, out_names[i])),
				     on_device ? dev : "host") == 0, "step %d: %s is on %s", step,
			      out_names[i], ortmk_value_location(ortmk_io_binding_output(b, out_names[i])));
		if (step == 1)
			check_close(env, ortmk_io_binding_output(b, "y"), y1, "y after one step");
		/* Rebind: this run's outputs are the next run's inputs. */
		OK(ortmk_io_binding_bind_input(b, "x", ortmk_io_binding_output(b, "y")));
		OK(ortmk_io_binding_bind_input(b, "past", ortmk_io_binding_output(b, "present")));
	}
	OK(ortmk_io_binding_synchronize_outputs(b, 10000));
	check_close(env, ortmk_io_binding_output(b, "y"), ry, "y after 5 steps");
	check_close(env, ortmk_io_binding_output(b, "present"), rp, "present (grown) after 5 steps");
	check_close(env, ortmk_io_binding_output(b, "pos"), rpos, "pos (data-dependent shape)");
	CHECK(ortmk_value_dims(ortmk_io_binding_output(b, "present"))[1] == 7, "present has 7 rows");
	/* take_output: ownership moves to the caller; the next run makes a new one. */
	OK(ortmk_io_binding_take_output(b, "present", &taken));
	CHECK(ortmk_io_binding_output(b, "present") == NULL, "taken output still there");
	check_close(env, taken, rp, "a taken output");
	ortmk_value_destroy(taken);
	taken = NULL;
	/* The same inputs without a binding give bit-identical outputs. */
	ortmk_io_binding_clear_inputs(b);
	OK(ortmk_io_binding_bind_input(b, "x", x));
	OK(ortmk_io_binding_bind_input(b, "past", past));
	OK(ortmk_session_run_binding(s, b));
	OK(ortmk_session_run(s, in_names, (const ortmk_value *const[]){x, past}, 2, out_names, 3, outs));
	for (int i = 0; i < 3; i++) {
		check_identical(env, ortmk_io_binding_output(b, out_names[i]), outs[i], out_names[i]);
		ortmk_value_destroy(outs[i]);
	}
	/* An output into a caller's host value: written in place. */
	OK(ortmk_value_create(env, ORTMK_FLOAT, (int64_t[]){1, 8}, 2, &hy));
	OK(ortmk_io_binding_bind_output(b, "y", hy));
	OK(ortmk_session_run_binding(s, b));
	CHECK(ortmk_io_binding_output(b, "y") == hy, "bound value is the output");
	check_close(env, hy, y1, "y into a bound host value");
	CHECK(ortmk_io_binding_take_output(b, "y", &taken) == ORTMK_ERR_INVALID_ARGUMENT,
	      "took the caller's own value");
	ortmk_value_destroy(taken);
	taken = NULL;
	/* One value as an input and an output of the same run: refused. */
	OK(ortmk_io_binding_bind_output(b, "y", x));
	CHECK(ortmk_session_run_binding(s, b) == ORTMK_ERR_INPUT &&
	      strstr(ortmk_last_error(), "input 'x' and output 'y'"), "aliased input and output");
	/* A bound value of the wrong shape is an input error. */
	{
		ortmk_value *bad;

		OK(ortmk_value_create(env, ORTMK_FLOAT, (int64_t[]){1, 9}, 2, &bad));
		OK(ortmk_io_binding_bind_output(b, "y", bad));
		CHECK(ortmk_session_run_binding(s, b) == ORTMK_ERR_INPUT, "wrong-shape output accepted");
		ortmk_value_destroy(bad);
	}
	ortmk_io_binding_clear_outputs(b);
	ortmk_io_binding_destroy(b);
	ortmk_value_destroy(hy);
	ortmk_value_destroy(x);
	ortmk_value_destroy(past);
	ortmk_value_destroy(ry);
	ortmk_value_destroy(rp);
	ortmk_value_destroy(rpos);
	ortmk_value_destroy(y1);
	ortmk_session_destroy(s);
}

/* Inputs copied to the device on a stream; the run is ordered after. */
static void test_stream_run(ortmk_env *env)
{
	ortmk_session *s = open_step(env);
	ortmk_value *x = load_npy(env, "x0.npy"), *past = load_npy(env, "past0.npy");
	ortmk_value *y1 = load_npy(env, "y_1.npy"), *dx, *dpast;
	ortmk_io_binding *b;
	ortmk_stream *st;

	OK(ortmk_stream_create(env, dev, &st));
	OK(ortmk_value_create_on(env, dev, ORTMK_FLOAT, ortmk_value_dims(x), 2, &dx));
	OK(ortmk_value_create_on(env, dev, ORTMK_FLOAT, ortmk_value_dims(past), 3, &dpast));
	OK(ortmk_copy_tensors(env, (const ortmk_value *const[]){x, past},
			      (ortmk_value *const[]){dx, dpast}, 2, st));
	OK(ortmk_io_binding_create(s, &b));
	OK(ortmk_io_binding_set_stream(b, st));
	OK(ortmk_io_binding_bind_input(b, "x", dx));
	OK(ortmk_io_binding_bind_input(b, "past", dpast));
	OK(ortmk_io_binding_bind_output_to_device(b, "y", "host"));
	OK(ortmk_session_run_binding(s, b));
	CHECK(strcmp(ortmk_value_location(ortmk_io_binding_output(b, "y")), "host") == 0, "y on host");
	check_close(env, ortmk_io_binding_output(b, "y"), y1, "y from inputs copied on a stream");
	OK(ortmk_io_binding_synchronize_inputs(b, 1000));
	ortmk_io_binding_destroy(b);
	ortmk_stream_destroy(st);
	ortmk_value_destroy(dx);
	ortmk_value_destroy(dpast);
	ortmk_value_destroy(x);
	ortmk_value_destroy(past);
	ortmk_value_destroy(y1);
	ortmk_session_destroy(s);
}

/* A copy whose fence the provider never signals: the wait ends at its
 * deadline; killing the provider then fails the fence at once. */
static void test_fence_deadline(void)
{
	char fault[64];
	ortmk_env *env;
	ortmk_value *h, *d;
	ortmk_stream *st;
	ortmk_fence *f;
	double t0, ms;
	ortmk_status rc;

	snprintf(fault, sizeof(fault), "%s/nosignal-after:copy:1", dev);
	setenv("ORTMK_EP_FAULT", fault, 1);
	OK(ortmk_env_create(&env));
	OK(ortmk_value_create(env, ORTMK_FLOAT, (int64_t[]){64}, 1, &h));
	OK(ortmk_value_create_on(env, dev, ORTMK_FLOAT, (int64_t[]){64}, 1, &d));
	OK(ortmk_stream_create(env, dev, &st));
	OK(ortmk_copy_tensors(env, (const ortmk_value *const[]){h}, (ortmk_value *const[]){d}, 1, st));
	OK(ortmk_stream_fence(st, &f));
	t0 = now_ms();
	rc = ortmk_fence_wait(f, 150);
	ms = now_ms() - t0;
	if (on_device) {
		CHECK(rc == ORTMK_ERR_TIMEOUT, "fence of a stuck copy: %s", ortmk_status_name(rc));
		CHECK(ms >= 140 && ms < 1000, "deadline of 150 ms took %.1f ms", ms);
		CHECK(ortmk_fence_wait(f, 0) == ORTMK_ERR_TIMEOUT, "a zero timeout is a check");
		kill_provider(env, dev);
		t0 = now_ms();
		rc = ortmk_fence_wait(f, 10000);
		ms = now_ms() - t0;
		CHECK(rc == ORTMK_ERR_PROVIDER_DIED && strstr(ortmk_last_error(), dev),
		      "fence of a dead provider: %s", ortmk_status_name(rc));
		CHECK(ms < 1000, "death noticed after %.1f ms", ms);
		CHECK(ortmk_stream_synchronize(st, 1000) == ORTMK_ERR_PROVIDER_DIED, "stream of a dead provider");
	} else {
		CHECK(rc == ORTMK_OK && ms < 100, "host copy: fence %s after %.1f ms",
		      ortmk_status_name(rc), ms);
	}
	ortmk_fence_destroy(f);
	ortmk_stream_destroy(st);
	ortmk_value_destroy(d);
	ortmk_value_destroy(h);
	ortmk_env_destroy(env);
	unsetenv("ORTMK_EP_FAULT");
}

/* A device value outlives its provider process: any use says so; host
 * values and the session go on. */
static void test_death(ortmk_env *env)
{
	ortmk_session *s = open_step(env);
	ortmk_value *x = load_npy(env, "x0.npy"), *past = load_npy(env, "past0.npy");
	ortmk_value *y1 = load_npy(env, "y_1.npy"), *dx, *back, *out[1];
	const char *in_names[] = {"x", "past"}, *out_names[] = {"y"};
	ortmk_io_binding *b;
	ortmk_status rc;

	OK(ortmk_value_create_on(env, dev, ORTMK_FLOAT, ortmk_value_dims(x), 2, &dx));
	OK(ortmk_copy_tensors(env, (const ortmk_value *const[]){x}, (ortmk_value *const[]){dx}, 1, NULL));
	OK(ortmk_value_create(env, ORTMK_FLOAT, ortmk_value_dims(x), 2, &back));
	CHECK(kill_provider(env, dev) == 0, "kill %s", dev);
	usleep(50000);
	rc = ortmk_copy_tensors(env, (const ortmk_value *const[]){dx}, (ortmk_value *const[]){back}, 1, NULL);
	if (on_device) {
		CHECK(rc == ORTMK_ERR_PROVIDER_DIED && strstr(ortmk_last_error(), "lost") &&
		      strstr(ortmk_last_error(), dev), "copy from a lost device value: %s",
		      ortmk_status_name(rc));
		OK(ortmk_io_binding_create(s, &b));
		OK(ortmk_io_binding_bind_input(b, "x", dx));
		OK(ortmk_io_binding_bind_input(b, "past", past));
		OK(ortmk_io_binding_bind_output_to_device(b, "y", dev));
		rc = ortmk_session_run_binding(s, b);
		CHECK(rc == ORTMK_ERR_PROVIDER_DIED && strstr(ortmk_last_error(), "lost"),
		      "run on a lost device value: %s", ortmk_status_name(rc));
		ortmk_io_binding_destroy(b);
	} else {
		CHECK(rc == ORTMK_OK, "host values survive: %s", ortmk_status_name(rc));
	}
	/* Host values are intact; a run restarts the provider and is right. */
	OK(ortmk_session_run(s, in_names, (const ortmk_value *const[]){x, past}, 2, out_names, 1, out));
	check_close(env, out[0], y1, "y after the provider's restart");
	ortmk_value_destroy(out[0]);
	ortmk_value_destroy(dx);     /* destroying a lost value is fine */
	ortmk_value_destroy(back);
	ortmk_value_destroy(x);
	ortmk_value_destroy(past);
	ortmk_value_destroy(y1);
	ortmk_session_destroy(s);
}

/* A provider that hangs in COPY: the copy fails with ORTMK_ERR_TIMEOUT at
 * the 10 s device deadline, the process is killed, its device values are
 * lost, and host work goes on (a restarted provider). */
static void test_copy_hang(void)
{
	char fault[64];
	ortmk_env *env;
	ortmk_session *s;
	ortmk_value *h, *d, *x, *past, *y1, *out[1];
	const char *in_names[] = {"x", "past"}, *out_names[] = {"y"};
	double t0, ms;
	ortmk_status rc;

	snprintf(fault, sizeof(fault), "%s/hang-after:copy:1", dev);
	setenv("ORTMK_EP_FAULT", fault, 1);
	OK(ortmk_env_create(&env));
	OK(ortmk_value_create(env, ORTMK_FLOAT, (int64_t[]){16}, 1, &h));
	OK(ortmk_value_create_on(env, dev, ORTMK_FLOAT, (int64_t[]){16}, 1, &d));
	t0 = now_ms();
	rc = ortmk_copy_tensors(env, (const ortmk_value *const[]){h}, (ortmk_value *const[]){d}, 1, NULL);
	ms = now_ms() - t0;
	CHECK(rc == ORTMK_ERR_TIMEOUT && strstr(ortmk_last_error(), "no reply to COPY"),
	      "hung copy: %s", ortmk_status_name(rc));
	CHECK(ms >= 9900 && ms < 13000, "hung copy failed after %.0f ms", ms);
	rc = ortmk_copy_tensors(env, (const ortmk_value *const[]){d}, (ortmk_value *const[]){h}, 1, NULL);
	CHECK(rc == ORTMK_ERR_PROVIDER_DIED && strstr(ortmk_last_error(), "lost"),
	      "device value of a killed provider: %s", ortmk_status_name(rc));
	unsetenv("ORTMK_EP_FAULT");
	s = open_step(env);
	x = load_npy(env, "x0.npy");
	past = load_npy(env, "past0.npy");
	y1 = load_npy(env, "y_1.npy");
	OK(ortmk_session_run(s, in_names, (const ortmk_value *const[]){x, past}, 2, out_names, 1, out));
	check_close(env, out[0], y1, "y after a hung copy");
	ortmk_value_destroy(out[0]);
	ortmk_value_destroy(x);
	ortmk_value_destroy(past);
	ortmk_value_destroy(y1);
	ortmk_session_destroy(s);
	ortmk_value_destroy(d);
	ortmk_value_destroy(h);
	ortmk_env_destroy(env);
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* Median ms of n runs each of small.onnx, interleaved so that both see the
 * same machine (alternating which goes first): unbound (a host input,
 * ortmk_session_run copying the output into a new host value) and bound
 * (the input a device value copied there once, the output bound to DEVICE). */
static void bench(ortmk_env *env, int n)
{
	ortmk_session *s = open_model(env, "small.onnx");
	ortmk_value *x = load_npy(env, "small_x0.npy"), *dx, *out;
	const char *in_names[] = {"x"}, *out_names[] = {"y"};
	double *tu = calloc((size_t)n, sizeof(double)), *tb = calloc((size_t)n, sizeof(double));
	ortmk_io_binding *b;

	OK(ortmk_value_create_on(env, dev, ORTMK_FLOAT, ortmk_value_dims(x), 2, &dx));
	OK(ortmk_copy_tensors(env, (const ortmk_value *const[]){x}, (ortmk_value *const[]){dx}, 1, NULL));
	OK(ortmk_io_binding_create(s, &b));
	OK(ortmk_io_binding_bind_input(b, "x", dx));
	OK(ortmk_io_binding_bind_output_to_device(b, "y", dev));
	for (int i = -5; i < n; i++) {
		double t0 = now_ms(), t1, t2;

		if (i & 1) {
			OK(ortmk_session_run_binding(s, b));
			t1 = now_ms();
			OK(ortmk_session_run(s, in_names, (const ortmk_value *const[]){x}, 1, out_names, 1, &out));
			t2 = now_ms();
		} else {
			OK(ortmk_session_run(s, in_names, (const ortmk_value *const[]){x}, 1, out_names, 1, &out));
			t1 = now_ms();
			OK(ortmk_session_run_binding(s, b));
			t2 = now_ms();
		}
		ortmk_value_destroy(out);
		if (i >= 0) {
			tu[i] = i & 1 ? t2 - t1 : t1 - t0;
			tb[i] = i & 1 ? t1 - t0 : t2 - t1;
		}
	}
	qsort(tu, (size_t)n, sizeof(double), cmp_d);
	qsort(tb, (size_t)n, sizeof(double), cmp_d);
	printf("small.onnx on %s: unbound median %.3f ms; bound (input and output on %s) median %.3f ms; %d runs each\n",
	       providers, tu[n / 2], ortmk_value_location(ortmk_io_binding_output(b, "y")), tb[n / 2], n);
	ortmk_io_binding_destroy(b);
	ortmk_value_destroy(dx);
	ortmk_value_destroy(x);
	ortmk_session_destroy(s);
	free(tu);
	free(tb);
}

/* small.onnx n times, y fed back as x, everything on DEVICE: the only
 * transfers are the first copy in and the last copy out. */
static void loop(ortmk_env *env, int n)
{
	ortmk_session *s = open_model(env, "small.onnx");
	ortmk_value *x = load_npy(env, "small_x0.npy"), *ref = load_npy(env, "small_y_loop.npy"), *dx;
	ortmk_io_binding *b;

	OK(ortmk_value_create_on(env, dev, ORTMK_FLOAT, ortmk_value_dims(x), 2, &dx));
	OK(ortmk_copy_tensors(env, (const ortmk_value *const[]){x}, (ortmk_value *const[]){dx}, 1, NULL));
	OK(ortmk_io_binding_create(s, &b));
	OK(ortmk_io_binding_bind_input(b, "x", dx));
	OK(ortmk_io_binding_bind_output_to_device(b, "y", dev));
	for (int i = 0; i < n; i++) {
		OK(ortmk_session_run_binding(s, b));
		OK(ortmk_io_binding_bind_input(b, "x", ortmk_io_binding_output(b, "y")));
	}
	if (n == 20) {
		ortmk_value *h = to_host(env, ortmk_io_binding_output(b, "y"));
		const float *a = ortmk_value_data_const(h), *r = ortmk_value_data_const(ref);
		double worst = 0;

		for (size_t i = 0; i < ortmk_value_nbytes(ref) / 4; i++)
			worst = fmax(worst, fabs((double)a[i] - (double)r[i]));
		CHECK(worst <= 1e-4, "small loop: differs from numpy by %g", worst);
		ortmk_value_destroy(h);
	}
	ortmk_io_binding_destroy(b);
	ortmk_value_destroy(dx);
	ortmk_value_destroy(x);
	ortmk_value_destroy(ref);
	ortmk_session_destroy(s);
}

int main(int argc, char **argv)
{
	ortmk_env *env;
	ortmk_value *probe;

	if (argc < 4) {
		fprintf(stderr, "usage: test_device MODEL_DIR DEVICE PROVIDERS [--bench N]\n");
		return 2;
	}
	dir = argv[1];
	dev = argv[2];
	providers = argv[3];
	OK(ortmk_env_create(&env));
	if (ortmk_value_create_on(env, dev, ORTMK_FLOAT, (int64_t[]){1}, 1, &probe) != ORTMK_OK) {
		printf("SKIP: provider '%s' unavailable: %s\n", dev, ortmk_last_error());
		ortmk_env_destroy(env);
		return 77;
	}
	on_device = strcmp(ortmk_value_location(probe), "host") != 0;
	ortmk_value_destroy(probe);
	if (strcmp(dev, "cpu") != 0 && !on_device) {
		printf("SKIP: provider '%s' has no device memory yet\n", dev);
		ortmk_env_destroy(env);
		return 77;
	}
	if (argc == 6 && strcmp(argv[4], "--bench") == 0) {
		bench(env, atoi(argv[5]));
		ortmk_env_destroy(env);
		return 0;
	}
	if (argc == 5 && strcmp(argv[4], "--hang") == 0) {
		ortmk_env_destroy(env);
		if (!on_device) {
			printf("SKIP: '%s' has no device memory: nothing to hang in\n", dev);
			return 77;
		}
		test_copy_hang();
		printf("%s\n", failures ? "hung-copy checks failed" : "hung-copy checks passed");
		return failures ? 1 : 0;
	}
	if (argc == 6 && strcmp(argv[4], "--loop") == 0) {
		loop(env, atoi(argv[5]));
		ortmk_env_destroy(env);
		return failures ? 1 : 0;
	}
	printf("device '%s' (%s), providers %s\n", dev, on_device ? "device memory" : "host memory",
	       providers);
	test_copy_roundtrip(env);
	test_bind_loop(env);
	test_stream_run(env);
	test_death(env);
	ortmk_env_destroy(env);
	test_fence_deadline();
	if (failures)
		fprintf(stderr, "%d check(s) failed\n", failures);
	else
		printf("all device checks passed\n");
	return failures ? 1 : 0;
}
