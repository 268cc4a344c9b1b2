/*
 * npy: read and write NumPy .npy files (format versions 1.0-3.0, C order,
 * little-endian) for ort-run and the tests.  dtypes are ONNX numbers:
 * float32, float64, float16, int8, uint8, int16, int32, int64, bool (and
 * uint16/uint32/uint64).
 */
#ifndef ORTMK_NPY_H
#define ORTMK_NPY_H

#include <stddef.h>
#include <stdint.h>

#define NPY_MAX_RANK 16

typedef struct npy_array {
	int32_t dtype;               /* ONNX TensorProto.DataType */
	int rank;
	int64_t dims[NPY_MAX_RANK];
	void *data;                  /* malloc'ed, dense, C order */
	size_t nbytes;
} npy_array;

/* 0 on success; otherwise -1 with a one-line reason in err (bad magic,
 * unsupported dtype or byte order, Fortran order, truncated data...). */
int npy_read(const char *path, npy_array *out, char *err, size_t errlen);
int npy_write(const char *path, int32_t dtype, int rank, const int64_t *dims,
	      const void *data, size_t nbytes, char *err, size_t errlen);
void npy_free(npy_array *a);

#endif
