/*
 * cpu_util: the small helpers every CPU operator uses (declared in
 * cpu_kernel.h): dtype sizes and names, element access across dtypes,
 * float16 conversion, NodeProto attribute lookup, TensorProto -> cpu_tensor
 * conversion (Constant, initializers) and cpu_fail.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <string.h>

#include "cpu_kernel.h"
#include "node_attr.h"
#include "sysio.h"
#include "tensor_bytes.h"

size_t cpu_dtype_size(int32_t dtype)
{
	switch (dtype) {
	case CPU_BOOL: case CPU_INT8: case CPU_UINT8: return 1;
	case CPU_INT16: case CPU_UINT16: case CPU_FLOAT16: case CPU_BFLOAT16: return 2;
	case CPU_FLOAT: case CPU_INT32: case CPU_UINT32: return 4;
	case CPU_DOUBLE: case CPU_INT64: case CPU_UINT64: return 8;
	case CPU_STRING: return sizeof(const char *);
	default: return 0;
	}
}

const char *cpu_dtype_name(int32_t dtype)
{
	switch (dtype) {
	case CPU_FLOAT: return "float32";
	case CPU_UINT8: return "uint8";
	case CPU_INT8: return "int8";
	case CPU_UINT16: return "uint16";
	case CPU_INT16: return "int16";
	case CPU_INT32: return "int32";
	case CPU_INT64: return "int64";
	case CPU_STRING: return "string";
	case CPU_BOOL: return "bool";
	case CPU_FLOAT16: return "float16";
	case CPU_DOUBLE: return "float64";
	case CPU_UINT32: return "uint32";
	case CPU_UINT64: return "uint64";
	case CPU_BFLOAT16: return "bfloat16";
	case CPU_SEQUENCE: return "sequence";
	case CPU_NONE: return "none";
	default: return "unknown dtype";
	}
}

int cpu_dtype_is_float(int32_t dtype)
{
	return dtype == CPU_FLOAT || dtype == CPU_DOUBLE || dtype == CPU_FLOAT16 ||
	       dtype == CPU_BFLOAT16;
}

int cpu_dtype_is_signed(int32_t dtype)
{
	return dtype == CPU_INT8 || dtype == CPU_INT16 || dtype == CPU_INT32 ||
	       dtype == CPU_INT64;
}

int64_t cpu_shape_numel(int rank, const int64_t *dims)
{
	int64_t nz = 1;   /* product of the non-zero dims */
	int empty = 0;
	for (int i = 0; i < rank; i++) {
		if (dims[i] < 0)
			return -1;
		if (dims[i] == 0) {
			empty = 1;
			continue;
		}
		if (nz > INT64_MAX / dims[i])
			return -1;
		nz *= dims[i];
	}
	return empty ? 0 : nz;
}

int64_t cpu_numel(const cpu_tensor *t)
{
	return cpu_shape_numel(t->rank, t->dims);
}

const char *cpu_shape_str(int rank, const int64_t *dims, char *buf, size_t n)
{
	size_t used = 0;
	if (n == 0)
		return buf;
	buf[0] = '\0';
	for (int i = 0; i <= rank && used < n; i++) {
		int w;
		if (i == rank)
			w = snprintf(buf + used, n - used, "]");
		else
			w = snprintf(buf + used, n - used, "%s%lld", i ? "," : "[",
				     (long long)dims[i]);
		if (w < 0)
			break;
		used += (size_t)w;
	}
	if (rank == 0)
		snprintf(buf, n, "[]");
	return buf;
}

int cpu_fail(cpu_ctx *ctx, int code, const char *fmt, ...)
{
	if (ctx && ctx->err && ctx->errlen) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(ctx->err, ctx->errlen, fmt, ap);
		va_end(ap);
	}
	return code;
}

const cpu_tensor *cpu_input(const cpu_ctx *ctx, int i)
{
	if (i < 0 || i >= ctx->n_in)
		return NULL;
	return ctx->in[i];
}

const cpu_tensor *cpu_node_const(const cpu_node *node, int i)
{
	if (!node->consts || i < 0 || i >= node->n_in)
		return NULL;
	return node->consts[i];
}

/* ---- float16 / bfloat16 ---- */

float cpu_f16_to_f32(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000) << 16;
	uint32_t exp = (h >> 10) & 0x1f, mant = h & 0x3ff, x;
	float f;
	if (exp == 0x1f) {
		x = sign | 0x7f800000u | (mant << 13);
	} else if (exp) {
		x = sign | ((exp + 112) << 23) | (mant << 13);
	} else {
		/* zero or subnormal: mant * 2^-24 is exact in float */
		f = (float)mant * 5.9604644775390625e-8f;
		return sign ? -f : f;
	}
	memcpy(&f, &x, 4);
	return f;
}

