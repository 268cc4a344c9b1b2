/*
 * scan: ONNX Scan.  From opset 9 each scan input is sliced along its axis
 * (scan_input_axes), forwards or backwards (scan_input_directions); the
 * body gets the state variables and one slice of each; its scan outputs
 * are stacked along scan_output_axes, backwards where
 * scan_output_directions says so.  Opset 8 has a leading batch axis on
 * every input and output (the scan axis is the next one) and an optional
 * first input sequence_lens, accepted when it is the full length.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "control_ops.h"

static const char *const scan_graphs[] = {"body", NULL};

typedef struct scan_io {
	int n_state, n_scan, n_out;
	const cpu_tensor **state_in;   /* n_state, borrowed */
	cpu_tensor *scan_in;           /* n_scan views */
	int64_t *axes, *dirs;          /* per scan input, normalized */
	cpu_tensor *cur;               /* final states */
	int *cur_heap;
	ctl_stack *stacks;             /* scan outputs in iteration order */
	cpu_tensor *slice;             /* n_scan */
	const cpu_tensor **in;
	cpu_tensor *out;
	int *out_heap;
} scan_io;

static int scan_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt, int n_in,
			 char *why, size_t n)
{
	(void)dt;
	(void)n_in;
	return ctl_supports_graphs(p, opset, scan_graphs, why, n);
}

static void scan_release(cpu_node *node)
{
	cpu_graph_free(node->state);
	node->state = NULL;
}

static int scan_prepare(cpu_node *node, char *err, size_t n)
{
	cpu_graph *g = NULL;
	int rc = ctl_compile(node, "body", &g, err, n);
	int n_state = node->n_in - (int)cpu_attr_int(node->proto, "num_scan_inputs", 0) -
		(node->opset < 9);

	node->state = g;
	if (rc == 0 && (n_state < 0 || cpu_graph_n_outputs(g) < n_state ||
			cpu_graph_n_inputs(g) != node->n_in - (node->opset < 9))) {
		snprintf(err, n, "num_scan_inputs does not match the body and the node");
		rc = CPU_E_INVALID;
	}
	return rc;
}

/* Copies slice idx along axis of x into s (whose data has room). */
static void take_slice(const cpu_tensor *x, int64_t axis, int64_t idx, cpu_tensor *s)
{
	size_t es = cpu_dtype_size(x->dtype), inner = es;
	int64_t outer = 1, len = x->dims[axis];

	for (int d = 0; d < axis; d++)
		outer *= x->dims[d];
	for (int d = (int)axis + 1; d < x->rank; d++)
		inner *= (size_t)x->dims[d];
	for (int64_t o = 0; o < outer && inner; o++)
		memcpy((char *)s->data + (size_t)o * inner,
		       (const char *)x->data + ((size_t)(o * len + idx)) * inner, inner);
}

static int slices_alloc(cpu_ctx *ctx, scan_io *io, int64_t *len)
{
	*len = -1;
	for (int m = 0; m < io->n_scan; m++) {
		const cpu_tensor *x = &io->scan_in[m];
		cpu_tensor *s = &io->slice[m];
		int64_t a = io->axes[m];

		if (x->dtype == CPU_SEQUENCE || x->dtype == CPU_NONE || a < 0 || a >= x->rank)
			return cpu_fail(ctx, CPU_E_INVALID, "scan input %d: bad axis or not a tensor", m);
		if (*len >= 0 && x->dims[a] != *len)
			return cpu_fail(ctx, CPU_E_INVALID, "scan inputs differ in length");
		*len = x->dims[a];
		memset(s, 0, sizeof(*s));
		s->dtype = x->dtype;
		s->rank = x->rank - 1;
		for (int d = 0, k = 0; d < x->rank; d++)
			if (d != a)
				s->dims[k++] = x->dims[d];
		s->nbytes = (size_t)cpu_numel(s) * cpu_dtype_size(x->dtype);
		s->data = cpu_scratch(ctx, s->nbytes + 1);
		if (!s->data)
			return CPU_E_NOMEM;
	}
	if (*len < 0)
		return cpu_fail(ctx, CPU_E_INVALID, "Scan needs at least one scan input");
	return 0;
}

