/*
 * pool: ONNX MaxPool, AveragePool, GlobalAveragePool and GlobalMaxPool for
 * float32.  MaxPool and AveragePool handle 1-D to 3-D windows with pads,
 * strides, dilations, auto_pad and ceil_mode; MaxPool's optional Indices
 * output honours storage_order.  AveragePool with count_include_pad divides
 * by the window positions inside the padded input (as PyTorch and ONNX
 * Runtime do), so a ceil_mode window hanging past the end padding is not
 * charged for the overhang.  MaxPool also takes int8 and uint8 (opset 12):
 * their values are exact in float, so each (N, C) plane is widened to float,
 * pooled by the float code and narrowed back, which loses nothing.
 *
 * Fast path: 1-D and 2-D windows without the Indices output run separably
 * (pool2d_plane): each input row is reduced horizontally once over the
 * output columns whose windows lie inside the row, in loops specialised
 * for the common (kernel, stride) pairs so they vectorize, then the output
 * rows combine the kernel rows they cover.  Columns whose windows touch the
 * padding are done tap by tap, unless the plane is copied into padded rows
 * first (MaxPool's padding -inf, a counted average's zeros: pad_copy_fits).
 * On AVX2 a 2-D window at column stride 1 or 2 runs row by row instead
 * (pool_rows; on AVX-512 a 3x3 window at stride 1 with pads 1 on a plane
 * of at most FLAT_MAX_FLOATS over the plane as one run, flat_plane); small 2-D planes of a multiple of eight channels that it
 * does not take are pooled blocked (small_planes_blocked); 3-D windows
 * and MaxPool with Indices go through
 * the general pool_window.  A NaN in a MaxPool window makes the
 * output NaN on every path (numpy's and PyTorch's rule); AveragePool's fast
 * path sums in float instead of double.
 */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "blk8.h"
#include "cpu_ops.h"
#include "par.h"
#include "vfloat.h"

typedef struct pool_state {
	cpu_window win;
	int is_max, count_include_pad, storage_order;
} pool_state;

#define POOL_TYPES_I8 (CPU_BIT(CPU_INT8) | CPU_BIT(CPU_UINT8))

static uint32_t pool_types(const Onnx__NodeProto *p, int64_t opset)
{
	if (opset >= 12 && !strcmp(p->op_type, "MaxPool"))
		return CPU_TYPES_F32 | POOL_TYPES_I8;
	return CPU_TYPES_F32;
}

static int pool_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt,
			 int n_in, char *why, size_t n)
{
	return cpu_supports_dtype(dt, n_in, 0, pool_types(p, opset), why, n);
}

static int pool_prepare(cpu_node *node, char *err, size_t n)
{
	pool_state *st = calloc(1, sizeof(*st));
	int rc;
	if (!st)
		return CPU_E_NOMEM;
	rc = cpu_window_parse(node->proto, &st->win, err, n);
	if (rc) {
		free(st);
		return rc;
	}
	st->is_max = node->proto->op_type[0] == 'M';
	st->count_include_pad = cpu_attr_int(node->proto, "count_include_pad", 0) != 0;
	st->storage_order = cpu_attr_int(node->proto, "storage_order", 0) != 0;
	node->state = st;
	return 0;
}

static void pool_release(cpu_node *node)
{
	free(node->state);
	node->state = NULL;
}

/* [*a, *b): the kernel taps kk in [0, k) with lo <= start + kk*d < hi. */
static void taps(int64_t start, int64_t k, int64_t d, int64_t lo, int64_t hi, int64_t *a,
		 int64_t *b)
{
	*a = start >= lo ? 0 : (lo - start + d - 1) / d;
	*b = start >= hi ? 0 : (hi - start + d - 1) / d;
	if (*a > k)
		*a = k;
	if (*b > k)
		*b = k;
	if (*b < *a)
		*b = *a;
}

/* One output element at window start s[3] of the (N, C) plane x. */
static float pool_window(const pool_state *st, const cpu_geom *g, const float *x,
			 const int64_t *s, int64_t *arg)
{
	int64_t a[3], b[3], cnt = 1, best_i = -1;
	float best = -FLT_MAX;
	double sum = 0.0;
	for (int i = 0; i < 3; i++) {
		if (st->count_include_pad && !st->is_max) {
			taps(s[i], g->k[i], g->d[i], -g->pb[i], g->in[i] + g->pe[i], &a[i], &b[i]);
			cnt *= b[i] - a[i];
		}
		taps(s[i], g->k[i], g->d[i], 0, g->in[i], &a[i], &b[i]);
		if (!st->count_include_pad || st->is_max)
			cnt *= b[i] - a[i];
	}
	for (int64_t kd = a[0]; kd < b[0]; kd++)
		for (int64_t kh = a[1]; kh < b[1]; kh++)
			for (int64_t kw = a[2]; kw < b[2]; kw++) {
				int64_t id = s[0] + kd * g->d[0], ih = s[1] + kh * g->d[1];
				int64_t iw = s[2] + kw * g->d[2];
				float v = x[(id * g->in[1] + ih) * g->in[2] + iw];
				if (!st->is_max) {
					sum += v;
				} else if (best_i < 0 || (best == best && (v > best || v != v))) {
					best = v;   /* the first NaN wins: NaN propagates */
					best_i = st->storage_order
						 ? id + (ih + iw * g->in[1]) * g->in[0]
						 : (id * g->in[1] + ih) * g->in[2] + iw;
				}
			}
	if (st->is_max) {
		*arg = best_i;
		return best;
	}
	return cnt ? (float)(sum / (double)cnt) : 0.0f;
}

static void pool_plane(const pool_state *st, const cpu_geom *g, const float *x, float *y,
		       int64_t *ind, int64_t ind_base)
{
	int64_t s[3], arg = -1;
	for (int64_t od = 0; od < g->out[0]; od++)
		for (int64_t oh = 0; oh < g->out[1]; oh++)
			for (int64_t ow = 0; ow < g->out[2]; ow++) {
				s[0] = od * g->s[0] - g->pb[0];
				s[1] = oh * g->s[1] - g->pb[1];
				s[2] = ow * g->s[2] - g->pb[2];
				*y++ = pool_window(st, g, x, s, &arg);
				if (ind)
					*ind++ = arg < 0 ? -1 : ind_base + arg;
			}
}

/* ---- separable 1-D / 2-D fast path ---- */

/* max(m, v) where a NaN on either side wins (as numpy and PyTorch do).
 * Two selects rather than one with `||`, which gcc turns into branches in
 * the scalar tails (mispredicted on real data: 4x slower). */
static inline float max_nan(float m, float v)
{
	m = v > m ? v : m;
	return v != v ? v : m;
}

/* h[i] = max (or sum) over k < kw of x[i*sw + k*dw], one pass per tap. */
static inline __attribute__((always_inline)) void
hrow_passes(int is_max, const float *x, float *h, int64_t n, int64_t kw, int64_t dw,
	    int64_t sw)
{
	for (int64_t i = 0; i < n; i++)
		h[i] = x[i * sw];
	for (int64_t k = 1; k < kw; k++) {
		const float *xk = x + k * dw;
		for (int64_t i = 0; i < n; i++)
			h[i] = is_max ? max_nan(h[i], xk[i * sw]) : h[i] + xk[i * sw];
	}
}

/* The same with every tap of an output in registers: for a constant kw. */
static inline __attribute__((always_inline)) void
hrow_fused(int is_max, const float *x, float *h, int64_t n, int kw, int64_t sw)
{
	for (int64_t i = 0; i < n; i++) {
		float m = x[i * sw];
		for (int k = 1; k < kw; k++) {
			float v = x[i * sw + k];
			m = is_max ? max_nan(m, v) : m + v;
		}
		h[i] = m;
	}
}

static inline __attribute__((always_inline)) void
hrow_any(int is_max, const float *x, float *h, int64_t n, int64_t kw, int64_t dw, int64_t sw)
{
	if (dw == 1 && kw == 3 && sw == 2)
		hrow_fused(is_max, x, h, n, 3, 2);
	else if (dw == 1 && kw == 3 && sw == 1)
		hrow_fused(is_max, x, h, n, 3, 1);
	else if (dw == 1 && kw == 2 && sw == 2)
		hrow_fused(is_max, x, h, n, 2, 2);
	else if (dw == 1 && kw == 2 && sw == 1)
		hrow_fused(is_max, x, h, n, 2, 1);
	else if (sw == 1)
		hrow_passes(is_max, x, h, n, kw, dw, 1);
	else if (sw == 2)
		hrow_passes(is_max, x, h, n, kw, dw, 2);
	else
		hrow_passes(is_max, x, h, n, kw, dw, sw);
}

CPU_MULTIVERSION
static void pool_hrow(int is_max, const float *x, float *h, int64_t n, int64_t kw, int64_t dw,
		      int64_t sw)
{
	if (is_max)
		hrow_any(1, x, h, n, kw, dw, sw);
	else
		hrow_any(0, x, h, n, kw, dw, sw);
}

