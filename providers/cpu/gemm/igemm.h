/*
 * igemm: the CPU provider's 8-bit integer matrix multiply, for ConvInteger
 * and MatMulInteger (the ops ONNX Runtime's dynamic quantizer emits).
 *
 *   Y[i][j] = sum_k (A[i][k] - za[i]) * (B[k][j] - zb[j])       int32
 *
 * A and B are uint8 or int8, the zero points per tensor or per row of A /
 * column of B, and every result is the exact int32 of that sum (wrapping
 * modulo 2^32 only where the spec's int32 arithmetic would).  Optionally
 * the result leaves as float32 through the epilogue of the
 * Cast -> Mul(scale) -> Add(bias) -> Relu chain that follows those ops
 * (y = clamp((float)Y * scale + bias), rounded exactly as the separate
 * nodes round, so fusing changes no bit).
 *
 * The kernels multiply unsigned by signed bytes (x86's vpdpbusd): A is
 * used as A_u = A + a_off (a_off 128 flips an int8 A's top bit into
 * uint8) and B as B_s = B - b_off (b_off 128 for a uint8 B).  With
 * ZA = za + a_off and ZB = zb - b_off,
 *   Y = sum A_u B_s - ZB rowsum(A_u) - ZA colsum(B_s) + K ZA ZB
 * all modulo 2^32, so the kernels accumulate sum A_u B_s and the
 * epilogue adds the three corrections.
 *
 * Layouts (the same for every ISA, so packs are portable and every kernel
 * can be tested on the same data):
 *  - A: rows of lda bytes, lda >= K4 = round_up(K, 4), zero in [K, K4);
 *    the kernels broadcast 4 bytes of a row at a time.
 *  - B: panels of IGEMM_NR = 16 columns; panel p starts p * pstride bytes
 *    in (pstride >= K4 * 16) and holds K4 / 4 groups of 64 bytes: group g,
 *    column j, byte t is B_s[4g + t][16p + j].  Rows past K and columns
 *    past N are 0.
 * Weights are packed once at load (igemm_pack_a for a convolution's
 * filter, which is the A of W x im2col(X); igemm_pack_b for MatMulInteger's
 * B), with their row or column sums; the other operand is packed per call.
 *
 * Microkernels per ISA, chosen once from cpuid and XGETBV: AMX-INT8
 * (tdpbusd on 16 x 64-byte tiles; Linux grants the tile state on request,
 * which igemm_isa_best makes: a sandboxed process calls it before its
 * filter forbids arch_prctl), AVX-512 VNNI (vpdpbusd on zmm), AVX-VNNI
 * (vpdpbusd on ymm), AVX2 (vpmaddwd on bytes widened to 16 bits:
 * vpmaddubsw would saturate) and scalar.  The B layout is AMX's: a group
 * of 4 k x 16 columns is one 64-byte tile row.
 * ORTMK_IGEMM_ISA=scalar|avx2|avxvnni|avx512vnni|amx lowers the choice.
 *
 * Errors are negative errno values; 0 is OK.  Callers: providers/cpu/ops/nn
 * (qconv.c, qmatmul.c), tests/unit/test_igemm.c, tools/bench_igemm.c.
 */
#ifndef ORTMK_IGEMM_H
#define ORTMK_IGEMM_H

#include <stddef.h>
#include <stdint.h>

#include "threadpool.h"

typedef enum igemm_isa {
	IGEMM_ISA_AUTO = 0,        /* the best this CPU supports */
	IGEMM_ISA_SCALAR = 1,
	IGEMM_ISA_AVX2 = 2,        /* AVX2: 16-bit products, vpmaddwd */
	IGEMM_ISA_AVXVNNI = 3,     /* AVX2 + AVX-VNNI (VEX vpdpbusd, ymm) */
	IGEMM_ISA_AVX512VNNI = 4,  /* AVX-512 F/BW/VL + VNNI (zmm) */
	IGEMM_ISA_AMX = 5,         /* AVX-512 VNNI + AMX-TILE/INT8 (tdpbusd) */
} igemm_isa;

#define IGEMM_ISA_LAST IGEMM_ISA_AMX

