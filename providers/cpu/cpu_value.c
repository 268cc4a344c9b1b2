/*
 * cpu_value: moving values between a subgraph, the node that runs it and
 * sequences (cpu_graph.h).  The rule that keeps this simple: tensor data
 * inside a sequence lives in the run's arena or in shared memory, never on
 * the heap, so sequences are copied by sharing their items; tensors that
 * change hands are copied or their heap block is handed over.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_graph.h"

int cpu_value_emit(cpu_ctx *ctx, int i, const cpu_tensor *v)
{
	cpu_tensor *t;

	if (!v)
		return cpu_fail(ctx, CPU_E_INTERNAL, "no value for output %d", i);
	if (v->dtype == CPU_NONE)
		return cpu_output_none(ctx, i);
	if (v->dtype == CPU_SEQUENCE) {
		const cpu_seq *src = v->data;
		cpu_seq *s = cpu_output_sequence(ctx, i, src->elem_dtype, src->n);

		if (!s)
			return CPU_E_NOMEM;
		if (src->n)
			memcpy(s->items, src->items, src->n * sizeof(cpu_tensor));
		return 0;
	}
	t = cpu_output(ctx, i, v->dtype, v->rank, v->dims);
	if (!t)
		return CPU_E_NOMEM;
	if (t->nbytes && t->data != v->data)
		memcpy(t->data, v->data, t->nbytes);
	return 0;
}

int cpu_value_own(cpu_ctx *ctx, cpu_tensor *v, int *heap)
{
	void *p;

	if (*heap || v->dtype == CPU_SEQUENCE || v->dtype == CPU_NONE)
		return 0;
	p = aligned_alloc(64, (v->nbytes + 64) & ~(size_t)63);
	if (!p)
		return cpu_fail(ctx, CPU_E_NOMEM, "out of memory (%zu bytes)", v->nbytes);
	if (v->nbytes)
		memcpy(p, v->data, v->nbytes);
	v->data = p;
	*heap = 1;
	return 0;
}

void cpu_value_drop(cpu_tensor *v, int *heap)
{
	if (*heap)
		free(v->data);
	*heap = 0;
	memset(v, 0, sizeof(*v));
}

int cpu_value_to_arena(cpu_ctx *ctx, const cpu_tensor *src, cpu_tensor *dst)
{
	void *p;

	if (src->dtype == CPU_SEQUENCE || src->dtype == CPU_NONE)
		return cpu_fail(ctx, CPU_E_INVALID, "a sequence item must be a tensor");
	p = ctx->arena ? cpu_arena_alloc(ctx->arena, src->nbytes ? src->nbytes : 1) : NULL;
	if (!p)
		return cpu_fail(ctx, CPU_E_NOMEM, "out of memory (%zu bytes)", src->nbytes);
	if (src->nbytes)
		memcpy(p, src->data, src->nbytes);
	*dst = *src;
	dst->data = p;
	return 0;
}

cpu_tensor *cpu_strings_from_proto(const Onnx__TensorProto *tp, char *err, size_t n)
{
	const size_t hdr = (sizeof(cpu_tensor) + 63) & ~(size_t)63;
	int64_t numel = 1;
	size_t bytes = 0, ptrs;
	cpu_tensor *t;
	char *dst;

	if (tp->n_dims > CPU_MAX_RANK)
		return snprintf(err, n, "tensor '%s': rank too large", tp->name ? tp->name : ""), NULL;
	for (size_t d = 0; d < tp->n_dims; d++) {
		if (tp->dims[d] < 0 || (tp->dims[d] && numel > INT32_MAX / tp->dims[d]))
			return snprintf(err, n, "tensor '%s': bad dims", tp->name ? tp->name : ""), NULL;
		numel *= tp->dims[d];
	}
	if ((size_t)numel != tp->n_string_data)
		return snprintf(err, n, "tensor '%s': %zu strings for %lld elements",
				tp->name ? tp->name : "", tp->n_string_data, (long long)numel), NULL;
	for (size_t i = 0; i < tp->n_string_data; i++)
		bytes += tp->string_data[i].len + 1;
	ptrs = (size_t)numel * sizeof(char *);
	t = aligned_alloc(64, (hdr + ptrs + bytes + 64) & ~(size_t)63);
	if (!t)
		return snprintf(err, n, "out of memory"), NULL;
	memset(t, 0, sizeof(*t));
	t->dtype = CPU_STRING;
	t->rank = (int)tp->n_dims;
	for (int d = 0; d < t->rank; d++)
		t->dims[d] = tp->dims[d];
	t->data = (char *)t + hdr;
	t->nbytes = ptrs;
	dst = (char *)t->data + ptrs;
	for (size_t i = 0; i < tp->n_string_data; i++) {
		((const char **)t->data)[i] = dst;
		if (tp->string_data[i].len)
			memcpy(dst, tp->string_data[i].data, tp->string_data[i].len);
		dst[tp->string_data[i].len] = 0;
		dst += tp->string_data[i].len + 1;
	}
	return t;
}
