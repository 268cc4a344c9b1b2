/*
 * bench_cpu_ops: times single CPU kernels (the non-GEMM ops of the ResNet
 * and BERT benchmark models, issue #7) straight through cpu_node_run_pool,
 * without the IPC and output copies that ort-bench --ops has to subtract.
 * Each case runs for half a second after a warm-up into a planned
 * (reused) output; the figures are the fastest run and the median, in
 * microseconds.
 *
 *   bench_cpu_ops [--threads T] [--const] [SUBSTRING...]   cases whose name contains one
 *
 * --const hands the second input (a convolution's filter, a Gemm's B) to
 * the kernel as a constant, as a model's initializer is: pre-packing and
 * the forms that need a constant filter (Winograd) then take part.
 *
 * Not a test (docs/PERFORMANCE.md quotes it); built next to the unit tests
 * because it uses the same kernel entry points.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cpu_node.h"
#include "ops_table.h"
#include "threadpool.h"

enum { MAXIN = 5, MAXATTR = 4 };

typedef struct attr {
	const char *name;
	int n;                 /* 0: an int, else an ints list of n */
	int64_t v[4];
} attr;

typedef struct bench_case {
	const char *name, *op;
	int n_in;
	int rank[MAXIN];
	int64_t dims[MAXIN][4];
	attr attrs[MAXATTR];
	int32_t dtype[MAXIN];  /* cpu dtypes; 0: float */
} bench_case;

