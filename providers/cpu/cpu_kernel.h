/*
 * cpu_kernel: the contract between the CPU provider's executor (cpu_exec.c,
 * cpu_node.c) and its operators (the files in ops/).
 *
 * An operator has an XNNPACK-like life: `prepare` runs once when a subgraph
 * is loaded (parse attributes, look at constant inputs, pack weights into
 * node->state); `compute` runs once per node per run and does nothing else.
 * compute receives its inputs as cpu_tensors (host memory, row-major, dense)
 * and asks the executor for each output with cpu_output(): the executor
 * returns the planned location after checking the kernel's shape against the
 * core's plan, or allocates one when the core could not infer the shape.
 * Kernels therefore always compute their own output shapes and validate
 * their inputs: a wrong dtype or shape is an error naming the problem, never
 * a crash.
 *
 * Adding an op: one file in its family's folder (ops/math, ops/nn,
 * ops/tensor, ops/seq, ops/control) defining `const cpu_op cpu_op_<name>`,
 * and one line naming that file in the folder's meson.build: the op table
 * is generated from those sources (ops/gen_registry.py).  Its shape
 * inference for the core's planner lives in core/shape_ops*.c.
 */
#ifndef ORTMK_CPU_KERNEL_H
#define ORTMK_CPU_KERNEL_H

#include <stddef.h>
#include <stdint.h>

#include "onnx.pb-c.h"

#define CPU_MAX_RANK 16

/* ONNX TensorProto.DataType values. */
enum cpu_dtype {
	CPU_UNDEFINED = 0, CPU_FLOAT = 1, CPU_UINT8 = 2, CPU_INT8 = 3,
	CPU_UINT16 = 4, CPU_INT16 = 5, CPU_INT32 = 6, CPU_INT64 = 7,
	CPU_STRING = 8, CPU_BOOL = 9, CPU_FLOAT16 = 10, CPU_DOUBLE = 11,
	CPU_UINT32 = 12, CPU_UINT64 = 13, CPU_BFLOAT16 = 16,
};

/* Kernel status codes (negative), mapped onto the protocol's ErrorCode. */
enum cpu_status {
	CPU_OK = 0,
	CPU_E_INVALID = -1,      /* bad input: dtype, shape, attribute value */
	CPU_E_UNSUPPORTED = -2,  /* valid ONNX that this kernel does not do */
	CPU_E_SHAPE = -3,        /* output shape differs from the core's plan */
	CPU_E_NOMEM = -4,
	CPU_E_INTERNAL = -5,
	CPU_E_CANCELLED = -7,    /* the run was cancelled (EP_E_CANCELLED) */
};

typedef struct cpu_tensor {
	int32_t dtype;
	int rank;
	int64_t dims[CPU_MAX_RANK];
	void *data;
	size_t nbytes;
} cpu_tensor;

/*
 * Values that are not numeric tensors.
 *  - A string tensor (CPU_STRING) holds numel `const char *`, NUL-terminated.
 *    The strings themselves live in the run's arena (cpu_string_new) or in
 *    shared memory, and stay valid until the run ends, so kernels may copy
 *    the pointers as they would copy int64s.
 *  - A sequence has dtype CPU_SEQUENCE, rank 0, and data -> cpu_seq; its
 *    struct and items live in the run's arena (cpu_output_sequence).
 *  - An empty optional has dtype CPU_NONE and no data (cpu_output_none).
 *    An optional holding a value is that value.
 */
#define CPU_SEQUENCE 0x1000
#define CPU_NONE 0x1001

typedef struct cpu_seq {
	int32_t elem_dtype;          /* CPU_UNDEFINED for an empty, untyped one */
	size_t n;
	cpu_tensor *items;
} cpu_seq;

/* A bump allocator whose memory lives until reset: one per run. */
typedef struct cpu_arena cpu_arena;
cpu_arena *cpu_arena_new(void);
void *cpu_arena_alloc(cpu_arena *a, size_t nbytes);   /* 64-byte aligned */
void cpu_arena_reset(cpu_arena *a);                   /* keeps one block */
void cpu_arena_free(cpu_arena *a);

struct cpu_node;
struct cpu_ctx;
struct cpu_pool;
struct cpu_prof;

/* The opset versions the model imports, by domain ("" is ai.onnx).  Ops
 * with subgraphs (If, Loop, Scan...) resolve the nodes inside them with it. */
typedef struct cpu_opsets {
	size_t n;
	const char *const *domains;
	const int64_t *versions;
} cpu_opsets;
/* The version imported for domain ("ai.onnx" and "" are one), 0 if none. */
int64_t cpu_opset_of(const cpu_opsets *m, const char *domain);

