/*
 * node_attr.h: reading a NodeProto's attributes by name, the one set of
 * readers the core (core/graph.c, core/loader*.c), the onnxrules library
 * and the device providers (providers/host, vulkan, cuda) use: a value
 * counts when its field is set (has_i, has_f, has_s, n_ints), whatever
 * `type` says.  The CPU provider's readers (cpu_util.c) also look at
 * `type` and read an INT as a float; they use proto_attr for the lookup
 * only.
 */
#ifndef ORTMK_PROTO_NODE_ATTR_H
#define ORTMK_PROTO_NODE_ATTR_H

#include <stddef.h>
#include <stdint.h>

#include "onnx.pb-c.h"

/* The attribute called name, or NULL (also for a NULL node). */
const Onnx__AttributeProto *proto_attr(const Onnx__NodeProto *n, const char *name);
/* Its int (has_i), else dflt. */
int64_t proto_attr_int(const Onnx__NodeProto *n, const char *name, int64_t dflt);
/* Its float (has_f), else dflt. */
float proto_attr_float(const Onnx__NodeProto *n, const char *name, float dflt);
/* Count of its ints (the values in *v), -1 when absent. */
int proto_attr_ints(const Onnx__NodeProto *n, const char *name, const int64_t **v);
/* 1 when its string (has_s) is present and equals `want`. */
int proto_attr_is(const Onnx__NodeProto *n, const char *name, const char *want);
/* The attribute when it holds a value of `type`: its `type` says so, or,
 * left unset by an old exporter, the field of that type is set. */
const Onnx__AttributeProto *proto_attr_typed(const Onnx__NodeProto *n, const char *name,
					     Onnx__AttributeProto__AttributeType type);
/* 1 when the node has an attribute not in the NULL-terminated `known`,
 * with "attribute 'x' is not supported" in why. */
int proto_attr_unknown(const Onnx__NodeProto *n, const char *const *known, char *why, size_t len);

#endif