/* y[i] = max (or sum / cnt) over the nr rows h + r*hs; nr is a constant
 * after inlining for the common kernel heights. */
static inline __attribute__((always_inline)) void
vrows(int is_max, const float *h, int64_t hs, int64_t nr, int64_t n, float cnt, float *y)
{
	for (int64_t i = 0; i < n; i++) {
		float m = h[i];
		for (int64_t r = 1; r < nr; r++) {
			float v = h[r * hs + i];
			m = is_max ? max_nan(m, v) : m + v;
		}
		y[i] = is_max ? m : m / cnt;
	}
}

static inline __attribute__((always_inline)) void
vrows_any(int is_max, const float *h, int64_t hs, int64_t nr, int64_t n, float cnt, float *y)
{
	if (nr == 3)
		vrows(is_max, h, hs, 3, n, cnt, y);
	else if (nr == 2)
		vrows(is_max, h, hs, 2, n, cnt, y);
	else if (nr == 1)
		vrows(is_max, h, hs, 1, n, cnt, y);
	else
		vrows(is_max, h, hs, nr, n, cnt, y);
}

CPU_MULTIVERSION
static void pool_vrows(int is_max, const float *h, int64_t hs, int64_t nr, int64_t n, float cnt,
		       float *y)
{
	if (is_max)
		vrows_any(1, h, hs, nr, n, cnt, y);
	else
		vrows_any(0, h, hs, nr, n, cnt, y);
}

/* An output of pool2d_plane whose window leaves the input sideways: kernel
 * rows [a, b) are inside (rcnt of them count for the average); columns are
 * checked tap by tap.  Same tap order, and so the same result, as
 * pool_window. */
static float edge_window(const pool_state *st, const cpu_geom *g, const float *x, int64_t ih0,
			 int64_t a, int64_t b, int64_t rcnt, int64_t iw0)
{
	int64_t W = g->in[2], ccnt = 0, first = 1;
	float best = -FLT_MAX, sum = 0.0f;
	int64_t lo = st->count_include_pad ? -g->pb[2] : 0;
	int64_t hi = st->count_include_pad ? W + g->pe[2] : W;
	for (int64_t k = 0; !st->is_max && k < g->k[2]; k++) {
		int64_t iw = iw0 + k * g->d[2];
		if (iw >= lo && iw < hi)
			ccnt++;
	}
	for (int64_t r = a; r < b; r++) {
		const float *xr = x + (ih0 + r * g->d[1]) * W;
		for (int64_t k = 0; k < g->k[2]; k++) {
			int64_t iw = iw0 + k * g->d[2];
			if (iw < 0 || iw >= W)
				continue;
			sum += xr[iw];
			best = first ? xr[iw] : max_nan(best, xr[iw]);
			first = 0;
		}
	}
	if (st->is_max)
		return best;
	return rcnt > 0 && ccnt > 0 ? sum / (float)(rcnt * ccnt) : 0.0f;
}

/* One (N, C) plane of a 1-D or 2-D window (g->in[0] == 1); hb has room for
 * in[1] x out[2] + in[2] floats. */
static void pool2d_plane(const pool_state *st, const cpu_geom *g, const float *x, float *y,
			 float *hb)
{
	int64_t H = g->in[1], W = g->in[2], OW = g->out[2], kw = g->k[2], sw = g->s[2];
	int64_t pw = g->pb[2], c0, c1, n, s[3] = {0, 0, 0}, arg;

	/* interior columns [c0, c1): 0 <= ow*sw - pw and ow*sw - pw + (kw-1)*dw < W */
	c0 = (pw + sw - 1) / sw;
	c1 = W - 1 + pw - (kw - 1) * g->d[2];
	c1 = c1 < 0 ? 0 : c1 / sw + 1;
	c1 = c1 < OW ? c1 : OW;
	c0 = c0 < c1 ? c0 : c1;
	n = c1 - c0;
	/* Max over windows that step down by more than a row: each output
	 * row's kernel rows are reduced first (contiguous vectors), then one
	 * row across, so the strided row reduction runs once an output row
	 * instead of once an input row (SqueezeNet's 3x3/2 on 111x111: half
	 * of them).  Max is the same in any order; averages keep theirs. */
	int vfirst = st->is_max && g->s[1] > 1 && n;
	int64_t span = n ? (n - 1) * sw + (kw - 1) * g->d[2] + 1 : 0;

	for (int64_t r = 0; n && !vfirst && r < H; r++)
		pool_hrow(st->is_max, x + r * W + c0 * sw - pw, hb + r * n, n, kw, g->d[2], sw);
	for (int64_t oh = 0; oh < g->out[1]; oh++) {
		int64_t a, b, pa, pz, cnt;
		float *yr = y + oh * OW;
		s[1] = oh * g->s[1] - g->pb[1];
		taps(s[1], g->k[1], g->d[1], 0, H, &a, &b);
		cnt = b - a;
		if (st->count_include_pad) {
			taps(s[1], g->k[1], g->d[1], -g->pb[1], H + g->pe[1], &pa, &pz);
			cnt = pz - pa;
		}
		if (b == a) {   /* no kernel row inside: pool_window says what that gives */
			for (int64_t ow = 0; ow < OW; ow++) {
				s[2] = ow * sw - pw;
				yr[ow] = pool_window(st, g, x, s, &arg);
			}
			continue;
		}
		for (int64_t ow = 0; ow < OW; ow++) {
			if (ow == c0)
				ow = c1;
			if (ow == OW)
				break;
			yr[ow] = edge_window(st, g, x, s[1], a, b, cnt, ow * sw - pw);
		}
		if (n && vfirst) {
			pool_vrows(1, x + (s[1] + a * g->d[1]) * W + c0 * sw - pw, g->d[1] * W, b - a,
				   span, 1.0f, hb);
			pool_hrow(1, hb, yr + c0, n, kw, g->d[2], sw);
		} else if (n) {
			pool_vrows(st->is_max, hb + (s[1] + a * g->d[1]) * n, g->d[1] * n, b - a, n,
				   (float)(cnt * kw), yr + c0);
		}
	}
}

/* A 2x2 window at stride 2 with every window inside the plane (no pads,
 * no ceil_mode overhang): planes [0, planes) in one vectorized loop, the
 * taps of an output combined in pool2d_plane's order (a row's two taps,
 * then the two rows), so the bits are its bits.  The example CNN's 32x32
 * planes took 48 calls of the row helpers each, 4x ONNX Runtime's time.
 * (3x3 windows at stride 2 overlap: the separable path, which reduces
 * each input row once, measured faster on SqueezeNet's 111x111.) */
static inline __attribute__((always_inline)) float s2_row(int is_max, const float *r, int64_t ow)
{
	return is_max ? max_nan(r[2 * ow], r[2 * ow + 1]) : r[2 * ow] + r[2 * ow + 1];
}

/* The same for eight outputs from ow: the even and odd columns of two
 * loads. */
static inline __attribute__((always_inline)) vf8 s2_row8(int is_max, const float *r, int64_t ow)
{
	const vi8 ev = {0, 2, 4, 6, 8, 10, 12, 14}, od = {1, 3, 5, 7, 9, 11, 13, 15};
	vf8 a = vf_load(r + 2 * ow), b = vf_load(r + 2 * ow + 8);
	vf8 m = __builtin_shuffle(a, b, ev), v = __builtin_shuffle(a, b, od);

	return is_max ? vf_max_nan(m, v) : m + v;
}

static inline __attribute__((always_inline)) void
s2_planes(int is_max, const float *x, float *y, int64_t planes, int64_t H, int64_t W, int64_t OH,
	  int64_t OW)
{
	int64_t vec = OW - OW % 8;   /* 2 * vec <= W: the loads stay in the row */

	for (int64_t p = 0; p < planes; p++)
		for (int64_t oh = 0; oh < OH; oh++) {
			const float *r = x + (p * H + 2 * oh) * W;
			float *yr = y + (p * OH + oh) * OW;
			int64_t ow = 0;

			for (; ow < vec; ow += 8) {
				vf8 m = s2_row8(is_max, r, ow), v = s2_row8(is_max, r + W, ow);

				m = is_max ? vf_max_nan(m, v) : m + v;
				vf_store(yr + ow, is_max ? m : m / 4.0f);
			}
			for (; ow < OW; ow++) {
				float m = s2_row(is_max, r, ow), v = s2_row(is_max, r + W, ow);

				m = is_max ? max_nan(m, v) : m + v;
				yr[ow] = is_max ? m : m / 4.0f;
			}
		}
}

CPU_MULTIVERSION
static void pool_s2(int is_max, const float *x, float *y, int64_t planes, int64_t H, int64_t W,
		    int64_t OH, int64_t OW)
{
	if (is_max)
		s2_planes(1, x, y, planes, H, W, OH, OW);
	else
		s2_planes(0, x, y, planes, H, W, OH, OW);
}

