/*
 * shape_ops_ms.c: type and shape inference for the com.microsoft (ONNX Runtime's contrib ops)
 * domain, and its table.  The contract is shape_ops.h's; an op missing
 * here takes what the model declares (SHAPE_DECLARED), and its outputs are
 * sized at run time.
 */
#include <string.h>

#include "shape_ops.h"
#include "shape_ops_fn.h"

static const struct {
	const char *op_type;
	shape_fn fn;
	int arg;
} op_table[] = {
	{ NULL, NULL, 0 },
};

shape_fn shape_op_find_ms(const char *op_type, int *arg)
{
	for (size_t i = 0; op_table[i].op_type; i++) {
		if (strcmp(op_table[i].op_type, op_type) == 0) {
			*arg = op_table[i].arg;
			return op_table[i].fn;
		}
	}
	return shape_op_find_msq(op_type, arg);
}
