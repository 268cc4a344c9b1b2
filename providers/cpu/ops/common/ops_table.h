/*
 * ops_table: the table of every CPU operator, cpu_optable_all.  It is
 * generated at build time (ops/gen_registry.py) from the op sources Meson
 * lists, and handed to the executor by the provider's main (cpu_ep.c) and
 * by the tests; the executor never names an op itself.  Ops that compile
 * subgraphs check the nodes inside with it at capability-query time.
 */
#ifndef ORTMK_CPU_OPS_TABLE_H
#define ORTMK_CPU_OPS_TABLE_H

#include "cpu_kernel.h"

extern const cpu_optable cpu_optable_all;

#endif