uint16_t cpu_f32_to_f16(float f)
{
	uint32_t x, ax, sign;
	memcpy(&x, &f, 4);
	sign = (x >> 16) & 0x8000;
	ax = x & 0x7fffffffu;
	if (ax > 0x7f800000u)
		return (uint16_t)(sign | 0x7e00);          /* NaN */
	if (ax >= 0x477ff000u)
		return (uint16_t)(sign | 0x7c00);          /* rounds to inf */
	if (ax < 0x38800000u) {
		/* subnormal half: adding 0.5 puts the float's rounding point at
		 * 2^-24, the half subnormal step, so the FPU rounds to even */
		float a;
		uint32_t r;
		memcpy(&a, &ax, 4);
		a += 0.5f;
		memcpy(&r, &a, 4);
		return (uint16_t)(sign | (r - 0x3f000000u));
	}
	/* normal: rebias the exponent and round the 13 dropped bits to even */
	ax += 0xc8000fffu + ((ax >> 13) & 1);
	return (uint16_t)(sign | (ax >> 13));
}

static float bf16_to_f32(uint16_t h)
{
	uint32_t x = (uint32_t)h << 16;
	float f;
	memcpy(&f, &x, 4);
	return f;
}

static uint16_t f32_to_bf16(float f)
{
	uint32_t x;
	memcpy(&x, &f, 4);
	if ((x & 0x7fffffffu) > 0x7f800000u)
		return (uint16_t)((x >> 16) | 0x40);
	x += 0x7fffu + ((x >> 16) & 1);
	return (uint16_t)(x >> 16);
}

/* ---- element access ---- */

double cpu_get_f64(int32_t dtype, const void *base, int64_t i)
{
	switch (dtype) {
	case CPU_FLOAT: return ((const float *)base)[i];
	case CPU_DOUBLE: return ((const double *)base)[i];
	case CPU_FLOAT16: return cpu_f16_to_f32(((const uint16_t *)base)[i]);
	case CPU_BFLOAT16: return bf16_to_f32(((const uint16_t *)base)[i]);
	case CPU_UINT64: return (double)((const uint64_t *)base)[i];
	default: return (double)cpu_get_i64(dtype, base, i);
	}
}

static int64_t f64_to_i64(double v)
{
	if (v != v)
		return 0;
	if (v >= 9223372036854775807.0)
		return INT64_MAX;
	if (v <= -9223372036854775808.0)
		return INT64_MIN;
	return (int64_t)v;
}

int64_t cpu_get_i64(int32_t dtype, const void *base, int64_t i)
{
	switch (dtype) {
	case CPU_BOOL: return ((const uint8_t *)base)[i] != 0;
	case CPU_UINT8: return ((const uint8_t *)base)[i];
	case CPU_INT8: return ((const int8_t *)base)[i];
	case CPU_UINT16: return ((const uint16_t *)base)[i];
	case CPU_INT16: return ((const int16_t *)base)[i];
	case CPU_INT32: return ((const int32_t *)base)[i];
	case CPU_UINT32: return ((const uint32_t *)base)[i];
	case CPU_INT64: return ((const int64_t *)base)[i];
	case CPU_UINT64: return (int64_t)((const uint64_t *)base)[i];
	case CPU_FLOAT: case CPU_DOUBLE: case CPU_FLOAT16: case CPU_BFLOAT16:
		return f64_to_i64(cpu_get_f64(dtype, base, i));
	default: return 0;
	}
}

void cpu_set_i64(int32_t dtype, void *base, int64_t i, int64_t v)
{
	/* integer targets wrap like a C conversion (two's complement) */
	switch (dtype) {
	case CPU_BOOL: ((uint8_t *)base)[i] = v != 0; break;
	case CPU_UINT8: ((uint8_t *)base)[i] = (uint8_t)v; break;
	case CPU_INT8: ((int8_t *)base)[i] = (int8_t)v; break;
	case CPU_UINT16: ((uint16_t *)base)[i] = (uint16_t)v; break;
	case CPU_INT16: ((int16_t *)base)[i] = (int16_t)v; break;
	case CPU_INT32: ((int32_t *)base)[i] = (int32_t)v; break;
	case CPU_UINT32: ((uint32_t *)base)[i] = (uint32_t)v; break;
	case CPU_INT64: ((int64_t *)base)[i] = v; break;
	case CPU_UINT64: ((uint64_t *)base)[i] = (uint64_t)v; break;
	default:
		if (cpu_dtype_is_float(dtype))
			cpu_set_f64(dtype, base, i, (double)v);
		break;
	}
}

