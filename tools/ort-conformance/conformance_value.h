/*
 * conformance_value: the values of an ONNX backend test case.  A data
 * set's input_K.pb / output_K.pb is a TensorProto, a SequenceProto or an
 * OptionalProto; which one is told by the type the model declares for that
 * input or output.  conformance_case.c reads them with conf_value_load,
 * feeds inputs through the public API (conf_value_make) and checks outputs
 * (conf_value_compare, both in conformance_compare.c): numbers within the ONNX runner's tolerances,
 * strings exactly, sequences item by item, optionals empty or not.
 */
#ifndef ORTMK_CONFORMANCE_VALUE_H
#define ORTMK_CONFORMANCE_VALUE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <ortmk/ortmk.h>
#include "onnx.pb-c.h"

#define CONF_MAX_RANK 16

enum { CONF_TENSOR, CONF_SEQUENCE, CONF_NONE };
/* What a dtype's elements are (K_NONE: the API has no such dtype). */
enum { K_NONE, K_FLOAT, K_SIGNED, K_UNSIGNED, K_BOOL, K_STRING };

typedef struct conf_value {
	int kind;
	/* CONF_TENSOR */
	int dtype;
	int64_t dims[CONF_MAX_RANK];
	size_t rank, count, nbytes;
	void *data;                  /* numbers, or count char * for strings */
	/* CONF_SEQUENCE */
	int elem_dtype;              /* declared, 0 when unknown */
	size_t n;
	struct conf_value *items;
} conf_value;

/* ONNX dtypes, including those ortmk cannot hold (conformance_value.c). */
int conf_dtype_kind(int t);
int conf_dtype_size(int t);
const char *conf_dtype_name(int t);
/* numpy has no bfloat16: the test data stores bfloat16 tensors as uint16
 * with the same bits; they are read as bfloat16 where model_t says so. */
void conf_retag_bfloat16(conf_value *t, int model_t);

/* The whole file at path, malloc'ed into *buf (*len bytes); false if it
 * cannot be read. */
bool conf_read_file(const char *path, uint8_t **buf, size_t *len);

/* Reads path as the value type `declared` describes (NULL: a tensor). */
bool conf_value_load(const char *path, const Onnx__TypeProto *declared, conf_value *v,
		     char *err, size_t cap);
void conf_value_free(conf_value *v);
/* A new value of the API holding v. */
bool conf_value_make(ortmk_env *env, const conf_value *v, ortmk_value **out, char *err,
		     size_t cap);
/* False with a reason when output k (`got`) differs from `exp`. */
bool conf_value_compare(size_t k, const char *name, const ortmk_value *got, conf_value *exp,
			char *reason, size_t cap);
/* NULL when the API carries values of this type, else its name ("map"). */
const char *conf_type_unsupported(const Onnx__TypeProto *ty, char *buf, size_t cap);

#endif
