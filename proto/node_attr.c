/*
 * node_attr.c: a NodeProto's attributes by name (see node_attr.h).
 */
#include <stdio.h>
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

int proto_attr_ints(const Onnx__NodeProto *n, const char *name, const int64_t **v)
{
	const Onnx__AttributeProto *a = proto_attr(n, name);

	if (!a)
		return -1;
	*v = a->ints;
	return (int)a->n_ints;
}

int proto_attr_is(const Onnx__NodeProto *n, const char *name, const char *want)
{
	const Onnx__AttributeProto *a = proto_attr(n, name);
	size_t len = strlen(want);

	return a && a->has_s && a->s.len == len && memcmp(a->s.data, want, len) == 0;
}

const Onnx__AttributeProto *proto_attr_typed(const Onnx__NodeProto *n, const char *name,
					     Onnx__AttributeProto__AttributeType type)
{
	const Onnx__AttributeProto *a = proto_attr(n, name);
	int set = 0;

	if (!a)
		return NULL;
	if (a->has_type && a->type != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__UNDEFINED)
		return a->type == type ? a : NULL;
	switch (type) {
	case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT: set = a->has_i; break;
	case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT: set = a->has_f; break;
	case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING: set = a->has_s; break;
	case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS: set = a->n_ints > 0; break;
	case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS: set = a->n_floats > 0; break;
	default: break;
	}
	return set ? a : NULL;
}

int proto_attr_unknown(const Onnx__NodeProto *n, const char *const *known, char *why, size_t len)
{
	for (size_t i = 0; i < n->n_attribute; i++) {
		const char *name = n->attribute[i]->name ? n->attribute[i]->name : "";
		int ok = 0;

		for (int k = 0; known[k] && !ok; k++)
			ok = strcmp(known[k], name) == 0;
		if (!ok) {
			snprintf(why, len, "attribute '%s' is not supported", name);
			return 1;
		}
	}
	return 0;
}
