/*
 * control_util: helpers of the control-flow ops (control_ops.h): graph
 * attributes, conditions, and stacking the per-iteration outputs of Loop
 * and Scan.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "control_ops.h"
#include "cpu_node.h"
#include "ops_table.h"

int ctl_compile(const cpu_node *node, const char *name, cpu_graph **g, char *err, size_t n)
{
	const Onnx__AttributeProto *a = cpu_attr(node->proto, name);
	cpu_load_env env = {node->ops, node->pack, node->opsets, 0};

	if (!a || !a->g)
		return snprintf(err, n, "attribute '%s' (a graph) is missing", name), CPU_E_INVALID;
	return cpu_graph_compile(a->g, &env, node->opset, g, err, n);
}

int ctl_supports_graphs(const Onnx__NodeProto *p, int64_t opset, const char *const *attrs,
			char *why, size_t n)
{
	for (int i = 0; attrs[i]; i++) {
		const Onnx__AttributeProto *a = cpu_attr(p, attrs[i]);

		if (!a || !a->g) {
			snprintf(why, n, "attribute '%s' (a graph) is missing", attrs[i]);
			return 0;
		}
	}
	return cpu_graph_supported(&cpu_optable_all, p, opset, why, n);
}

int ctl_read_bool(cpu_ctx *ctx, const cpu_tensor *t, const char *what, int *out)
{
	if (!t || t->dtype == CPU_SEQUENCE || t->dtype == CPU_NONE || t->dtype == CPU_STRING ||
	    cpu_numel(t) != 1)
		return cpu_fail(ctx, CPU_E_INVALID, "%s must be a tensor of one element", what);
	*out = cpu_dtype_is_float(t->dtype) ? cpu_get_f64(t->dtype, t->data, 0) != 0.0 :
		cpu_get_i64(t->dtype, t->data, 0) != 0;
	return 0;
}

int32_t ctl_output_elem_type(const Onnx__GraphProto *gp, int i)
{
	const Onnx__TypeProto *t;

	if (!gp || i < 0 || (size_t)i >= gp->n_output || !(t = gp->output[i]->type))
		return CPU_UNDEFINED;
	if (t->value_case == ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE && t->sequence_type)
		t = t->sequence_type->elem_type;
	if (t && t->value_case == ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE && t->tensor_type &&
	    t->tensor_type->has_elem_type)
		return t->tensor_type->elem_type;
	return CPU_UNDEFINED;
}

void ctl_stack_init(ctl_stack *s)
{
	memset(s, 0, sizeof(*s));
	s->rank = -1;
}

static int same_shape(const ctl_stack *s, const cpu_tensor *t)
{
	if (t->dtype != s->dtype || t->rank != s->rank)
		return 0;
	for (int d = 0; d < t->rank; d++)
		if (t->dims[d] != s->dims[d])
			return 0;
	return 1;
}

int ctl_stack_push(cpu_ctx *ctx, ctl_stack *s, const cpu_tensor *item)
{
	size_t need;

	if (item->dtype == CPU_SEQUENCE || item->dtype == CPU_NONE)
		return cpu_fail(ctx, CPU_E_INVALID, "a scan output must be a tensor");
	if (s->rank < 0) {
		s->dtype = item->dtype;
		s->rank = item->rank;
		memcpy(s->dims, item->dims, sizeof(int64_t) * (size_t)item->rank);
		s->item_bytes = item->nbytes;
		if (item->rank >= CPU_MAX_RANK)
			return cpu_fail(ctx, CPU_E_UNSUPPORTED, "scan output of rank %d", item->rank);
	} else if (!same_shape(s, item)) {
		return cpu_fail(ctx, CPU_E_INVALID, "scan output changes dtype or shape "
				"between iterations");
	}
	need = (size_t)(s->count + 1) * s->item_bytes;
	if (need > s->cap) {
		size_t cap = s->cap ? s->cap * 2 : s->item_bytes * 4 + 64;
		char *b;

		while (cap < need)
			cap *= 2;
		b = realloc(s->buf, cap);
		if (!b)
			return cpu_fail(ctx, CPU_E_NOMEM, "out of memory (%zu bytes)", cap);
		s->buf = b;
		s->cap = cap;
	}
	if (s->item_bytes)
		memcpy(s->buf + (size_t)s->count * s->item_bytes, item->data, s->item_bytes);
	s->count++;
	return 0;
}

/* The item shape a graph output declares, when every dim is known. */
static int declared_item(const Onnx__GraphProto *gp, int gi, int *rank, int64_t *dims)
{
	const Onnx__TypeProto *t = gp && gi >= 0 && (size_t)gi < gp->n_output ?
		gp->output[gi]->type : NULL;
	const Onnx__TensorShapeProto *sh;

	if (!t || t->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !t->tensor_type ||
	    !(sh = t->tensor_type->shape) || sh->n_dim >= CPU_MAX_RANK)
		return 0;
	for (size_t d = 0; d < sh->n_dim; d++) {
		if (sh->dim[d]->value_case != ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE)
			return 0;
		dims[d] = sh->dim[d]->dim_value;
	}
	*rank = (int)sh->n_dim;
	return 1;
}

int ctl_stack_emit(cpu_ctx *ctx, ctl_stack *s, int i, const Onnx__GraphProto *gp, int gi)
{
	int64_t dims[CPU_MAX_RANK];
	cpu_tensor *t;

	if (s->rank < 0) {
		int32_t dt = ctl_output_elem_type(gp, gi);
		int rank = 0;

		dims[0] = 0;
		if (!declared_item(gp, gi, &rank, dims + 1))
			rank = 0;
		t = cpu_output(ctx, i, dt ? dt : CPU_FLOAT, rank + 1, dims);
		return t ? 0 : CPU_E_NOMEM;
	}
	dims[0] = s->count;
	memcpy(dims + 1, s->dims, sizeof(int64_t) * (size_t)s->rank);
	t = cpu_output(ctx, i, s->dtype, s->rank + 1, dims);
	if (!t)
		return CPU_E_NOMEM;
	if (t->nbytes)
		memcpy(t->data, s->buf, t->nbytes);
	return 0;
}

void ctl_stack_free(ctl_stack *s)
{
	free(s->buf);
	ctl_stack_init(s);
}
