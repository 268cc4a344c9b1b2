/*
 * blk8: the channel-blocked layout of float32 values inside the CPU
 * provider (NCHWc8: x[n][c / 8][spatial][c % 8], a multiple of 8
 * channels; cpu_layout.h decides which values).  The same bytes as NCHW in
 * another order; a value of one pixel an image is the same in both.
 * Callers: conv.c, conv_blk.c, pool.c, binary.c.
 */
#ifndef ORTMK_CPU_BLK8_H
#define ORTMK_CPU_BLK8_H

#include "cpu_ops.h"

#define CPU_BLK8 8

/* N images of C channels (a multiple of 8) and P pixels from NCHW to
 * NCHWc8 (to_blocked) or back, src and dst apart, over the pool. */
void cpu_blk8_reorder(cpu_ctx *ctx, const float *src, float *dst, int64_t N, int64_t C,
		      int64_t P, int to_blocked);
/* NCHWc8 src to NCHW dst plus add (NCHW, may be dst itself: each element
 * is read before it is written; NULL: nothing added). */
void cpu_blk8_unblock_add(cpu_ctx *ctx, const float *src, float *dst, const float *add,
			  int64_t N, int64_t C, int64_t P);
/* A float32 tensor of rank >= 2 and a multiple of 8 channels reordered to
 * NCHWc8 in place (through scratch); 0 or a status. */
int cpu_blk8_block_inplace(cpu_ctx *ctx, cpu_tensor *t);
/* t's NCHW copy in scratch when it is blocked and has more than one pixel
 * an image (*plain then that copy's header), else *plain = *t; 0 or a
 * status. */
int cpu_blk8_plain(cpu_ctx *ctx, const cpu_tensor *t, cpu_tensor *plain);

#endif