/* Values visible by name while a graph runs, for subgraphs that read
 * values of the graphs enclosing them.  find looks in this scope only
 * (NULL when the name is not there or has no value yet); cpu_scope_lookup
 * walks the chain outwards.  What it returns stays valid while the node
 * whose ctx carries the scope runs. */
typedef struct cpu_scope {
	const struct cpu_scope *parent;
	const cpu_tensor *(*find)(const struct cpu_scope *s, const char *name);
} cpu_scope;
const cpu_tensor *cpu_scope_lookup(const cpu_scope *s, const char *name);

typedef struct cpu_op {
	const char *op_type;
	const char *domain;      /* "" = ai.onnx */
	int min_opset, max_opset;/* opset versions of `domain` this entry covers */
	/* Optional: refuse a node at capability-query time (attributes or dtypes
	 * this kernel does not handle).  Returns 1 to accept; 0 to refuse, with
	 * the reason in why.  in_dtypes[i] is CPU_UNDEFINED when unknown. */
	int (*supports)(const Onnx__NodeProto *node, int64_t opset,
			const int32_t *in_dtypes, int n_in, char *why, size_t n);
	/* Optional: parse attributes, pack constant inputs.  node->consts[i] is
	 * non-NULL for inputs that are initializers. */
	int (*prepare)(struct cpu_node *node, char *err, size_t n);
	int (*compute)(struct cpu_ctx *ctx);
	void (*release)(struct cpu_node *node);  /* frees node->state */
} cpu_op;

/* Element-wise work the provider fused into a node at load (cpu_fuse.c):
 * the kernel applies it to its output 0 before writing it,
 *   y = act(scale * op(node) + in[bias_input] + in[add_input])
 * where in[add_input] broadcasts onto the result (numpy rules; the kernel
 * handles an addend whose broadcast widens the result too).  Kernels that
 * do not look at node->fuse are never given one (cpu_fuse_accepts). */
typedef enum cpu_fuse_act {
	CPU_FUSE_ACT_NONE = 0,
	CPU_FUSE_ACT_RELU = 1,
	CPU_FUSE_ACT_GELU = 2,      /* x * 0.5 * (1 + erf(x / sqrt 2)) */
	/* applied by cpu_fuse_end over the result (fuse_tail.c) */
	CPU_FUSE_ACT_CLIP = 3,      /* min(max(x, act_a), act_b) */
	CPU_FUSE_ACT_LEAKY = 4,     /* x < 0 ? act_a * x : x */
	CPU_FUSE_ACT_HSIGMOID = 5,  /* max(0, min(1, act_a * x + act_b)) */
	CPU_FUSE_ACT_HSWISH = 6,    /* x * max(0, min(1, x / 6 + 1 / 2)) */
	CPU_FUSE_ACT_SIGMOID = 7,
	CPU_FUSE_ACT_SILU = 8,      /* x * sigmoid(x): Sigmoid and Mul of torch's SiLU */
	CPU_FUSE_ACT_TANH = 9,
} cpu_fuse_act;

typedef struct cpu_fusion {
	int add_input;              /* input index of the addend, or -1 */
	/* MatMul/Gemm: input index of a constant [N] row added before the
	 * addend (the Add of nn.Linear's bias), or -1. */
	int bias_input;
	cpu_fuse_act act;
	/* MatMul: the product is first multiplied by this (a Div or Mul by a
	 * constant scalar, as attention scores are); 0 stands for 1. */
	float scale;
	/* MatMul (attention, Q x K^T -> Softmax -> x V): when set, the scaled
	 * product is normalised by a Softmax over its last axis and
	 * multiplied by in[v_input]; the node writes that product. */
	int attention;
	int v_input;
	float act_a, act_b;         /* the activation's parameters, as above */
	/* attention: inputs added (broadcast) to the scaled scores before the
	 * Softmax: a mask, a relative position bias */
	int n_score_add;
	int score_add[2];
	/* ConvInteger/MatMulInteger (dynamic quantization): the Cast to
	 * float and the Mul by the scales that follow the node are fused:
	 * it writes float32 (float)Y * s (+ in[bias_input], a constant per
	 * output channel of a ConvInteger or per column of a MatMulInteger)
	 * with s = in[quant_s0] * in[quant_s1] (quant_s1 -1: s = in[quant_s0]),
	 * float32 scalars, each step rounded as the nodes round. */
	int quant;
	int quant_s0, quant_s1;
} cpu_fusion;