void cpu_set_f64(int32_t dtype, void *base, int64_t i, double v)
{
	switch (dtype) {
	case CPU_FLOAT: ((float *)base)[i] = (float)v; break;
	case CPU_DOUBLE: ((double *)base)[i] = v; break;
	case CPU_FLOAT16: ((uint16_t *)base)[i] = cpu_f32_to_f16((float)v); break;
	case CPU_BFLOAT16: ((uint16_t *)base)[i] = f32_to_bf16((float)v); break;
	case CPU_BOOL: ((uint8_t *)base)[i] = v != 0; break;
	case CPU_UINT64:
		if (v >= 18446744073709551616.0)
			((uint64_t *)base)[i] = UINT64_MAX;
		else if (v >= 9223372036854775808.0)
			((uint64_t *)base)[i] = (uint64_t)v;
		else
			((uint64_t *)base)[i] = (uint64_t)f64_to_i64(v);
		break;
	default: cpu_set_i64(dtype, base, i, f64_to_i64(v)); break;
	}
}

/* ---- attributes ---- */

const Onnx__AttributeProto *cpu_attr(const Onnx__NodeProto *n, const char *name)
{
	return proto_attr(n, name);
}

/* Very old exporters leave `type` unset: then the field that is set decides. */
static int attr_is(const Onnx__AttributeProto *a, Onnx__AttributeProto__AttributeType t)
{
	if (!a)
		return 0;
	if (a->has_type && a->type != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__UNDEFINED)
		return a->type == t;
	switch (t) {
	case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT: return a->has_i;
	case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT: return a->has_f;
	case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING: return a->has_s;
	case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS: return a->n_ints > 0;
	case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS: return a->n_floats > 0;
	case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR: return a->t != NULL;
	default: return 0;
	}
}

int64_t cpu_attr_int(const Onnx__NodeProto *n, const char *name, int64_t dflt)
{
	const Onnx__AttributeProto *a = cpu_attr(n, name);
	return attr_is(a, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT) ? a->i : dflt;
}

float cpu_attr_float(const Onnx__NodeProto *n, const char *name, float dflt)
{
	const Onnx__AttributeProto *a = cpu_attr(n, name);
	if (attr_is(a, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT))
		return a->f;
	if (attr_is(a, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT))
		return (float)a->i;
	return dflt;
}

size_t cpu_attr_ints(const Onnx__NodeProto *n, const char *name, const int64_t **v)
{
	const Onnx__AttributeProto *a = cpu_attr(n, name);
	*v = NULL;
	if (!attr_is(a, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS))
		return 0;
	*v = a->ints;
	return a->n_ints;
}

size_t cpu_attr_floats(const Onnx__NodeProto *n, const char *name, const float **v)
{
	const Onnx__AttributeProto *a = cpu_attr(n, name);
	*v = NULL;
	if (!attr_is(a, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS))
		return 0;
	*v = a->floats;
	return a->n_floats;
}

const Onnx__TensorProto *cpu_attr_tensor(const Onnx__NodeProto *n, const char *name)
{
	const Onnx__AttributeProto *a = cpu_attr(n, name);
	return attr_is(a, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR) ? a->t : NULL;
}

int cpu_attr_str(const Onnx__NodeProto *n, const char *name, char *buf, size_t size)
{
	const Onnx__AttributeProto *a = cpu_attr(n, name);
	size_t len;
	if (size == 0)
		return 0;
	buf[0] = '\0';
	if (!attr_is(a, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING))
		return 0;
	len = a->s.len < size - 1 ? a->s.len : size - 1;
	if (len)
		memcpy(buf, a->s.data, len);
	buf[len] = '\0';
	return 1;
}

const char *cpu_attr_string(const Onnx__NodeProto *n, const char *name, const char *dflt)
{
	static _Thread_local char buf[256];
	return cpu_attr_str(n, name, buf, sizeof(buf)) ? buf : dflt;
}

/* ---- TensorProto -> cpu_tensor ---- */

/* Fills t->data from the typed repeated field that holds this dtype. */
static int proto_typed_fill(const Onnx__TensorProto *tp, cpu_tensor *t, int64_t numel,
			    char *err, size_t n)
{
	size_t have, unit;

	/* a string tensor has no typed numeric field: only an empty one loads */
	if (proto_typed_field(tp, &have, &unit) < 0)
		have = 0;
	if (have != (size_t)numel) {
		snprintf(err, n, "tensor '%s' has %zu %s values for %lld elements",
			 tp->name ? tp->name : "", have, cpu_dtype_name(t->dtype), (long long)numel);
		return CPU_E_INVALID;
	}
	proto_typed_copy(tp, t->data);
	return 0;
}

