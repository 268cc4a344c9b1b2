/*
 * test_cuda_api: CUDA device values through the public API (docs/DEVICE.md)
 * against a real ort-ep-cuda process.
 *
 *   test_cuda_api nodevice MODEL   ORTMK_CUDA_DEVICE names no device (works
 *                                  on any machine): a device value on cuda is
 *                                  refused with a message naming the reason,
 *                                  and a cuda,cpu session still runs (on cpu)
 *   test_cuda_api gpu MODEL        host -> device -> device -> host copies on
 *                                  a stream, bit-exact (small, unaligned and
 *                                  20 MiB), fences; the example CNN run with
 *                                  its input and output bound to the device
 *                                  equals the plain run and cpu's (rtol 1e-3);
 *                                  exit 77 (skipped) when there is no device
 *
 * MODEL is examples/cnn_example.onnx (input "image" [1,3,32,32], output
 * "probs" [1,10]).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ortmk/ortmk.h"

#define CHECK_LAST_ERROR
#include "../check.h"

#define WAIT_MS 60000

static const int64_t image_dims[4] = {1, 3, 32, 32};

static void fill(float *p, size_t n, uint32_t seed)
{
	for (size_t i = 0; i < n; i++) {
		seed = seed * 1664525u + 1013904223u;
		p[i] = (float)(seed >> 8) / (float)(1u << 24) * 2.0f - 1.0f;
	}
}

static ortmk_session *open_session(ortmk_env *env, const char *model, const char *providers)
{
	ortmk_session_options *o = NULL;
	ortmk_session *s = NULL;

	if (ortmk_session_options_create(&o) == ORTMK_OK &&
	    ortmk_session_options_set(o, "providers", providers) == ORTMK_OK &&
	    ortmk_session_options_set(o, "threads", "1") == ORTMK_OK)
		ortmk_session_create(env, model, o, &s);
	ortmk_session_options_destroy(o);
	return s;
}

/* probs of one plain run on `image`; NULL on failure. */
static ortmk_value *plain_run(ortmk_session *s, const ortmk_value *image)
{
	const char *in = "image", *out = "probs";
	ortmk_value *probs = NULL;

	if (ortmk_session_run(s, &in, &image, 1, &out, 1, &probs) != ORTMK_OK)
		return NULL;
	return probs;
}

static size_t nodes_on(const ortmk_session *s, const char *provider)
{
	for (size_t i = 0; i < ortmk_session_provider_count(s); i++) {
		const char *name;
		size_t n;

		if (ortmk_session_provider_nodes(s, i, &name, &n) == ORTMK_OK && !strcmp(name, provider))
			return n;
	}
	return 0;
}

/* ---- no device ----------------------------------------------------------- */

static void no_device(ortmk_env *env, const char *model, const ortmk_value *image)
{
	int64_t dims[1] = {16};
	ortmk_value *v = NULL, *probs;
	ortmk_session *s;
	ortmk_status st;

	st = ortmk_value_create_on(env, "cuda", ORTMK_FLOAT, dims, 1, &v);
	CHECK(st != ORTMK_OK && !v, "a device value on cuda without a device: status %s",
	      ortmk_status_name(st));
	CHECK(strstr(ortmk_last_error(), "no CUDA device") != NULL,
	      "the refusal does not say why: '%s'", ortmk_last_error());
	ortmk_value_destroy(v);
	s = open_session(env, model, "cuda,cpu");
	CHECK(s != NULL, "cuda,cpu session");
	if (!s)
		return;
	CHECK(nodes_on(s, "cuda") == 0 && nodes_on(s, "cpu") == 12,
	      "nodes: cuda %zu, cpu %zu (want 0 and 12)", nodes_on(s, "cuda"), nodes_on(s, "cpu"));
	probs = plain_run(s, image);
	CHECK(probs != NULL, "run on cuda,cpu without a device");
	ortmk_value_destroy(probs);
	ortmk_session_destroy(s);
}

/* ---- with a GPU ---------------------------------------------------------- */

