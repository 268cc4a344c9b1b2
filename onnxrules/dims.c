/*
 * dims.c: broadcasting and the view ops' dims (see dims.h).
 */
#include <stdio.h>

#include "dims.h"

int onnx_axis(int64_t axis, int rank)
{
	if (axis < -rank || axis >= rank)
		return -1;
	return (int)(axis < 0 ? axis + rank : axis);
}

int64_t onnx_prod(const int64_t *dims, int n)
{
	int64_t p = 1, sym = 0;
	int nsym = 0;

	for (int i = 0; i < n; i++) {
		if (dims[i] < 0) {
			sym = dims[i];
			nsym++;
		} else if (__builtin_mul_overflow(p, dims[i], &p)) {
			return ONNX_DIM_NEW;
		}
	}
	if (nsym == 0)
		return p;
	if (p == 0)
		return 0;
	return nsym == 1 && p == 1 && sym != ONNX_DIM_NEW ? sym : ONNX_DIM_NEW;
}

int onnx_broadcast(int ra, const int64_t *a, int rb, const int64_t *b, int64_t *out)
{
	int r = ra > rb ? ra : rb;

	if (r > ONNX_MAX_RANK)
		return -1;
	for (int i = 0; i < r; i++) {
		int64_t x = i < r - ra ? 1 : a[i - (r - ra)];
		int64_t y = i < r - rb ? 1 : b[i - (r - rb)];

		if (x == y || y == 1)
			out[i] = x;
		else if (x == 1)
			out[i] = y;
		else if (x >= 0 && y >= 0)
			return -1;
		else if (x >= 0 || y >= 0)
			out[i] = x >= 0 ? x : y;
		else
			out[i] = ONNX_DIM_NEW;
	}
	return r;
}

int onnx_reshape_spec(int rank, const int64_t *dims, const int64_t *s, int r, int allowzero,
		      int64_t *od, int *neg, char *err, size_t n)
{
	*neg = -1;
	for (int i = 0; i < r; i++) {
		od[i] = s[i];
		if (s[i] == 0 && !allowzero) {
			if (rank >= 0 && i >= rank)
				return snprintf(err, n, "shape[%d] = 0 copies a dim the input lacks", i),
				       ONNX_E_INVALID;
			od[i] = rank >= 0 ? dims[i] : ONNX_DIM_NEW;
		} else if (s[i] == -1 && *neg < 0) {
			*neg = i;
			od[i] = ONNX_DIM_NEW;
		} else if (s[i] < 0) {
			return snprintf(err, n, "shape[%d] = %lld is invalid (one -1 at most)", i,
					(long long)s[i]), ONNX_E_INVALID;
		}
	}
	return 0;
}

int onnx_reshape_dims(int rank, const int64_t *dims, int64_t numel, const int64_t *s, int r,
		      int allowzero, int64_t *od, char *err, size_t n)
{
	int64_t known = 1;
	int neg, rc;

	if (r < 0)
		return snprintf(err, n, "shape is missing"), ONNX_E_INVALID;
	rc = onnx_reshape_spec(rank, dims, s, r, allowzero, od, &neg, err, n);
	for (int i = 0; i < r && !rc; i++)
		if (i != neg && __builtin_mul_overflow(known, od[i], &known))
			return snprintf(err, n, "shape overflows"), ONNX_E_INVALID;
	if (rc)
		return rc;
	if (neg >= 0) {
		if (known == 0 || numel % known)
			return snprintf(err, n, "cannot reshape %lld elements into a multiple of %lld",
					(long long)numel, (long long)known), ONNX_E_INVALID;
		od[neg] = numel / known;
		known = numel;
	}
	if (known != numel)
		return snprintf(err, n, "cannot reshape %lld elements to %lld elements",
				(long long)numel, (long long)known), ONNX_E_INVALID;
	return 0;
}

int onnx_flatten_dims(int rank, const int64_t *dims, int64_t axis, int64_t *od, char *err,
		      size_t n)
{
	if (axis < -rank || axis > rank)
		return snprintf(err, n, "axis %lld out of range for rank %d", (long long)axis, rank),
		       ONNX_E_INVALID;
	if (axis < 0)
		axis += rank;
	od[0] = onnx_prod(dims, (int)axis);
	od[1] = onnx_prod(dims + axis, rank - (int)axis);
	return 0;
}

/* Marks the axes in mask (bit per dim of rank `rank`). */
static int axes_mask(const int64_t *ax, int cnt, int rank, int unique, uint32_t *mask, char *err,
		     size_t n)
{
	*mask = 0;
	for (int i = 0; i < cnt; i++) {
		int a = rank > 0 ? onnx_axis(ax[i], rank) : -1;

		if (a < 0)
			return snprintf(err, n, "axis %lld out of range for rank %d", (long long)ax[i],
					rank), ONNX_E_INVALID;
		if (unique && (*mask & (1u << a)))
			return snprintf(err, n, "axis %lld repeated", (long long)ax[i]), ONNX_E_INVALID;
		*mask |= 1u << a;
	}
	return 0;
}

int onnx_squeeze_dims(int rank, const int64_t *dims, const int64_t *ax, int cnt, int64_t *od,
		      int *ro, char *err, size_t n)
{
	uint32_t mask;
	int r = 0, rc = axes_mask(ax, cnt > 0 ? cnt : 0, rank, 0, &mask, err, n);

	if (rc)
		return rc;
	for (int i = 0; i < rank; i++) {
		int64_t d = dims[i];

		if (cnt <= 0 && d < 0)
			return 1;
		if ((mask & (1u << i)) && d >= 0 && d != 1)
			return snprintf(err, n, "cannot squeeze dim %d of size %lld", i, (long long)d),
			       ONNX_E_INVALID;
		if ((cnt > 0 && !(mask & (1u << i))) || (cnt <= 0 && d != 1))
			od[r++] = d;
	}
	*ro = r;
	return 0;
}

int onnx_unsqueeze_dims(int rank, const int64_t *dims, const int64_t *ax, int cnt, int64_t *od,
			int *ro, char *err, size_t n)
{
	int r = rank + (cnt > 0 ? cnt : 0), k = 0, rc;
	uint32_t mask;

	if (cnt < 0)
		return snprintf(err, n, "axes are required"), ONNX_E_INVALID;
	if (r > ONNX_MAX_RANK)
		return snprintf(err, n, "output rank %d exceeds %d", r, ONNX_MAX_RANK), ONNX_E_INVALID;
	rc = axes_mask(ax, cnt, r, 1, &mask, err, n);
	if (rc)
		return rc;
	for (int i = 0; i < r; i++)
		od[i] = (mask & (1u << i)) ? 1 : dims[k++];
	*ro = r;
	return 0;
}
