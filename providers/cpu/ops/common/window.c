/*
 * window: the Conv and pooling ops' sliding-window geometry, ONNX's rules
 * in onnxrules/window.c (shared with the core and the device providers)
 * under the names the CPU ops call.
 */
#include "cpu_ops.h"

_Static_assert((int)CPU_E_INVALID == (int)ONNX_E_INVALID &&
	       (int)CPU_E_UNSUPPORTED == (int)ONNX_E_UNSUPPORTED,
	       "onnxrules' error codes are the CPU provider's");

int cpu_window_parse(const Onnx__NodeProto *p, cpu_window *w, char *err, size_t n)
{
	return onnx_window_parse(p, w, err, n);
}

int cpu_window_strided(const cpu_window *w)
{
	for (int i = 0; i < w->n_strides; i++)
		if (w->strides[i] != 1)
			return 1;
	return 0;
}

int cpu_window_geom(const cpu_window *w, int nsp, const int64_t *in_sp,
		    const int64_t *kernel, cpu_geom *g, char *err, size_t n)
{
	return onnx_window_geom(w, nsp, in_sp, kernel, g, err, n);
}