/* The ISA IGEMM_ISA_AUTO stands for (decided once). */
igemm_isa igemm_isa_best(void);
/* 1 when this binary has the ISA's kernels and this CPU (and its OS) runs them. */
int igemm_isa_supported(igemm_isa isa);
const char *igemm_isa_name(igemm_isa isa);

#define IGEMM_NR 16
#define IGEMM_PACK_VERSION 1

static inline int64_t igemm_k4(int64_t K)
{
	return (K + 3) & ~(int64_t)3;
}

/* An A operand as the kernels read it (see the file comment). */
typedef struct igemm_a {
	const uint8_t *a;
	int64_t lda;
	const int32_t *rowsum;   /* sum_k A_u[i][k] per row, or NULL */
	int32_t off;             /* A = A_u - off: 0, or 128 for int8 */
} igemm_a;

/* A B operand as the kernels read it. */
typedef struct igemm_b {
	const int8_t *panels;
	int64_t pstride;         /* bytes from one panel to the next */
	const int32_t *colsum;   /* sum_k B_s[k][j] per column, or NULL */
	int32_t off;             /* B = B_s + off: 0, or 128 for uint8 */
} igemm_b;

/* ---- packing (igemm_pack.c) ----
 * A packed operand is a 64-byte header (magic, version, kind, sizes,
 * checksum) followed by the data and the sums, so a pre-pack cache blob
 * is validated before use. */

/* Bytes for A (M x K) / B (K x N); 0 on a negative size or overflow. */
size_t igemm_pack_a_size(int64_t M, int64_t K);
size_t igemm_pack_b_size(int64_t K, int64_t N);
/* A: M x K bytes with row stride lda, int8 when a_signed, else uint8. */
int igemm_pack_a(const void *A, int64_t lda, int a_signed, int64_t M, int64_t K, void *dst,
		 size_t size);
/* B: K x N bytes with row stride ldb (B^T, N x K, when transB). */
int igemm_pack_b(const void *B, int64_t ldb, int transB, int b_signed, int64_t K, int64_t N,
		 void *dst, size_t size);
/* 0 when packed (size bytes) is a valid pack of an M x K A / K x N B
 * (negative: any), else -EINVAL. */
int igemm_pack_a_check(const void *packed, size_t size, int64_t M, int64_t K);
int igemm_pack_b_check(const void *packed, size_t size, int64_t K, int64_t N);
/* The operand a checked pack holds (rowsum / colsum included). */
void igemm_pack_a_view(const void *packed, igemm_a *a);
void igemm_pack_b_view(const void *packed, igemm_b *b);

/* Rows [g0 * 4, (g0 + gs) * 4) x panels [p0, p1) of B_s into dst, one
 * panel after the other (gs * 64 bytes each); B is K x N with row stride
 * ldb, b_off subtracted (0 or 128). */
void igemm_pack_b_block(const void *B, int64_t ldb, int32_t b_off, int64_t K, int64_t N,
			int64_t g0, int64_t gs, int64_t p0, int64_t p1, int8_t *dst);

/* ---- products (igemm_driver.c) ---- */

/* A B the caller produces block by block (a convolution's im2col): fills
 * dst with rows [g0 * 4, (g0 + gs) * 4) x panels [p0, p1) of B_s in the
 * layout above (panel stride gs * 64), zero past K and N.  Called
 * concurrently from pool threads. */
typedef void igemm_pack_fn(void *ctx, int64_t g0, int64_t gs, int64_t p0, int64_t p1,
			   int8_t *dst);

/* What happens to each result.  Float output: C[i][j] =
 * act((float)Y * scale + bias + add[i][j]) with scale = scale_row[i],
 * scale_col[j] or scale, bias = bias_row[i], bias_col[j] or none, add an
 * addend laid out as C (same ldc; it may be C itself) or none, each step
 * rounded to float32 (no fused multiply-add): the bits of Cast, Mul, Add,
 * Add, then Relu or Clip (act: with clamp, min(hi, max(lo, y)), which
 * keeps a NaN and is Relu's y < 0 ? 0 : y bit for bit at lo 0, hi
 * +inf).  With an addend, K must fit one K block (IGEMM_KBLOCK): the
 * partial sums of several would overwrite an addend stored in C. */
