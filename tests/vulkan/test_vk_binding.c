/*
 * test_vk_binding: device values, copies, streams and IO binding on
 * ort-ep-vulkan through the public API (docs/DEVICE.md, docs/VULKAN.md).
 *   - copy_tensors host -> vulkan -> host on a stream, bit-exact, with a
 *     fence waited on with a deadline; a device value has no host data;
 *   - outputs bound to the device whose shape depends on data (the model
 *     of gen_binding_model.py): the provider allocates them, a view output
 *     is copied device to device, a computed one written in place; read
 *     back equal to relu(x) and x; rebinding a new shape;
 *   - an int64 input bound as a device value (the provider reads it on the
 *     host) and a float input bound as a device value (used in place);
 *   - the outputs of one run bound as the inputs of the next;
 *   - a run on a stream after a copy enqueued on it, without a wait;
 *   - SIGKILL of ort-ep-vulkan: its device values give
 *     ORTMK_ERR_PROVIDER_DIED naming 'vulkan', host values survive, the
 *     next run restarts the provider.
 * Usage: test_vk_binding MODEL ORT_EP_VULKAN; exit 77 without a Vulkan
 * device (ORT_EP_VULKAN --probe).
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ortmk/ortmk.h"

#define CHECK_LAST_ERROR
#include "../check.h"

#define N 12

static ortmk_env *env;

/* A host float tensor [rows, n / rows]. */
static ortmk_value *host_f32(const float *data, size_t n, int64_t rows)
{
	int64_t d[2] = {rows, (int64_t)n / rows};
	ortmk_value *v = NULL;

	ortmk_value_create_copy(env, ORTMK_FLOAT, d, 2, data, n * sizeof(float), &v);
	return v;
}

/* A device value on vulkan holding a copy of host value h. */
static ortmk_value *to_device(const ortmk_value *h)
{
	ortmk_value *d = NULL;

	if (ortmk_value_create_on(env, "vulkan", ortmk_value_dtype(h), ortmk_value_dims(h),
				  ortmk_value_rank(h), &d))
		return NULL;
	if (ortmk_copy_tensors(env, &h, &d, 1, NULL)) {
		ortmk_value_destroy(d);
		return NULL;
	}
	return d;
}

/* A host copy of v (NULL on failure, the status in *st). */
static ortmk_value *to_host(const ortmk_value *v, ortmk_status *st)
{
	ortmk_value *h = NULL;

	*st = ortmk_value_create(env, ortmk_value_dtype(v), ortmk_value_dims(v), ortmk_value_rank(v),
				 &h);
	if (*st == ORTMK_OK)
		*st = ortmk_copy_tensors(env, &v, &h, 1, NULL);
	if (*st) {
		ortmk_value_destroy(h);
		return NULL;
	}
	return h;
}

static void test_copy_stream(void)
{
	enum { M = 100003 };
	float *a = malloc(M * sizeof(float));
	ortmk_value *h, *d = NULL, *back = NULL;
	ortmk_stream *st = NULL;
	ortmk_fence *f = NULL;
	int64_t dims[2] = {1, M};

	for (int i = 0; i < M; i++)
		a[i] = (float)i * 0.37f - 1000.0f;
	h = host_f32(a, M, 1);
	CHECK(ortmk_stream_create(env, "vulkan", &st) == ORTMK_OK, "stream");
	CHECK(ortmk_value_create_on(env, "vulkan", ORTMK_FLOAT, dims, 2, &d) == ORTMK_OK, "device value");
	CHECK(ortmk_value_create(env, ORTMK_FLOAT, dims, 2, &back) == ORTMK_OK, "host value");
	if (!st || !d || !back)
		goto out;
	CHECK(strcmp(ortmk_value_location(d), "vulkan") == 0 && ortmk_value_data(d) == NULL,
	      "device value at '%s'", ortmk_value_location(d));
	CHECK(ortmk_copy_tensors(env, (const ortmk_value *const[]){h}, (ortmk_value *const[]){d}, 1, st) ==
	      ORTMK_OK, "h2d");
	CHECK(ortmk_copy_tensors(env, (const ortmk_value *const[]){d}, (ortmk_value *const[]){back}, 1, st) ==
	      ORTMK_OK, "d2h");
	CHECK(ortmk_stream_fence(st, &f) == ORTMK_OK, "fence");
	CHECK(f && ortmk_fence_wait(f, 10000) == ORTMK_OK, "fence wait");
	CHECK(memcmp(a, ortmk_value_data(back), M * sizeof(float)) == 0,
	      "host -> vulkan -> host is not bit-exact");
out:
	ortmk_fence_destroy(f);
	ortmk_stream_destroy(st);
	ortmk_value_destroy(back);
	ortmk_value_destroy(d);
	ortmk_value_destroy(h);
	free(a);
}

