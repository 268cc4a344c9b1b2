/*
 * registry_tensor: the CPU provider's tensor ops, one line each.  registry.c
 * searches this table after its own.
 */
#include <stddef.h>

#include "tensor_ops.h"

const cpu_op *const cpu_ops_tensor[] = {
	&cpu_op_gatherelements,
	&cpu_op_gathernd,
	&cpu_op_trilu,
	&cpu_op_eyelike,
	&cpu_op_resize,
	&cpu_op_upsample,
	&cpu_op_pad,
	&cpu_op_centercroppad,
	&cpu_op_nonmaxsuppression,
	&cpu_op_castlike,
	&cpu_op_gridsample,
	&cpu_op_nonzero,
	&cpu_op_compress,
	&cpu_op_onehot,
	&cpu_op_tile,
	&cpu_op_topk,
	&cpu_op_unique,
	&cpu_op_reversesequence,
	&cpu_op_depthtospace,
	&cpu_op_spacetodepth,
	&cpu_op_scatterelements,
	&cpu_op_scatter,
	&cpu_op_scatternd,
	&cpu_op_roialign,
	&cpu_op_maxroipool,
	&cpu_op_maxunpool,
	&cpu_op_col2im,
	&cpu_op_lppool,
	NULL,
};
