/*
 * cpu_node: the per-node glue between the CPU provider's graph executor
 * (cpu_exec.c) and the operators (ops/).  It resolves a node to its op
 * table entry, checks the inputs the executor hands over, implements
 * cpu_output and cpu_scratch for the kernels, and prefixes every error with
 * the node's name and op type.  See cpu_node.h for the contract.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_f16.h"
#include "cpu_map.h"
#include "cpu_node.h"

/* State of one cpu_node_run, reached from cpu_ctx.exec. */
typedef struct exec_run {
	const cpu_tensor **planned;
	cpu_tensor *out;
	int *out_heap;
	unsigned char *given;    /* n_out flags: output i handed to the kernel */
	unsigned char given_buf[32];
	void **scratch;          /* singly linked blocks; first word links */
	cpu_keep *keep;          /* the node's kept scratch, or NULL */
	size_t keep_used;        /* bytes of keep handed out */
	size_t scratch_total;    /* bytes every cpu_scratch of this run asked */
	int status;              /* first failure of cpu_output/cpu_scratch */
	/* widened float16 (cpu_f16.c): per output, the float32 tensor the
	 * kernel writes, narrowed into out[i] after compute; NULL when not */
	cpu_tensor **narrow;
} exec_run;

/* The float32 copies of a node's float16 constants (CPU_F16_WIDEN). */
struct cpu_node_f16 {
	const cpu_tensor **consts;   /* what prepare saw: widened where float16 */
	const cpu_tensor **orig;     /* the float16 constant, where widened */
	cpu_tensor **wide;           /* owned */
};

enum { SCRATCH_HDR = 64 };

static const char *norm_domain(const char *d)
{
	if (!d || strcmp(d, "ai.onnx") == 0)
		return "";
	return d;
}

static const char *node_name(const Onnx__NodeProto *p)
{
	if (p && p->name && p->name[0])
		return p->name;
	if (p && p->n_output > 0 && p->output[0])
		return p->output[0];
	return "";
}

/* Rewrites err as "node 'name' (Op): <err>". */
static void prefix_err(const Onnx__NodeProto *p, int rc, char *err, size_t n)
{
	char msg[512];
	if (!err || n == 0)
		return;
	if (err[0])
		snprintf(msg, sizeof(msg), "%s", err);
	else
		snprintf(msg, sizeof(msg), "failed with status %d", rc);
	snprintf(err, n, "node '%s' (%s): %s", node_name(p),
		 p && p->op_type ? p->op_type : "?", msg);
}

const cpu_op *cpu_op_find(const cpu_optable *t, const char *op_type, const char *domain,
			  int64_t opset)
{
	if (!t || !op_type)
		return NULL;
	domain = norm_domain(domain);
	for (size_t i = 0; i < t->n; i++) {
		const cpu_op *op = t->ops[i];

		if (strcmp(op->op_type, op_type) == 0 && strcmp(op->domain, domain) == 0 &&
		    opset >= op->min_opset && opset <= op->max_opset)
			return op;
	}
	return NULL;
}

int cpu_node_supported(const cpu_optable *ops, const Onnx__NodeProto *p, int64_t opset,
		       const int32_t *in_dtypes, int n_in, char *why, size_t n)
{
	const cpu_op *op;
	if (why && n)
		why[0] = '\0';
	if (!p || !p->op_type) {
		snprintf(why, n, "node without op_type");
		return 0;
	}
	op = cpu_op_find(ops, p->op_type, p->domain, opset);
	if (!op) {
		snprintf(why, n, "no kernel for op '%s' (domain '%s', opset %lld)", p->op_type,
			 norm_domain(p->domain), (long long)opset);
		return 0;
	}
	if (op->supports && !op->supports(p, opset, in_dtypes, n_in, why, n) &&
	    !cpu_f16_widens(op, p, opset, in_dtypes, n_in))
		return 0;
	return 1;
}