/* One iteration over slice t. */
static int scan_step(cpu_ctx *ctx, cpu_graph *g, scan_io *io, int64_t t, int64_t len)
{
	int n_body_out = cpu_graph_n_outputs(g), rc;

	for (int m = 0; m < io->n_scan; m++) {
		take_slice(&io->scan_in[m], io->axes[m], io->dirs[m] ? len - 1 - t : t, &io->slice[m]);
		io->in[io->n_state + m] = &io->slice[m];
	}
	for (int j = 0; j < io->n_state; j++)
		io->in[j] = &io->cur[j];
	if ((rc = cpu_graph_run(g, ctx, io->in, io->out, io->out_heap)))
		return rc;
	for (int j = 0; j < io->n_state && rc == 0; j++)
		rc = cpu_value_own(ctx, &io->out[j], &io->out_heap[j]);
	for (int k = 0; k < io->n_out && rc == 0; k++)
		rc = ctl_stack_push(ctx, &io->stacks[k], &io->out[io->n_state + k]);
	for (int j = 0; j < io->n_state && rc == 0; j++) {
		cpu_value_drop(&io->cur[j], &io->cur_heap[j]);
		io->cur[j] = io->out[j];
		io->cur_heap[j] = io->out_heap[j];
		io->out_heap[j] = 0;
	}
	for (int i = 0; i < n_body_out; i++)
		cpu_value_drop(&io->out[i], &io->out_heap[i]);
	return rc;
}

/* Runs the whole scan; the caller frees cur and stacks (scan_done). */
static int scan_core(cpu_ctx *ctx, cpu_graph *g, scan_io *io)
{
	int64_t len;
	int rc;

	for (int j = 0; j < io->n_state; j++) {
		io->cur[j] = *io->state_in[j];
		io->cur_heap[j] = 0;
	}
	for (int k = 0; k < io->n_out; k++)
		ctl_stack_init(&io->stacks[k]);
	rc = slices_alloc(ctx, io, &len);
	for (int64_t t = 0; rc == 0 && t < len; t++)
		rc = scan_step(ctx, g, io, t, len);
	return rc;
}

static void scan_done(scan_io *io)
{
	for (int j = 0; j < io->n_state; j++)
		cpu_value_drop(&io->cur[j], &io->cur_heap[j]);
	for (int k = 0; k < io->n_out; k++)
		ctl_stack_free(&io->stacks[k]);
}

static int io_alloc(cpu_ctx *ctx, cpu_graph *g, scan_io *io, int n_state, int n_scan)
{
	int nb = cpu_graph_n_outputs(g) + 1;

	memset(io, 0, sizeof(*io));
	io->n_state = n_state;
	io->n_scan = n_scan;
	io->n_out = nb - 1 - n_state;
	io->state_in = cpu_scratch(ctx, sizeof(*io->state_in) * (size_t)(n_state + 1));
	io->scan_in = cpu_scratch(ctx, sizeof(*io->scan_in) * (size_t)(n_scan + 1));
	io->axes = cpu_scratch(ctx, sizeof(int64_t) * (size_t)(n_scan + 1));
	io->dirs = cpu_scratch(ctx, sizeof(int64_t) * (size_t)(n_scan + 1));
	io->cur = cpu_scratch(ctx, sizeof(*io->cur) * (size_t)(n_state + 1));
	io->cur_heap = cpu_scratch(ctx, sizeof(int) * (size_t)(n_state + 1));
	io->stacks = cpu_scratch(ctx, sizeof(*io->stacks) * (size_t)(io->n_out + 1));
	io->slice = cpu_scratch(ctx, sizeof(*io->slice) * (size_t)(n_scan + 1));
	io->in = cpu_scratch(ctx, sizeof(*io->in) * (size_t)(n_state + n_scan + 1));
	io->out = cpu_scratch(ctx, sizeof(*io->out) * (size_t)nb);
	io->out_heap = cpu_scratch(ctx, sizeof(int) * (size_t)nb);
	if (!io->state_in || !io->scan_in || !io->axes || !io->dirs || !io->cur ||
	    !io->cur_heap || !io->stacks || !io->slice || !io->in || !io->out || !io->out_heap)
		return CPU_E_NOMEM;
	memset(io->out_heap, 0, sizeof(int) * (size_t)nb);
	return 0;
}

/* Attribute list value i, or dflt past its end. */
static int64_t attr_at(const Onnx__NodeProto *p, const char *name, int i, int64_t dflt)
{
	const int64_t *v;
	size_t n = cpu_attr_ints(p, name, &v);

	return (size_t)i < n ? v[i] : dflt;
}

/* Writes stack s into out: the items along axis, reversed when dir. */
static void arrange(const ctl_stack *s, int64_t axis, int dir, void *dst)
{
	size_t inner = s->item_bytes;
	int64_t outer = 1, len = s->count;

	for (int d = 0; d < axis; d++)
		outer *= s->dims[d];
	if (outer)
		inner /= (size_t)outer;
	for (int64_t t = 0; t < len; t++) {
		int64_t p = dir ? len - 1 - t : t;

		for (int64_t o = 0; o < outer && inner; o++)
			memcpy((char *)dst + ((size_t)(o * len + p)) * inner,
			       s->buf + (size_t)t * s->item_bytes + (size_t)o * inner, inner);
	}
}

