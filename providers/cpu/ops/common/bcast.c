/*
 * bcast: numpy-style broadcasting iteration and strided copies, used by the
 * elementwise ops (Add, Where, ...), Expand, the reductions, Transpose and
 * Slice.  Both collapse the iteration space first (drop size-1 dims, merge
 * dims that stay contiguous) so the common cases — same shapes, a scalar,
 * a bias along the last dim — run as long flat rows.  A strided copy whose
 * innermost output dim is a gather but another dim reads contiguously (a
 * transpose) is done in tiles.
 */
#include <stdio.h>
#include <string.h>

#include "cpu_ops.h"
#include "vfloat.h"

/* Appends one iteration dim, merging it into the previous one when every
 * operand's stride continues across the boundary. */
static void push_dim(cpu_bcast *b, int64_t dim, const int64_t *st)
{
	int r = b->rank, merge = r > 0;
	for (int k = 0; merge && k < b->n; k++)
		merge = b->strides[k][r - 1] == st[k] * dim;
	if (merge) {
		b->dims[r - 1] *= dim;
		for (int k = 0; k < b->n; k++)
			b->strides[k][r - 1] = st[k];
		return;
	}
	b->dims[r] = dim;
	for (int k = 0; k < b->n; k++)
		b->strides[k][r] = st[k];
	b->rank++;
}

int cpu_bcast_init(cpu_bcast *b, int n, const int *ranks, const int64_t *const *dims)
{
	int64_t stride[CPU_BCAST_MAX][CPU_MAX_RANK];
	int out_rank = 0;

	memset(b, 0, sizeof(*b));
	if (n < 1 || n > CPU_BCAST_MAX)
		return -1;
	b->n = n;
	for (int k = 0; k < n; k++) {
		/* Expand's target shape is not a real tensor: bound every operand */
		if (ranks[k] < 0 || ranks[k] > CPU_MAX_RANK || cpu_shape_numel(ranks[k], dims[k]) < 0)
			return -1;
		if (ranks[k] > out_rank)
			out_rank = ranks[k];
	}
	b->out_rank = out_rank;
	/* right-aligned dims of every operand; stride 0 where it broadcasts */
	for (int k = 0; k < n; k++) {
		int64_t s = 1;
		for (int d = out_rank - 1; d >= 0; d--) {
			int kd = d - (out_rank - ranks[k]);
			int64_t dim = kd >= 0 ? dims[k][kd] : 1;
			stride[k][d] = dim == 1 ? 0 : s;
			s *= dim;
		}
	}
	for (int d = 0; d < out_rank; d++) {
		int64_t od = 1;
		for (int k = 0; k < n; k++) {
			int kd = d - (out_rank - ranks[k]);
			int64_t dim = kd >= 0 ? dims[k][kd] : 1;
			if (dim == 1 || dim == od)
				continue;
			if (od != 1)
				return -1;
			od = dim;
		}
		b->out_dims[d] = od;
	}
	if (cpu_shape_numel(out_rank, b->out_dims) < 0)
		return -1;
	for (int d = 0; d < out_rank; d++) {
		int64_t st[CPU_BCAST_MAX];
		if (b->out_dims[d] == 1)
			continue;
		for (int k = 0; k < n; k++)
			st[k] = stride[k][d];
		push_dim(b, b->out_dims[d], st);
	}
	if (b->rank == 0) {
		b->rank = 1;
		b->dims[0] = 1;
	}
	return 0;
}

int cpu_bcast_each(const cpu_bcast *b, cpu_bcast_row row, void *arg)
{
	int64_t idx[CPU_MAX_RANK] = {0}, off[CPU_BCAST_MAX + 1] = {0}, step[CPU_BCAST_MAX];
	int64_t rows = 1, inner = b->dims[b->rank - 1];
	int rc;

	for (int d = 0; d < b->rank; d++)
		if (b->dims[d] == 0)
			return 0;
	for (int d = 0; d < b->rank - 1; d++)
		rows *= b->dims[d];
	for (int k = 0; k < b->n; k++)
		step[k] = b->strides[k][b->rank - 1];
	for (int64_t r = 0; r < rows; r++) {
		rc = row(arg, inner, off, step);
		if (rc)
			return rc;
		off[b->n] += inner;
		for (int d = b->rank - 2; d >= 0; d--) {
			for (int k = 0; k < b->n; k++)
				off[k] += b->strides[k][d];
			if (++idx[d] < b->dims[d])
				break;
			for (int k = 0; k < b->n; k++)
				off[k] -= b->strides[k][d] * b->dims[d];
			idx[d] = 0;
		}
	}
	return 0;
}