static void f16_free(struct cpu_node_f16 *f, int n_in)
{
	if (!f)
		return;
	for (int i = 0; f->wide && i < n_in; i++)
		free(f->wide[i]);
	free(f->consts);
	free(f->orig);
	free(f->wide);
	free(f);
}

/* A node whose op refuses its float16 constants but takes them as
 * float32 is prepared with float32 copies: packed weights come from
 * them, and runs use them in place of the float16 inputs. */
static int f16_init(cpu_node *node)
{
	int32_t dt[64];
	struct cpu_node_f16 *f;
	int any = 0;

	if (!node->consts || node->n_in > 64)
		return 0;
	for (int i = 0; i < node->n_in; i++) {
		dt[i] = node->consts[i] ? node->consts[i]->dtype : CPU_UNDEFINED;
		any |= dt[i] == CPU_FLOAT16;
	}
	if (!any || !cpu_f16_widens(node->op, node->proto, node->opset, dt, node->n_in))
		return 0;
	node->f16_mode = CPU_F16_WIDEN;
	f = node->f16 = calloc(1, sizeof(*f));
	if (!f)
		return CPU_E_NOMEM;
	f->consts = calloc((size_t)node->n_in, sizeof(*f->consts));
	f->orig = calloc((size_t)node->n_in, sizeof(*f->orig));
	f->wide = calloc((size_t)node->n_in, sizeof(*f->wide));
	if (!f->consts || !f->orig || !f->wide)
		return CPU_E_NOMEM;
	for (int i = 0; i < node->n_in; i++) {
		f->consts[i] = node->consts[i];
		if (dt[i] != CPU_FLOAT16)
			continue;
		if (!(f->wide[i] = cpu_f16_widen_tensor(node->consts[i])))
			return CPU_E_NOMEM;
		f->orig[i] = node->consts[i];
		f->consts[i] = f->wide[i];
	}
	node->consts = f->consts;
	return 0;
}

int cpu_node_f16_decide(cpu_node *node, const int32_t *dt)
{
	int any = 0;

	if (!node->op || node->f16_mode != CPU_F16_UNDECIDED || node->n_in > 64)
		return node->f16_mode;
	for (int i = 0; i < node->n_in; i++) {
		if (dt[i] < 0)
			return node->f16_mode;
		any |= dt[i] == CPU_FLOAT16;
	}
	if (any)
		node->f16_mode = cpu_f16_widens(node->op, node->proto, node->opset, dt, node->n_in) ?
			CPU_F16_WIDEN : CPU_F16_AS_IS;
	return node->f16_mode;
}

int cpu_node_init(cpu_node *node, const cpu_load_env *env, const cpu_fusion *fuse,
		  const Onnx__NodeProto *p, int64_t opset, const cpu_tensor **consts,
		  int n_in, int n_out, char *err, size_t n)
{
	const cpu_op *op;
	int rc;
	if (err && n)
		err[0] = '\0';
	memset(node, 0, sizeof(*node));
	node->pack = env->pack;
	node->opsets = env->opsets;
	node->ops = env->ops;
	node->fuse = fuse;
	node->layout = env->layout;
	if (!p || !p->op_type || n_in < 0 || n_out < 0) {
		snprintf(err, n, "invalid node");
		return CPU_E_INVALID;
	}
	op = cpu_op_find(env->ops, p->op_type, p->domain, opset);
	if (!op) {
		snprintf(err, n, "no kernel for op '%s' (domain '%s', opset %lld)", p->op_type,
			 norm_domain(p->domain), (long long)opset);
		prefix_err(p, CPU_E_UNSUPPORTED, err, n);
		return CPU_E_UNSUPPORTED;
	}
	node->op = op;
	node->proto = p;
	node->opset = opset;
	node->n_in = n_in;
	node->n_out = n_out;
	node->consts = consts;
	rc = f16_init(node);
	if (rc) {
		snprintf(err, n, "out of memory");
		prefix_err(p, rc, err, n);
		cpu_node_fini(node);
		return rc;
	}
	if (!op->prepare)
		return 0;
	rc = op->prepare(node, err, n);
	if (rc == 0)
		return 0;
	if (rc > 0)
		rc = CPU_E_INTERNAL;
	prefix_err(p, rc, err, n);
	cpu_node_fini(node);
	return rc;
}

