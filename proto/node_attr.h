/*
 * node_attr.h: reading a NodeProto's attributes by name, the way the core
 * (core/graph.c: graph_attr*) and the device providers (providers/host/
 * ep_shape.c: ep_attr*) both do: a value counts when its field is set
 * (has_i, has_f), whatever `type` says.  The CPU provider's readers
 * (cpu_util.c) also look at `type` and read an INT as a float; they use
 * proto_attr for the lookup only.
 */
#ifndef ORTMK_PROTO_NODE_ATTR_H
#define ORTMK_PROTO_NODE_ATTR_H

#include <stdint.h>

#include "onnx.pb-c.h"

/* The attribute called name, or NULL (also for a NULL node). */
const Onnx__AttributeProto *proto_attr(const Onnx__NodeProto *n, const char *name);
/* Its int (has_i), else dflt. */
int64_t proto_attr_int(const Onnx__NodeProto *n, const char *name, int64_t dflt);
/* Its float (has_f), else dflt. */
float proto_attr_float(const Onnx__NodeProto *n, const char *name, float dflt);

#endif