void cpu_bcast_error(cpu_ctx *ctx, int n, const cpu_tensor *const *ts)
{
	char msg[400], s[160];
	size_t used = 0;
	msg[0] = '\0';
	for (int k = 0; k < n && used < sizeof(msg); k++) {
		int w = snprintf(msg + used, sizeof(msg) - used, "%s%s", k ? " and " : "",
				 cpu_shape_str(ts[k]->rank, ts[k]->dims, s, sizeof(s)));
		if (w < 0)
			break;
		used += (size_t)w;
	}
	cpu_fail(ctx, CPU_E_INVALID, "shapes %s are not broadcast-compatible", msg);
}

/* One row of a strided copy, by element size so the compiler sees the type. */
static void copy_row(char *dst, const char *src, size_t es, int64_t len, int64_t step)
{
	if (step == 1) {
		memcpy(dst, src, (size_t)len * es);
		return;
	}
	if (step == 0 && (es == 1 || es == 4 || es == 8)) {
		/* one value broadcast along the row (Expand, ConstantOfShape):
		 * read once, so the stores vectorize (re-read each time, as dst
		 * might alias src, a fill ran at ~1.5 ns an element) */
		if (es == 1) {
			memset(dst, *src, (size_t)len);
		} else if (es == 4) {
			uint32_t v;

			memcpy(&v, src, 4);
			for (int64_t i = 0; i < len; i++)
				((uint32_t *)dst)[i] = v;
		} else {
			uint64_t v;

			memcpy(&v, src, 8);
			for (int64_t i = 0; i < len; i++)
				((uint64_t *)dst)[i] = v;
		}
		return;
	}
	switch (es) {
	case 1:
		for (int64_t i = 0; i < len; i++)
			dst[i] = src[i * step];
		break;
	case 2:
		for (int64_t i = 0; i < len; i++)
			((uint16_t *)dst)[i] = ((const uint16_t *)src)[i * step];
		break;
	case 4:
		for (int64_t i = 0; i < len; i++)
			((uint32_t *)dst)[i] = ((const uint32_t *)src)[i * step];
		break;
	case 8:
		for (int64_t i = 0; i < len; i++)
			((uint64_t *)dst)[i] = ((const uint64_t *)src)[i * step];
		break;
	default:
		for (int64_t i = 0; i < len; i++)
			memcpy(dst + (size_t)i * es, src + i * step * (int64_t)es, es);
		break;
	}
}

/* One tile of a transpose: rows i < ni of the output dim whose source
 * stride is 1, columns j < nj of the innermost output dim (source stride
 * sj).  The element size is a constant after inlining. */
static inline __attribute__((always_inline)) void
tile(char *dst, int64_t di, const char *src, int64_t sj, int64_t ni, int64_t nj, size_t es)
{
	for (int64_t i = 0; i < ni; i++)
		for (int64_t j = 0; j < nj; j++)
			memcpy(dst + (size_t)(i * di + j) * es, src + (size_t)(i + j * sj) * es, es);
}

enum { TILE = 16 };

/* A whole TILE x TILE tile of 4-byte elements as four 8 x 8 register
 * transposes (the element loop moved ~4 GB/s: ConvNeXt's NCHW <-> NHWC
 * transposes of 1.2 MB took ~300 us). */
CPU_MULTIVERSION
static void tile4_full(char *dst, int64_t di, const char *src, int64_t sj)
{
	for (int i0 = 0; i0 < TILE; i0 += 8)
		for (int j0 = 0; j0 < TILE; j0 += 8) {
			vf8 v[8];

			for (int k = 0; k < 8; k++)
				v[k] = vf_load((const float *)src + (j0 + k) * sj + i0);
			vf_transpose8(v);
			for (int k = 0; k < 8; k++)
				vf_store((float *)dst + (i0 + k) * di + j0, v[k]);
		}
}