void cpu_node_fini(cpu_node *node)
{
	if (!node)
		return;
	if (node->op && node->op->release)
		node->op->release(node);
	f16_free(node->f16, node->n_in);
	for (int i = 0; i < node->n_packed; i++)
		free(node->packed[i]);
	free(node->packed);
	memset(node, 0, sizeof(*node));
}

void cpu_keep_free(cpu_keep *k)
{
	if (!k)
		return;
	free(k->p);
	k->p = NULL;
	k->size = 0;
	for (int i = 0; i < CPU_KEEP_BIG; i++) {
		free(k->big[i]);
		k->big[i] = NULL;
		k->big_cap[i] = 0;
	}
}

void *cpu_keep_alloc(cpu_keep *k, size_t bytes)
{
	int best = -1;

	if (k && bytes >= CPU_KEEP_BIG_MIN)
		for (int i = 0; i < CPU_KEEP_BIG; i++)
			if (k->big[i] && k->big_cap[i] >= bytes && k->big_cap[i] / 2 <= bytes &&
			    (best < 0 || k->big_cap[i] < k->big_cap[best]))
				best = i;
	if (best >= 0) {
		void *p = k->big[best];

		k->big[best] = NULL;
		k->big_cap[best] = 0;
		return p;
	}
	return aligned_alloc(64, (bytes + 64) & ~(size_t)63);
}

void cpu_keep_release(cpu_keep *k, void *p, size_t bytes)
{
	int slot = -1;

	if (!p)
		return;
	if (k && bytes >= CPU_KEEP_BIG_MIN) {
		for (int i = 0; i < CPU_KEEP_BIG && slot < 0; i++)
			if (!k->big[i])
				slot = i;
		/* all taken: the smallest block goes if this one is larger */
		for (int i = 0; i < CPU_KEEP_BIG && slot < 0; i++)
			if (k->big_cap[i] < bytes)
				slot = i;
		for (int i = 0; slot >= 0 && k->big[slot] && i < CPU_KEEP_BIG; i++)
			if (k->big_cap[i] < k->big_cap[slot])
				slot = i;
	}
	if (slot < 0) {
		free(p);
		return;
	}
	free(k->big[slot]);
	k->big[slot] = p;
	k->big_cap[slot] = bytes;
}

/* Even an empty tensor's non-zero dims must multiply (times an element
 * size) without overflow: kernels compute strides and byte offsets. */
static int dims_bounded(const cpu_tensor *t)
{
	int64_t nz = 1;
	for (int d = 0; d < t->rank; d++) {
		if (t->dims[d] > 0 && nz > (INT64_MAX / 16) / t->dims[d])
			return 0;
		nz *= t->dims[d] > 0 ? t->dims[d] : 1;
	}
	return 1;
}

/* The executor hands tensors over shared memory: check that each describes
 * itself consistently before a kernel trusts its dims and nbytes. */
static int check_inputs(cpu_ctx *ctx)
{
	for (int i = 0; i < ctx->n_in; i++) {
		const cpu_tensor *t = ctx->in[i];
		size_t es;
		int64_t numel;
		if (!t || t->dtype == CPU_NONE)
			continue;
		if (t->dtype == CPU_SEQUENCE) {
			if (!t->data)
				return cpu_fail(ctx, CPU_E_INVALID, "input %d: sequence without items", i);
			continue;
		}
		if (t->rank < 0 || t->rank > CPU_MAX_RANK)
			return cpu_fail(ctx, CPU_E_INVALID, "input %d: rank %d out of range", i, t->rank);
		es = cpu_dtype_size(t->dtype);
		if (es == 0)
			return cpu_fail(ctx, CPU_E_UNSUPPORTED, "input %d: dtype %s is not supported",
					i, cpu_dtype_name(t->dtype));
		numel = cpu_numel(t);
		if (numel < 0 || (uint64_t)numel > SIZE_MAX / es || !dims_bounded(t))
			return cpu_fail(ctx, CPU_E_INVALID, "input %d: invalid dims", i);
		if (t->nbytes < (size_t)numel * es || (numel > 0 && !t->data))
			return cpu_fail(ctx, CPU_E_INVALID, "input %d: %zu bytes for %lld %s elements",
					i, t->nbytes, (long long)numel, cpu_dtype_name(t->dtype));
	}
	return 0;
}

