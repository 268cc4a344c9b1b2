/*
 * vk_util: attribute and shape helpers of the Vulkan ops, and the op
 * registry (one table per family file).
 */
#include <stdio.h>
#include <string.h>

#include "vk_ops.h"

const Onnx__AttributeProto *vk_attr(const Onnx__NodeProto *p, const char *name)
{
	for (size_t i = 0; i < p->n_attribute; i++)
		if (p->attribute[i]->name && strcmp(p->attribute[i]->name, name) == 0)
			return p->attribute[i];
	return NULL;
}

int64_t vk_attr_int(const Onnx__NodeProto *p, const char *name, int64_t dflt)
{
	const Onnx__AttributeProto *a = vk_attr(p, name);

	return a && a->has_i ? a->i : dflt;
}

float vk_attr_float(const Onnx__NodeProto *p, const char *name, float dflt)
{
	const Onnx__AttributeProto *a = vk_attr(p, name);

	return a && a->has_f ? a->f : dflt;
}

int vk_attr_ints(const Onnx__NodeProto *p, const char *name, const int64_t **v)
{
	const Onnx__AttributeProto *a = vk_attr(p, name);

	if (!a)
		return -1;
	*v = a->ints;
	return (int)a->n_ints;
}

int vk_attr_is(const Onnx__NodeProto *p, const char *name, const char *want)
{
	const Onnx__AttributeProto *a = vk_attr(p, name);
	size_t n = strlen(want);

	return a && a->has_s && a->s.len == n && memcmp(a->s.data, want, n) == 0;
}

int vk_attr_unknown(const Onnx__NodeProto *p, const char *const *known, char *why, size_t n)
{
	for (size_t i = 0; i < p->n_attribute; i++) {
		const char *name = p->attribute[i]->name ? p->attribute[i]->name : "";
		int ok = 0;

		for (int k = 0; known[k] && !ok; k++)
			ok = strcmp(known[k], name) == 0;
		if (!ok) {
			snprintf(why, n, "attribute '%s' is not supported", name);
			return 1;
		}
	}
	return 0;
}

int vk_need_float(const Onnx__NodeProto *p, const int32_t *dt, int n_in, int first, int count,
		  char *why, size_t n)
{
	int end = count < 0 ? n_in : first + count;
	int32_t want = 0;

	for (int i = first; i < end && i < n_in; i++) {
		if (i < (int)p->n_input && !p->input[i][0])
			continue;
		if (!want && (dt[i] == VK_FLOAT || dt[i] == VK_FLOAT16))
			want = dt[i];
		if (!want || dt[i] != want) {   /* 0: a sequence, an optional, unknown */
			snprintf(why, n, "input %d is not %s (dtype %d)", i,
				 want == VK_FLOAT16 ? "float16 like input 0" : "float32", dt[i]);
			return 0;
		}
	}
	return 1;
}

int vk_n_outputs(const Onnx__NodeProto *p)
{
	int n = 0;

	for (size_t i = 0; i < p->n_output; i++)
		n += p->output[i][0] != 0;
	return n;
}

int64_t vk_numel(int rank, const int64_t *dims)
{
	int64_t n = 1;

	for (int i = 0; i < rank; i++)
		n *= dims[i];
	return n;
}

const char *vk_shape_str(int rank, const int64_t *dims, char *buf, size_t n)
{
	size_t at = 0;

	at += (size_t)snprintf(buf, n, "[");
	for (int i = 0; i < rank && at < n; i++)
		at += (size_t)snprintf(buf + at, n - at, "%s%lld", i ? "," : "", (long long)dims[i]);
	if (at < n)
		snprintf(buf + at, n - at, "]");
	return buf;
}

int64_t vk_get_int(const vk_val *v, int64_t i)
{
	if (v->dtype == VK_INT32)
		return ((const int32_t *)v->host)[i];
	return ((const int64_t *)v->host)[i];
}

int vk_axis(int64_t axis, int rank)
{
	if (axis < -rank || axis >= rank)
		return -1;
	return (int)(axis < 0 ? axis + rank : axis);
}

int vk_broadcast(int ra, const int64_t *a, int rb, const int64_t *b, int *ro, int64_t *out)
{
	int r = ra > rb ? ra : rb;

	if (r > EP_MAX_RANK)
		return -1;
	for (int i = 0; i < r; i++) {
		int64_t da = i < r - ra ? 1 : a[i - (r - ra)];
		int64_t db = i < r - rb ? 1 : b[i - (r - rb)];

		if (da != db && da != 1 && db != 1)
			return -1;
		out[i] = da == 1 ? db : da;
	}
	*ro = r;
	return 0;
}

/* The tensors of one side of a NodeQuery: refuses a float tensor whose
 * known size exceeds what one storage-buffer binding reaches. */
static int side_fits(const char *side, size_t n_t, const int32_t *dt, size_t n_dt,
		     const int32_t *ranks, const int64_t *dims, size_t n_dims,
		     uint64_t max_bytes, uint64_t f16_size, char *why, size_t n)
{
	size_t at = 0;

	for (size_t i = 0; i < n_t; i++) {
		int64_t numel = 1;
		int known = 1;
		uint64_t esz;

		if (ranks[i] < 0)
			continue;
		if ((size_t)ranks[i] > n_dims - at)
			return snprintf(why, n, "malformed shapes in the capability query"), 0;
		for (int d = 0; d < ranks[i]; d++, at++) {
			if (dims[at] < 0)
				known = 0;
			else if (numel <= VK_MAX_ELEMS)
				numel *= dims[at];
		}
		esz = i < n_dt && dt[i] == VK_FLOAT16 ? f16_size : i < n_dt && dt[i] == VK_FLOAT ? 4 : 0;
		if (!known || !esz)
			continue;
		if (numel >= VK_MAX_ELEMS || (uint64_t)numel * esz > max_bytes)
			return snprintf(why, n, "%s %zu has %lld elements: more than a storage buffer "
					"reaches (%llu bytes)", side, i, (long long)numel,
					(unsigned long long)max_bytes), 0;
	}
	return 1;
}

int vk_shapes_fit(const Ortmk__NodeQuery *q, uint64_t max_bytes, int f16, char *why, size_t n)
{
	uint64_t f16_size = f16 ? 2 : 4;

	return side_fits("input", q->n_input_ranks, q->input_dtypes, q->n_input_dtypes,
			 q->input_ranks, q->input_dims, q->n_input_dims, max_bytes, f16_size, why,
			 n) &&
	       side_fits("output", q->n_output_ranks, q->output_dtypes, q->n_output_dtypes,
			 q->output_ranks, q->output_dims, q->n_output_dims, max_bytes, f16_size, why,
			 n);
}

const vk_op *vk_op_find(const char *op_type, const char *domain, int64_t opset)
{
	static const vk_op *const tables[] = {vk_ops_elem, vk_ops_linalg, vk_ops_nn, vk_ops_norm,
					      vk_ops_shape, vk_ops_reduce};

	if (domain && domain[0] && strcmp(domain, "ai.onnx") != 0)
		return NULL;
	for (size_t t = 0; t < sizeof(tables) / sizeof(tables[0]); t++)
		for (const vk_op *op = tables[t]; op->op_type; op++)
			if (strcmp(op->op_type, op_type) == 0 && opset >= op->min_opset &&
			    opset <= op->max_opset)
				return op;
	return NULL;
}
