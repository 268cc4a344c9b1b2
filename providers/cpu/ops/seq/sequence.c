/*
 * sequence: ONNX SequenceEmpty, SequenceConstruct, SequenceInsert,
 * SequenceAt, SequenceErase and SequenceLength.  A new sequence shares the
 * items of the one it came from (they live in the arena or in shared
 * memory until the run ends); a tensor that joins a sequence is copied
 * into the arena, since its own buffer may be freed after its last use.
 */
#include <string.h>

#include "seq_ops.h"

static int empty_compute(cpu_ctx *ctx)
{
	int32_t dt = (int32_t)cpu_attr_int(ctx->node->proto, "dtype", CPU_FLOAT);

	if (!cpu_dtype_size(dt))
		return cpu_fail(ctx, CPU_E_UNSUPPORTED, "dtype %d", (int)dt);
	return cpu_output_sequence(ctx, 0, dt, 0) ? 0 : CPU_E_NOMEM;
}

static int tensor_in(cpu_ctx *ctx, int i, const cpu_tensor **t)
{
	*t = cpu_input(ctx, i);
	if (!*t || (*t)->dtype == CPU_SEQUENCE || (*t)->dtype == CPU_NONE)
		return cpu_fail(ctx, CPU_E_INVALID, "input %d must be a tensor", i);
	return 0;
}

static int construct_compute(cpu_ctx *ctx)
{
	const cpu_tensor *t;
	cpu_seq *s;
	int rc;

	if (ctx->n_in < 1)
		return cpu_fail(ctx, CPU_E_INVALID, "SequenceConstruct needs an input");
	for (int i = 0; i < ctx->n_in; i++) {
		if ((rc = tensor_in(ctx, i, &t)))
			return rc;
		if (t->dtype != ctx->in[0]->dtype)
			return cpu_fail(ctx, CPU_E_INVALID, "inputs differ in dtype");
	}
	if (!(s = cpu_output_sequence(ctx, 0, ctx->in[0]->dtype, (size_t)ctx->n_in)))
		return CPU_E_NOMEM;
	for (int i = 0; i < ctx->n_in; i++)
		if ((rc = cpu_value_to_arena(ctx, ctx->in[i], &s->items[i])))
			return rc;
	return 0;
}

static int insert_compute(cpu_ctx *ctx)
{
	const cpu_seq *in;
	const cpu_tensor *t;
	cpu_seq *s;
	int64_t pos;
	int rc = 0;

	if (!(in = seq_input(ctx, 0, &rc)) || (rc = tensor_in(ctx, 1, &t)))
		return rc;
	if (in->elem_dtype != CPU_UNDEFINED && in->elem_dtype != t->dtype)
		return cpu_fail(ctx, CPU_E_INVALID, "inserting %s into a sequence of %s",
				cpu_dtype_name(t->dtype), cpu_dtype_name(in->elem_dtype));
	if ((rc = seq_position(ctx, 2, in->n, 1, (int64_t)in->n, &pos)))
		return rc;
	if (!(s = cpu_output_sequence(ctx, 0, t->dtype, in->n + 1)))
		return CPU_E_NOMEM;
	memcpy(s->items, in->items, (size_t)pos * sizeof(cpu_tensor));
	memcpy(s->items + pos + 1, in->items + pos, (in->n - (size_t)pos) * sizeof(cpu_tensor));
	return cpu_value_to_arena(ctx, t, &s->items[pos]);
}

static int at_compute(cpu_ctx *ctx)
{
	const cpu_seq *in;
	int64_t pos;
	int rc = 0;

	if (!(in = seq_input(ctx, 0, &rc)))
		return rc;
	if (!cpu_input(ctx, 1))
		return cpu_fail(ctx, CPU_E_INVALID, "position is required");
	if ((rc = seq_position(ctx, 1, in->n, 0, 0, &pos)))
		return rc;
	return cpu_value_emit(ctx, 0, &in->items[pos]);
}

static int erase_compute(cpu_ctx *ctx)
{
	const cpu_seq *in;
	cpu_seq *s;
	int64_t pos;
	int rc = 0;

	if (!(in = seq_input(ctx, 0, &rc)))
		return rc;
	if (in->n == 0)
		return cpu_fail(ctx, CPU_E_INVALID, "erasing from an empty sequence");
	if ((rc = seq_position(ctx, 1, in->n, 0, -1, &pos)))
		return rc;
	if (!(s = cpu_output_sequence(ctx, 0, in->elem_dtype, in->n - 1)))
		return CPU_E_NOMEM;
	memcpy(s->items, in->items, (size_t)pos * sizeof(cpu_tensor));
	memcpy(s->items + pos, in->items + pos + 1, (in->n - 1 - (size_t)pos) * sizeof(cpu_tensor));
	return 0;
}

static int length_compute(cpu_ctx *ctx)
{
	const cpu_seq *in;
	cpu_tensor *y;
	int rc = 0;

	if (!(in = seq_input(ctx, 0, &rc)))
		return rc;
	if (!(y = cpu_output(ctx, 0, CPU_INT64, 0, NULL)))
		return CPU_E_NOMEM;
	*(int64_t *)y->data = (int64_t)in->n;
	return 0;
}

const cpu_op cpu_op_sequenceempty = {
	"SequenceEmpty", "", 11, CPU_OPSET_MAX, NULL, NULL, empty_compute, NULL,
};
const cpu_op cpu_op_sequenceconstruct = {
	"SequenceConstruct", "", 11, CPU_OPSET_MAX, NULL, NULL, construct_compute, NULL,
};
const cpu_op cpu_op_sequenceinsert = {
	"SequenceInsert", "", 11, CPU_OPSET_MAX, NULL, NULL, insert_compute, NULL,
};
const cpu_op cpu_op_sequenceat = {
	"SequenceAt", "", 11, CPU_OPSET_MAX, NULL, NULL, at_compute, NULL,
};
const cpu_op cpu_op_sequenceerase = {
	"SequenceErase", "", 11, CPU_OPSET_MAX, NULL, NULL, erase_compute, NULL,
};
const cpu_op cpu_op_sequencelength = {
	"SequenceLength", "", 11, CPU_OPSET_MAX, NULL, NULL, length_compute, NULL,
};