/* Frees this run's overflow scratch and grows the node's kept block to
 * what the run needed in all, so the next run with the same shapes
 * allocates nothing (XNNPACK's "setup" done once per shape). */
static void run_cleanup(exec_run *run)
{
	int overflowed = run->scratch != NULL;

	while (run->scratch) {
		void **next = run->scratch[0];
		free(run->scratch);
		run->scratch = next;
	}
	if (run->given != run->given_buf)
		free(run->given);
	run->given = NULL;
	if (overflowed && run->keep && run->scratch_total > run->keep->size) {
		void *p = aligned_alloc(64, run->scratch_total);

		if (p) {
			free(run->keep->p);
			run->keep->p = p;
			run->keep->size = run->scratch_total;
		}
	}
}

/* The float16 inputs of a widened node as float32 (constants widened at
 * load, the others into scratch); its float32 outputs are narrowed after
 * compute (cpu_output hands the kernel float32 scratch, run.narrow).
 * A node of an op that takes its float16 inputs as they are is marked so
 * and never looked at again. */
static int f16_begin(cpu_ctx *ctx)
{
	cpu_node *node = ctx->node;
	exec_run *run = ctx->exec;
	const struct cpu_node_f16 *f = node->f16;
	const cpu_tensor **in;
	int32_t dt[64];
	int any = 0;

	for (int i = 0; i < ctx->n_in && i < 64; i++) {
		dt[i] = ctx->in[i] ? ctx->in[i]->dtype : CPU_UNDEFINED;
		any |= dt[i] == CPU_FLOAT16;
	}
	/* a node widened at load runs widened even when every float16 input
	 * arrives as float32 (cpu_plan_wide): its other outputs narrow */
	if (!any && node->f16_mode != CPU_F16_WIDEN)
		return 0;
	if (node->f16_mode == CPU_F16_UNDECIDED)
		node->f16_mode = ctx->n_in <= 64 && cpu_f16_widens(node->op, node->proto, node->opset,
								   dt, ctx->n_in) ?
			CPU_F16_WIDEN : CPU_F16_AS_IS;
	if (node->f16_mode != CPU_F16_WIDEN)
		return 0;
	in = cpu_scratch(ctx, sizeof(*in) * (size_t)ctx->n_in + 1);
	run->narrow = cpu_scratch(ctx, sizeof(*run->narrow) * (size_t)ctx->n_out + 1);
	if (!in || !run->narrow)
		return CPU_E_NOMEM;
	memset(run->narrow, 0, sizeof(*run->narrow) * (size_t)ctx->n_out);
	for (int i = 0; i < ctx->n_in; i++) {
		const cpu_tensor *t = ctx->in[i];
		cpu_tensor *w;

		in[i] = t;
		if (!t || t->dtype != CPU_FLOAT16)
			continue;
		if (f && f->orig[i] && f->orig[i]->data == t->data) {
			in[i] = f->wide[i];
			continue;
		}
		w = cpu_scratch(ctx, sizeof(*w) + 64 + (size_t)cpu_numel(t) * sizeof(float));
		if (!w)
			return CPU_E_NOMEM;
		*w = *t;
		w->dtype = CPU_FLOAT;
		w->data = (char *)w + ((sizeof(*w) + 63) & ~(size_t)63);
		w->nbytes = (size_t)cpu_numel(t) * sizeof(float);
		cpu_f16_widen(t->data, w->data, cpu_numel(t));
		in[i] = w;
	}
	ctx->in = in;
	return 0;
}

