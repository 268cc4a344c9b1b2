/*
 * registry: the CPU provider's op table — one line per op, each pointing at
 * the cpu_op its ops/ file defines — and cpu_op_find, which cpu_exec uses to
 * resolve a node by (op_type, domain, opset).
 */
#include <string.h>

#include "cpu_ops.h"

static const cpu_op *const ops[] = {
	&cpu_op_abs,
	&cpu_op_add,
	&cpu_op_averagepool,
	&cpu_op_batchnorm,
	&cpu_op_cast,
	&cpu_op_clip,
	&cpu_op_concat,
	&cpu_op_constant,
	&cpu_op_constantofshape,
	&cpu_op_conv,
	&cpu_op_div,
	&cpu_op_dropout,
	&cpu_op_equal,
	&cpu_op_erf,
	&cpu_op_exp,
	&cpu_op_expand,
	&cpu_op_flatten,
	&cpu_op_gather,
	&cpu_op_gelu,
	&cpu_op_gemm,
	&cpu_op_globalaveragepool,
	&cpu_op_globalmaxpool,
	&cpu_op_greater,
	&cpu_op_greaterorequal,
	&cpu_op_identity,
	&cpu_op_layernorm,
	&cpu_op_leakyrelu,
	&cpu_op_less,
	&cpu_op_lessorequal,
	&cpu_op_log,
	&cpu_op_logsoftmax,
	&cpu_op_matmul,
	&cpu_op_max,
	&cpu_op_maxpool,
	&cpu_op_min,
	&cpu_op_mul,
	&cpu_op_neg,
	&cpu_op_pow,
	&cpu_op_range,
	&cpu_op_reciprocal,
	&cpu_op_reducemax,
	&cpu_op_reducemean,
	&cpu_op_reducemin,
	&cpu_op_reducesum,
	&cpu_op_relu,
	&cpu_op_reshape,
	&cpu_op_shape,
	&cpu_op_sigmoid,
	&cpu_op_size,
	&cpu_op_slice,
	&cpu_op_softmax,
	&cpu_op_split,
	&cpu_op_sqrt,
	&cpu_op_squeeze,
	&cpu_op_sub,
	&cpu_op_tanh,
	&cpu_op_tfidfvectorizer,
	&cpu_op_transpose,
	&cpu_op_unsqueeze,
	&cpu_op_where,
};

/* Family tables (ops/<family>/registry_<family>.c), each NULL-terminated. */
extern const cpu_op *const cpu_ops_math[];
extern const cpu_op *const cpu_ops_tensor[];
extern const cpu_op *const cpu_ops_nn[];
extern const cpu_op *const cpu_ops_control[];
/* Searched before the others: its Identity, Cast and CastLike also take
 * sequences, optionals and strings, and hand plain tensors to ours. */
extern const cpu_op *const cpu_ops_seq[];

static int op_matches(const cpu_op *op, const char *op_type, const char *domain, int64_t opset)
{
	return strcmp(op->op_type, op_type) == 0 && strcmp(op->domain, domain) == 0 &&
	       opset >= op->min_opset && opset <= op->max_opset;
}

const cpu_op *cpu_op_find(const char *op_type, const char *domain, int64_t opset)
{
	const cpu_op *const *families[] = {cpu_ops_math, cpu_ops_tensor, cpu_ops_nn, cpu_ops_control};

	if (!op_type)
		return NULL;
	if (!domain || !strcmp(domain, "ai.onnx"))
		domain = "";
	for (size_t i = 0; cpu_ops_seq[i]; i++)
		if (op_matches(cpu_ops_seq[i], op_type, domain, opset))
			return cpu_ops_seq[i];
	for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++)
		if (op_matches(ops[i], op_type, domain, opset))
			return ops[i];
	for (size_t f = 0; f < sizeof(families) / sizeof(families[0]); f++)
		for (size_t i = 0; families[f][i]; i++)
			if (op_matches(families[f][i], op_type, domain, opset))
				return families[f][i];
	return NULL;
}