/* MaxPool and AveragePool of 2-D windows at column stride 1 or 2, no
 * dilation, every window holding a tap of the plane: for each output row,
 * the kernel rows inside the plane are reduced into one row (vm, its left
 * padding and everything past the image -inf for max, 0 for the sum),
 * whose windows then give eight outputs a vector, the taps as shifted
 * loads (stride 2: the even lanes of two); an average divides by the
 * window's rows times its columns that count (inside the plane, or inside
 * its pads with count_include_pad: pool_window's count).  No edge column
 * or row is special and a row costs a few vectors, where the separable
 * kernel's per-row calls and the padded copy cost more than the pooling
 * on small planes (GoogLeNet's 3x3/1 MaxPools on 14x14 planes of 480-832
 * channels: 4x ONNX Runtime's blocked kernel; Inception's 3x3/1
 * AveragePools on 35x35 and 17x17: 2.5-3x).  A NaN in a max window is
 * tracked apart, as blk_pool_range does, and wins.  AVX2 intrinsics for
 * maxps: the generic vectors' max is a compare and a blend, whose chain
 * per tap left the loop latency-bound (2-3x slower); other CPUs keep the
 * separable kernel. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#include <immintrin.h>
#define RM_X86 1
#define RM_TARGET __attribute__((target("avx2,fma")))
#define RM_VM_FLOATS 4096   /* rows of vm a block of output rows, at most (one at least) */

/* Eight floats of row x (W of them) from w, the lanes past W `fill`
 * (only W < 8 has such lanes: a row's last vector overlaps the one
 * before). */
static inline __attribute__((always_inline)) RM_TARGET __m256 rm8_load(const float *x, int64_t w,
								       int64_t W, float fill)
{
	__m256i m;

	if (W - w >= 8)
		return _mm256_loadu_ps(x + w);
	m = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(W - w)),
			       _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
	return _mm256_blendv_ps(_mm256_set1_ps(fill), _mm256_maskload_ps(x + w, m),
				_mm256_castsi256_ps(m));
}

/* acc folded with u: the max, the NaNs seen kept in nan; or the sum. */
static inline __attribute__((always_inline)) RM_TARGET void rm8_fold(__m256 *acc, __m256 *nan,
								     __m256 u, int is_max)
{
	if (is_max) {
		*nan = _mm256_or_ps(*nan, _mm256_cmp_ps(u, u, _CMP_UNORD_Q));
		*acc = _mm256_max_ps(u, *acc);
	} else {
		*acc = _mm256_add_ps(*acc, u);
	}
}

/* A max is NaN where a NaN was seen. */
static inline __attribute__((always_inline)) RM_TARGET __m256 rm8_result(__m256 acc, __m256 nan,
									 int is_max)
{
	return is_max ? _mm256_blendv_ps(acc, _mm256_set1_ps(NAN), nan) : acc;
}

/* The max (NaN winning) or the sum of a window's taps along a row of vm,
 * eight outputs. */
static inline __attribute__((always_inline)) RM_TARGET __m256 rm8_taps(const float *v, int kw,
								       int s2, int is_max)
{
	__m256 acc = _mm256_set1_ps(is_max ? -INFINITY : 0.0f), nan = _mm256_setzero_ps();

	for (int t = 0; t < kw; t++) {
		__m256 u = _mm256_loadu_ps(v + t);

		if (s2) {
			__m256 b = _mm256_loadu_ps(v + t + 8);

			u = _mm256_castpd_ps(_mm256_permute4x64_pd(
				_mm256_castps_pd(_mm256_shuffle_ps(u, b, 0x88)), 0xd8));
		}
		rm8_fold(&acc, &nan, u, is_max);
	}
	return rm8_result(acc, nan, is_max);
}

/* An average's count along axis i (1 rows, 2 columns) for the window
 * starting at `start` (no dilation): its taps inside the plane, or inside
 * the plane and its pads with count_include_pad (pool_window's count). */
static int64_t rm_count(const pool_state *st, const cpu_geom *g, int i, int64_t start)
{
	int64_t lo = st->count_include_pad ? -g->pb[i] : 0;
	int64_t hi = st->count_include_pad ? g->in[i] + g->pe[i] : g->in[i], a, b;

	taps(start, g->k[i], 1, lo, hi, &a, &b);
	return b - a;
}

/* Output rows a block: their rows of vm (vs floats each) within
 * RM_VM_FLOATS, one at least. */
static int64_t rm_block_rows(int64_t vs)
{
	return RM_VM_FLOATS / vs > 1 ? RM_VM_FLOATS / vs : 1;
}

/* One plane; cc: an average's column counts (OW of them, then room for a
 * vector), NULL for max. */
static inline __attribute__((always_inline)) RM_TARGET void
rm8_plane(const pool_state *st, const cpu_geom *g, const float *x, float *y, float *vm,
	  int64_t vs, const float *cc, int kw, int s2, int is_max)
{
	int64_t H = g->in[1], W = g->in[2], OH = g->out[1], OW = g->out[2];
	int64_t pl = g->pb[2], sw = s2 ? 2 : 1;
	float fill = is_max ? -INFINITY : 0.0f;

	/* output rows a block (vm: 16 KiB), each block's kernel rows into its
	 * rows of vm first (a vector read back right after its store would
	 * wait on the store buffer), then its windows, the kernel width a
	 * constant for 2 and 3 */
	int64_t rows = rm_block_rows(vs);

	for (int64_t oh0 = 0; oh0 < OH; oh0 += rows) {
		int64_t oh1 = oh0 + rows < OH ? oh0 + rows : OH;

		for (int64_t oh = oh0; oh < oh1; oh++) {
			int64_t ra = oh * g->s[1] - g->pb[1], rb = ra + g->k[1];
			float *vr = vm + (oh - oh0) * vs + pl;

			ra = ra < 0 ? 0 : ra;
			rb = rb < H ? rb : H;
			for (int64_t w = 0; w < W; w += 8) {
				int64_t at = W >= 8 && w + 8 > W ? W - 8 : w;
				__m256 acc = rm8_load(x + ra * W, at, W, fill);
				__m256 nan = _mm256_cmp_ps(acc, acc, _CMP_UNORD_Q);

				for (int64_t r = ra + 1; r < rb; r++)
					rm8_fold(&acc, &nan, rm8_load(x + r * W, at, W, fill), is_max);
				_mm256_storeu_ps(vr + at, rm8_result(acc, nan, is_max));
			}
		}
		for (int64_t oh = oh0; oh < oh1; oh++) {
			__m256 rc = _mm256_setzero_ps();

			if (!is_max)
				rc = _mm256_set1_ps((float)rm_count(st, g, 1, oh * g->s[1] - g->pb[1]));
			for (int64_t ow = 0; ow < OW; ow += 8) {
				int64_t at = OW >= 8 && ow + 8 > OW ? OW - 8 : ow;
				__m256 o = rm8_taps(vm + (oh - oh0) * vs + at * sw, kw, s2, is_max);

				if (!is_max)
					o = _mm256_div_ps(o, _mm256_mul_ps(rc, _mm256_loadu_ps(cc + at)));
				if (OW >= 8) {
					_mm256_storeu_ps(y + oh * OW + at, o);
				} else {
					float b[8];

					_mm256_storeu_ps(b, o);
					memcpy(y + oh * OW, b, (size_t)OW * sizeof(float));
				}
			}
		}
	}
}

/* The same plane with AVX-512: sixteen pixels a vector, the row's last
 * vector through a mask (its lanes past the row filled, so vm's right
 * padding stays the fill), NaNs tracked in a mask register.  The same
 * taps in the same order, so the bits are rm8_plane's; a 14-pixel row of
 * GoogLeNet's 3x3/1 MaxPools is one vector instead of two overlapping
 * ones (those pools alone, 512 planes of 14 x 14: 75 -> 57 us a run,
 * ONNX Runtime's blocked kernel 30; 256 of 28 x 28: 140 -> 99, ORT 64;
 * Inception's 288 of 35 x 35: 247 -> 213, ORT 118; ResNet's 3x3/2 on 64 of
 * 112 x 112: 219 -> 179). */
#define RM16_TARGET __attribute__((target("avx512f")))

static inline __attribute__((always_inline)) RM16_TARGET __mmask16 rm16_mask(int64_t n)
{
	return n >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << n) - 1);
}

static inline __attribute__((always_inline)) RM16_TARGET __m512 rm16_taps(const float *v, int kw,
									  int s2, int is_max)
{
	const __m512i ev = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26,
					     28, 30);
	__m512 acc = _mm512_set1_ps(is_max ? -INFINITY : 0.0f);
	__mmask16 nan = 0;

	for (int t = 0; t < kw; t++) {
		__m512 u = _mm512_loadu_ps(v + t);

		if (s2)
			u = _mm512_permutex2var_ps(u, ev, _mm512_loadu_ps(v + t + 16));
		if (is_max) {
			nan = _kor_mask16(nan, _mm512_cmp_ps_mask(u, u, _CMP_UNORD_Q));
			acc = _mm512_max_ps(u, acc);
		} else {
			acc = _mm512_add_ps(acc, u);
		}
	}
	return is_max ? _mm512_mask_mov_ps(acc, nan, _mm512_set1_ps(NAN)) : acc;
}

