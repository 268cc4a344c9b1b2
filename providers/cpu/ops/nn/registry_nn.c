/*
 * registry_nn: the CPU provider's nn ops, one line each.  registry.c
 * searches this table after its own.
 */
#include <stddef.h>

#include "nn_ops.h"

const cpu_op *const cpu_ops_nn[] = {
	&cpu_op_rnn,
	&cpu_op_gru,
	&cpu_op_lstm,
	&cpu_op_convtranspose,
	&cpu_op_quantizelinear,
	&cpu_op_dequantizelinear,
	&cpu_op_dynamicquantizelinear,
	&cpu_op_matmulinteger,
	&cpu_op_qlinearmatmul,
	&cpu_op_convinteger,
	&cpu_op_qlinearconv,
	&cpu_op_dft,
	&cpu_op_stft,
	&cpu_op_hannwindow,
	&cpu_op_hammingwindow,
	&cpu_op_blackmanwindow,
	&cpu_op_melweightmatrix,
	NULL,
};
