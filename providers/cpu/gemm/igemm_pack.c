/*
 * igemm_pack: the int8 GEMM's packed operands (layouts in igemm.h): a
 * 64-byte header, then A's rows and row sums, or B's panels and column
 * sums.  The header names the kind, the sizes and the format version and
 * carries a checksum of itself, so a pre-pack cache blob from another
 * version or a torn write is refused by igemm_pack_*_check, never
 * computed with.  The layout does not depend on the ISA: one pack serves
 * every kernel.
 */
#include <errno.h>
#include <string.h>

#include "gemm_kern.h"
#include "igemm_kern.h"

static const char MAGIC_A[8] = "ORTMKIA", MAGIC_B[8] = "ORTMKIB";
enum { HDR = 64, BYTE_ORDER_MARK = 0x01020304 };

typedef struct ipack_hdr {
	char magic[8];
	uint32_t version;
	uint32_t elem;           /* 1: bytes */
	int64_t rows, cols;      /* A: M, K; B: K, N */
	int64_t stride;          /* A: lda; B: pstride */
	uint64_t bytes;          /* header included */
	int32_t off;
	uint32_t byte_order;
	uint32_t reserved;
	uint32_t check;          /* FNV-1a of everything before it */
} ipack_hdr;

_Static_assert(sizeof(ipack_hdr) == HDR, "int8 pack header is 64 bytes");

static int64_t round_up(int64_t x, int64_t to)
{
	return (x + to - 1) / to * to;
}

/* Sizes of the parts; 0 on overflow (callers check dims first). */
static size_t a_bytes(int64_t M, int64_t K, int64_t *lda)
{
	*lda = round_up(igemm_k4(K), 16);
	if (M < 0 || K < 0 || M > ((int64_t)1 << 31) || *lda > ((int64_t)1 << 31))
		return 0;
	return HDR + (size_t)round_up(M * *lda, 64) + (size_t)round_up(M * 4, 64);
}

static size_t b_bytes(int64_t K, int64_t N, int64_t *pstride)
{
	int64_t panels = (N + IGEMM_NR - 1) / IGEMM_NR;

	*pstride = igemm_k4(K) * IGEMM_NR;
	if (K < 0 || N < 0 || K > ((int64_t)1 << 31) || N > ((int64_t)1 << 31) ||
	    panels * *pstride > ((int64_t)1 << 40))
		return 0;
	return HDR + (size_t)(panels * *pstride) + (size_t)round_up(panels * IGEMM_NR * 4, 64);
}

size_t igemm_pack_a_size(int64_t M, int64_t K)
{
	int64_t lda;
	return a_bytes(M, K, &lda);
}

size_t igemm_pack_b_size(int64_t K, int64_t N)
{
	int64_t ps;
	return b_bytes(K, N, &ps);
}

static void put_hdr(void *dst, const char *magic, int64_t rows, int64_t cols, int64_t stride,
		    size_t bytes, int32_t off)
{
	ipack_hdr h;

	memset(&h, 0, sizeof(h));
	memcpy(h.magic, magic, 8);
	h.version = IGEMM_PACK_VERSION;
	h.elem = 1;
	h.rows = rows;
	h.cols = cols;
	h.stride = stride;
	h.bytes = bytes;
	h.off = off;
	h.byte_order = BYTE_ORDER_MARK;
	h.check = gemm_fnv1a(&h, offsetof(ipack_hdr, check));
	memcpy(dst, &h, sizeof(h));
}

static int check_hdr(const void *packed, size_t size, const char *magic, int64_t rows,
		     int64_t cols, ipack_hdr *h)
{
	if (!packed || size < HDR)
		return -EINVAL;
	memcpy(h, packed, sizeof(*h));
	if (memcmp(h->magic, magic, 8) || h->version != IGEMM_PACK_VERSION || h->elem != 1 ||
	    h->byte_order != BYTE_ORDER_MARK ||
	    h->check != gemm_fnv1a(h, offsetof(ipack_hdr, check)) || h->bytes > size || (rows >= 0 && h->rows != rows) || (cols >= 0 && h->cols != cols) ||
	    (h->off != 0 && h->off != 128))
		return -EINVAL;
	return 0;
}

int igemm_pack_a(const void *A, int64_t lda, int a_signed, int64_t M, int64_t K, void *dst,
		 size_t size)
{
	int64_t ld;
	size_t bytes = a_bytes(M, K, &ld);
	uint8_t *rows = (uint8_t *)dst + HDR, flip = a_signed ? 0x80 : 0;
	int32_t *sums = (int32_t *)(rows + round_up(M * ld, 64));

	if (!bytes || bytes > size || !dst || (M > 0 && K > 0 && (!A || lda < K)))
		return -EINVAL;
	memset(rows, 0, bytes - HDR);
	for (int64_t i = 0; i < M; i++) {
		const uint8_t *src = (const uint8_t *)A + i * lda;
		uint32_t s = 0;
		for (int64_t k = 0; k < K; k++) {
			rows[i * ld + k] = src[k] ^ flip;
			s += rows[i * ld + k];
		}
		sums[i] = (int32_t)s;
	}
	put_hdr(dst, MAGIC_A, M, K, ld, bytes, a_signed ? 128 : 0);
	return 0;
}