static void f16_end(cpu_ctx *ctx)
{
	exec_run *run = ctx->exec;

	for (int i = 0; i < ctx->n_out; i++)
		if (run->narrow[i] && run->given[i])
			cpu_f16_narrow(run->narrow[i]->data, run->out[i].data,
				       cpu_numel(&run->out[i]));
}

int cpu_node_run(cpu_node *node, const cpu_run_env *env, const cpu_tensor **in,
		 const cpu_tensor **planned, cpu_tensor *out, int *out_heap, char *err,
		 size_t n)
{
	exec_run run;
	cpu_ctx ctx;
	int rc;

	if (err && n)
		err[0] = '\0';
	if (!node || !node->op) {
		snprintf(err, n, "node is not initialized");
		return CPU_E_INTERNAL;
	}
	memset(&run, 0, sizeof(run));
	memset(&ctx, 0, sizeof(ctx));
	for (int i = 0; i < node->n_out; i++) {
		memset(&out[i], 0, sizeof(out[i]));
		out_heap[i] = 0;
	}
	run.planned = planned;
	run.keep = env->keep;
	run.out = out;
	run.out_heap = out_heap;
	if ((size_t)node->n_out + 1 <= sizeof(run.given_buf))
		run.given = memset(run.given_buf, 0, sizeof(run.given_buf));
	else
		run.given = calloc((size_t)node->n_out + 1, 1);
	ctx.node = node;
	ctx.n_in = node->n_in;
	ctx.n_out = node->n_out;
	ctx.in = in;
	ctx.arena = env->arena;
	ctx.scope = env->scope;
	ctx.pool = env->pool;
	ctx.exec = &run;
	ctx.threads = env->threads > 0 ? env->threads : 1;
	ctx.cancel = env->cancel;
	ctx.cancel_token = env->cancel_token;
	ctx.prof = env->prof;
	ctx.prof_parent = env->prof_parent;
	ctx.prof_depth = env->prof_depth;
	ctx.err = err;
	ctx.errlen = n;
	if (!run.given)
		rc = cpu_fail(&ctx, CPU_E_NOMEM, "out of memory");
	else
		rc = check_inputs(&ctx);
	if (rc == 0 && node->f16_mode != CPU_F16_AS_IS)
		rc = f16_begin(&ctx);
	if (rc == 0)
		rc = node->op->compute(&ctx);
	if (rc == 0 && run.narrow)
		f16_end(&ctx);
	if (rc != 0 && run.status != 0)
		rc = run.status;   /* cpu_output/cpu_scratch know the real cause */
	if (rc > 0)
		rc = CPU_E_INTERNAL;
	run_cleanup(&run);
	if (rc == 0)
		return 0;
	for (int i = 0; i < node->n_out; i++) {
		if (out_heap[i])
			cpu_keep_release(env->keep, out[i].data, out[i].nbytes);
		memset(&out[i], 0, sizeof(out[i]));
		out_heap[i] = 0;
	}
	prefix_err(node->proto, rc, err, n);
	return rc;
}

/* ---- services for the kernels ---- */

void *cpu_scratch(cpu_ctx *ctx, size_t nbytes)
{
	exec_run *run = ctx->exec;
	cpu_keep *keep = run->keep;
	size_t need = (nbytes + 63) & ~(size_t)63;
	void **blk;

	if (nbytes <= SIZE_MAX / 4) {
		run->scratch_total += need + 64;
		if (keep && keep->p && keep->size - run->keep_used >= need) {
			void *p = (char *)keep->p + run->keep_used;

			run->keep_used += need;
			return p;
		}
	}
	if (nbytes > SIZE_MAX / 2) {
		blk = NULL;
	} else {
		blk = aligned_alloc(64, (SCRATCH_HDR + nbytes + 63) & ~(size_t)63);
	}
	if (!blk) {
		if (!run->status)
			run->status = cpu_fail(ctx, CPU_E_NOMEM,
					       "out of memory (%zu bytes of scratch)", nbytes);
		return NULL;
	}
	blk[0] = run->scratch;
	run->scratch = blk;
	return (char *)blk + SCRATCH_HDR;
}