static inline __attribute__((always_inline)) RM16_TARGET void
rm16_plane(const pool_state *st, const cpu_geom *g, const float *x, float *y, float *vm,
	   int64_t vs, const float *cc, int kw, int s2, int is_max)
{
	int64_t H = g->in[1], W = g->in[2], OH = g->out[1], OW = g->out[2];
	int64_t pl = g->pb[2], sw = s2 ? 2 : 1;
	const __m512 fill = _mm512_set1_ps(is_max ? -INFINITY : 0.0f);
	int64_t rows = rm_block_rows(vs);

	for (int64_t oh0 = 0; oh0 < OH; oh0 += rows) {
		int64_t oh1 = oh0 + rows < OH ? oh0 + rows : OH;

		for (int64_t oh = oh0; oh < oh1; oh++) {
			int64_t ra = oh * g->s[1] - g->pb[1], rb = ra + g->k[1];
			float *vr = vm + (oh - oh0) * vs + pl;

			ra = ra < 0 ? 0 : ra;
			rb = rb < H ? rb : H;
			for (int64_t w = 0; w < W; w += 16) {
				__mmask16 m = rm16_mask(W - w);
				__m512 acc = _mm512_mask_loadu_ps(fill, m, x + ra * W + w);
				__mmask16 nan = _mm512_cmp_ps_mask(acc, acc, _CMP_UNORD_Q);

				for (int64_t r = ra + 1; r < rb; r++) {
					__m512 u = _mm512_mask_loadu_ps(fill, m, x + r * W + w);

					if (is_max) {
						nan = _kor_mask16(nan, _mm512_cmp_ps_mask(u, u, _CMP_UNORD_Q));
						acc = _mm512_max_ps(u, acc);
					} else {
						acc = _mm512_add_ps(acc, u);
					}
				}
				if (is_max)
					acc = _mm512_mask_mov_ps(acc, nan, _mm512_set1_ps(NAN));
				_mm512_storeu_ps(vr + w, acc);
			}
		}
		for (int64_t oh = oh0; oh < oh1; oh++) {
			__m512 rc = _mm512_setzero_ps();

			if (!is_max)
				rc = _mm512_set1_ps((float)rm_count(st, g, 1, oh * g->s[1] - g->pb[1]));
			for (int64_t ow = 0; ow < OW; ow += 16) {
				__m512 o = rm16_taps(vm + (oh - oh0) * vs + ow * sw, kw, s2, is_max);

				if (!is_max)
					o = _mm512_div_ps(o, _mm512_mul_ps(rc, _mm512_loadu_ps(cc + ow)));
				_mm512_mask_storeu_ps(y + oh * OW + ow, rm16_mask(OW - ow), o);
			}
		}
	}
}

/* pool_rows' rows of vm: the padded row, a vector (of 16) past the image,
 * and what the last vector of outputs reads. */
static int64_t rows_stride(const cpu_geom *g)
{
	int64_t a = g->pb[2] + g->in[2] + 16, b = g->s[2] * (g->out[2] + 16) + g->k[2] + 16;

	return a > b ? a : b;
}

/* vm's floats: a block of rows. */
static int64_t rows_vm(const cpu_geom *g)
{
	int64_t vs = rows_stride(g), rows = rm_block_rows(vs);

	return vs * (rows < g->out[1] ? rows : g->out[1]);
}

static inline __attribute__((always_inline)) RM_TARGET void
rows_planes(const pool_state *st, const cpu_geom *g, const float *x, float *y, int64_t planes,
	    float *vm, const float *cc, int is_max)
{
	int64_t vs = rows_stride(g), isz = g->in[1] * g->in[2], osz = g->out[1] * g->out[2];
	int s2 = g->s[2] == 2, kw = (int)g->k[2];

	for (int64_t p = 0; p < planes; p++, x += isz, y += osz)
		if (kw == 3 && s2)
			rm8_plane(st, g, x, y, vm, vs, cc, 3, 1, is_max);
		else if (kw == 3)
			rm8_plane(st, g, x, y, vm, vs, cc, 3, 0, is_max);
		else if (kw == 2 && s2)
			rm8_plane(st, g, x, y, vm, vs, cc, 2, 1, is_max);
		else if (kw == 2)
			rm8_plane(st, g, x, y, vm, vs, cc, 2, 0, is_max);
		else
			rm8_plane(st, g, x, y, vm, vs, cc, kw, s2, is_max);
}

static inline __attribute__((always_inline)) RM16_TARGET void
rows_planes16(const pool_state *st, const cpu_geom *g, const float *x, float *y, int64_t planes,
	      float *vm, const float *cc, int is_max)
{
	int64_t vs = rows_stride(g), isz = g->in[1] * g->in[2], osz = g->out[1] * g->out[2];
	int s2 = g->s[2] == 2, kw = (int)g->k[2];

	for (int64_t p = 0; p < planes; p++, x += isz, y += osz)
		if (kw == 3 && s2)
			rm16_plane(st, g, x, y, vm, vs, cc, 3, 1, is_max);
		else if (kw == 3)
			rm16_plane(st, g, x, y, vm, vs, cc, 3, 0, is_max);
		else if (kw == 2 && s2)
			rm16_plane(st, g, x, y, vm, vs, cc, 2, 1, is_max);
		else if (kw == 2)
			rm16_plane(st, g, x, y, vm, vs, cc, 2, 0, is_max);
		else
			rm16_plane(st, g, x, y, vm, vs, cc, kw, s2, is_max);
}

static RM16_TARGET void pool_rows16(const pool_state *st, const cpu_geom *g, const float *x,
				    float *y, int64_t planes, float *buf, const float *cc)
{
	if (st->is_max)
		rows_planes16(st, g, x, y, planes, buf, NULL, 1);
	else
		rows_planes16(st, g, x, y, planes, buf, cc, 0);
}

/* 3 x 3 windows at stride 1 with one pixel of padding on every side, on
 * planes of at most FLAT_MAX_FLOATS (Inception's average pools at 35 x 35
 * to 8 x 8, GoogLeNet's 3x3/1 max pools at 28 x 28 to 7 x 7): the output
 * has the input's shape, so both passes run over the plane as one flat
 * run of H x W floats, sixteen a vector across row ends, where
 * rm16_plane's rows of 17 or 14 pixels took a vector and a masked one
 * each, twice (768 planes of 17 x 17: 210 us a pool, ~1000 cycles a
 * plane).  The vertical pass masks the rows above the first and below
 * the last by the flat index, the horizontal one the columns left of the
 * first and right of the last through a table of masks per vector; each
 * window's taps are added (or maxed) in rm16_plane's order and an
 * average divided by the same count, so the bits are its. */
#define FLAT_MAX_FLOATS 4096

static int flat_fits(const cpu_geom *g)
{
	return g->k[1] == 3 && g->k[2] == 3 && g->s[1] == 1 && g->s[2] == 1 && g->pb[1] == 1 &&
	       g->pe[1] == 1 && g->pb[2] == 1 && g->pe[2] == 1 && g->out[1] == g->in[1] &&
	       g->out[2] == g->in[2] && g->in[1] * g->in[2] <= FLAT_MAX_FLOATS;
}

/* flat_plane's scratch: the vertical sums with a vector of margin each
 * side, the counts (and a vector past them), two masks a vector. */
static int64_t flat_floats(const cpu_geom *g)
{
	int64_t n = g->in[1] * g->in[2];

	return (n + 32) + (n + 16) + (n / 16 + 1);
}

/* The counts and column masks of flat_plane for geometry g into buf
 * (flat_floats): returns the masks, *cnt the counts. */
static uint16_t *flat_tables(const pool_state *st, const cpu_geom *g, float *buf, float **cnt)
{
	int64_t H = g->in[1], W = g->in[2], n = H * W;
	/* the column counts where flat_plane's vertical sums go later */
	float *c = buf + n + 32, *cc = buf + 16;
	uint16_t *mk = (uint16_t *)(c + n + 16);

	memset(mk, 0, (size_t)((n + 15) / 16) * 2 * sizeof(*mk));
	for (int64_t col = 0; col < W; col++)
		cc[col] = (float)rm_count(st, g, 2, col - 1);
	for (int64_t r = 0, i = 0; r < H; r++) {
		float rc = (float)rm_count(st, g, 1, r - 1);

		for (int64_t col = 0; col < W; col++, i++) {
			c[i] = rc * cc[col];
			mk[i / 16 * 2] |= (uint16_t)((col > 0) << (i % 16));
			mk[i / 16 * 2 + 1] |= (uint16_t)((col < W - 1) << (i % 16));
		}
	}
	for (int64_t i = n; i < n + 16; i++)
		c[i] = 1.0f;
	*cnt = c;
	return mk;
}