void igemm_pack_b_block(const void *B, int64_t ldb, int32_t b_off, int64_t K, int64_t N,
			int64_t g0, int64_t gs, int64_t p0, int64_t p1, int8_t *dst)
{
	const uint8_t *src = B;
	uint8_t flip = b_off ? 0x80 : 0;

	for (int64_t p = p0; p < p1; p++, dst += gs * 64) {
		int64_t j0 = p * IGEMM_NR, w = N - j0 < IGEMM_NR ? N - j0 : IGEMM_NR;
		memset(dst, 0, (size_t)gs * 64);
		for (int64_t g = 0; g < gs; g++)
			for (int t = 0; t < 4; t++) {
				int64_t k = (g0 + g) * 4 + t;
				const uint8_t *row = src + k * ldb + j0;
				if (k >= K)
					break;
				for (int64_t j = 0; j < w; j++)
					dst[g * 64 + j * 4 + t] = (int8_t)(row[j] ^ flip);
			}
	}
}

int igemm_pack_b(const void *B, int64_t ldb, int transB, int b_signed, int64_t K, int64_t N,
		 void *dst, size_t size)
{
	int64_t ps, panels = (N + IGEMM_NR - 1) / IGEMM_NR;
	size_t bytes = b_bytes(K, N, &ps);
	int8_t *pan = (int8_t *)dst + HDR;
	int32_t *sums = (int32_t *)(pan + panels * ps);
	const uint8_t *src = B;
	uint8_t flip = b_signed ? 0 : 0x80;

	if (!bytes || bytes > size || !dst || (K > 0 && N > 0 && (!B || ldb < (transB ? K : N))))
		return -EINVAL;
	memset(pan, 0, bytes - HDR);
	if (!transB) {
		igemm_pack_b_block(B, ldb, b_signed ? 0 : 128, K, N, 0, ps / 64, 0, panels, pan);
	} else {
		for (int64_t j = 0; j < N; j++)
			for (int64_t k = 0; k < K; k++)
				pan[(j / IGEMM_NR) * ps + (k / 4) * 64 + (j % IGEMM_NR) * 4 + k % 4] =
					(int8_t)(src[j * ldb + k] ^ flip);
	}
	for (int64_t j = 0; j < N; j++) {
		uint32_t s = 0;
		for (int64_t g = 0; g < ps / 64; g++)
			for (int t = 0; t < 4; t++)
				s += (uint32_t)(int32_t)pan[(j / IGEMM_NR) * ps + g * 64 +
							    (j % IGEMM_NR) * 4 + t];
		sums[j] = (int32_t)s;
	}
	put_hdr(dst, MAGIC_B, K, N, ps, bytes, b_signed ? 0 : 128);
	return 0;
}

int igemm_pack_a_check(const void *packed, size_t size, int64_t M, int64_t K)
{
	ipack_hdr h;
	int64_t ld;

	if (check_hdr(packed, size, MAGIC_A, M, K, &h) || a_bytes(h.rows, h.cols, &ld) != h.bytes ||
	    ld != h.stride)
		return -EINVAL;
	return 0;
}

int igemm_pack_b_check(const void *packed, size_t size, int64_t K, int64_t N)
{
	ipack_hdr h;
	int64_t ps;

	if (check_hdr(packed, size, MAGIC_B, K, N, &h) || b_bytes(h.rows, h.cols, &ps) != h.bytes ||
	    ps != h.stride)
		return -EINVAL;
	return 0;
}

void igemm_pack_a_view(const void *packed, igemm_a *a)
{
	ipack_hdr h;

	memcpy(&h, packed, sizeof(h));
	a->a = (const uint8_t *)packed + HDR;
	a->lda = h.stride;
	a->rowsum = (const int32_t *)(a->a + round_up(h.rows * h.stride, 64));
	a->off = h.off;
}

void igemm_pack_b_view(const void *packed, igemm_b *b)
{
	ipack_hdr h;

	memcpy(&h, packed, sizeof(h));
	b->panels = (const int8_t *)packed + HDR;
	b->pstride = h.stride;
	b->colsum = (const int32_t *)(b->panels + (h.cols + IGEMM_NR - 1) / IGEMM_NR * h.stride);
	b->off = h.off;
}

int32_t igemm_ref_dot(const void *A, int64_t lda, int a_signed, int32_t za, const void *B,
		      int64_t ldb, int b_signed, int32_t zb, int64_t i, int64_t j, int64_t K)
{
	uint32_t s = 0;

	for (int64_t k = 0; k < K; k++) {
		int32_t a = a_signed ? ((const int8_t *)A)[i * lda + k] : ((const uint8_t *)A)[i * lda + k];
		int32_t b = b_signed ? ((const int8_t *)B)[k * ldb + j] : ((const uint8_t *)B)[k * ldb + j];
		s += (uint32_t)(a - za) * (uint32_t)(b - zb);
	}
	return (int32_t)s;
}