static cpu_tensor *output_fail(cpu_ctx *ctx, int code, const char *msg)
{
	exec_run *run = ctx->exec;
	if (!run->status)
		run->status = cpu_fail(ctx, code, "%s", msg);
	return NULL;
}

/* Output i exists in the graph (not an omitted optional output). */
static int output_present(const cpu_ctx *ctx, int i)
{
	const Onnx__NodeProto *p = ctx->node->proto;
	if (i >= ctx->n_out)
		return 0;
	if (p && (size_t)i < p->n_output && p->output[i] && p->output[i][0] == '\0')
		return 0;
	return 1;
}

static cpu_tensor *planned_output(cpu_ctx *ctx, int i, int32_t dtype, int rank,
				  const int64_t *dims, size_t bytes)
{
	exec_run *run = ctx->exec;
	const cpu_tensor *p = run->planned[i];
	char msg[400], ps[160], cs[160];
	int same = p->dtype == dtype && p->rank == rank;
	for (int d = 0; same && d < rank; d++)
		same = p->dims[d] == dims[d];
	if (!same) {
		snprintf(msg, sizeof(msg), "output %d: planned %s %s but computed %s %s", i,
			 cpu_dtype_name(p->dtype),
			 cpu_shape_str(p->rank < 0 || p->rank > CPU_MAX_RANK ? 0 : p->rank,
				       p->dims, ps, sizeof(ps)),
			 cpu_dtype_name(dtype), cpu_shape_str(rank, dims, cs, sizeof(cs)));
		return output_fail(ctx, CPU_E_SHAPE, msg);
	}
	if (p->nbytes < bytes || (bytes && !p->data)) {
		snprintf(msg, sizeof(msg), "output %d: planned buffer of %zu bytes, need %zu",
			 i, p->nbytes, bytes);
		return output_fail(ctx, CPU_E_INTERNAL, msg);
	}
	run->out[i] = *p;
	run->given[i] = 1;
	return &run->out[i];
}

static cpu_tensor *output_at(cpu_ctx *ctx, int i, int32_t dtype, int rank, const int64_t *dims,
			     int placed_ok);

/* A widened node's float32 output i: the graph's float16 tensor is made
 * (planned or allocated) and the kernel writes a float32 twin in
 * scratch, narrowed into it after compute. */
static cpu_tensor *output_narrowed(cpu_ctx *ctx, int i, int rank, const int64_t *dims)
{
	exec_run *run = ctx->exec;
	cpu_tensor *t, *w;

	/* a value only widened nodes read stays float32: in the executor's
	 * float32 twin of the place the core planned for it (planned[i] then
	 * says float32), else on the heap */
	if (cpu_output_kept_wide(ctx, i))
		return cpu_output_wide(ctx, i, rank, dims);
	t = output_at(ctx, i, CPU_FLOAT16, rank, dims, 1);
	if (!t)
		return NULL;
	w = cpu_scratch(ctx, sizeof(*w) + 64 + (size_t)cpu_numel(t) * sizeof(float));
	if (!w)
		return NULL;
	*w = *t;
	w->dtype = CPU_FLOAT;
	w->data = (char *)w + ((sizeof(*w) + 63) & ~(size_t)63);
	w->nbytes = (size_t)cpu_numel(t) * sizeof(float);
	if (run->given[i])
		run->narrow[i] = w;
	return w;
}

int cpu_output_kept_wide(const cpu_ctx *ctx, int i)
{
	return i >= 0 && i < 32 && i < ctx->n_out && (ctx->node->f16_wide_out >> i & 1);
}

cpu_tensor *cpu_output_wide(cpu_ctx *ctx, int i, int rank, const int64_t *dims)
{
	exec_run *run = ctx->exec;

	return output_at(ctx, i, CPU_FLOAT, rank, dims,
			 run->planned && run->planned[i] && run->planned[i]->dtype == CPU_FLOAT);
}