/* Reads output `name` back and checks its shape and values. */
static void check_output(ortmk_io_binding *b, const char *name, const int64_t *shape,
			 const float *x, int relu)
{
	ortmk_value *v = ortmk_io_binding_output(b, name), *h;
	ortmk_status st;

	CHECK(v && strcmp(ortmk_value_location(v), "vulkan") == 0, "%s not on vulkan", name);
	if (!v)
		return;
	CHECK(ortmk_value_rank(v) == 2 && ortmk_value_dims(v)[0] == shape[0] &&
	      ortmk_value_dims(v)[1] == shape[1], "%s has the wrong shape", name);
	h = to_host(v, &st);
	CHECK(h != NULL, "read back %s", name);
	if (!h)
		return;
	for (int i = 0; i < N; i++) {
		float want = relu && x[i] < 0 ? 0.0f : x[i];

		if (((const float *)ortmk_value_data(h))[i] != want) {
			CHECK(0, "%s[%d] = %g, want %g", name, i, ((const float *)ortmk_value_data(h))[i],
			      want);
			break;
		}
	}
	ortmk_value_destroy(h);
}

static void test_binding(ortmk_session *s, float *x)
{
	int64_t sd[1] = {2}, s34[2] = {3, 4}, s26[2] = {2, 6}, s62[2] = {6, 2};
	ortmk_value *xh = host_f32(x, N, 2), *sh = NULL, *sdev = NULL, *xdev = NULL, *sh2 = NULL;
	ortmk_io_binding *b = NULL;

	ortmk_value_create_copy(env, ORTMK_INT64, sd, 1, s34, sizeof(s34), &sh);
	ortmk_value_create_copy(env, ORTMK_INT64, sd, 1, s26, sizeof(s26), &sh2);
	sdev = to_device(sh);
	xdev = to_device(xh);
	CHECK(xh && sh && sh2 && sdev && xdev, "values");
	CHECK(ortmk_io_binding_create(s, &b) == ORTMK_OK, "binding");
	if (!b || !sdev || !xdev)
		goto out;
	/* Host inputs, outputs allocated on the device by the provider. */
	CHECK(ortmk_io_binding_bind_input(b, "x", xh) == ORTMK_OK &&
	      ortmk_io_binding_bind_input(b, "s", sh) == ORTMK_OK &&
	      ortmk_io_binding_bind_output_to_device(b, "y", "vulkan") == ORTMK_OK &&
	      ortmk_io_binding_bind_output_to_device(b, "v", "vulkan") == ORTMK_OK, "bind");
	CHECK(ortmk_session_run_binding(s, b) == ORTMK_OK, "run 1");
	check_output(b, "y", s34, x, 1);
	check_output(b, "v", s34, x, 0);
	/* Rebind: another shape. */
	CHECK(ortmk_io_binding_bind_input(b, "s", sh2) == ORTMK_OK, "rebind s");
	CHECK(ortmk_session_run_binding(s, b) == ORTMK_OK, "run 2");
	check_output(b, "y", s26, x, 1);
	/* Device inputs: x used in place, s (int64) read on the host. */
	CHECK(ortmk_io_binding_bind_input(b, "x", xdev) == ORTMK_OK &&
	      ortmk_io_binding_bind_input(b, "s", sdev) == ORTMK_OK, "bind device inputs");
	CHECK(ortmk_session_run_binding(s, b) == ORTMK_OK, "run 3");
	check_output(b, "y", s34, x, 1);
	check_output(b, "v", s34, x, 0);
	/* This run's output v (= x, on the device) as the next run's x, with
	 * a new shape: relu of it again. */
	{
		int64_t s62d[2] = {6, 2};
		ortmk_value *s62v = NULL, *vout = NULL;

		ortmk_value_create_copy(env, ORTMK_INT64, sd, 1, s62d, sizeof(s62d), &s62v);
		CHECK(ortmk_io_binding_take_output(b, "v", &vout) == ORTMK_OK, "take v");
		CHECK(vout && ortmk_io_binding_bind_input(b, "x", vout) == ORTMK_OK &&
		      ortmk_io_binding_bind_input(b, "s", s62v) == ORTMK_OK, "chain");
		CHECK(ortmk_session_run_binding(s, b) == ORTMK_OK, "run 4");
		check_output(b, "y", s62, x, 1);
		ortmk_io_binding_clear_inputs(b);
		ortmk_value_destroy(vout);
		ortmk_value_destroy(s62v);
	}
out:
	ortmk_io_binding_destroy(b);
	ortmk_value_destroy(xdev);
	ortmk_value_destroy(sdev);
	ortmk_value_destroy(sh2);
	ortmk_value_destroy(sh);
	ortmk_value_destroy(xh);
}

/* A run given a stream starts after the stream's copies: the input is
 * copied to the device on the stream and the run enqueued at once (no
 * wait by the application), 20 times with new data each time. */