/* host -> device -> device -> host of n floats on `st`, bit-exact. */
static void round_trip(ortmk_env *env, ortmk_stream *st, size_t n, uint32_t seed)
{
	int64_t dims[1] = {(int64_t)n};
	ortmk_value *h = NULL, *d1 = NULL, *d2 = NULL, *back = NULL;
	ortmk_fence *f = NULL;
	ortmk_status rc;

	if (ortmk_value_create(env, ORTMK_FLOAT, dims, 1, &h) ||
	    ortmk_value_create(env, ORTMK_FLOAT, dims, 1, &back) ||
	    ortmk_value_create_on(env, "cuda", ORTMK_FLOAT, dims, 1, &d1) ||
	    ortmk_value_create_on(env, "cuda", ORTMK_FLOAT, dims, 1, &d2)) {
		CHECK(0, "values of %zu floats", n);
		goto out;
	}
	CHECK(!strcmp(ortmk_value_location(d1), "cuda") && !ortmk_value_data(d1),
	      "device value location '%s'", ortmk_value_location(d1));
	fill(ortmk_value_data(h), n, seed);
	memset(ortmk_value_data(back), 0, n * 4);
	rc = ortmk_copy_tensors(env, (const ortmk_value *const[]){h}, (ortmk_value *const[]){d1}, 1, st);
	if (rc == ORTMK_OK)
		rc = ortmk_copy_tensors(env, (const ortmk_value *const[]){d1},
					(ortmk_value *const[]){d2}, 1, st);
	if (rc == ORTMK_OK)
		rc = ortmk_copy_tensors(env, (const ortmk_value *const[]){d2},
					(ortmk_value *const[]){back}, 1, st);
	CHECK(rc == ORTMK_OK, "copies of %zu floats", n);
	rc = ortmk_stream_fence(st, &f);
	CHECK(rc == ORTMK_OK && ortmk_fence_wait(f, WAIT_MS) == ORTMK_OK, "fence after %zu floats", n);
	CHECK(!memcmp(ortmk_value_data(h), ortmk_value_data(back), n * 4),
	      "%zu floats came back different", n);
out:
	ortmk_fence_destroy(f);
	ortmk_value_destroy(h);
	ortmk_value_destroy(back);
	ortmk_value_destroy(d1);
	ortmk_value_destroy(d2);
}

static int close_to(const float *a, const float *b, size_t n, double rtol, double atol)
{
	for (size_t i = 0; i < n; i++)
		if (!(fabs((double)a[i] - b[i]) <= atol + rtol * fabs((double)b[i])))
			return 0;
	return 1;
}

/* The CNN with the image on the device and probs left there. */
static void bound_run(ortmk_env *env, ortmk_session *s, ortmk_stream *st,
		      const ortmk_value *image, const float *want)
{
	int64_t pdims[2] = {1, 10};
	ortmk_value *dimg = NULL, *probs = NULL, *host = NULL;
	ortmk_io_binding *b = NULL;

	if (ortmk_value_create_on(env, "cuda", ORTMK_FLOAT, image_dims, 4, &dimg) ||
	    ortmk_value_create(env, ORTMK_FLOAT, pdims, 2, &host) ||
	    ortmk_io_binding_create(s, &b)) {
		CHECK(0, "binding setup");
		goto out;
	}
	CHECK(ortmk_copy_tensors(env, (const ortmk_value *const[]){image},
				 (ortmk_value *const[]){dimg}, 1, st) == ORTMK_OK, "image upload");
	CHECK(ortmk_io_binding_set_stream(b, st) == ORTMK_OK, "binding stream");
	CHECK(ortmk_io_binding_bind_input(b, "image", dimg) == ORTMK_OK, "bind image");
	CHECK(ortmk_io_binding_bind_output_to_device(b, "probs", "cuda") == ORTMK_OK, "bind probs");
	for (int i = 0; i < 3; i++)
		CHECK(ortmk_session_run_binding(s, b) == ORTMK_OK, "bound run %d", i);
	probs = ortmk_io_binding_output(b, "probs");
	CHECK(probs && !strcmp(ortmk_value_location(probs), "cuda"),
	      "probs is on '%s'", probs ? ortmk_value_location(probs) : "(none)");
	if (probs) {
		CHECK(ortmk_copy_tensors(env, (const ortmk_value *const[]){probs},
					 (ortmk_value *const[]){host}, 1, NULL) == ORTMK_OK,
		      "probs download");
		CHECK(close_to(ortmk_value_data(host), want, 10, 1e-5, 1e-7),
		      "bound run differs from the plain run");
	}
out:
	ortmk_io_binding_destroy(b);
	ortmk_value_destroy(host);
	ortmk_value_destroy(dimg);
}

