/*
 * cpu_f16: float16 tensors through float32 kernels.  Most CPU kernels are
 * written for float32 (their supports() refuse float16); rather than a
 * second copy of each, the per-node glue (cpu_node.c) widens: a node whose
 * op refuses its float16 inputs but accepts the same node with float32 in
 * their place runs in "widened" mode — constant float16 inputs are widened
 * once at load (and packed from the float32 copy), other float16 inputs
 * are widened into scratch per run, the kernel computes in float32 and
 * every float32 output it asks for is narrowed back to float16 (round to
 * nearest even) where the graph expects it, unless the executor keeps
 * that value in float32 (cpu_plan_wide in cpu_exec.c: only widened nodes
 * read it and it stays inside the provider).  Ops that take float16 only
 * through their generic per-element path (slow_f16) are widened too.  ONNX's float16 ops compute in
 * at least float32 precision, so this is what the spec allows; only the
 * storage is narrow.
 *
 * The conversions use F16C (vcvtph2ps / vcvtps2ph) when the CPU has it,
 * else the scalar bit conversions of cpu_util.c (same results).
 */
#include <stdlib.h>
#include <string.h>

#include "cpu_f16.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

__attribute__((target("avx,f16c")))
static void widen_f16c(const uint16_t *x, float *y, int64_t n)
{
	int64_t i = 0;

	for (; i + 8 <= n; i += 8)
		_mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(x + i))));
	for (; i < n; i++)
		y[i] = cpu_f16_to_f32(x[i]);
}

__attribute__((target("avx,f16c")))
static void narrow_f16c(const float *x, uint16_t *y, int64_t n)
{
	int64_t i = 0;

	for (; i + 8 <= n; i += 8)
		_mm_storeu_si128((__m128i *)(y + i),
				 _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
	for (; i < n; i++)
		y[i] = cpu_f32_to_f16(x[i]);
}

static int have_f16c(void)
{
	static int have = -1;

	if (have < 0)
		have = __builtin_cpu_supports("f16c") && __builtin_cpu_supports("avx");
	return have;
}
#else
static int have_f16c(void)
{
	return 0;
}
#define widen_f16c(x, y, n) ((void)0)
#define narrow_f16c(x, y, n) ((void)0)
#endif

void cpu_f16_widen(const uint16_t *x, float *y, int64_t n)
{
	if (have_f16c()) {
		widen_f16c(x, y, n);
		return;
	}
	for (int64_t i = 0; i < n; i++)
		y[i] = cpu_f16_to_f32(x[i]);
}

void cpu_f16_narrow(const float *x, uint16_t *y, int64_t n)
{
	if (have_f16c()) {
		narrow_f16c(x, y, n);
		return;
	}
	for (int64_t i = 0; i < n; i++)
		y[i] = cpu_f32_to_f16(x[i]);
}

/* Ops whose float16 path is the generic per-element one (double
 * precision through cpu_get_f64): widened, they run their vector float32
 * loops, which costs less than that path even with the conversions. */
static int slow_f16(const char *op_type)
{
	static const char *const ops[] = {
		"Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Sum", "Mean", "Where",
		"GlobalAveragePool", "AveragePool", "MaxPool", "GlobalMaxPool", "ReduceMean",
		"ReduceSum", "ReduceMax", "ReduceMin", "ReduceL2", "Softmax", "LogSoftmax",
		"LayerNormalization", "BatchNormalization", "InstanceNormalization",
		"GroupNormalization", "Resize", "Upsample", "PRelu",
	};

	for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++)
		if (strcmp(op_type, ops[i]) == 0)
			return 1;
	return 0;
}

int cpu_f16_widens(const cpu_op *op, const Onnx__NodeProto *p, int64_t opset,
		   const int32_t *in_dtypes, int n_in)
{
	int32_t wide[64];
	char why[8];
	int any = 0;

	if (!op->supports || n_in > 64)
		return 0;
	for (int i = 0; i < n_in; i++) {
		wide[i] = in_dtypes[i] == CPU_FLOAT16 ? CPU_FLOAT : in_dtypes[i];
		any |= in_dtypes[i] == CPU_FLOAT16;
	}
	if (!any || (op->supports(p, opset, in_dtypes, n_in, why, sizeof(why)) &&
		     !slow_f16(op->op_type)))
		return 0;
	return op->supports(p, opset, wide, n_in, why, sizeof(why));
}

cpu_tensor *cpu_f16_widen_tensor(const cpu_tensor *t)
{
	int64_t n = cpu_numel(t);
	size_t hdr = (sizeof(cpu_tensor) + 63) & ~(size_t)63;
	cpu_tensor *w;

	if (n < 0 || (uint64_t)n > (SIZE_MAX - hdr - 64) / sizeof(float))
		return NULL;
	w = aligned_alloc(64, (hdr + (size_t)n * sizeof(float) + 64) & ~(size_t)63);
	if (!w)
		return NULL;
	*w = *t;
	w->dtype = CPU_FLOAT;
	w->data = (char *)w + hdr;
	w->nbytes = (size_t)n * sizeof(float);
	cpu_f16_widen(t->data, w->data, n);
	return w;
}
