/*
 * registry_math: the CPU provider's math ops, one line each.  registry.c
 * searches this table after its own.
 */
#include <stddef.h>

#include "cpu_ops.h"

const cpu_op *const cpu_ops_math[] = {
	NULL,
};
