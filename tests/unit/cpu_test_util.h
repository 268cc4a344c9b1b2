/*
 * cpu_test_util.h: what the CPU kernel unit tests (test_cpu_ops, _math,
 * _nn, _tensor) share: a NodeProto builder that needs no allocation, a
 * cpu_tensor over caller data, and the harness that runs one node through
 * cpu_node_init/cpu_node_run with heap-allocated outputs and checks its
 * results or its error, against inline values or the .npy reference
 * fixtures in tests/data/ops/.
 */
#ifndef ORTMK_CPU_TEST_UTIL_H
#define ORTMK_CPU_TEST_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "cpu_node.h"
#include "ops_table.h"

/* Every CPU op, no pre-pack cache, no opsets: how the tests load a node. */
#define TEST_LOAD (&(cpu_load_env){&cpu_optable_all, NULL, NULL, 0})

enum {
	ERRLEN = 512,    /* error buffers the harness hands to the kernels */
	TN_MAXA = 10,    /* attributes of one node */
	TN_MAXLIST = 16, /* entries of one ints/floats/strings attribute */
	TN_MAXIN = 10,   /* inputs of one node */
	TN_MAXOUT = 8,   /* outputs of one node */
};

/* A NodeProto and the storage its names and attributes point into. */
typedef struct tnode {
	Onnx__NodeProto p;
	Onnx__AttributeProto attr[TN_MAXA];
	Onnx__AttributeProto *attrp[TN_MAXA];
	int64_t ints[TN_MAXA][TN_MAXLIST];
	float floats[TN_MAXA][TN_MAXLIST];
	ProtobufCBinaryData strs[TN_MAXA][TN_MAXLIST];
	char *in[TN_MAXIN], *out[TN_MAXOUT];
	char names[TN_MAXIN + TN_MAXOUT][12];
} tnode;

/* Node "t" of type op with inputs i0.. and outputs o<n_in>.., no attributes. */
void tn(tnode *t, const char *op, int n_in, int n_out);
/* Appends an attribute of this type and returns it for the value. */
Onnx__AttributeProto *tn_attr(tnode *t, const char *name, Onnx__AttributeProto__AttributeType type);
void tn_int(tnode *t, const char *name, int64_t v);
void tn_float(tnode *t, const char *name, float v);
void tn_ints(tnode *t, const char *name, const int64_t *v, size_t n);
void tn_floats(tnode *t, const char *name, const float *v, size_t n);
void tn_str(tnode *t, const char *name, const char *s);
void tn_strs(tnode *t, const char *name, const char *const *s, size_t n);
/* Input i becomes an omitted optional input (empty name). */
void tn_skip(tnode *t, int i);

/* A tensor of this dtype and shape over data (not copied, not owned).
 * Inline: tests build tensors over buffers they fill afterwards, which an
 * out-of-line call would have the compiler take for reads. */
static inline cpu_tensor tens(int32_t dt, int rank, const int64_t *dims, const void *data)
{
	cpu_tensor t;

	memset(&t, 0, sizeof(t));
	t.dtype = dt;
	t.rank = rank;
	for (int i = 0; i < rank; i++)
		t.dims[i] = dims[i];
	t.data = (void *)data;
	t.nbytes = (size_t)cpu_numel(&t) * cpu_dtype_size(dt);
	return t;
}

/* Runs t on in[]; the outputs are heap-allocated (nothing planned), for
 * the caller to free.  Returns the kernel's status, its message in err. */
int run(tnode *t, int64_t opset, int n_in, const cpu_tensor **in, int n_out,
	cpu_tensor *out, char *err);
/* run with the intra-op pool (NULL: none) and its thread count. */
struct cpu_pool;
int run_pool(tnode *t, int64_t opset, int n_in, const cpu_tensor **in, int n_out,
	     cpu_tensor *out, struct cpu_pool *pool, int threads, char *err);
/* run, failing the test on an error. */
void run_ok(tnode *t, int64_t opset, int n_in, const cpu_tensor **in, int n_out,
	    cpu_tensor *out);
void free_outs(cpu_tensor *out, int n);

/* Runs t and compares its output k (as double) with want[] and its dtype
 * and shape within tol (relative to 1 + |want|; NaN matches NaN). */
void expect_out(tnode *t, int64_t opset, int n_in, const cpu_tensor **in, int k,
		int32_t dt, int rank, const int64_t *dims, const double *want, double tol);
/* expect_out for output 0. */
void expect(tnode *t, int64_t opset, int n_in, const cpu_tensor **in, int32_t dt,
	    int rank, const int64_t *dims, const double *want, double tol);
/* Runs t expecting status want_rc with an error containing needle, and no
 * output left allocated. */
void expect_error(tnode *t, int64_t opset, int n_in, const cpu_tensor **in,
		  int want_rc, const char *needle);

/* The reference tensor tests/data/ops/<cs>.<name>.npy (written by
 * tests/data/gen_cpu_op_refs.py with numpy; $TEST_DATA_DIR names
 * tests/data), its data malloc'ed for the caller to free. */
cpu_tensor load(const char *cs, const char *name);
/* got has want's dtype and shape and its values within tol (relative to
 * 1 + |want|). */
void expect_close(const cpu_tensor *got, const cpu_tensor *want, double tol);
/* Runs t on the fixture inputs <cs>.<ins[i]> (NULL: omitted) and compares
 * every output with <cs>.<outs[j]> (NULL: not checked). */
void check_fixture(tnode *t, int64_t opset, const char *cs, const char *const *ins,
		   int n_in, const char *const *outs, int n_out, double tol);

#endif
