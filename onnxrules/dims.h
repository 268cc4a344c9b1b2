/*
 * dims.h: ONNX's rules for the dims of broadcasting and of the view ops
 * (Reshape, Flatten, Squeeze, Unsqueeze), the one copy the core's shape
 * inference (core/shape*.c) and the device providers (providers/host/
 * ep_ops.c) use.
 *
 * Dims are int64; the core's may be unknown: a negative dim is a symbol
 * (the same value is the same dim) or ONNX_DIM_NEW (a dim nothing names).
 * The providers' are all known, and the same rules give their answer.
 * Functions that can fail return 0 or ONNX_E_INVALID with a one-line
 * message in err (the core prefixes the node).
 */
#ifndef ORTMK_ONNXRULES_DIMS_H
#define ORTMK_ONNXRULES_DIMS_H

#include <stddef.h>
#include <stdint.h>

#include "rules.h"

#define ONNX_DIM_NEW INT64_MIN

/* axis in [-rank, rank) into [0, rank); -1 when out of range. */
int onnx_axis(int64_t axis, int rank);
/* Product of n dims: known, the single symbol when every other dim is 1,
 * else ONNX_DIM_NEW (also on overflow). */
int64_t onnx_prod(const int64_t *dims, int n);

/*
 * Numpy (multidirectional) broadcasting of a and b into out: the output
 * rank, or -1 when two known dims clash or the rank exceeds ONNX_MAX_RANK.
 * A symbol against a known n != 1 gives n (the symbol must be 1 or n for
 * the model to run); two different symbols give ONNX_DIM_NEW.
 */
int onnx_broadcast(int ra, const int64_t *a, int rb, const int64_t *b, int64_t *out);

/*
 * Reshape's output as spelled by its shape input s[0..r): a 0 copies the
 * input's dim at that index (with allowzero it is a real 0), a -1 (one at
 * most) is left to infer: ONNX_DIM_NEW in od, its index in *neg (-1 when
 * there is none).  rank < 0: the input's rank is unknown (a copied dim is
 * ONNX_DIM_NEW).
 */
int onnx_reshape_spec(int rank, const int64_t *dims, const int64_t *s, int r, int allowzero,
		      int64_t *od, int *neg, char *err, size_t n);
/* The same for an input of `numel` elements whose dims are all known:
 * the -1 inferred and the element count checked. */
int onnx_reshape_dims(int rank, const int64_t *dims, int64_t numel, const int64_t *s, int r,
		      int allowzero, int64_t *od, char *err, size_t n);

/* Flatten at axis (in [-rank, rank]) into od[2]. */
int onnx_flatten_dims(int rank, const int64_t *dims, int64_t axis, int64_t *od, char *err,
		      size_t n);

/*
 * Squeeze of the cnt axes ax (cnt <= 0: absent or empty, every size-1
 * dim; a repeated axis is allowed) into od, rank *ro.  Returns 1 when
 * which dims are 1 is not known (cnt <= 0 and an unknown dim): od is not
 * set.  A listed unknown dim is taken to be 1.
 */
int onnx_squeeze_dims(int rank, const int64_t *dims, const int64_t *ax, int cnt, int64_t *od,
		      int *ro, char *err, size_t n);
/* Unsqueeze at the cnt axes ax (each in [-r, r) of the output rank r =
 * rank + cnt, none repeated; cnt < 0: absent, an error) into od, rank *ro. */
int onnx_unsqueeze_dims(int rank, const int64_t *dims, const int64_t *ax, int cnt, int64_t *od,
			int *ro, char *err, size_t n);

#endif