typedef struct cpu_node {
	const cpu_op *op;
	const Onnx__NodeProto *proto;
	int64_t opset;
	int n_in, n_out;
	const cpu_tensor **consts;   /* n_in entries, NULL where not constant */
	void *state;                 /* owned by the op (prepare/release) */
	struct cpu_pack_cache *pack; /* the subgraph's pre-pack cache, or NULL */
	void **packed;               /* blobs cpu_prepack allocated (freed at fini) */
	int n_packed;
	const cpu_opsets *opsets;    /* the model's (or NULL), set before prepare */
	const struct cpu_optable *ops;  /* the table it was found in, for subgraphs */
	const cpu_fusion *fuse;      /* fused element-wise tail, or NULL */
	/* float16 inputs through the float32 kernel (cpu_f16.c, cpu_node.c):
	 * CPU_F16_* and the float32 copies of float16 constants. */
	int f16_mode;
	struct cpu_node_f16 *f16;
	/* Outputs (bit i) a widened node leaves in float32: values inside the
	 * provider that only widened nodes read (cpu_exec.h, cpu_plan_wide). */
	uint32_t f16_wide_out;
	/* CPU_LAYOUT_* bits: which of its values inside the provider the node
	 * reads (inputs 0 and 1; a Conv's fused addend follows its output) or
	 * writes (output 0) channel-blocked (cpu_layout.h), set before
	 * prepare. */
	unsigned layout;
	/* Constant inputs (bit i) the op keeps only in packed form: it never
	 * reads their data after prepare, at any shape a run can bring (set in
	 * prepare).  The loader gives a weight's memory back once every node
	 * that reads it says so (ViT's MatMul weights: a second copy of 330 MB
	 * beside the packed one). */
	uint64_t packed_only;
} cpu_node;

enum { CPU_LAYOUT_IN_BLK8 = 1, CPU_LAYOUT_OUT_BLK8 = 2, CPU_LAYOUT_IN1_BLK8 = 4 };

enum { CPU_F16_UNDECIDED = 0, CPU_F16_WIDEN = 1, CPU_F16_AS_IS = 2 };

/*
 * Pre-packed weights.  In prepare, a kernel asks for the packed form of its
 * constant input `input` in a named format of `size` bytes; fill() packs it
 * when the pre-pack cache (docs/PREPACK.md) has no valid copy.  The result
 * is read-only and lives as long as the node: either in the cache file's
 * read-only mapping (shared by every process) or owned by the node.
 */
typedef int (*cpu_pack_fn)(void *dst, size_t size, void *arg);
const void *cpu_prepack(cpu_node *node, int input, const char *format, size_t size,
			cpu_pack_fn fill, void *arg, char *err, size_t n);

typedef struct cpu_ctx {
	cpu_node *node;
	int n_in, n_out;
	const cpu_tensor **in;       /* NULL for an omitted optional input */
	cpu_arena *arena;            /* the run's arena (strings, sequences) */
	const cpu_scope *scope;      /* enclosing graphs' values, or NULL */
	/* The intra-op thread pool (gemm/threadpool.h: cpu_pool_for, or pass
	 * it to gemm_compute), NULL for the calling thread alone.  A kernel
	 * that finds the pool busy (cpu_pool_try_begin) runs alone. */
	struct cpu_pool *pool;
	/* executor-private */
	void *exec;
	int threads;
	const _Atomic uint64_t *cancel;  /* the run's (cpu_run_env): bodies inherit it */
	uint64_t cancel_token;
	/* profiling (cpu_run_env): bodies record their nodes under the span
	 * of the node running them */
	struct cpu_prof *prof;
	int32_t prof_parent;
	uint32_t prof_depth;
	char *err;
	size_t errlen;
} cpu_ctx;

/* Returns the output tensor i with this dtype and shape, or NULL (with the
 * error set: shape mismatch against the plan, out of memory).  Output i may
 * be omitted in the graph: then a scratch tensor is returned all the same.
 * After a NULL from cpu_output or cpu_scratch the kernel returns any nonzero
 * status; the executor reports the status recorded by the failed call. */
cpu_tensor *cpu_output(cpu_ctx *ctx, int i, int32_t dtype, int rank, const int64_t *dims);
/* Whether float16 output i is kept float32 for the widened nodes that read
 * it (cpu_plan_wide), and that float32 tensor: a node producing it writes
 * float32 there, not float16. */
int cpu_output_kept_wide(const cpu_ctx *ctx, int i);
cpu_tensor *cpu_output_wide(cpu_ctx *ctx, int i, int rank, const int64_t *dims);
/* Output i as a sequence of n items (zeroed; fill each with
 * cpu_seq_item), or as an empty optional. */
cpu_seq *cpu_output_sequence(cpu_ctx *ctx, int i, int32_t elem_dtype, size_t n);
int cpu_output_none(cpu_ctx *ctx, int i);
/* Item i of a sequence made by cpu_output_sequence, with room for its data
 * in the run's arena. */
