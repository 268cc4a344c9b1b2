/*
 * node_attr.c: a NodeProto's attributes by name (see node_attr.h).
 */
#include <string.h>

#include "node_attr.h"

const Onnx__AttributeProto *proto_attr(const Onnx__NodeProto *n, const char *name)
{
	for (size_t i = 0; n && i < n->n_attribute; i++) {
		const Onnx__AttributeProto *a = n->attribute[i];

		if (a && a->name && strcmp(a->name, name) == 0)
			return a;
	}
	return NULL;
}

int64_t proto_attr_int(const Onnx__NodeProto *n, const char *name, int64_t dflt)
{
	const Onnx__AttributeProto *a = proto_attr(n, name);

	return a && a->has_i ? a->i : dflt;
}

float proto_attr_float(const Onnx__NodeProto *n, const char *name, float dflt)
{
	const Onnx__AttributeProto *a = proto_attr(n, name);

	return a && a->has_f ? a->f : dflt;
}