/* A gather whose innermost output dim reads with a stride while output dim
 * k reads contiguously (a transpose of the last two axes, BERT's key
 * heads): copied in TILE x TILE tiles so both sides stay within a few
 * cache lines.  cd/cs are the collapsed dims and source strides, r >= 2. */
static void copy_transposed(char *dst, const char *src, size_t es, int r, const int64_t *cd,
			    const int64_t *cs, int k)
{
	int64_t ost[CPU_MAX_RANK], idx[CPU_MAX_RANK] = {0}, outer = 1, so = 0, dof = 0;
	int64_t nj = cd[r - 1], sj = cs[r - 1], ni = cd[k];

	ost[r - 1] = 1;
	for (int d = r - 2; d >= 0; d--)
		ost[d] = ost[d + 1] * cd[d + 1];
	for (int d = 0; d < r - 1; d++)
		if (d != k)
			outer *= cd[d];
	for (int64_t o = 0; o < outer; o++) {
		for (int64_t i0 = 0; i0 < ni; i0 += TILE)
			for (int64_t j0 = 0; j0 < nj; j0 += TILE) {
				int64_t ti = ni - i0 < TILE ? ni - i0 : TILE;
				int64_t tj = nj - j0 < TILE ? nj - j0 : TILE;
				char *d = dst + (size_t)(dof + i0 * ost[k] + j0) * es;
				const char *q = src + (size_t)(so + i0 + j0 * sj) * es;
				if (es == 4 && ti == TILE && tj == TILE)
					tile4_full(d, ost[k], q, sj);
				else if (es == 4)
					tile(d, ost[k], q, sj, ti, tj, 4);
				else if (es == 8)
					tile(d, ost[k], q, sj, ti, tj, 8);
				else if (es == 2)
					tile(d, ost[k], q, sj, ti, tj, 2);
				else
					tile(d, ost[k], q, sj, ti, tj, es);
			}
		for (int d = r - 2; d >= 0; d--) {   /* next index of the other dims */
			if (d == k)
				continue;
			so += cs[d];
			dof += ost[d];
			if (++idx[d] < cd[d])
				break;
			so -= cs[d] * cd[d];
			dof -= ost[d] * cd[d];
			idx[d] = 0;
		}
	}
}

void cpu_copy_strided(void *dst, const void *src, size_t esize, int rank,
		      const int64_t *dims, const int64_t *strides)
{
	int64_t cd[CPU_MAX_RANK], cs[CPU_MAX_RANK], idx[CPU_MAX_RANK] = {0};
	int64_t rows = 1, inner, off = 0;
	int r = 0;
	char *out = dst;

	for (int d = 0; d < rank; d++) {
		if (dims[d] == 0)
			return;
		if (dims[d] == 1)
			continue;
		if (r > 0 && cs[r - 1] == strides[d] * dims[d]) {
			cd[r - 1] *= dims[d];
			cs[r - 1] = strides[d];
			continue;
		}
		cd[r] = dims[d];
		cs[r] = strides[d];
		r++;
	}
	if (r == 0) {
		cd[0] = 1;
		cs[0] = 1;
		r = 1;
	}
	inner = cd[r - 1];
	for (int d = 0; d < r - 1; d++)
		rows *= cd[d];
	for (int d = 0; d < r - 1 && cs[r - 1] > 1 && inner >= 4; d++)
		if (cs[d] == 1 && cd[d] >= 4) {
			copy_transposed(dst, src, esize, r, cd, cs, d);
			return;
		}
	for (int64_t row = 0; row < rows; row++) {
		copy_row(out, (const char *)src + off * (int64_t)esize, esize, inner, cs[r - 1]);
		out += (size_t)inner * esize;
		for (int d = r - 2; d >= 0; d--) {
			off += cs[d];
			if (++idx[d] < cd[d])
				break;
			off -= cs[d] * cd[d];
			idx[d] = 0;
		}
	}
}