/* Checks what the header of tp promises; returns its element count or -1. */
static int64_t proto_check(const Onnx__TensorProto *tp, size_t room, char *err, size_t n)
{
	const char *name = tp->name ? tp->name : "";
	size_t es = cpu_dtype_size(tp->data_type);
	int64_t numel;
	if (es == 0) {
		snprintf(err, n, "tensor '%s': unsupported dtype %s (%d)", name,
			 cpu_dtype_name(tp->data_type), (int)tp->data_type);
		return -1;
	}
	if (tp->has_data_location && tp->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL) {
		snprintf(err, n, "tensor '%s': external data is not resolved here", name);
		return -1;
	}
	if (tp->n_dims > CPU_MAX_RANK) {
		snprintf(err, n, "tensor '%s': rank %zu exceeds %d", name, tp->n_dims, CPU_MAX_RANK);
		return -1;
	}
	numel = cpu_shape_numel((int)tp->n_dims, tp->dims);
	if (numel < 0 || (uint64_t)numel > room / es) {
		snprintf(err, n, "tensor '%s': bad dims", name);
		return -1;
	}
	return numel;
}

cpu_tensor *cpu_tensor_from_proto(const Onnx__TensorProto *tp, char *err, size_t n)
{
	const size_t hdr = (sizeof(cpu_tensor) + 63) & ~(size_t)63;
	cpu_tensor *t = NULL;
	size_t nbytes;
	int64_t numel;

	if (!tp) {
		snprintf(err, n, "missing tensor");
		return NULL;
	}
	if ((numel = proto_check(tp, SIZE_MAX - hdr - 64, err, n)) < 0)
		return NULL;
	nbytes = (size_t)numel * cpu_dtype_size(tp->data_type);
	t = aligned_alloc(64, (hdr + (nbytes ? nbytes : 1) + 63) & ~(size_t)63);
	if (!t) {
		snprintf(err, n, "out of memory for tensor '%s'", tp->name ? tp->name : "");
		return NULL;
	}
	memset(t, 0, sizeof(*t));
	t->dtype = tp->data_type;
	t->rank = (int)tp->n_dims;
	for (int i = 0; i < t->rank; i++)
		t->dims[i] = tp->dims[i];
	t->data = (char *)t + hdr;
	t->nbytes = nbytes;
	if (tp->has_raw_data) {
		if (tp->raw_data.len != nbytes) {
			snprintf(err, n, "tensor '%s': raw_data has %zu bytes, expected %zu",
				 tp->name ? tp->name : "", tp->raw_data.len, nbytes);
			goto fail;
		}
		/* ONNX raw_data is little-endian, as is every host we build for */
		if (nbytes)
			memcpy(t->data, tp->raw_data.data, nbytes);
	} else if (proto_typed_fill(tp, t, numel, err, n) != 0) {
		goto fail;
	}
	return t;
fail:
	free(t);
	return NULL;
}

/* From 2 MiB on: 2 MiB-aligned and marked for transparent huge pages
 * (where the kernel's setting is `madvise`, as Debian's is).  Packed
 * weights are streamed once a run, and with 4 KiB pages the TLB missed on
 * them (a node's kept scratch through here measured noise, so it stays on
 * aligned_alloc): ResNet-18's 512 -> 512 3x3 layers at
 * 7x7 (16.8 MiB of Winograd-packed filter each) took 0.68-0.78x their
 * time with huge pages (Xeon, 1 thread, in the model). */
#define ALLOC_HUGE ((size_t)2 << 20)

int cpu_bytes_overlap(const void *a, size_t an, const void *b, size_t bn)
{
	const char *p = a, *q = b;

	return p && q && an && bn && p < q + bn && q < p + an;
}

void *cpu_alloc_big(size_t size)
{
	size_t r = (size + 63) & ~(size_t)63;
	void *p;

	if (size > SIZE_MAX / 2)
		return NULL;
	if (size < ALLOC_HUGE)
		return aligned_alloc(64, r ? r : 64);
	if (posix_memalign(&p, ALLOC_HUGE, r))
		return NULL;
	/* the whole 2 MiB pages only: a tail in one more huge page cost up to
	 * 2 MiB a blob (ViT-B/16's 2.3 MiB packed 768 x 768 weights took 4);
	 * and only while huge pages are cheap to fault in (sysio.h) */
	sys_huge_advise(p, r & ~(ALLOC_HUGE - 1));
	return p;
}