static void test_run_on_stream(ortmk_session *s, const float *x)
{
	int64_t sd[1] = {2}, s34[2] = {3, 4}, dims[2] = {2, 6};
	ortmk_value *sh = NULL, *xh = NULL, *xdev = NULL;
	ortmk_stream *st = NULL;
	ortmk_io_binding *b = NULL;
	float v[N];

	ortmk_value_create_copy(env, ORTMK_INT64, sd, 1, s34, sizeof(s34), &sh);
	ortmk_value_create(env, ORTMK_FLOAT, dims, 2, &xh);
	CHECK(ortmk_stream_create(env, "vulkan", &st) == ORTMK_OK &&
	      ortmk_value_create_on(env, "vulkan", ORTMK_FLOAT, dims, 2, &xdev) == ORTMK_OK &&
	      ortmk_io_binding_create(s, &b) == ORTMK_OK, "stream, value, binding");
	if (!st || !xdev || !b || !sh || !xh)
		goto out;
	CHECK(ortmk_io_binding_set_stream(b, st) == ORTMK_OK &&
	      ortmk_io_binding_bind_input(b, "x", xdev) == ORTMK_OK &&
	      ortmk_io_binding_bind_input(b, "s", sh) == ORTMK_OK &&
	      ortmk_io_binding_bind_output_to_device(b, "y", "vulkan") == ORTMK_OK, "bind");
	for (int k = 0; k < 20 && !failures; k++) {
		for (int i = 0; i < N; i++)
			v[i] = x[i] * (float)(k + 1);
		memcpy(ortmk_value_data(xh), v, sizeof(v));
		CHECK(ortmk_copy_tensors(env, (const ortmk_value *const[]){xh},
					 (ortmk_value *const[]){xdev}, 1, st) == ORTMK_OK, "copy %d", k);
		CHECK(ortmk_session_run_binding(s, b) == ORTMK_OK, "run %d", k);
		check_output(b, "y", s34, v, 1);
	}
out:
	ortmk_io_binding_destroy(b);
	ortmk_stream_destroy(st);
	ortmk_value_destroy(xdev);
	ortmk_value_destroy(xh);
	ortmk_value_destroy(sh);
}

static int vulkan_pid(ortmk_session *s)
{
	for (size_t i = 0; i < ortmk_session_provider_count(s); i++) {
		const char *name;
		size_t nodes;
		int pid;

		if (ortmk_session_provider_nodes(s, i, &name, &nodes) == ORTMK_OK &&
		    strcmp(name, "vulkan") == 0 && ortmk_session_provider_pid(s, i, &pid) == ORTMK_OK)
			return pid;
	}
	return -1;
}

static void test_provider_death(ortmk_session *s, float *x)
{
	ortmk_value *xh = host_f32(x, N, 1), *xdev = to_device(xh), *back;
	int pid = vulkan_pid(s);
	ortmk_status st;

	CHECK(xdev && pid > 0, "device value, vulkan pid %d", pid);
	if (!xdev || pid <= 0)
		goto out;
	kill(pid, SIGKILL);
	usleep(200 * 1000);
	back = to_host(xdev, &st);
	CHECK(back == NULL && st == ORTMK_ERR_PROVIDER_DIED, "a lost device value gave status %d", st);
	CHECK(strstr(ortmk_last_error(), "vulkan") != NULL, "the error does not name vulkan");
	ortmk_value_destroy(back);
	CHECK(memcmp(ortmk_value_data(xh), x, N * sizeof(float)) == 0, "the host value changed");
	/* The provider comes back: new device values work. */
	{
		ortmk_value *again = to_device(xh);

		back = again ? to_host(again, &st) : NULL;
		CHECK(back && memcmp(ortmk_value_data(back), x, N * sizeof(float)) == 0,
		      "no device values after the restart");
		ortmk_value_destroy(back);
		ortmk_value_destroy(again);
	}
out:
	ortmk_value_destroy(xdev);
	ortmk_value_destroy(xh);
}

int main(int argc, char **argv)
{
	ortmk_session_options *o = NULL;
	ortmk_session *s = NULL;
	float x[N];

	char probe[4200];

	if (argc != 3)
		return fprintf(stderr, "usage: test_vk_binding MODEL ORT_EP_VULKAN\n"), 2;
	snprintf(probe, sizeof(probe), "'%s' --probe >/dev/null 2>&1", argv[2]);
	if (system(probe) != 0) {
		printf("SKIP: no Vulkan device\n");
		return 77;
	}
	for (int i = 0; i < N; i++)
		x[i] = (float)(i - 6) * 0.75f;
	if (ortmk_env_create(&env) || ortmk_session_options_create(&o) ||
	    ortmk_session_options_set(o, "providers", "vulkan,cpu") ||
	    ortmk_session_create(env, argv[1], o, &s))
		return fprintf(stderr, "session: %s\n", ortmk_last_error()), 1;
	test_copy_stream();
	test_binding(s, x);
	test_run_on_stream(s, x);
	test_provider_death(s, x);
	ortmk_session_destroy(s);
	ortmk_session_options_destroy(o);
	ortmk_env_destroy(env);
	if (failures)
		return fprintf(stderr, "%d failures\n", failures), 1;
	printf("ok\n");
	return 0;
}
