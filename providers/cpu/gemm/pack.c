/*
 * pack: the ISA table (which microkernel this CPU gets) and the packed-B
 * format.
 *
 * A packed B is a 64-byte header followed by the panels.  op(B) (K x N) is
 * cut into K blocks of kc rows (the last may be shorter; kc is chosen per
 * matrix so the blocks are even, at most the ISA's KC) and each block into
 * NR-wide column panels, zero-padded past N.  A panel is rows x NR floats,
 * row after row, so the microkernel streams it with aligned loads; the
 * panels of one block are contiguous, so a kc x NC block of the driver is
 * one contiguous run of memory.
 *
 * The header names the format version, the ISA (which fixes NR), kc, K, N,
 * the total size, the element size and the byte order, and carries a
 * checksum of itself: gemm_pack_b_check refuses anything else, so a
 * pre-pack cache file from another machine, version or a torn write is
 * rejected instead of being computed with.
 */
#include <errno.h>
#include <string.h>
#ifdef __SSE2__
#include <xmmintrin.h>
#endif

#include "gemm_kern.h"

static const char MAGIC[8] = "ORTMKGB";   /* + NUL */
enum { HDR_SIZE = 64, BYTE_ORDER_MARK = 0x01020304 };

typedef struct pack_hdr {
	char magic[8];
	uint32_t version;
	uint32_t isa;
	uint32_t nr;
	uint32_t kc;
	int64_t K, N;
	uint64_t bytes;          /* header included */
	uint32_t elem_size;
	uint32_t byte_order;
	uint32_t reserved;
	uint32_t check;          /* FNV-1a of everything before it */
} pack_hdr;

_Static_assert(sizeof(pack_hdr) == HDR_SIZE, "packed B header is 64 bytes");

/* ---- ISA selection ---- */

static const gemm_isa_desc *select_best(void)
{
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
	__builtin_cpu_init();
#ifdef GEMM_HAVE_AVX512
	if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl"))
		return &gemm_desc_avx512;
#endif
#ifdef GEMM_HAVE_AVX2
	if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
		return &gemm_desc_avx2;
#endif
#endif
	return &gemm_desc_scalar;
}

/* The ISA table: decided on first use, the same answer ever after (a
 * benign race: every thread computes the same pointer). */
static const gemm_isa_desc *_Atomic best_desc;

static const gemm_isa_desc *best(void)
{
	const gemm_isa_desc *d = best_desc;

	if (!d) {
		d = select_best();
		best_desc = d;
	}
	return d;
}

gemm_isa gemm_isa_best(void)
{
	return best()->id;
}

const gemm_isa_desc *gemm_isa_desc_get(gemm_isa isa)
{
	const gemm_isa_desc *b = best();

	if (isa == GEMM_ISA_AUTO)
		return b;
	if (isa == GEMM_ISA_SCALAR)
		return &gemm_desc_scalar;
	/* An ISA is usable when the best one is at least as wide: AVX-512
	 * selection implies AVX2 and FMA on every CPU that has it. */
#ifdef GEMM_HAVE_AVX2
	if (isa == GEMM_ISA_AVX2 && b->id >= GEMM_ISA_AVX2)
		return &gemm_desc_avx2;
#endif
#ifdef GEMM_HAVE_AVX512
	if (isa == GEMM_ISA_AVX512 && b->id >= GEMM_ISA_AVX512)
		return &gemm_desc_avx512;
#endif
	return NULL;
}

int gemm_isa_supported(gemm_isa isa)
{
	return gemm_isa_desc_get(isa) != NULL;
}

const char *gemm_isa_name(gemm_isa isa)
{
	switch (isa) {
	case GEMM_ISA_AUTO: return "auto";
	case GEMM_ISA_SCALAR: return "scalar";
	case GEMM_ISA_AVX2: return "avx2";
	case GEMM_ISA_AVX512: return "avx512";
	}
	return "?";
}

/* ---- format ---- */

uint32_t gemm_fnv1a(const void *p, size_t n)
{
	const unsigned char *s = p;
	uint32_t h = 2166136261u;

	for (size_t i = 0; i < n; i++)
		h = (h ^ s[i]) * 16777619u;
	return h;
}

static int64_t choose_kc(const gemm_isa_desc *d, int64_t K)
{
	int64_t blocks = (K + d->kc - 1) / d->kc;

	return blocks ? (K + blocks - 1) / blocks : 1;
}

/* Payload bytes, or 0 (with *ok = 0) on overflow. */
static size_t payload(const gemm_isa_desc *d, int64_t K, int64_t N, int *ok)
{
	uint64_t panels = ((uint64_t)N + (uint64_t)d->nr - 1) / (uint64_t)d->nr;
	uint64_t per_row = panels * (uint64_t)d->nr * sizeof(float);

	*ok = 1;
	if (K > 0 && per_row > (SIZE_MAX - HDR_SIZE) / (uint64_t)K) {
		*ok = 0;
		return 0;
	}
	return (size_t)(per_row * (uint64_t)K);
}