/* dtype, the last field, is given only where an input is not float */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
static const bench_case cases[] = {
	{"maxpool 1x64x112x112 k3 s2 p1", "MaxPool", 1, {4}, {{1, 64, 112, 112}},
	 {{"kernel_shape", 2, {3, 3}}, {"strides", 2, {2, 2}}, {"pads", 4, {1, 1, 1, 1}}}},
	{"averagepool 1x64x56x56 k3 s1 p1", "AveragePool", 1, {4}, {{1, 64, 56, 56}},
	 {{"kernel_shape", 2, {3, 3}}, {"pads", 4, {1, 1, 1, 1}}}},
	{"averagepool 1x288x35x35 k3 s1 p1 counted (inception)", "AveragePool", 1, {4},
	 {{1, 288, 35, 35}}, {{"kernel_shape", 2, {3, 3}}, {"pads", 4, {1, 1, 1, 1}},
	 {"count_include_pad", 0, {1}}}},
	{"averagepool 1x768x17x17 k3 s1 p1 counted (inception)", "AveragePool", 1, {4},
	 {{1, 768, 17, 17}}, {{"kernel_shape", 2, {3, 3}}, {"pads", 4, {1, 1, 1, 1}},
	 {"count_include_pad", 0, {1}}}},
	{"averagepool 1x288x37x37 k3 s1 (inception, padded)", "AveragePool", 1, {4},
	 {{1, 288, 37, 37}}, {{"kernel_shape", 2, {3, 3}}}},
	{"globalaveragepool 1x512x7x7", "GlobalAveragePool", 1, {4}, {{1, 512, 7, 7}}, {{0}}},
	{"globalaveragepool 1x64x56x56", "GlobalAveragePool", 1, {4}, {{1, 64, 56, 56}}, {{0}}},
	{"softmax 1x4x128x128", "Softmax", 1, {4}, {{1, 4, 128, 128}}, {{"axis", 0, {-1}}}},
	{"layernorm 1x128x256", "LayerNormalization", 3, {3, 1, 1}, {{1, 128, 256}, {256}, {256}},
	 {{"axis", 0, {-1}}}},
	{"erf 1x128x1024", "Erf", 1, {3}, {{1, 128, 1024}}, {{0}}},
	{"tanh 1x128x1024", "Tanh", 1, {3}, {{1, 128, 1024}}, {{0}}},
	{"sigmoid 1x128x1024", "Sigmoid", 1, {3}, {{1, 128, 1024}}, {{0}}},
	{"exp 1x128x1024", "Exp", 1, {3}, {{1, 128, 1024}}, {{0}}},
	{"relu 1x64x56x56", "Relu", 1, {4}, {{1, 64, 56, 56}}, {{0}}},
	{"add 1x128x1024 + [1024]", "Add", 2, {3, 1}, {{1, 128, 1024}, {1024}}, {{0}}},
	{"add 1x128x256 same shape", "Add", 2, {3, 3}, {{1, 128, 256}, {1, 128, 256}}, {{0}}},
	{"add 1x64x56x56 same shape", "Add", 2, {4, 4}, {{1, 64, 56, 56}, {1, 64, 56, 56}}, {{0}}},
	{"div 1x4x128x128 / scalar", "Div", 2, {4, 0}, {{1, 4, 128, 128}, {0}}, {{0}}},
	{"mul 1x128x1024 * scalar", "Mul", 2, {3, 0}, {{1, 128, 1024}, {0}}, {{0}}},
	{"transpose 1x128x4x64 0,2,1,3", "Transpose", 1, {4}, {{1, 128, 4, 64}},
	 {{"perm", 4, {0, 2, 1, 3}}}},
	{"transpose 1x128x4x64 0,2,3,1", "Transpose", 1, {4}, {{1, 128, 4, 64}},
	 {{"perm", 4, {0, 2, 3, 1}}}},
	/* the zoo's convolutions outside ResNet's shapes (issue 18) */
	{"conv grouped 1x104x28x28 g13 3x3", "Conv", 2, {4, 4}, {{1, 104, 28, 28}, {104, 8, 3, 3}},
	 {{"group", 0, {13}}, {"pads", 4, {1, 1, 1, 1}}}},
	{"conv grouped 1x48x56x56 g6 3x3/2", "Conv", 2, {4, 4}, {{1, 48, 56, 56}, {48, 8, 3, 3}},
	 {{"group", 0, {6}}, {"pads", 4, {1, 1, 1, 1}}, {"strides", 2, {2, 2}}}},
	{"conv depthwise 1x96x112x112 3x3/2", "Conv", 2, {4, 4}, {{1, 96, 112, 112}, {96, 1, 3, 3}},
	 {{"group", 0, {96}}, {"pads", 4, {1, 1, 1, 1}}, {"strides", 2, {2, 2}}}},
	{"conv depthwise 1x144x56x56 5x5", "Conv", 2, {4, 4}, {{1, 144, 56, 56}, {144, 1, 5, 5}},
	 {{"group", 0, {144}}, {"pads", 4, {2, 2, 2, 2}}}},
	{"conv 1x1 1x96x56x56 -> 24", "Conv", 2, {4, 4}, {{1, 96, 56, 56}, {24, 96, 1, 1}}, {{0}}},
	{"conv 1x16x120x160 3x3 -> 16 (dbnet)", "Conv", 2, {4, 4}, {{1, 16, 120, 160}, {16, 16, 3, 3}},
	 {{"pads", 4, {1, 1, 1, 1}}}},
	{"conv 1x64x120x160 3x3 -> 16 (dbnet smooth)", "Conv", 2, {4, 4},
	 {{1, 64, 120, 160}, {16, 64, 3, 3}}, {{"pads", 4, {1, 1, 1, 1}}}},
	{"conv 1x1 1x40x28x28 -> 240", "Conv", 2, {4, 4}, {{1, 40, 28, 28}, {240, 40, 1, 1}}, {{0}}},
	{"conv 1x1 1x16x112x112 -> 96", "Conv", 2, {4, 4}, {{1, 16, 112, 112}, {96, 16, 1, 1}}, {{0}}},
	{"conv 1x1 1x24x56x56 -> 144", "Conv", 2, {4, 4}, {{1, 24, 56, 56}, {144, 24, 1, 1}}, {{0}}},
	{"conv 1x1 1x144x28x28 -> 32", "Conv", 2, {4, 4}, {{1, 144, 28, 28}, {32, 144, 1, 1}}, {{0}}},
	{"conv 1x1 1x384x14x14 -> 64", "Conv", 2, {4, 4}, {{1, 384, 14, 14}, {64, 384, 1, 1}}, {{0}}},
	{"conv 1x1 1x960x7x7 -> 160", "Conv", 2, {4, 4}, {{1, 960, 7, 7}, {160, 960, 1, 1}}, {{0}}},
	/* MobileNetV2's and SqueezeNet's: the small images' 1x1 layers */
	{"conv 1x1 1x320x7x7 -> 1280", "Conv", 2, {4, 4}, {{1, 320, 7, 7}, {1280, 320, 1, 1}}, {{0}}},
	{"conv 1x1 1x960x7x7 -> 320", "Conv", 2, {4, 4}, {{1, 960, 7, 7}, {320, 960, 1, 1}}, {{0}}},
	{"conv 1x1 1x96x14x14 -> 576", "Conv", 2, {4, 4}, {{1, 96, 14, 14}, {576, 96, 1, 1}}, {{0}}},
	{"conv 1x1 1x32x112x112 -> 16", "Conv", 2, {4, 4}, {{1, 32, 112, 112}, {16, 32, 1, 1}}, {{0}}},
	{"conv 1x1 1x512x13x13 -> 1000", "Conv", 2, {4, 4}, {{1, 512, 13, 13}, {1000, 512, 1, 1}}, {{0}}},
	{"conv 3x3 1x16x55x55 -> 64", "Conv", 2, {4, 4}, {{1, 16, 55, 55}, {64, 16, 3, 3}},
	 {{"pads", 4, {1, 1, 1, 1}}}},
	{"conv 3x3 1x64x13x13 -> 256", "Conv", 2, {4, 4}, {{1, 64, 13, 13}, {256, 64, 3, 3}},
	 {{"pads", 4, {1, 1, 1, 1}}}},
	{"conv 3x3/2 1x3x224x224 -> 64 (squeezenet)", "Conv", 2, {4, 4},
	 {{1, 3, 224, 224}, {64, 3, 3, 3}}, {{"strides", 2, {2, 2}}}},
	{"conv 3x3/2 stem 1x3x224x224 -> 32", "Conv", 2, {4, 4}, {{1, 3, 224, 224}, {32, 3, 3, 3}},
	 {{"pads", 4, {1, 1, 1, 1}}, {"strides", 2, {2, 2}}}},
	{"conv 7x7/2 stem 1x3x224x224 -> 64", "Conv", 2, {4, 4}, {{1, 3, 224, 224}, {64, 3, 7, 7}},
	 {{"pads", 4, {3, 3, 3, 3}}, {"strides", 2, {2, 2}}}},
	/* YOLO's downsampling convolutions (3x3 stride 2) */
	{"conv 3x3/2 1x16x160x160 -> 32", "Conv", 2, {4, 4}, {{1, 16, 160, 160}, {32, 16, 3, 3}},
	 {{"pads", 4, {1, 1, 1, 1}}, {"strides", 2, {2, 2}}}},
	{"conv 3x3/2 1x32x80x80 -> 64", "Conv", 2, {4, 4}, {{1, 32, 80, 80}, {64, 32, 3, 3}},
	 {{"pads", 4, {1, 1, 1, 1}}, {"strides", 2, {2, 2}}}},
	/* DBNet's FPN smoothing: few output channels, a long filter */
	{"conv 3x3 1x64x120x160 -> 16", "Conv", 2, {4, 4}, {{1, 64, 120, 160}, {16, 64, 3, 3}},
	 {{"pads", 4, {1, 1, 1, 1}}}},
	/* Inception v3's: 32 to 288 input channels at 147x147 to 17x17 */
	{"conv 3x3 1x32x149x149 -> 32 (inception)", "Conv", 2, {4, 4},
	 {{1, 32, 149, 149}, {32, 32, 3, 3}}, {{0}}},
	{"conv 3x3 1x32x147x147 -> 64 (inception)", "Conv", 2, {4, 4},
	 {{1, 32, 147, 147}, {64, 32, 3, 3}}, {{"pads", 4, {1, 1, 1, 1}}}},
	{"conv 3x3 1x80x73x73 -> 192 (inception)", "Conv", 2, {4, 4},
	 {{1, 80, 73, 73}, {192, 80, 3, 3}}, {{0}}},
	{"conv 5x5 1x48x35x35 -> 64 (inception)", "Conv", 2, {4, 4},
	 {{1, 48, 35, 35}, {64, 48, 5, 5}}, {{"pads", 4, {2, 2, 2, 2}}}},
	{"conv 3x3 1x64x35x35 -> 96 (inception)", "Conv", 2, {4, 4},
	 {{1, 64, 35, 35}, {96, 64, 3, 3}}, {{"pads", 4, {1, 1, 1, 1}}}},
	{"conv 3x3/2 1x288x35x35 -> 384 (inception)", "Conv", 2, {4, 4},
	 {{1, 288, 35, 35}, {384, 288, 3, 3}}, {{"strides", 2, {2, 2}}}},
	{"conv 1x7 1x128x17x17 -> 128 (inception)", "Conv", 2, {4, 4},
	 {{1, 128, 17, 17}, {128, 128, 1, 7}}, {{"pads", 4, {0, 3, 0, 3}}}},
	{"conv 7x1 1x160x17x17 -> 192 (inception)", "Conv", 2, {4, 4},
	 {{1, 160, 17, 17}, {192, 160, 7, 1}}, {{"pads", 4, {3, 0, 3, 0}}}},
	/* ResNet's 3x3 stride-1 layers (Winograd where it fits, else
	 * conv_nhwc.c on AVX2) */
	{"conv 3x3 1x64x56x56 -> 64 (resnet)", "Conv", 2, {4, 4}, {{1, 64, 56, 56}, {64, 64, 3, 3}},
	 {{"pads", 4, {1, 1, 1, 1}}}},
	{"conv 3x3 1x128x28x28 -> 128 (resnet)", "Conv", 2, {4, 4},
	 {{1, 128, 28, 28}, {128, 128, 3, 3}}, {{"pads", 4, {1, 1, 1, 1}}}},
	{"conv 3x3 1x256x14x14 -> 256 (resnet)", "Conv", 2, {4, 4},
	 {{1, 256, 14, 14}, {256, 256, 3, 3}}, {{"pads", 4, {1, 1, 1, 1}}}},
	{"conv 3x3 1x512x7x7 -> 512 (resnet)", "Conv", 2, {4, 4}, {{1, 512, 7, 7}, {512, 512, 3, 3}},
	 {{"pads", 4, {1, 1, 1, 1}}}},
	/* ResNet-50's strided 1x1 (downsample) layers */
	{"conv 1x1/2 1x256x56x56 -> 512 (resnet50)", "Conv", 2, {4, 4},
	 {{1, 256, 56, 56}, {512, 256, 1, 1}}, {{"strides", 2, {2, 2}}}},
	{"conv 1x1/2 1x1024x14x14 -> 2048 (resnet50)", "Conv", 2, {4, 4},
	 {{1, 1024, 14, 14}, {2048, 1024, 1, 1}}, {{"strides", 2, {2, 2}}}},
	/* the example CNN's (examples/, docs/PERFORMANCE.md) */
	{"conv cnn 1x3x32x32 -> 16 3x3", "Conv", 2, {4, 4}, {{1, 3, 32, 32}, {16, 3, 3, 3}},
	 {{"pads", 4, {1, 1, 1, 1}}}},
	{"conv cnn 1x16x16x16 -> 32 3x3", "Conv", 2, {4, 4}, {{1, 16, 16, 16}, {32, 16, 3, 3}},
	 {{"pads", 4, {1, 1, 1, 1}}}},
	{"maxpool cnn 16x16x32x32 k2 s2", "MaxPool", 1, {4}, {{16, 16, 32, 32}},
	 {{"kernel_shape", 2, {2, 2}}, {"strides", 2, {2, 2}}}},
	{"maxpool squeezenet 1x64x111x111 k3 s2", "MaxPool", 1, {4}, {{1, 64, 111, 111}},
	 {{"kernel_shape", 2, {3, 3}}, {"strides", 2, {2, 2}}}},
	{"mul 1x96x56x56 * 1x96x1x1 (SE)", "Mul", 2, {4, 4}, {{1, 96, 56, 56}, {1, 96, 1, 1}}, {{0}}},
	{"globalaveragepool 1x96x112x112", "GlobalAveragePool", 1, {4}, {{1, 96, 112, 112}}, {{0}}},
	/* the dynamically quantized transformer's products (u8 x s8) */
	{"matmulinteger 64x256 x 256x768", "MatMulInteger", 2, {2, 2}, {{64, 256}, {256, 768}},
	 {{0}}, {CPU_UINT8, CPU_INT8}},
	{"matmulinteger 64x512 x 512x256", "MatMulInteger", 2, {2, 2}, {{64, 512}, {512, 256}},
	 {{0}}, {CPU_UINT8, CPU_INT8}},
	{"matmulinteger 197x768 x 768x3072", "MatMulInteger", 2, {2, 2},
	 {{197, 768}, {768, 3072}}, {{0}}, {CPU_UINT8, CPU_INT8}},
	/* the dynamically quantized MobileNetV2's ConvInteger (u8 x u8, zero points) */
	{"convinteger 1x1 1x320x7x7 -> 1280", "ConvInteger", 4, {4, 4, 0, 0},
	 {{1, 320, 7, 7}, {1280, 320, 1, 1}}, {{0}}, {CPU_UINT8, CPU_UINT8, CPU_UINT8, CPU_UINT8}},
	{"convinteger 1x1 1x16x112x112 -> 96", "ConvInteger", 4, {4, 4, 0, 0},
	 {{1, 16, 112, 112}, {96, 16, 1, 1}}, {{0}}, {CPU_UINT8, CPU_UINT8, CPU_UINT8, CPU_UINT8}},
	{"convinteger 1x1 1x96x14x14 -> 576", "ConvInteger", 4, {4, 4, 0, 0},
	 {{1, 96, 14, 14}, {576, 96, 1, 1}}, {{0}}, {CPU_UINT8, CPU_UINT8, CPU_UINT8, CPU_UINT8}},
};
#pragma GCC diagnostic pop

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Random inputs in [-2, 2) (LayerNorm's scale shifted to [0.5, 4.5)); the
 * bytes of an 8-bit input uniform. */
static int make_inputs(const bench_case *c, cpu_tensor *t)
{
	for (int i = 0; i < c->n_in; i++) {
		int64_t n;
		memset(&t[i], 0, sizeof(t[i]));
		t[i].dtype = c->dtype[i] ? c->dtype[i] : CPU_FLOAT;
		t[i].rank = c->rank[i];
		memcpy(t[i].dims, c->dims[i], sizeof(int64_t) * (size_t)c->rank[i]);
		n = cpu_numel(&t[i]);
		t[i].nbytes = (size_t)n * cpu_dtype_size(t[i].dtype);
		if (!(t[i].data = malloc(t[i].nbytes + 64)))
			return -1;
		if (t[i].dtype != CPU_FLOAT) {
			for (size_t k = 0; k < t[i].nbytes; k++)
				((unsigned char *)t[i].data)[k] = (unsigned char)rand();
			continue;
		}
		for (int64_t k = 0; k < n; k++)
			((float *)t[i].data)[k] = (float)rand() / (float)RAND_MAX * 4.0f - 2.0f +
						  (i == 1 && c->n_in == 3 ? 2.5f : 0.0f);
	}
	return 0;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static int run_case(const bench_case *c, cpu_pool *pool, int threads, int consts)
{
	Onnx__NodeProto p = ONNX__NODE_PROTO__INIT;
	Onnx__AttributeProto a[MAXATTR], *ap[MAXATTR];
	char *in_names[MAXIN] = {"i0", "i1", "i2", "i3", "i4"}, *out_names[1] = {"o0"};
	cpu_tensor in[MAXIN], out[1], planned;
	const cpu_tensor *inp[MAXIN], *pl[1] = {NULL}, *cst[MAXIN] = {NULL};
	int heap[1] = {0}, rc, runs = 0;
	double best = 1e9, end, *ts = NULL, med = 0;
	int cap = 0;
	char err[256];
	cpu_keep keep = {0};
	cpu_run_env env = {NULL, NULL, pool, threads, &keep, NULL, 0, NULL, -1, 0};
	cpu_node node;

	p.op_type = (char *)c->op;
	p.name = "bench";
	p.n_input = (size_t)c->n_in;
	p.input = in_names;
	p.n_output = 1;
	p.output = out_names;
	p.attribute = ap;
	for (int k = 0; k < MAXATTR && c->attrs[k].name; k++) {
		Onnx__AttributeProto init = ONNX__ATTRIBUTE_PROTO__INIT;
		a[k] = init;
		a[k].name = (char *)c->attrs[k].name;
		a[k].has_type = 1;
		if (c->attrs[k].n) {
			a[k].type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS;
			a[k].n_ints = (size_t)c->attrs[k].n;
			a[k].ints = (int64_t *)c->attrs[k].v;
		} else {
			a[k].type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT;
			a[k].has_i = 1;
			a[k].i = c->attrs[k].v[0];
		}
		ap[k] = &a[k];
		p.n_attribute++;
	}
	if (make_inputs(c, in))
		return -1;
	for (int i = 0; i < c->n_in; i++)
		inp[i] = &in[i];
	if (consts && c->n_in > 1)
		cst[1] = &in[1];
	rc = cpu_node_init(&node, &(cpu_load_env){&cpu_optable_all, NULL, NULL, 0}, NULL, &p, 17,
			   consts ? cst : NULL, c->n_in, 1, err, sizeof(err));
	if (!rc)   /* the first run allocates the output; the rest reuse it */
		rc = cpu_node_run(&node, &env, inp, pl, out, heap, err, sizeof(err));
	if (rc) {
		fprintf(stderr, "bench_cpu_ops: %s: %s\n", c->name, err);
		return -1;
	}
	planned = out[0];
	pl[0] = &planned;
	end = now() + 0.5;
	while (now() < end || runs < 20) {
		double t0 = now(), t;
		cpu_node_run(&node, &env, inp, pl, out, heap, err, sizeof(err));
		t = now() - t0;
		best = t < best ? t : best;
		if (runs == cap) {
			double *g = realloc(ts, sizeof(*ts) * (size_t)(cap = cap ? 2 * cap : 64));
			if (!g)
				break;
			ts = g;
		}
		ts[runs++] = t;
	}
	if (ts) {
		qsort(ts, (size_t)runs, sizeof(*ts), cmp_double);
		med = ts[runs / 2];
		free(ts);
	}
	printf("%-36s %9.1f us  median %9.1f  (%d runs)\n", c->name, best * 1e6, med * 1e6, runs);
	cpu_node_fini(&node);
	cpu_keep_free(&keep);
	free(planned.data);
	for (int i = 0; i < c->n_in; i++)
		free(in[i].data);
	return 0;
}

int main(int argc, char **argv)
{
	cpu_pool *pool = NULL;
	int threads = 1, first = 1, rc = 0, consts = 0;

	for (;;) {
		if (argc > first + 1 && !strcmp(argv[first], "--threads")) {
			threads = atoi(argv[first + 1]);
			first += 2;
		} else if (argc > first && !strcmp(argv[first], "--const")) {
			consts = 1;
			first++;
		} else {
			break;
		}
	}
	if (threads < 1) {
		fprintf(stderr, "bench_cpu_ops: --threads wants a count >= 1\n");
		return 2;
	}
	if (threads > 1 && cpu_pool_create(threads, &pool)) {
		fprintf(stderr, "bench_cpu_ops: no thread pool of %d\n", threads);
		return 1;
	}
	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		int pick = first >= argc;
		for (int a = first; a < argc; a++)
			pick |= strstr(cases[c].name, argv[a]) != NULL;
		if (pick && run_case(&cases[c], pool, threads, consts))
			rc = 1;
	}
	cpu_pool_destroy(pool);
	return rc;
}
