/*
 * tree: TreeEnsembleClassifier and TreeEnsembleRegressor share one
 * compiled form of the ensemble (tree_build.c, at prepare) and one
 * evaluator (tree_eval.c); tree_ops.c turns the per-row sums into the
 * ops' outputs the way ONNX Runtime does.
 *
 * The layout.  The nodes of every tree are laid out depth first, the
 * false child right after its parent, as 16-byte records {feature,
 * threshold, false offset, true offset}; a leaf has both offsets 0, so a
 * walk that reaches it stays there.  That lets the evaluator walk a tree a
 * fixed number of steps (the tree's depth) for eight rows (or, for a
 * single row, eight trees) at once without a branch per row: each step is
 * a load, a compare and an add, and the eight walks' memory latencies
 * overlap.  A leaf's threshold holds its first weight (the value a
 * single-target ensemble adds); its weights are at wfirst[leaf] ..
 * wfirst[leaf] + wcount[leaf] in the weight arrays.
 *
 * Thresholds and weights exist in float (for float, int32 and int64 X:
 * ONNX Runtime compares those in float) and in double (for double X).
 */
#ifndef ORTMK_CPU_ML_TREE_H
#define ORTMK_CPU_ML_TREE_H

#include <stddef.h>
#include <stdint.h>

#include "ml_ops.h"

/* Node modes (flags bits 0-3) and the missing-value flag (bit 4). */
enum tree_mode {
	TREE_LEQ, TREE_LT, TREE_GTE, TREE_GT, TREE_EQ, TREE_NEQ, TREE_LEAF,
	TREE_MIXED = 15,              /* tree_ens.mode: modes differ by node */
};
#define TREE_MISSING_TRUE 16

enum tree_agg { TREE_SUM, TREE_AVERAGE, TREE_MIN, TREE_MAX };

typedef struct tree_node {
	int32_t feature;              /* 0 in a leaf */
	float thr;                    /* a leaf: its first weight */
	/* child - this: inc[0] the false child, inc[1] the true one (indexed
	 * by the comparison, so a step has no branch); 0 and 0 in a leaf */
	int32_t inc[2];
} tree_node;

typedef struct tree_ens {
	int64_t n_nodes, n_trees;
	tree_node *nodes;
	double *thr64;                /* thresholds / leaf values in double */
	uint8_t *flags;               /* mode | TREE_MISSING_TRUE */
	int32_t *wfirst, *wcount;     /* per node (leaves only) */
	int32_t *roots, *depth;       /* per tree */
	int64_t n_weights;
	int32_t *wtarget;             /* class or target id of each weight */
	float *wval;
	double *wval64;
	int mode;                     /* the one mode of every branch, or TREE_MIXED */
	int missing;                  /* some node has missing_value_tracks_true */
	int max_depth;
	int64_t max_feature;          /* -1 when every tree is a leaf */
	int64_t n_out;                /* targets or classes (weights' ids below it) */
	int single;                   /* one output: add each leaf's first weight */
	int agg;
	double *base;                 /* base_values (n_base) */
	int64_t n_base;
	int all_positive;             /* every weight >= 0 */
	/* every leaf has one weight per output, in output order (a random
	 * forest's classes): summed without the per-weight bookkeeping */
	int dense;
	int64_t n_weight_classes;     /* distinct weight ids */
} tree_ens;

/* tree_build.c: compiles the node and weight attributes.  `prefix` is
 * "class" or "target" (class_ids, target_ids...); n_out the classes or
 * targets (0: the largest weight id + 1).  0, or a CPU_E_* code with err
 * set. */
int tree_build(const Onnx__NodeProto *p, const char *prefix, int64_t n_out, tree_ens *e,
	       char *err, size_t n);
void tree_free(tree_ens *e);

/* tree_eval.c: for every row of X [N, C] (float, or double when x64),
 * the aggregate of every tree's leaf per output: score[N * K] and
 * has[N * K] (K = e->single ? 1 : e->n_out), with ONNX Runtime's
 * ScoreValue rules (has = some tree gave that output a weight).  SUM is
 * used for AVERAGE too (the division is the finalizer's). */
int tree_eval(cpu_ctx *ctx, const tree_ens *e, const void *x, int x64, int64_t N, int64_t C,
	      double *score, uint8_t *has);

#endif