size_t gemm_pack_b_size(gemm_isa isa, int64_t K, int64_t N)
{
	const gemm_isa_desc *d = gemm_isa_desc_get(isa);
	int ok;
	size_t n;

	if (!d || K < 0 || N < 0 || N > INT64_MAX / 2)
		return 0;
	n = payload(d, K, N, &ok);
	if (!ok || n > SIZE_MAX - HDR_SIZE - GEMM_PACK_ALIGN)
		return 0;
	/* A multiple of the alignment, so aligned_alloc takes it as is. */
	return (HDR_SIZE + n + GEMM_PACK_ALIGN - 1) / GEMM_PACK_ALIGN * GEMM_PACK_ALIGN;
}

/* One panel row: w floats, zero-padded to nr.  The full-width case has a
 * constant size, so the copy is inlined. */
static void copy_row(float *dst, const float *src, int64_t w, int64_t nr)
{
	if (w == 32 && nr == 32)
		memcpy(dst, src, 32 * sizeof(float));
	else if (w == 16 && nr == 16)
		memcpy(dst, src, 16 * sizeof(float));
	else if (w == 8 && nr == 8)
		memcpy(dst, src, 8 * sizeof(float));
	else {
		memcpy(dst, src, (size_t)w * sizeof(float));
		memset(dst + w, 0, (size_t)(nr - w) * sizeof(float));
	}
}

/* One panel from B^T: dst[r][j] = bt[j][r] for j < w (rows of B^T, stride
 * ldb), r < rows; zero past w.  4 x 4 blocks go through SSE registers
 * (baseline on x86-64): four row loads, a register transpose, four stores,
 * instead of sixteen scattered stores. */
static void pack_panel_t(const float *bt, int64_t ldb, int64_t rows, int64_t w, int64_t nr,
			 float *dst)
{
	int64_t j = 0, r;

#ifdef __SSE2__
	for (; j + 4 <= w; j += 4) {
		const float *s0 = bt + j * ldb, *s1 = s0 + ldb, *s2 = s1 + ldb, *s3 = s2 + ldb;
		for (r = 0; r + 4 <= rows; r += 4) {
			__m128 a = _mm_loadu_ps(s0 + r), b = _mm_loadu_ps(s1 + r);
			__m128 c = _mm_loadu_ps(s2 + r), d = _mm_loadu_ps(s3 + r);
			_MM_TRANSPOSE4_PS(a, b, c, d);
			_mm_storeu_ps(dst + r * nr + j, a);
			_mm_storeu_ps(dst + (r + 1) * nr + j, b);
			_mm_storeu_ps(dst + (r + 2) * nr + j, c);
			_mm_storeu_ps(dst + (r + 3) * nr + j, d);
		}
		for (; r < rows; r++) {
			dst[r * nr + j] = s0[r];
			dst[r * nr + j + 1] = s1[r];
			dst[r * nr + j + 2] = s2[r];
			dst[r * nr + j + 3] = s3[r];
		}
	}
#endif
	for (; j < w; j++)
		for (r = 0; r < rows; r++)
			dst[r * nr + j] = bt[j * ldb + r];
	if (w < nr)
		for (r = 0; r < rows; r++)
			memset(dst + r * nr + w, 0, (size_t)(nr - w) * sizeof(float));
}

void gemm_pack_block(const float *B, int64_t ldb, int transB, int64_t N, int64_t nr,
		     int64_t k0, int64_t rows, int64_t p0, int64_t p1, float *dst)
{
	if (!transB) {
		/* Row by row of B, so its reads are sequential; the writes go
		 * to one row of each panel. */
		for (int64_t r = 0; r < rows; r++) {
			const float *src = B + (k0 + r) * ldb;
			for (int64_t p = p0; p < p1; p++) {
				int64_t j0 = p * nr, w = N - j0 < nr ? N - j0 : nr;
				copy_row(dst + ((p - p0) * rows + r) * nr, src + j0, w, nr);
			}
		}
		return;
	}
	for (int64_t p = p0; p < p1; p++, dst += rows * nr) {
		int64_t j0 = p * nr, w = N - j0 < nr ? N - j0 : nr;
		pack_panel_t(B + j0 * ldb + k0, ldb, rows, w, nr, dst);
	}
}

void gemm_pack_panels(const gemm_packed_view *v, const float *B, int64_t ldb, int transB,
		      int64_t p0, int64_t p1)
{
	for (int64_t k0 = 0; k0 < v->K; k0 += v->kc) {
		int64_t rows = v->K - k0 < v->kc ? v->K - k0 : v->kc;
		if (p1 > p0)
			gemm_pack_block(B, ldb, transB, v->N, v->isa->nr, k0, rows, p0, p1,
					(float *)gemm_packed_panel(v, k0, p0));
	}
}

