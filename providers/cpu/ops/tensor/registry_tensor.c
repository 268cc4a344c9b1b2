/*
 * registry_tensor: the CPU provider's tensor ops, one line each.  registry.c
 * searches this table after its own.
 */
#include <stddef.h>

#include "cpu_ops.h"

const cpu_op *const cpu_ops_tensor[] = {
	NULL,
};
