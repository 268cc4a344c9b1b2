/*
 * rules.h: what every part of the onnxrules library shares: the largest
 * rank it handles (the core's GRAPH_MAX_RANK, the providers' EP_MAX_RANK
 * and CPU_MAX_RANK are the same 16) and its error codes, the values of the
 * providers' EP_E_INVALID / CPU_E_INVALID and *_UNSUPPORTED.
 *
 * onnxrules/ is the one home of rules ONNX and ortmk's files define that
 * the core and the providers both apply: window geometry (window.h),
 * broadcasting and the view ops' dims (dims.h), the pre-pack cache file
 * (prepack_file.h), and the small system helpers they need (sysio.h).
 */
#ifndef ORTMK_ONNXRULES_RULES_H
#define ORTMK_ONNXRULES_RULES_H

#define ONNX_MAX_RANK 16

enum { ONNX_E_INVALID = -1, ONNX_E_UNSUPPORTED = -2 };

#endif
