/*
 * registry_control: the CPU provider's control-flow ops, one line each.
 * registry.c searches this table after its own.
 */
#include <stddef.h>

#include "control_ops.h"

const cpu_op *const cpu_ops_control[] = {
	&cpu_op_if,
	&cpu_op_loop,
	&cpu_op_scan8,
	&cpu_op_scan,
	&cpu_op_sequencemap,
	NULL,
};