cpu_tensor *cpu_output(cpu_ctx *ctx, int i, int32_t dtype, int rank, const int64_t *dims)
{
	exec_run *run = ctx->exec;

	if (run->narrow && dtype == CPU_FLOAT && i >= 0 && i < ctx->n_out)
		return output_narrowed(ctx, i, rank, dims);
	return output_at(ctx, i, dtype, rank, dims, 1);
}

/* Output i: at its planned place (unless placed_ok is 0), else on the
 * heap (out_heap[i]), or in scratch when the graph omits it. */
static cpu_tensor *output_at(cpu_ctx *ctx, int i, int32_t dtype, int rank, const int64_t *dims,
			     int placed_ok)
{
	exec_run *run = ctx->exec;
	size_t es = cpu_dtype_size(dtype), bytes;
	int64_t numel;
	cpu_tensor *t;
	char msg[200], cs[160];

	if (i < 0 || rank < 0 || rank > CPU_MAX_RANK || es == 0 || i >= ctx->n_out)
		return output_fail(ctx, CPU_E_INTERNAL, "bad output request");
	numel = cpu_shape_numel(rank, dims);
	if (numel < 0 || (uint64_t)numel > (SIZE_MAX / 4) / es) {
		snprintf(msg, sizeof(msg), "output %d: invalid shape %s", i,
			 cpu_shape_str(rank, dims, cs, sizeof(cs)));
		return output_fail(ctx, CPU_E_INVALID, msg);
	}
	bytes = (size_t)numel * es;
	if (output_present(ctx, i) && run->given[i])
		return output_fail(ctx, CPU_E_INTERNAL, "output requested twice");
	if (output_present(ctx, i) && placed_ok && run->planned && run->planned[i])
		return planned_output(ctx, i, dtype, rank, dims, bytes);
	if (!output_present(ctx, i)) {
		/* omitted in the graph: the kernel still gets somewhere to write */
		t = cpu_scratch(ctx, sizeof(*t) + 64 + bytes);
		if (!t)
			return NULL;
		memset(t, 0, sizeof(*t));
		t->data = (char *)t + ((sizeof(*t) + 63) & ~(size_t)63);
	} else {
		t = &run->out[i];
		t->data = cpu_keep_alloc(run->keep, bytes);
		if (!t->data) {
			snprintf(msg, sizeof(msg), "out of memory for output %d (%zu bytes)", i, bytes);
			return output_fail(ctx, CPU_E_NOMEM, msg);
		}
		run->out_heap[i] = 1;
		run->given[i] = 1;
	}
	t->dtype = dtype;
	t->rank = rank;
	for (int d = 0; d < rank; d++)
		t->dims[d] = dims[d];
	t->nbytes = bytes;
	return t;
}

/* ---- opsets and scopes ---- */

int64_t cpu_opset_of(const cpu_opsets *m, const char *domain)
{
	domain = norm_domain(domain);
	for (size_t i = 0; m && i < m->n; i++)
		if (strcmp(norm_domain(m->domains[i]), domain) == 0)
			return m->versions[i];
	return 0;
}

const cpu_tensor *cpu_scope_lookup(const cpu_scope *s, const char *name)
{
	for (; s && name; s = s->parent) {
		const cpu_tensor *t = s->find ? s->find(s, name) : NULL;

		if (t)
			return t;
	}
	return NULL;
}

/* ---- values that are not numeric tensors ---- */

static void *arena_or_fail(cpu_ctx *ctx, size_t nbytes)
{
	void *p = ctx->arena ? cpu_arena_alloc(ctx->arena, nbytes ? nbytes : 1) : NULL;

	if (!p)
		output_fail(ctx, ctx->arena ? CPU_E_NOMEM : CPU_E_UNSUPPORTED,
			    ctx->arena ? "out of memory" : "strings and sequences need a run arena");
	return p;
}