/* max(a, b, c), or NaN where any of them is NaN (maxps alone returns its
 * second operand when one is NaN). */
static inline __attribute__((always_inline)) RM16_TARGET __m512 max3_nan(__m512 a, __m512 b,
									  __m512 c)
{
	__mmask16 nan = _kor_mask16(_kor_mask16(_mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q),
						_mm512_cmp_ps_mask(b, b, _CMP_UNORD_Q)),
				    _mm512_cmp_ps_mask(c, c, _CMP_UNORD_Q));

	return _mm512_mask_mov_ps(_mm512_max_ps(a, _mm512_max_ps(b, c)), nan,
				  _mm512_set1_ps(NAN));
}

static inline __attribute__((always_inline)) RM16_TARGET void
flat_plane(const float *x, float *y, float *v, const float *cnt, const uint16_t *mk, int64_t H,
	   int64_t W, int is_max)
{
	const int64_t n = H * W;
	const __m512i iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
	const __m512i wv = _mm512_set1_epi32((int)W), lastv = _mm512_set1_epi32((int)(n - W));
	const __m512 fill = _mm512_set1_ps(is_max ? -INFINITY : 0.0f);

	for (int64_t i = 0; i < n; i += 16) {
		__m512i idx = _mm512_add_epi32(_mm512_set1_epi32((int)i), iota);
		__mmask16 in = rm16_mask(n - i);
		__mmask16 top = _mm512_mask_cmpge_epi32_mask(in, idx, wv);
		__mmask16 bot = _mm512_mask_cmplt_epi32_mask(in, idx, lastv);
		__m512 c = _mm512_mask_loadu_ps(fill, in, x + i);
		__m512 t = _mm512_mask_loadu_ps(fill, top, x + i - W);
		__m512 b = _mm512_mask_loadu_ps(fill, bot, x + i + W), acc;

		if (is_max) {
			acc = max3_nan(b, c, t);
		} else {
			/* the rows in order from the first inside the window */
			acc = _mm512_mask_add_ps(c, top, t, c);
			acc = _mm512_mask_add_ps(acc, bot, acc, b);
		}
		_mm512_storeu_ps(v + i, acc);
	}
	for (int64_t i = 0; i < n; i += 16) {
		__mmask16 lm = mk[i / 8], rm = mk[i / 8 + 1];
		__m512 l = _mm512_mask_loadu_ps(fill, lm, v + i - 1);
		__m512 c = _mm512_loadu_ps(v + i);
		__m512 r = _mm512_mask_loadu_ps(fill, rm, v + i + 1), acc;

		if (is_max) {
			acc = max3_nan(r, c, l);
		} else {
			acc = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(fill, l), c), r);
			acc = _mm512_div_ps(acc, _mm512_loadu_ps(cnt + i));
		}
		_mm512_mask_storeu_ps(y + i, rm16_mask(n - i), acc);
	}
}

static RM16_TARGET void flat_planes(const pool_state *st, const cpu_geom *g, const float *x,
				    float *y, int64_t planes, float *buf)
{
	int64_t H = g->in[1], W = g->in[2], n = H * W;
	float *cnt;
	const uint16_t *mk = flat_tables(st, g, buf, &cnt);

	for (int64_t p = 0; p < planes; p++, x += n, y += n)
		if (st->is_max)
			flat_plane(x, y, buf + 16, cnt, mk, H, W, 1);
		else
			flat_plane(x, y, buf + 16, cnt, mk, H, W, 0);
}

/* Planes [0, planes) of x into y; buf: rows_floats of scratch. */
static RM_TARGET void pool_rows(const pool_state *st, const cpu_geom *g, const float *x, float *y,
				int64_t planes, float *buf)
{
	int64_t n = rows_vm(g), OW = g->out[2];
	float *cc = buf + n;

	/* (flat_planes builds its own tables in buf) */
	if (cpu_has_avx512() && flat_fits(g)) {
		flat_planes(st, g, x, y, planes, buf);
		return;
	}
	for (int64_t i = 0; i < n; i++)
		buf[i] = st->is_max ? -INFINITY : 0.0f;
	for (int64_t ow = 0; !st->is_max && ow < OW + 16; ow++)
		cc[ow] = ow >= OW ? 1.0f : (float)rm_count(st, g, 2, ow * g->s[2] - g->pb[2]);
	if (cpu_has_avx512()) {
		pool_rows16(st, g, x, y, planes, buf, st->is_max ? NULL : cc);
		return;
	}
	if (st->is_max) {
		rows_planes(st, g, x, y, planes, buf, NULL, 1);
		return;
	}
	rows_planes(st, g, x, y, planes, buf, cc, 0);
}
#endif

/* pool_rows' scratch floats: vm, an average's column counts. */
static int64_t rows_floats(const cpu_geom *g)
{
#ifdef RM_X86
	int64_t f = flat_fits(g) ? flat_floats(g) : 0, r = rows_vm(g) + g->out[2] + 16;

	return f > r ? f : r;
#else
	(void)g;
	return 0;
#endif
}

/* Whether pool_s2 takes g: 2-D, 2x2, stride 2, no dilation, no pads,
 * every window inside. */
static int s2_fits(const cpu_geom *g)
{
	return g->in[0] == 1 && g->k[0] == 1 && g->k[1] == 2 && g->k[2] == 2 && g->s[1] == 2 &&
	       g->s[2] == 2 && g->d[1] == 1 && g->d[2] == 1 && g->pb[1] == 0 && g->pb[2] == 0 &&
	       2 * g->out[1] <= g->in[1] && 2 * g->out[2] <= g->in[2];
}

/* Whether pool_rows takes geometry g (float, no Indices): an AVX2 CPU;
 * 2-D or 1-D, column stride 1 or 2, no dilation, pads shorter than the
 * kernel, every window (ceil_mode's last included) starting inside the
 * plane or its leading pads; not pool_s2's 2x2 at stride 2 (0.6-0.9x
 * pool_rows' time on 32x32 and 14x14 planes). */
static int rows_takes(const cpu_geom *g)
{
#ifdef RM_X86
	return cpu_has_avx2_fma() && g->in[0] == 1 && g->k[0] == 1 && g->d[1] == 1 &&
	       g->d[2] == 1 && (g->s[2] == 1 || g->s[2] == 2) && g->pb[1] < g->k[1] &&
	       g->pe[1] < g->k[1] && g->pb[2] < g->k[2] && g->pe[2] < g->k[2] &&
	       (g->out[1] - 1) * g->s[1] - g->pb[1] < g->in[1] &&
	       (g->out[2] - 1) * g->s[2] - g->pb[2] < g->in[2] && !s2_fits(g);
#else
	(void)g;
	return 0;
#endif
}

/* A range of (N, C) planes for cpu_par_for; X and Y of another dtype than
 * float go through float copies of one plane at a time (in member
 * scratch, as is the fast path's row buffer). */
typedef struct pool_job {
	const pool_state *st;
	const cpu_geom *g;
	const cpu_tensor *X;
	cpu_tensor *Y, *I;
	float *scratch;
	int64_t isz, osz, per_member;   /* scratch floats per member */
	int fast, s2, rows;   /* pool2d_plane; pool_s2; pool_rows */
	/* An average counting its padding: each plane is copied into zeroed
	 * padded rows (member scratch after the row buffer) and pooled with
	 * geometry pg, which has no pads, so no window touches an edge. */
	const cpu_geom *pg;
} pool_job;

/* Counted padding (AveragePool with count_include_pad), or MaxPool's, of
 * a 1-D or 2-D window whose every window lies inside the padded plane:
 * the zeros of a padded copy count as the padding does (MaxPool's copy
 * is padded with -inf, which no tap loses to, and every window keeps a
 * tap of the plane: the pads are shorter than the window), and the
 * separable fast path then has no edge columns or rows (a 3x3 pool with
 * pads 1 on 35x35 planes, Inception's: 4x the unpadded pool's time, the
 * edges tap by tap; GoogLeNet's 3x3 MaxPools with pads 1 on 7x7 to 28x28
 * planes 7-14x ONNX Runtime's).  Sets pg to that geometry. */
static int pad_copy_fits(const pool_state *st, const cpu_geom *g, cpu_geom *pg)
{
	if ((!st->is_max && !st->count_include_pad) || g->in[0] != 1 || g->k[0] != 1 ||
	    (!g->pb[1] && !g->pe[1] && !g->pb[2] && !g->pe[2]))
		return 0;
	*pg = *g;
	for (int i = 1; i < 3; i++) {
		if (st->is_max && ((g->pb[i] + g->d[i] - 1) / g->d[i] >= g->k[i] ||
				   (g->pe[i] + g->d[i] - 1) / g->d[i] >= g->k[i]))
			return 0;
		pg->in[i] = g->in[i] + g->pb[i] + g->pe[i];
		pg->pb[i] = pg->pe[i] = 0;
		if ((g->out[i] - 1) * g->s[i] + (g->k[i] - 1) * g->d[i] + 1 > pg->in[i])
			return 0;   /* ceil_mode's last window hangs past the padding */
	}
	return 1;
}