static int emit_scan_output(cpu_ctx *ctx, cpu_graph *g, const scan_io *io, int k)
{
	const ctl_stack *s = &io->stacks[k];
	int64_t dims[CPU_MAX_RANK], axis = attr_at(ctx->node->proto, "scan_output_axes", k, 0);
	int i = io->n_state + k;
	cpu_tensor *t;

	if (s->rank < 0)
		return ctl_stack_emit(ctx, &io->stacks[k], i, cpu_graph_proto(g), i);
	if (axis < 0)
		axis += s->rank + 1;
	if (axis < 0 || axis > s->rank)
		return cpu_fail(ctx, CPU_E_INVALID, "scan_output_axes[%d] is out of range", k);
	for (int d = 0, j = 0; d <= s->rank; d++)
		dims[d] = d == axis ? s->count : s->dims[j++];
	if (!(t = cpu_output(ctx, i, s->dtype, s->rank + 1, dims)))
		return CPU_E_NOMEM;
	arrange(s, axis, (int)attr_at(ctx->node->proto, "scan_output_directions", k, 0), t->data);
	return 0;
}

static int scan9_compute(cpu_ctx *ctx)
{
	cpu_graph *g = ctx->node->state;
	int n_scan = (int)cpu_attr_int(ctx->node->proto, "num_scan_inputs", 0), rc;
	scan_io io;

	if (n_scan < 1 || n_scan > ctx->n_in)
		return cpu_fail(ctx, CPU_E_INVALID, "num_scan_inputs is %d", n_scan);
	if ((rc = io_alloc(ctx, g, &io, ctx->n_in - n_scan, n_scan)))
		return rc;
	for (int j = 0; j < io.n_state; j++)
		if (!(io.state_in[j] = cpu_input(ctx, j)))
			return cpu_fail(ctx, CPU_E_INVALID, "state input %d is missing", j);
	for (int m = 0; m < n_scan; m++) {
		const cpu_tensor *x = cpu_input(ctx, io.n_state + m);

		if (!x)
			return cpu_fail(ctx, CPU_E_INVALID, "scan input %d is missing", m);
		io.scan_in[m] = *x;
		io.axes[m] = attr_at(ctx->node->proto, "scan_input_axes", m, 0);
		io.axes[m] += io.axes[m] < 0 ? x->rank : 0;
		io.dirs[m] = attr_at(ctx->node->proto, "scan_input_directions", m, 0);
	}
	rc = scan_core(ctx, g, &io);
	for (int j = 0; j < io.n_state && j < ctx->n_out && rc == 0; j++)
		rc = cpu_value_emit(ctx, j, &io.cur[j]);
	for (int k = 0; k < io.n_out && rc == 0; k++)
		if (io.n_state + k < ctx->n_out)
			rc = emit_scan_output(ctx, g, &io, k);
	scan_done(&io);
	return rc;
}

/* ---- opset 8: a batch axis in front ---- */

static cpu_tensor batch_view(const cpu_tensor *x, int64_t b)
{
	cpu_tensor v = *x;
	size_t per = x->dims[0] ? x->nbytes / (size_t)x->dims[0] : 0;

	v.rank = x->rank - 1;
	memmove(v.dims, x->dims + 1, sizeof(int64_t) * (size_t)v.rank);
	v.data = (char *)x->data + per * (size_t)b;
	v.nbytes = per;
	return v;
}

/* Output i for batch entry b: allocated for all B at b == 0. */
static int put_batch(cpu_ctx *ctx, cpu_tensor **outs, int i, int64_t b, int64_t B,
		     const cpu_tensor *v)
{
	int64_t dims[CPU_MAX_RANK];

	if (v->dtype == CPU_SEQUENCE || v->dtype == CPU_NONE || v->rank + 1 > CPU_MAX_RANK)
		return cpu_fail(ctx, CPU_E_INVALID, "Scan-8 output %d must be a tensor", i);
	if (b == 0) {
		dims[0] = B;
		memcpy(dims + 1, v->dims, sizeof(int64_t) * (size_t)v->rank);
		if (!(outs[i] = cpu_output(ctx, i, v->dtype, v->rank + 1, dims)))
			return CPU_E_NOMEM;
	}
	if (outs[i]->dtype != v->dtype || outs[i]->rank != v->rank + 1 ||
	    memcmp(outs[i]->dims + 1, v->dims, sizeof(int64_t) * (size_t)v->rank))
		return cpu_fail(ctx, CPU_E_INVALID, "output %d differs in shape across the batch", i);
	if (v->nbytes)
		memcpy((char *)outs[i]->data + (size_t)b * v->nbytes, v->data, v->nbytes);
	return 0;
}