/* Claims output i for a value the kernel builds itself. */
static cpu_tensor *claim_output(cpu_ctx *ctx, int i, int32_t dtype)
{
	exec_run *run = ctx->exec;
	cpu_tensor *t;

	if (i < 0 || i >= ctx->n_out)
		return output_fail(ctx, CPU_E_INTERNAL, "bad output request");
	if (run->given[i])
		return output_fail(ctx, CPU_E_INTERNAL, "output requested twice");
	if (run->planned && run->planned[i])
		return output_fail(ctx, CPU_E_SHAPE, "a sequence or optional output was planned as a tensor");
	t = &run->out[i];
	memset(t, 0, sizeof(*t));
	t->dtype = dtype;
	run->given[i] = 1;
	run->out_heap[i] = 0;
	return t;
}

cpu_seq *cpu_output_sequence(cpu_ctx *ctx, int i, int32_t elem_dtype, size_t n)
{
	cpu_tensor *t;
	cpu_seq *s;

	if (n > (SIZE_MAX / 4) / sizeof(cpu_tensor)) {
		output_fail(ctx, CPU_E_INVALID, "sequence too long");
		return NULL;
	}
	s = arena_or_fail(ctx, sizeof(*s) + n * sizeof(cpu_tensor));
	t = s ? claim_output(ctx, i, CPU_SEQUENCE) : NULL;
	if (!t)
		return NULL;
	memset(s, 0, sizeof(*s) + n * sizeof(cpu_tensor));
	s->elem_dtype = elem_dtype;
	s->n = n;
	s->items = (cpu_tensor *)(s + 1);
	t->data = s;
	t->nbytes = sizeof(*s);
	return s;
}

int cpu_output_none(cpu_ctx *ctx, int i)
{
	return claim_output(ctx, i, CPU_NONE) ? 0 : CPU_E_INTERNAL;
}

cpu_tensor *cpu_seq_item(cpu_ctx *ctx, cpu_seq *s, size_t i, int32_t dtype, int rank,
			 const int64_t *dims)
{
	size_t es = cpu_dtype_size(dtype);
	int64_t numel = cpu_shape_numel(rank, dims);
	cpu_tensor *t;

	if (!s || i >= s->n || rank < 0 || rank > CPU_MAX_RANK || !es || numel < 0 ||
	    (uint64_t)numel > (SIZE_MAX / 4) / es)
		return output_fail(ctx, CPU_E_INVALID, "bad sequence item");
	t = &s->items[i];
	t->data = arena_or_fail(ctx, (size_t)numel * es);
	if (!t->data)
		return NULL;
	t->dtype = dtype;
	t->rank = rank;
	for (int d = 0; d < rank; d++)
		t->dims[d] = dims[d];
	t->nbytes = (size_t)numel * es;
	return t;
}

cpu_map *cpu_seq_map(cpu_ctx *ctx, cpu_seq *s, size_t i, int32_t key_dtype, const void *keys,
		     int32_t value_dtype, size_t n)
{
	size_t es = cpu_dtype_size(value_dtype);
	cpu_map *m;

	if (!s || i >= s->n || !es || n > (SIZE_MAX / 4) / es ||
	    (key_dtype != CPU_INT64 && key_dtype != CPU_STRING)) {
		output_fail(ctx, CPU_E_INVALID, "bad sequence map");
		return NULL;
	}
	m = arena_or_fail(ctx, sizeof(*m));
	if (!m || !(m->values = arena_or_fail(ctx, n * es)))
		return NULL;
	m->key_dtype = key_dtype;
	m->value_dtype = value_dtype;
	m->n = n;
	m->keys = keys;
	s->items[i].dtype = CPU_MAP;
	s->items[i].rank = 1;
	s->items[i].dims[0] = (int64_t)n;
	s->items[i].data = m;
	s->items[i].nbytes = sizeof(*m);
	return m;
}

char *cpu_string_new(cpu_ctx *ctx, const char *s, size_t len)
{
	char *p = arena_or_fail(ctx, len + 1);

	if (!p)
		return NULL;
	memcpy(p, s, len);
	p[len] = 0;
	return p;
}