/* Plane x (geometry g) into the interior of the padded plane xp (pg),
 * whose border rows and columns stay zero. */
static void pad_plane(const cpu_geom *g, const cpu_geom *pg, const float *x, float *xp)
{
	for (int64_t r = 0; r < g->in[1]; r++)
		memcpy(xp + (r + g->pb[1]) * pg->in[2] + g->pb[2], x + r * g->in[2],
		       (size_t)g->in[2] * sizeof(float));
}

static void pool_range(void *arg, int64_t p0, int64_t p1, int member)
{
	const pool_job *j = arg;
	const cpu_tensor *X = j->X;
	int wide = X->dtype != CPU_FLOAT;
	float *hb = j->scratch + member * j->per_member;
	float *xf = hb + (j->fast ? j->g->in[1] * j->g->out[2] + j->g->in[2] : 0), *yf = xf + j->isz;

	if (j->pg) {
		const cpu_geom *pg = j->pg;
		float *xp = hb + pg->in[1] * pg->out[2] + pg->in[2];

		if (j->st->is_max)
			for (int64_t i = 0; i < pg->in[1] * pg->in[2]; i++)
				xp[i] = -INFINITY;
		else
			memset(xp, 0, (size_t)(pg->in[1] * pg->in[2]) * sizeof(float));
		for (int64_t p = p0; p < p1; p++) {
			pad_plane(j->g, pg, (const float *)X->data + p * j->isz, xp);
			pool2d_plane(j->st, pg, xp, (float *)j->Y->data + p * j->osz, hb);
		}
		return;
	}
#ifdef RM_X86
	if (j->rows) {
		pool_rows(j->st, j->g, (const float *)X->data + p0 * j->isz,
			  (float *)j->Y->data + p0 * j->osz, p1 - p0, hb);
		return;
	}
#endif
	if (j->s2 && !wide) {
		pool_s2(j->st->is_max, (const float *)X->data + p0 * j->isz,
			(float *)j->Y->data + p0 * j->osz, p1 - p0, j->g->in[1], j->g->in[2],
			j->g->out[1], j->g->out[2]);
		return;
	}
	for (int64_t p = p0; p < p1; p++) {
		const float *x = wide ? xf : (const float *)X->data + p * j->isz;
		float *y = wide ? yf : (float *)j->Y->data + p * j->osz;
		for (int64_t i = 0; wide && i < j->isz; i++)
			xf[i] = (float)cpu_get_f64(X->dtype, X->data, p * j->isz + i);
		if (j->fast)
			pool2d_plane(j->st, j->g, x, y, hb);
		else
			pool_plane(j->st, j->g, x, y, j->I ? (int64_t *)j->I->data + p * j->osz : NULL,
				   p * j->isz);
		for (int64_t i = 0; wide && i < j->osz; i++)
			cpu_set_f64(j->Y->dtype, j->Y->data, p * j->osz + i, yf[i]);
	}
}

static int pool_planes(cpu_ctx *ctx, const cpu_geom *g, const cpu_tensor *X, cpu_tensor *Y,
		       cpu_tensor *I)
{
	pool_job j;
	cpu_geom pg;
	int64_t planes = X->dims[0] * X->dims[1], taps = g->k[0] * g->k[1] * g->k[2];

	memset(&j, 0, sizeof(j));
	j.st = ctx->node->state;
	j.g = g;
	j.X = X;
	j.Y = Y;
	j.I = I;
	j.isz = g->in[0] * g->in[1] * g->in[2];
	j.osz = g->out[0] * g->out[1] * g->out[2];
	j.fast = g->in[0] == 1 && g->k[0] == 1 && !I;
	j.s2 = j.fast && s2_fits(g);
	j.per_member = j.fast ? g->in[1] * g->out[2] + g->in[2] : 0;
	if (j.fast && X->dtype == CPU_FLOAT && rows_takes(g)) {
		j.rows = 1;
		j.per_member = rows_floats(g);
	} else if (j.fast && X->dtype == CPU_FLOAT && pad_copy_fits(j.st, g, &pg)) {
		j.pg = &pg;
		j.per_member = pg.in[1] * pg.out[2] + pg.in[2] + pg.in[1] * pg.in[2];
	}
	if (X->dtype != CPU_FLOAT)
		j.per_member += j.isz + j.osz;
	j.scratch = cpu_scratch(ctx, (size_t)(j.per_member * cpu_par_members(ctx)) *
				sizeof(float) + 1);
	if (!j.scratch)
		return CPU_E_NOMEM;
	/* ~0.05 ns per tap on the fast path, ~2 ns on the general one */
	cpu_par_for(ctx, planes, (double)j.osz * (double)taps * (j.fast ? 0.05 : 2.0) +
		    (double)j.isz * 0.1, 1, pool_range, &j);
	return 0;
}

/* MaxPool and AveragePool of channel-blocked 2-D images (cpu_layout.h):
 * eight channels a vector, each output pixel's taps inside the image found
 * as pool_window finds them (so the same count for AveragePool, and a
 * window of no taps gives what it gives); MaxPool makes a window with a
 * NaN NaN, the average sums in float in tap order. */
typedef struct blk_pool_job {
	const pool_state *st;
	const cpu_geom *g;
	const float *x;
	float *y;
} blk_pool_job;