typedef struct igemm_out {
	void *c;                  /* int32 or float, M x N */
	int64_t ldc;
	int is_float;
	float scale;
	const float *scale_row, *scale_col;
	const float *bias_row, *bias_col;
	const float *add;
	int clamp;
	float lo, hi;
} igemm_out;

/* The longest K computed in one block (longer ones keep partial sums in C). */
#define IGEMM_KBLOCK 2048

typedef struct igemm_problem {
	int64_t M, N, K;
	/* A: a kernel-ready operand (A.a set: a packed filter's view), or a
	 * raw M x K matrix (a_raw, lda_raw, a_signed) the driver prepares. */
	igemm_a A;
	const void *a_raw;
	int64_t lda_raw;
	int a_signed;
	int32_t za;               /* A's zero point, or per row: */
	const int32_t *za_row;
	/* B: kernel-ready (B.panels set), a raw K x N matrix (b_raw, ldb_raw,
	 * b_signed), or produced by b_pack (b_signed: its source's type). */
	igemm_b B;
	const void *b_raw;
	int64_t ldb_raw;
	int b_signed;
	igemm_pack_fn *b_pack;
	void *b_pack_ctx;
	int32_t zb;               /* B's zero point, or per column: */
	const int32_t *zb_col;
	igemm_out out;
} igemm_problem;

/* Computes p on the pool (NULL: the caller alone) with the isa's kernels
 * (AUTO: the best).  -EINVAL, -ENOMEM, -ENOTSUP. */
int igemm_compute(cpu_pool *pool, igemm_isa isa, const igemm_problem *p);

/* ---- a convolution read in place (igemm_conv.c) ----
 *
 * A stride-1 2-D convolution of one (image, group) as an implicit GEMM:
 * the input, channel-interleaved and padded by the caller (x4: cg planes
 * of hp x wp pixels x 4 bytes, B_s values, pads holding the input zero
 * point's B_s, channels past the real ones 0, and at least 256 readable
 * bytes past the last plane), is read in place, so that tap t of output
 * pixel (y, x) reads byte (y * wp + x) * 4 + toff[t] of every plane.  A
 * is the filter packed by igemm_pack_a with its k in (tap, channel group,
 * channel) order, zero for the missing channels.  K is the real number of
 * products per result (channels x taps) and colsum[p] the sum of B_s over
 * them for output pixel p (needed when the filter's zero point is not 0:
 * ZA != 0).  out is M x (oh * ow). */
typedef struct igemm_conv {
	int64_t M, K;
	igemm_a A;
	int32_t za;
	const int32_t *za_row;
	const int8_t *x4;
	int64_t cg, hp, wp;
	int ntaps;
	const int64_t *toff;
	int64_t oh, ow;
	const int32_t *colsum;
	int32_t zb, b_off;        /* B's zero point; B = B_s + b_off */
	igemm_out out;
} igemm_conv;

int igemm_conv_compute(cpu_pool *pool, igemm_isa isa, const igemm_conv *cv);

/* o's epilogue (no zero-point terms) on finished int32 sums acc[0, n) of
 * row i, columns [j0, j0 + n), into c (row i's element j0) with the
 * addend add (parallel to c; NULL: none): for kernels that make their own
 * sums (the depthwise convolution), so they round as the GEMM does. */
void igemm_finish_row(const igemm_out *o, int64_t i, int64_t j0, int64_t n, const int32_t *acc,
		      void *c, const float *add);

/* The same on sums held in floats that are exact integers (|v| < 2^24),
 * as a float kernel makes them: the depthwise convolution through the
 * float32 one.  scale_col and bias_col are not allowed here. */
void igemm_finish_row_f(const igemm_out *o, int64_t i, int64_t n, const float *acc, void *c,
			const float *add);

/* The reference the tests hold every kernel to: the ONNX formula with
 * int32 wrap-around, one element at a time. */
int32_t igemm_ref_dot(const void *A, int64_t lda, int a_signed, int32_t za, const void *B,
		      int64_t ldb, int b_signed, int32_t zb, int64_t i, int64_t j, int64_t K);

#endif