static int scan8_batch(cpu_ctx *ctx, cpu_graph *g, scan_io *io, cpu_tensor **outs,
		       int64_t b, int64_t B)
{
	cpu_tensor *views = cpu_scratch(ctx, sizeof(*views) * (size_t)(io->n_state + 1));
	int rc;

	if (!views)
		return CPU_E_NOMEM;
	for (int j = 0; j < io->n_state; j++) {
		views[j] = batch_view(cpu_input(ctx, 1 + j), b);
		io->state_in[j] = &views[j];
	}
	for (int m = 0; m < io->n_scan; m++) {
		io->scan_in[m] = batch_view(cpu_input(ctx, 1 + io->n_state + m), b);
		io->axes[m] = 0;
		io->dirs[m] = attr_at(ctx->node->proto, "directions", m, 0);
	}
	rc = scan_core(ctx, g, io);
	for (int j = 0; j < io->n_state && j < ctx->n_out && rc == 0; j++)
		rc = put_batch(ctx, outs, j, b, B, &io->cur[j]);
	for (int k = 0; k < io->n_out && rc == 0; k++) {
		cpu_tensor v = {.dtype = io->stacks[k].dtype, .rank = io->stacks[k].rank + 1,
				.data = io->stacks[k].buf};

		v.dims[0] = io->stacks[k].count;
		memcpy(v.dims + 1, io->stacks[k].dims, sizeof(int64_t) * (size_t)io->stacks[k].rank);
		v.nbytes = io->stacks[k].item_bytes * (size_t)io->stacks[k].count;
		if (io->n_state + k < ctx->n_out)
			rc = io->stacks[k].rank < 0 ?
				cpu_fail(ctx, CPU_E_UNSUPPORTED, "Scan-8 with no iterations") :
				put_batch(ctx, outs, io->n_state + k, b, B, &v);
	}
	scan_done(io);
	return rc;
}

static int scan8_compute(cpu_ctx *ctx)
{
	cpu_graph *g = ctx->node->state;
	int n_scan = (int)cpu_attr_int(ctx->node->proto, "num_scan_inputs", 0), rc;
	const cpu_tensor *lens = cpu_input(ctx, 0);
	cpu_tensor **outs = cpu_scratch(ctx, sizeof(*outs) * (size_t)(ctx->n_out + 1));
	int64_t B = -1;
	scan_io io;

	if (n_scan < 1 || n_scan > ctx->n_in - 1)
		return cpu_fail(ctx, CPU_E_INVALID, "num_scan_inputs is %d", n_scan);
	if (!outs || (rc = io_alloc(ctx, g, &io, ctx->n_in - 1 - n_scan, n_scan)))
		return CPU_E_NOMEM;
	for (int i = 1; i < ctx->n_in; i++) {
		const cpu_tensor *x = cpu_input(ctx, i);

		if (!x || x->dtype == CPU_SEQUENCE || x->dtype == CPU_NONE ||
		    x->rank < (i > io.n_state ? 2 : 1) ||
		    (B >= 0 && x->dims[0] != B))
			return cpu_fail(ctx, CPU_E_INVALID, "input %d: a tensor with the batch axis "
					"is needed", i);
		B = x->dims[0];
	}
	if (lens && lens->dtype != CPU_INT32)
		return cpu_fail(ctx, CPU_E_INVALID, "sequence_lens must be int32");
	for (int64_t i = 0; lens && i < cpu_numel(lens); i++) {
		int64_t full = cpu_input(ctx, 1 + io.n_state)->dims[1];

		if (((const int32_t *)lens->data)[i] != full)
			return cpu_fail(ctx, CPU_E_UNSUPPORTED, "sequence_lens shorter than the "
					"sequences");
	}
	for (int64_t b = 0; b < B; b++)
		if ((rc = scan8_batch(ctx, g, &io, outs, b, B)))
			return rc;
	return B > 0 ? 0 : cpu_fail(ctx, CPU_E_UNSUPPORTED, "Scan-8 with an empty batch");
}

const cpu_op cpu_op_scan8 = {
	"Scan", "", 8, 8, scan_supports, scan_prepare, scan8_compute, scan_release,
};
const cpu_op cpu_op_scan = {
	"Scan", "", 9, CPU_OPSET_MAX, scan_supports, scan_prepare, scan9_compute, scan_release,
};