cpu_tensor *cpu_seq_item(cpu_ctx *ctx, cpu_seq *s, size_t i, int32_t dtype, int rank,
			 const int64_t *dims);
/* A copy of s[0..len) that lives until the end of the run. */
char *cpu_string_new(cpu_ctx *ctx, const char *s, size_t len);
/* Scratch memory valid until compute returns. */
void *cpu_scratch(cpu_ctx *ctx, size_t nbytes);
/* Memory for a large buffer read every run (packed weights): 64-byte
 * aligned, from 2 MiB on in transparent huge pages where the OS gives
 * them; free() releases it; NULL when out of memory. */
void *cpu_alloc_big(size_t size);
/* Whether bytes [a, a + an) and [b, b + bn) share one (NULL or empty: no). */
int cpu_bytes_overlap(const void *a, size_t an, const void *b, size_t bn);
/* Formats a message into ctx->err; returns `code` for `return cpu_fail(...)`. */
int cpu_fail(cpu_ctx *ctx, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Helpers every op uses. */
size_t cpu_dtype_size(int32_t dtype);
const char *cpu_dtype_name(int32_t dtype);
int64_t cpu_numel(const cpu_tensor *t);
const Onnx__AttributeProto *cpu_attr(const Onnx__NodeProto *n, const char *name);
int64_t cpu_attr_int(const Onnx__NodeProto *n, const char *name, int64_t dflt);
float cpu_attr_float(const Onnx__NodeProto *n, const char *name, float dflt);
size_t cpu_attr_ints(const Onnx__NodeProto *n, const char *name, const int64_t **v);
const char *cpu_attr_string(const Onnx__NodeProto *n, const char *name, const char *dflt);

/* Input i, or NULL when the node omits it (empty name or past its inputs). */
const cpu_tensor *cpu_input(const cpu_ctx *ctx, int i);
/* Constant input i known at prepare time, or NULL. */
const cpu_tensor *cpu_node_const(const cpu_node *node, int i);
/* "[2,3,4]" into buf (a scalar is "[]"); returns buf. */
const char *cpu_shape_str(int rank, const int64_t *dims, char *buf, size_t n);
/* Product of dims; -1 when a dim is negative or the product of the
 * non-zero dims overflows (so an empty tensor's strides still fit). */
int64_t cpu_shape_numel(int rank, const int64_t *dims);

/* Attribute helpers.  Protobuf strings are not NUL-terminated, so
 * cpu_attr_str copies one into buf (truncating) and returns 1 when present;
 * cpu_attr_string returns a thread-local copy valid until its next call. */
int cpu_attr_str(const Onnx__NodeProto *n, const char *name, char *buf, size_t size);
size_t cpu_attr_floats(const Onnx__NodeProto *n, const char *name, const float **v);
const Onnx__TensorProto *cpu_attr_tensor(const Onnx__NodeProto *n, const char *name);

/* Converts a TensorProto (raw_data or the typed fields; little-endian) into
 * one malloc'ed block: the cpu_tensor header followed by its data, 64-byte
 * aligned.  Release it with free().  NULL with the reason in err for
 * external data, strings, sparse or inconsistent element counts. */
cpu_tensor *cpu_tensor_from_proto(const Onnx__TensorProto *tp, char *err, size_t n);

/* Element access across dtypes for the paths that are not hot: a value is
 * read as double or int64 and written back with C conversion (float to int
 * saturates, NaN becomes 0; bool stores x != 0). */
double cpu_get_f64(int32_t dtype, const void *base, int64_t i);
int64_t cpu_get_i64(int32_t dtype, const void *base, int64_t i);
void cpu_set_f64(int32_t dtype, void *base, int64_t i, double v);
void cpu_set_i64(int32_t dtype, void *base, int64_t i, int64_t v);
int cpu_dtype_is_float(int32_t dtype);   /* float16/32/64, bfloat16 */
int cpu_dtype_is_signed(int32_t dtype);  /* int8/16/32/64 */
float cpu_f16_to_f32(uint16_t h);
uint16_t cpu_f32_to_f16(float f);        /* round to nearest even */

/* A table of ops (ops/common/ops_table.h has every CPU op).  cpu_op_find
 * returns the entry covering (op_type, domain, opset) or NULL; "ai.onnx"
 * and "" are one domain. */
typedef struct cpu_optable {
	size_t n;
	const cpu_op *const *ops;
} cpu_optable;
const cpu_op *cpu_op_find(const cpu_optable *t, const char *op_type, const char *domain,
			  int64_t opset);

#endif
