/*
 * cpu_layout: which values inside a step the CPU provider keeps
 * channel-blocked (NCHWc8: an image's channels as blocks of eight, each
 * pixel's eight consecutive; conv_blk.c).  Decided at load, after the
 * fusions (cpu_fuse.h) and before the nodes are prepared, from the nodes'
 * attributes and constant filters alone.
 *
 * A value is blocked when a Conv that conv_blk_kind accepts (a 1x1 or
 * depthwise layer with a constant float32 filter, a multiple of 8
 * channels, or a first layer of a few plain input channels) writes it as
 * its output 0, and every reader is a 1x1 or depthwise one reading it as
 * its input X, or any of them reading it as its fused residual; when the core never
 * reads it (LoadSubgraph.exported: outputs of the step, values another
 * provider or a later step needs), no nested subgraph reads it and it is
 * not a constant.  A fused residual has its head's output layout: where
 * one of the two cannot be blocked, neither is.  A value's bytes are the
 * same number either way (its channels are a multiple of 8), so the core's
 * memory plan is unchanged; only the provider's kernels see the order.
 *
 * float16 models: a Conv with a float16 filter runs widened (its kernel on
 * float32 copies, converted element by element, so in the same order) and
 * takes part; Add and Mul only where dtype[] (per value, 0 unknown) says
 * their operands and result are float32 or float16 (with float16 they
 * always run widened: their float32 kernel sees the layout).
 *
 * Output: node_layout[k] = CPU_LAYOUT_IN_BLK8 | CPU_LAYOUT_OUT_BLK8 as
 * node k's input 0 and output 0 are blocked.  Returns how many values are
 * blocked, or CPU_E_NOMEM.  Caller: cpu_ep.c.
 */
#ifndef ORTMK_CPU_LAYOUT_H
#define ORTMK_CPU_LAYOUT_H

#include "cpu_fuse.h"

int cpu_layout_plan(const cpu_fuse_graph *fg, const cpu_fuse_node *fuse, const int32_t *dtype,
		    unsigned char *node_layout);

#endif