int64_t gemm_choose_kc(const gemm_isa_desc *d, int64_t K)
{
	return choose_kc(d, K);
}

int gemm_pack_init(const gemm_isa_desc *d, int64_t K, int64_t N, void *dst, size_t dst_size,
		   gemm_packed_view *v)
{
	size_t need = gemm_pack_b_size(d->id, K, N);
	pack_hdr h;

	if (!need || !dst || dst_size < need || ((uintptr_t)dst % GEMM_PACK_ALIGN))
		return -EINVAL;
	memset(&h, 0, sizeof(h));
	memcpy(h.magic, MAGIC, sizeof(h.magic));
	h.version = GEMM_PACK_VERSION;
	h.isa = (uint32_t)d->id;
	h.nr = (uint32_t)d->nr;
	h.kc = (uint32_t)choose_kc(d, K);
	h.K = K;
	h.N = N;
	h.bytes = need;
	h.elem_size = sizeof(float);
	h.byte_order = BYTE_ORDER_MARK;
	h.check = gemm_fnv1a(&h, offsetof(pack_hdr, check));
	memcpy(dst, &h, sizeof(h));
	return gemm_packed_view_get(dst, v);
}

int gemm_pack_b(gemm_isa isa, const float *B, int64_t ldb, int transB, int64_t K, int64_t N,
		void *dst, size_t dst_size)
{
	const gemm_isa_desc *d = gemm_isa_desc_get(isa);
	gemm_packed_view v;
	int rc;

	if (!d)
		return -ENOTSUP;
	if (K > 0 && N > 0 && (!B || ldb < (transB ? K : N)))
		return -EINVAL;
	rc = gemm_pack_init(d, K, N, dst, dst_size, &v);
	if (rc)
		return rc;
	gemm_pack_panels(&v, B, ldb, transB, 0, v.panels);
	return 0;
}

/* Header checks that do not need the size of the buffer; the checksum
 * only with `sum`: gemm_pack_b_check verifies it once, where a buffer
 * comes from the pre-pack cache or a file; gemm_packed_view_get, on
 * every product, checks the fields only (the checksum was 4% of the
 * example CNN's run: its Winograd products look up 16 buffers a call). */
static int check_header(const pack_hdr *h, const gemm_isa_desc **isa, int sum)
{
	const gemm_isa_desc *d;

	if (memcmp(h->magic, MAGIC, sizeof(h->magic)) ||
	    (sum && h->check != gemm_fnv1a(h, offsetof(pack_hdr, check))) ||
	    h->version != GEMM_PACK_VERSION || h->elem_size != sizeof(float) ||
	    h->byte_order != BYTE_ORDER_MARK || h->K < 0 || h->N < 0)
		return -EINVAL;
	if (h->isa != GEMM_ISA_SCALAR && h->isa != GEMM_ISA_AVX2 && h->isa != GEMM_ISA_AVX512)
		return -EINVAL;
	d = gemm_isa_desc_get((gemm_isa)h->isa);
	if (!d)
		return -ENOTSUP;
	if (h->nr != (uint32_t)d->nr || h->kc == 0 || (int64_t)h->kc != choose_kc(d, h->K) ||
	    h->bytes != gemm_pack_b_size(d->id, h->K, h->N))
		return -EINVAL;
	*isa = d;
	return 0;
}

int gemm_pack_b_check(const void *packed, size_t size, int64_t K, int64_t N)
{
	const gemm_isa_desc *d;
	pack_hdr h;
	int rc;

	if (!packed || size < HDR_SIZE || ((uintptr_t)packed % GEMM_PACK_ALIGN))
		return -EINVAL;
	memcpy(&h, packed, sizeof(h));
	rc = check_header(&h, &d, 1);
	if (rc)
		return rc;
	if ((K >= 0 && h.K != K) || (N >= 0 && h.N != N) || size < h.bytes)
		return -EINVAL;
	return 0;
}

void gemm_pack_b_info(const void *packed, gemm_isa *isa, int64_t *K, int64_t *N)
{
	pack_hdr h;

	memcpy(&h, packed, sizeof(h));
	if (isa)
		*isa = (gemm_isa)h.isa;
	if (K)
		*K = h.K;
	if (N)
		*N = h.N;
}

int gemm_packed_view_get(const void *packed, gemm_packed_view *v)
{
	const gemm_isa_desc *d;
	pack_hdr h;

	if (!packed || ((uintptr_t)packed % GEMM_PACK_ALIGN))
		return -EINVAL;
	memcpy(&h, packed, sizeof(h));
	if (check_header(&h, &d, 0))
		return -EINVAL;
	v->isa = d;
	v->K = h.K;
	v->N = h.N;
	v->kc = h.kc;
	v->panels = (h.N + d->nr - 1) / d->nr;
	v->data = (const float *)((const char *)packed + HDR_SIZE);
	return 0;
}