CPU_MULTIVERSION
static void blk_pool_range(void *arg, int64_t r0, int64_t r1, int member)
{
	const blk_pool_job *j = arg;
	const cpu_geom *g = j->g;
	int64_t IH = g->in[1], IW = g->in[2], OH = g->out[1], OW = g->out[2];
	int is_max = j->st->is_max, incl = j->st->count_include_pad && !is_max;

	(void)member;
	for (int64_t r = r0; r < r1; r++) {   /* r: block plane * OH + output row */
		int64_t b = r / OH, oh = r % OH, sh = oh * g->s[1] - g->pb[1], ha, hb, pa, pb;
		const float *x = j->x + b * IH * IW * CPU_BLK8;
		float *y = j->y + r * OW * CPU_BLK8;

		taps(sh, g->k[1], g->d[1], 0, IH, &ha, &hb);
		taps(sh, g->k[1], g->d[1], -g->pb[1], IH + g->pe[1], &pa, &pb);
		for (int64_t ow = 0; ow < OW; ow++) {
			int64_t sw = ow * g->s[2] - g->pb[2], wa = 0, wb = g->k[2], qa = 0, qb = wb, cnt;
			int64_t sws = g->s[2], dw = g->d[2];
			vf8 acc = vf_splat(is_max ? -FLT_MAX : 0.0f);
			/* four outputs whose windows lie inside the row */
			int four = hb > ha && ow + 4 <= OW && sw >= 0 &&
				   sw + 3 * sws + (wb - 1) * dw < IW;

			/* MaxPool, four outputs whose windows lie inside the row: four
			 * independent chains of max (one chain waited on each tap's
			 * compare and select: 1.5x the plain separable kernel) */
			if (is_max && four) {
				const float *xr = x + (sh + ha * g->d[1]) * IW * CPU_BLK8;
				vf8 a0 = vf_load(xr + sw * CPU_BLK8);
				vf8 a1 = vf_load(xr + (sw + sws) * CPU_BLK8);
				vf8 a2 = vf_load(xr + (sw + 2 * sws) * CPU_BLK8);
				vf8 a3 = vf_load(xr + (sw + 3 * sws) * CPU_BLK8);
				vi8 n0 = a0 != a0, n1 = a1 != a1, n2 = a2 != a2, n3 = a3 != a3;

				for (int64_t kh = ha; kh < hb; kh++) {
					xr = x + (sh + kh * g->d[1]) * IW * CPU_BLK8;
					for (int64_t kw = kh == ha ? 1 : 0; kw < wb; kw++) {
						const float *xt = xr + (sw + kw * dw) * CPU_BLK8;
						vf8 v0 = vf_load(xt), v1 = vf_load(xt + sws * CPU_BLK8);
						vf8 v2 = vf_load(xt + 2 * sws * CPU_BLK8);
						vf8 v3 = vf_load(xt + 3 * sws * CPU_BLK8);

						n0 |= v0 != v0;
						n1 |= v1 != v1;
						n2 |= v2 != v2;
						n3 |= v3 != v3;
						a0 = vf_max(v0, a0);
						a1 = vf_max(v1, a1);
						a2 = vf_max(v2, a2);
						a3 = vf_max(v3, a3);
					}
				}
				vf_store(y + ow * CPU_BLK8, vf_sel(n0, vf_splat(NAN), a0));
				vf_store(y + (ow + 1) * CPU_BLK8, vf_sel(n1, vf_splat(NAN), a1));
				vf_store(y + (ow + 2) * CPU_BLK8, vf_sel(n2, vf_splat(NAN), a2));
				vf_store(y + (ow + 3) * CPU_BLK8, vf_sel(n3, vf_splat(NAN), a3));
				ow += 3;
				continue;
			}

			/* AveragePool, the same for four outputs whose windows lie
			 * inside the row: four chains of adds, each in tap order
			 * (one chain waited on each add: Inception's 3x3 / 1
			 * pools 2.9x ONNX Runtime's time at batch 32) */
			if (!is_max && four) {
				vf8 a0 = acc, a1 = acc, a2 = acc, a3 = acc, div;

				for (int64_t kh = ha; kh < hb; kh++) {
					const float *xr = x + (sh + kh * g->d[1]) * IW * CPU_BLK8;

					for (int64_t kw = 0; kw < wb; kw++) {
						const float *xt = xr + (sw + kw * dw) * CPU_BLK8;

						a0 += vf_load(xt);
						a1 += vf_load(xt + sws * CPU_BLK8);
						a2 += vf_load(xt + 2 * sws * CPU_BLK8);
						a3 += vf_load(xt + 3 * sws * CPU_BLK8);
					}
				}
				cnt = incl ? (pb - pa) * (qb - qa) : (hb - ha) * wb;
				div = vf_splat((float)cnt);
				vf_store(y + ow * CPU_BLK8, cnt ? a0 / div : vf_splat(0.0f));
				vf_store(y + (ow + 1) * CPU_BLK8, cnt ? a1 / div : vf_splat(0.0f));
				vf_store(y + (ow + 2) * CPU_BLK8, cnt ? a2 / div : vf_splat(0.0f));
				vf_store(y + (ow + 3) * CPU_BLK8, cnt ? a3 / div : vf_splat(0.0f));
				ow += 3;
				continue;
			}

			/* the window's taps: all of them where it lies inside the row */
			if (sw < 0 || sw + (wb - 1) * g->d[2] >= IW) {
				taps(sw, g->k[2], g->d[2], 0, IW, &wa, &wb);
				taps(sw, g->k[2], g->d[2], -g->pb[2], IW + g->pe[2], &qa, &qb);
			}
			cnt = incl ? (pb - pa) * (qb - qa) : (hb - ha) * (wb - wa);
			if (is_max && hb > ha && wb > wa) {
				/* from the first tap on; the NaNs seen kept apart
				 * (cheaper than vf_max_nan at every tap) */
				const float *x0 = x + ((sh + ha * g->d[1]) * IW + sw + wa * g->d[2]) *
						  CPU_BLK8;
				vi8 nan;

				acc = vf_load(x0);
				nan = acc != acc;
				for (int64_t kh = ha; kh < hb; kh++) {
					const float *xr = x + (sh + kh * g->d[1]) * IW * CPU_BLK8;

					for (int64_t kw = kh == ha ? wa + 1 : wa; kw < wb; kw++) {
						vf8 v = vf_load(xr + (sw + kw * g->d[2]) * CPU_BLK8);

						nan |= v != v;
						acc = vf_max(v, acc);
					}
				}
				acc = vf_sel(nan, vf_splat(NAN), acc);
			} else if (!is_max) {
				for (int64_t kh = ha; kh < hb; kh++) {
					const float *xr = x + (sh + kh * g->d[1]) * IW * CPU_BLK8;

					for (int64_t kw = wa; kw < wb; kw++)
						acc += vf_load(xr + (sw + kw * g->d[2]) * CPU_BLK8);
				}
				acc = cnt ? acc / vf_splat((float)cnt) : vf_splat(0.0f);
			}
			vf_store(y + ow * CPU_BLK8, acc);
		}
	}
}

/* Blocked pooling of `blocks` blocks of eight channels (x, y NCHWc8). */
static void blk_pool(cpu_ctx *ctx, const pool_state *st, const cpu_geom *g, const float *x,
		     float *y, int64_t blocks)
{
	blk_pool_job bj = {st, g, x, y};

	/* ~0.3 ns a tap of eight lanes */
	cpu_par_for(ctx, blocks * g->out[1], 0.3 * (double)(g->out[2] * g->k[1] * g->k[2]) + 5.0,
		    1, blk_pool_range, &bj);
}

/* Small planes of plain 2-D input with a multiple of eight channels: the
 * separable kernel's per-row loops cost more than the pooling there, so
 * the planes are blocked into scratch, pooled eight channels a vector and
 * unblocked into Y (Zen 3, paired per node in GoogLeNet: its 3x3 MaxPools
 * with pads 1 at 7x7 0.36-0.43x the separable kernel's time, at 14x14
 * 0.68-0.83x, at 28x28 1.4-1.7x; its 2x2/2 at 14x14, which pool_s2
 * takes, 1.2x). */
#define POOL_BLOCK_MAX_PIXELS (16 * 16)
static int small_planes_blocked(const cpu_geom *g, const cpu_tensor *X, const cpu_tensor *I)
{
	return X->rank == 4 && !I && X->dtype == CPU_FLOAT && X->dims[1] % CPU_BLK8 == 0 &&
	       g->in[0] == 1 && g->k[0] == 1 && g->in[1] * g->in[2] <= POOL_BLOCK_MAX_PIXELS &&
	       !s2_fits(g);
}

static int pool_via_blocks(cpu_ctx *ctx, const pool_state *st, const cpu_geom *g,
			   const cpu_tensor *X, cpu_tensor *Y)
{
	int64_t N = X->dims[0], C = X->dims[1], P = g->in[1] * g->in[2];
	int64_t OP = g->out[1] * g->out[2];
	float *xb = cpu_scratch(ctx, (size_t)(N * C * (P + OP)) * sizeof(float));

	if (!xb)
		return CPU_E_NOMEM;
	cpu_blk8_reorder(ctx, X->data, xb, N, C, P, 1);
	blk_pool(ctx, st, g, xb, xb + N * C * P, N * C / CPU_BLK8);
	cpu_blk8_unblock_add(ctx, xb + N * C * P, Y->data, NULL, N, C, OP);
	return 0;
}

static int pool_compute(cpu_ctx *ctx)
{
	const pool_state *st = ctx->node->state;
	const cpu_tensor *X;
	cpu_tensor *Y, *I = NULL;
	int64_t dims[CPU_MAX_RANK];
	cpu_geom g;
	int rc = 0;

	if (!(X = cpu_require(ctx, 0, &rc)))
		return rc;
	rc = cpu_check_dtype(ctx, X, 0, pool_types(ctx->node->proto, ctx->node->opset));
	if (rc != 0)
		return rc;
	if (X->rank < 3)
		return cpu_fail(ctx, CPU_E_INVALID, "X has rank %d (need N, C and spatial dims)",
				X->rank);
	rc = cpu_window_geom(&st->win, X->rank - 2, X->dims + 2, NULL, &g, ctx->err, ctx->errlen);
	if (rc)
		return rc;
	dims[0] = X->dims[0];
	dims[1] = X->dims[1];
	for (int i = 0; i < X->rank - 2; i++)
		dims[2 + i] = g.out[3 - (X->rank - 2) + i];
	if (!(Y = cpu_output(ctx, 0, X->dtype, X->rank, dims)))
		return CPU_E_NOMEM;
	if (st->is_max && ctx->n_out > 1 && !(I = cpu_output(ctx, 1, CPU_INT64, X->rank, dims)))
		return CPU_E_NOMEM;
	if (ctx->node->layout & CPU_LAYOUT_IN_BLK8) {
		if (X->rank != 4 || I || X->dtype != CPU_FLOAT || X->dims[1] % CPU_BLK8)
			return cpu_fail(ctx, CPU_E_INTERNAL, "a channel-blocked input it cannot pool");
		blk_pool(ctx, st, &g, X->data, Y->data, X->dims[0] * X->dims[1] / CPU_BLK8);
		return 0;
	}
	if (small_planes_blocked(&g, X, I) && !rows_takes(&g))
		return pool_via_blocks(ctx, st, &g, X, Y);
	return pool_planes(ctx, &g, X, Y, I);
}

/* The mean of x[0, n) as ONNX Runtime computes GlobalAveragePool (MLAS's
 * global pooling kernel): four float sums over x[i], x[i+1], x[i+2],
 * x[i+3] in order, added as (s0 + s2) + (s1 + s3), the last n % 4 values
 * added one by one, then divided by n.  The same bits, so a quantizer after
 * a squeeze-excite's pooling (EfficientNet, MobileNetV3 dynamically
 * quantized) sees what ONNX Runtime's sees; a float sum of a 112x112 plane
 * loses up to ~1e-4 relative where a double one would not, as there.  The
 * four sums are one SSE vector's lanes after gcc's vectorizer. */