static int with_gpu(ortmk_env *env, const char *model, const ortmk_value *image)
{
	int64_t dims[1] = {4};
	ortmk_value *probe = NULL, *p_cuda = NULL, *p_cpu = NULL;
	ortmk_session *s = NULL, *cpu = NULL;
	ortmk_stream *st = NULL;

	if (ortmk_value_create_on(env, "cuda", ORTMK_FLOAT, dims, 1, &probe) != ORTMK_OK) {
		if (strstr(ortmk_last_error(), "no CUDA device")) {
			printf("skip: %s\n", ortmk_last_error());
			return 77;
		}
		CHECK(0, "a device value on cuda");
		return 1;
	}
	ortmk_value_destroy(probe);
	CHECK(ortmk_stream_create(env, "cuda", &st) == ORTMK_OK, "stream");
	if (st) {
		round_trip(env, st, 1000, 1);
		round_trip(env, st, 7, 2);
		round_trip(env, st, 5 << 20, 3);
	}
	s = open_session(env, model, "cuda,cpu");
	cpu = open_session(env, model, "cpu");
	CHECK(s && cpu, "sessions");
	if (s && cpu) {
		CHECK(nodes_on(s, "cuda") > 0, "nothing runs on cuda");
		p_cuda = plain_run(s, image);
		p_cpu = plain_run(cpu, image);
		CHECK(p_cuda && p_cpu, "plain runs");
	}
	if (p_cuda && p_cpu) {
		CHECK(close_to(ortmk_value_data(p_cuda), ortmk_value_data(p_cpu), 10, 1e-3, 1e-5),
		      "cuda,cpu differs from cpu");
		if (st)
			bound_run(env, s, st, image, ortmk_value_data(p_cuda));
	}
	ortmk_value_destroy(p_cuda);
	ortmk_value_destroy(p_cpu);
	ortmk_session_destroy(s);
	ortmk_session_destroy(cpu);
	ortmk_stream_destroy(st);
	return failures ? 1 : 0;
}

int main(int argc, char **argv)
{
	ortmk_env *env = NULL;
	ortmk_value *image = NULL;
	int rc;

	if (argc != 3 || (strcmp(argv[1], "nodevice") && strcmp(argv[1], "gpu"))) {
		fprintf(stderr, "usage: test_cuda_api nodevice|gpu MODEL\n");
		return 2;
	}
	if (!strcmp(argv[1], "nodevice"))
		setenv("ORTMK_CUDA_DEVICE", "99", 1);
	if (ortmk_env_create(&env) != ORTMK_OK ||
	    ortmk_value_create(env, ORTMK_FLOAT, image_dims, 4, &image) != ORTMK_OK) {
		fprintf(stderr, "FAIL: environment: %s\n", ortmk_last_error());
		return 1;
	}
	fill(ortmk_value_data(image), 3 * 32 * 32, 7);
	if (!strcmp(argv[1], "nodevice")) {
		no_device(env, argv[2], image);
		rc = failures ? 1 : 0;
	} else {
		rc = with_gpu(env, argv[2], image);
	}
	ortmk_value_destroy(image);
	ortmk_env_destroy(env);
	if (rc == 0)
		printf("ok\n");
	return rc;
}