CPU_MULTIVERSION
static float global_mean(const float *x, int64_t n)
{
	float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f, r;
	int64_t i = 0;

	if (n == 0)
		return 0.0f;
	for (; i + 4 <= n; i += 4) {
		s0 += x[i];
		s1 += x[i + 1];
		s2 += x[i + 2];
		s3 += x[i + 3];
	}
	r = (s0 + s2) + (s1 + s3);
	for (; i < n; i++)
		r += x[i];
	return r / (float)n;
}

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define POOL_X86 1
#include <immintrin.h>

/* The four planes' means from their four running sums each (s[4p ..
 * 4p + 3], values [0, i) summed), global_mean's order: (s0 + s2) + (s1 +
 * s3), the values from i on one by one, then / n.  For global_mean4 and
 * global_mean4_avx2. */
static inline __attribute__((always_inline)) void
mean4_finish(const float s[16], const float *x, int64_t n, int64_t i, float *y)
{
	for (int p = 0; p < 4; p++) {
		float r = (s[4 * p] + s[4 * p + 2]) + (s[4 * p + 1] + s[4 * p + 3]);

		for (int64_t k = i; k < n; k++)
			r += x[p * n + k];
		y[p] = r / (float)n;
	}
}

/* global_mean of four planes (x, x + n, x + 2n, x + 3n, n > 0) at once:
 * each plane's four sums are one 128-bit quarter of a zmm accumulator, so
 * every sum still adds its values one by one in global_mean's order (the
 * same bits), but four planes' chains run side by side instead of one
 * chain bound by the add's latency (EfficientNet's squeeze-excite pools:
 * 466 us a run against ONNX Runtime's 186). */
__attribute__((target("avx512f"))) static void global_mean4(const float *x, int64_t n, float *y)
{
	__m512 acc = _mm512_setzero_ps();
	float s[16];
	int64_t i = 0;

	for (; i + 4 <= n; i += 4) {
		__m512 v = _mm512_castps128_ps512(_mm_loadu_ps(x + i));

		v = _mm512_insertf32x4(v, _mm_loadu_ps(x + n + i), 1);
		v = _mm512_insertf32x4(v, _mm_loadu_ps(x + 2 * n + i), 2);
		v = _mm512_insertf32x4(v, _mm_loadu_ps(x + 3 * n + i), 3);
		acc = _mm512_add_ps(acc, v);
	}
	_mm512_storeu_ps(s, acc);
	mean4_finish(s, x, n, i, y);
}

/* global_mean4 on AVX2: planes 0 and 1 share one ymm accumulator, 2 and
 * 3 another (each plane's four sums a 128-bit half), so two add chains
 * run side by side and every sum keeps global_mean's order. */
__attribute__((target("avx2"))) static void global_mean4_avx2(const float *x, int64_t n,
							       float *y)
{
	__m256 a01 = _mm256_setzero_ps(), a23 = _mm256_setzero_ps();
	float s[16];
	int64_t i = 0;

	for (; i + 4 <= n; i += 4) {
		a01 = _mm256_add_ps(a01, _mm256_set_m128(_mm_loadu_ps(x + n + i), _mm_loadu_ps(x + i)));
		a23 = _mm256_add_ps(a23, _mm256_set_m128(_mm_loadu_ps(x + 3 * n + i),
							 _mm_loadu_ps(x + 2 * n + i)));
	}
	_mm256_storeu_ps(s, a01);
	_mm256_storeu_ps(s + 8, a23);
	mean4_finish(s, x, n, i, y);
}
#endif

/* The (NaN-propagating) max of x[0, n); -inf when n is 0. */
CPU_MULTIVERSION
static float global_max(const float *x, int64_t n)
{
	vf8 m = vf_splat(-INFINITY);
	int64_t i = 0;
	float mm;

	for (; i + 8 <= n; i += 8)
		m = vf_max_nan(m, vf_load(x + i));
	if (i < n)
		m = vf_max_nan(m, vf_load_part(x + i, n - i, -INFINITY));
	mm = m[0];
	for (int t = 1; t < 8; t++)
		mm = m[t] > mm || m[t] != m[t] ? m[t] : mm;
	return mm;
}

/* A range of planes for cpu_par_for. */
typedef struct global_job {
	const float *x;
	float *y;
	int64_t sz;
	int is_max;
} global_job;

static void global_range(void *arg, int64_t p0, int64_t p1, int member)
{
	const global_job *j = arg;
	int64_t p = p0;

	(void)member;
#ifdef POOL_X86
	if (!j->is_max && j->sz > 0 && cpu_has_avx512())
		for (; p + 4 <= p1; p += 4)
			global_mean4(j->x + p * j->sz, j->sz, j->y + p);
	else if (!j->is_max && j->sz > 0 && cpu_has_avx2_fma())
		for (; p + 4 <= p1; p += 4)
			global_mean4_avx2(j->x + p * j->sz, j->sz, j->y + p);
#endif
	for (; p < p1; p++)
		j->y[p] = j->is_max ? global_max(j->x + p * j->sz, j->sz) :
			  global_mean(j->x + p * j->sz, j->sz);
}

/* GlobalAveragePool of channel-blocked images (cpu_layout.h): eight
 * channels a vector, each lane summed in global_mean's order (four running
 * sums over pixels 4i .. 4i + 3, (s0 + s2) + (s1 + s3), the rest one by
 * one, / n), so the same bits as the plain kernel. */
CPU_MULTIVERSION
static void global_blk_range(void *arg, int64_t b0, int64_t b1, int member)
{
	const global_job *j = arg;
	int64_t n = j->sz;

	(void)member;
	for (int64_t b = b0; b < b1; b++) {
		const float *x = j->x + b * n * CPU_BLK8;
		vf8 s0 = vf_splat(0.0f), s1 = s0, s2 = s0, s3 = s0, r;
		int64_t i = 0;

		for (; i + 4 <= n; i += 4) {
			s0 += vf_load(x + i * CPU_BLK8);
			s1 += vf_load(x + (i + 1) * CPU_BLK8);
			s2 += vf_load(x + (i + 2) * CPU_BLK8);
			s3 += vf_load(x + (i + 3) * CPU_BLK8);
		}
		r = (s0 + s2) + (s1 + s3);
		for (; i < n; i++)
			r += vf_load(x + i * CPU_BLK8);
		vf_store(j->y + b * CPU_BLK8, r / vf_splat((float)n));
	}
}

static int global_compute(cpu_ctx *ctx)
{
	int is_max = ctx->node->proto->op_type[6] == 'M';
	global_job j;
	const cpu_tensor *X;
	cpu_tensor *Y;
	int64_t dims[CPU_MAX_RANK], planes, sz = 1;
	int rc = 0;

	if (!(X = cpu_require(ctx, 0, &rc)))
		return rc;
	if ((rc = cpu_check_dtype(ctx, X, 0, CPU_TYPES_F32)) != 0)
		return rc;
	if (X->rank < 2)
		return cpu_fail(ctx, CPU_E_INVALID, "X has rank %d (need N, C, ...)", X->rank);
	for (int i = 0; i < X->rank; i++) {
		dims[i] = i < 2 ? X->dims[i] : 1;
		if (i >= 2)
			sz *= X->dims[i];
	}
	if (!(Y = cpu_output(ctx, 0, CPU_FLOAT, X->rank, dims)))
		return CPU_E_NOMEM;
	planes = X->dims[0] * X->dims[1];
	j.x = X->data;
	j.y = Y->data;
	j.sz = sz;
	j.is_max = is_max;
	if ((ctx->node->layout & CPU_LAYOUT_IN_BLK8) && sz > 1) {
		if (is_max || X->dims[1] % CPU_BLK8)
			return cpu_fail(ctx, CPU_E_INTERNAL, "a channel-blocked input it cannot pool");
		/* ~3 ns a pixel's vector: ~1 from this core's L2, but the
		 * layer before split its output over the pool, so on one
		 * thread half of it comes from the other core (EfficientNet's
		 * squeeze-excite pools at 2 threads: 359 us a run unsplit
		 * under the 0.4 this had, 163 split; the model 5.81 -> 5.51 ms) */
		cpu_par_for(ctx, planes / CPU_BLK8, (double)sz * 3.0 + 5.0, 1, global_blk_range, &j);
		return 0;
	}
	cpu_par_for(ctx, planes, (double)sz * 0.1 + 5.0, 1, global_range, &j);
	return 0;
}

const cpu_op cpu_op_maxpool = {
	"MaxPool", "", 1, CPU_OPSET_MAX, pool_supports, pool_prepare, pool_compute, pool_release,
};
const cpu_op cpu_op_averagepool = {
	"AveragePool", "", 1, CPU_OPSET_MAX, pool_supports, pool_prepare, pool_compute,
	pool_release,
};
const cpu_op cpu_op_globalaveragepool = {
	"GlobalAveragePool", "", 1, CPU_OPSET_MAX, pool_supports, NULL, global_compute, NULL,
};
const cpu_op cpu_op_globalmaxpool = {
	"GlobalMaxPool", "", 1, CPU_OPSET_MAX, pool_supports, NULL, global_compute, NULL,
};
