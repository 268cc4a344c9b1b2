/*
 * igemm_driver: which int8 kernel this CPU gets, and the blocking and
 * threading around it (igemm_compute).
 *
 * ISA: cpuid leaf 7 (AVX2, AVX-512 F/BW/VL/VNNI, AMX-TILE/INT8; subleaf 1
 * for AVX-VNNI) and XGETBV, which says whether the OS saves the ymm,
 * zmm/opmask and tile state: a CPU with AVX-512 under an OS (or
 * hypervisor) that does not enable it must not get the AVX-512 kernel;
 * AMX also needs the kernel's permission, asked for once here.
 *
 * Blocking.  C is cut into tasks of rows [m0, m1) x panels [q0, q1); a
 * task walks K in blocks of at most KG_MAX groups of 4.  The B block of
 * a task (its panels x the K block) is either read in place (a packed
 * weight) or packed by the task into its scratch (a convolution's
 * im2col, a B that is an activation) and is sized for L2; the kernel's
 * row tiles (at most MR rows, nearly equal heights) sweep it.  When all
 * of A's rows of a K block fit in L1 the panels are the outer loop (each
 * slice of B is read from L2 once), otherwise the tiles are (each tile of
 * A stays in L1 while B streams from L2).  Partial sums of the K blocks
 * before the last are kept in C as int32; the last one finishes C.
 *
 * Zero points (igemm.h): Y = acc + ZB (K ZA - rowsum A_u) - ZA colsum B_s.
 * The per-row and per-column parts become the kernels' row_off, col_off
 * and rank-one terms.  A B packed per call gets its column sums in the
 * task, before the last K block's tiles need them.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include "igemm_kern.h"

enum {
	KG_MAX = IGEMM_KBLOCK / 4,       /* groups of 4 k per K block */
	L2_BLOCK = 384 * 1024,           /* bytes of a task's B block */
	L1_A = 16 * 1024,                /* A's rows of a K block that L1 keeps */
	MIN_MACS_PER_THREAD = 1 << 19,   /* below, another thread costs more */
	AMX_MIN_ROWS = 16,               /* igemm_desc_for */
	AMX_MIN_GROUPS = 16,
};

/* ---- ISA selection ---- */

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
static uint64_t xgetbv0(void)
{
	uint32_t lo, hi;

	__asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
	return ((uint64_t)hi << 32) | lo;
}
#endif

#ifdef IGEMM_HAVE_AMX
/* Linux (5.16 on) enables the tile data state of a process only on
 * request (ARCH_REQ_XCOMP_PERM for XFEATURE_XTILEDATA); without it
 * tdpbusd faults.  An older kernel refuses the request: no AMX. */
static int amx_permitted(void)
{
#ifdef SYS_arch_prctl
	return syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18 /* XTILEDATA */) == 0;
#else
	return 0;
#endif
}
#endif

/* What the CPU and OS allow, best first. */
static igemm_isa detect(void)
{
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
	unsigned a, b, c, d, b7, c7, d7, a71 = 0;
	uint64_t xcr0;

	if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 27)))   /* OSXSAVE */
		return IGEMM_ISA_SCALAR;
	xcr0 = xgetbv0();
	if ((xcr0 & 0x6) != 0x6)                                  /* xmm, ymm state */
		return IGEMM_ISA_SCALAR;
	if (!__get_cpuid_count(7, 0, &a, &b7, &c7, &d7))
		return IGEMM_ISA_SCALAR;
	if (a >= 1)
		__get_cpuid_count(7, 1, &a71, &b, &c, &d);
#ifdef IGEMM_HAVE_AVX512VNNI
	/* F (ebx 16), BW (ebx 30), VL (ebx 31), VNNI (ecx 11); opmask and
	 * zmm state (xcr0 bits 5-7) */
	if ((b7 & (1u << 16)) && (b7 & (1u << 30)) && (b7 & (1u << 31)) && (c7 & (1u << 11)) &&
	    (xcr0 & 0xe0) == 0xe0) {
#ifdef IGEMM_HAVE_AMX
		/* AMX-TILE (edx 24), AMX-INT8 (edx 25); tile config and data
		 * state (xcr0 bits 17, 18); and Linux's permission to use it */
		if ((d7 & (1u << 24)) && (d7 & (1u << 25)) && (xcr0 & 0x60000) == 0x60000 &&
		    amx_permitted())
			return IGEMM_ISA_AMX;
#endif
		return IGEMM_ISA_AVX512VNNI;
	}
#endif
	if (!(b7 & (1u << 5)))                                    /* AVX2 */
		return IGEMM_ISA_SCALAR;
#ifdef IGEMM_HAVE_AVXVNNI
	if (a71 & (1u << 4))                                      /* AVX-VNNI */
		return IGEMM_ISA_AVXVNNI;
#endif
#ifdef IGEMM_HAVE_AVX2
	return IGEMM_ISA_AVX2;
#endif
#endif
	return IGEMM_ISA_SCALAR;
}

static const igemm_isa_desc *desc_of(igemm_isa isa)
{
	switch (isa) {
#ifdef IGEMM_HAVE_AMX
	case IGEMM_ISA_AMX: return &igemm_desc_amx;
#endif
#ifdef IGEMM_HAVE_AVX512VNNI
	case IGEMM_ISA_AVX512VNNI: return &igemm_desc_avx512vnni;
#endif
#ifdef IGEMM_HAVE_AVXVNNI
	case IGEMM_ISA_AVXVNNI: return &igemm_desc_avxvnni;
#endif
#ifdef IGEMM_HAVE_AVX2
	case IGEMM_ISA_AVX2: return &igemm_desc_avx2;
#endif
	case IGEMM_ISA_SCALAR: return &igemm_desc_scalar;
	default: return NULL;
	}
}

static igemm_isa _Atomic cpu_best, chosen;

static igemm_isa cpu_isa(void)
{
	igemm_isa i = cpu_best;

	if (!i)
		cpu_best = i = detect();
	return i;
}

int igemm_isa_supported(igemm_isa isa)
{
	/* AVX-VNNI is a separate cpuid bit; an AVX-512 VNNI CPU may lack it
	 * (Ice Lake), so ask the CPU rather than compare ranks. */
	if (isa == IGEMM_ISA_AVXVNNI) {
#if defined(__x86_64__) && defined(IGEMM_HAVE_AVXVNNI)
		unsigned a, b, c, d;
		if (cpu_isa() < IGEMM_ISA_AVX2 || !__get_cpuid_count(7, 0, &a, &b, &c, &d) || a < 1)
			return 0;
		__get_cpuid_count(7, 1, &a, &b, &c, &d);
		return (a >> 4) & 1;
#else
		return 0;
#endif
	}
	return isa >= IGEMM_ISA_SCALAR && isa <= cpu_isa() && desc_of(isa) != NULL;
}

igemm_isa igemm_isa_best(void)
{
	igemm_isa i = chosen;
	const char *env;

	if (i)
		return i;
	i = cpu_isa();
	/* ORTMK_IGEMM_ISA lowers the choice (benchmarks, tests) */
	if ((env = getenv("ORTMK_IGEMM_ISA")) != NULL) {
		for (igemm_isa k = IGEMM_ISA_SCALAR; k <= IGEMM_ISA_LAST; k++)
			if (strcmp(env, igemm_isa_name(k)) == 0 && igemm_isa_supported(k))
				i = k;
	}
	chosen = i;
	return i;
}

const char *igemm_isa_name(igemm_isa isa)
{
	switch (isa) {
	case IGEMM_ISA_SCALAR: return "scalar";
	case IGEMM_ISA_AVX2: return "avx2";
	case IGEMM_ISA_AVXVNNI: return "avxvnni";
	case IGEMM_ISA_AVX512VNNI: return "avx512vnni";
	case IGEMM_ISA_AMX: return "amx";
	default: return "auto";
	}
}

const igemm_isa_desc *igemm_isa_desc_get(igemm_isa isa)
{
	if (isa == IGEMM_ISA_AUTO)
		isa = igemm_isa_best();
	return igemm_isa_supported(isa) ? desc_of(isa) : NULL;
}

const igemm_isa_desc *igemm_desc_for(igemm_isa isa, int64_t M, int64_t groups)
{
	const igemm_isa_desc *d = igemm_isa_desc_get(isa);

#ifdef IGEMM_HAVE_AMX
	/* AMX's tiles are 16 rows x 16 groups: a product with fewer rows, or
	 * runs of fewer groups along K, fills a fraction of each and pays the
	 * tile loads and the padded tails regardless; zmm does it better */
	if (isa == IGEMM_ISA_AUTO && d == &igemm_desc_amx && (M < AMX_MIN_ROWS || groups < AMX_MIN_GROUPS))
		return &igemm_desc_avx512vnni;
#else
	(void)M;
	(void)groups;
#endif
	return d;
}

/* ---- the product ---- */

typedef struct run {
	const igemm_problem *p;
	const igemm_isa_desc *d;
	igemm_a A;
	igemm_b B;                 /* B.panels NULL: packed per task */
	int64_t M, N, K, G;        /* G: groups of 4 along K */
	int64_t gs, nkb;           /* groups per K block, K blocks */
	int64_t panels, cp, rm;    /* panels, per task; rows per task */
	int64_t tn, tm;            /* task grid */
	int32_t ZA, ZB;            /* scalar parts (ZA/ZB rows/cols in za_row/zb_col) */
	int need_colsum;
	/* per-row terms, M values (NULL when not used) */
	int32_t *row_off, *rk_row, *rk2_row;
	/* per-column terms when B is packed ahead (N values) */
	int32_t *col_off, *rk_col, *rk2_col;
	size_t task_bytes;
	cpu_pool *pool;
	uint8_t *own;              /* without a pool: one task's scratch */
} run;

static void *task_scratch(const run *r, int member)
{
	return r->pool ? cpu_pool_scratch(r->pool, member) : r->own;
}

/* Column terms of columns [j0, j0 + n) from their sums (see the file
 * comment): col_off = -ZA colsum, or a rank-one term with the per-row ZA. */
static void col_terms(const run *r, const int32_t *csum, int64_t j0, int64_t n, int32_t *off,
		      int32_t *rk, int32_t *rk2)
{
	const igemm_problem *p = r->p;

	for (int64_t j = 0; j < n; j++) {
		uint32_t cs = csum ? (uint32_t)csum[j] : 0u;
		if (off)
			off[j] = (int32_t)(0u - (uint32_t)r->ZA * cs);
		if (p->zb_col)
			rk[j] = (int32_t)((uint32_t)p->zb_col[j0 + j] - (uint32_t)r->B.off);
		if (p->za_row)
			(p->zb_col ? rk2 : rk)[j] = (int32_t)cs;
	}
}

/* Rows [m0, m1) in ceil((m1 - m0) / MR) tiles of nearly equal height
 * times panels [q0, q1) of a B block (kg groups, panel q0 at b): the
 * kernel calls, in the loop order the file comment describes. */
static void block_tiles(const run *r, int64_t m0, int64_t m1, int64_t q0, int64_t q1,
			int64_t g0, int64_t kg, const int8_t *b, int64_t pstride, int first,
			int finish, const int32_t *coff, const int32_t *rk, const int32_t *rk2)
{
	const igemm_isa_desc *d = r->d;
	const igemm_out *o = &r->p->out;
	int64_t kp = d->nr / IGEMM_NR, tiles = (m1 - m0 + d->mr - 1) / d->mr;
	int panels_outer = (m1 - m0) * kg * 4 <= L1_A;
	int64_t outer = panels_outer ? (q1 - q0 + kp - 1) / kp : tiles;
	int64_t inner = panels_outer ? tiles : (q1 - q0 + kp - 1) / kp;
	static const int64_t tap0 = 0;
	igemm_bwalk bw = {NULL, pstride, 1, &tap0, kg, 64};
	igemm_tile_ep ep = {0};

	ep.first = first;
	ep.finish = finish;
	ep.is_float = o->is_float;
	ep.scale = o->scale;
	igemm_ep_clamp(&ep, o);
	for (int64_t u = 0; u < outer; u++)
		for (int64_t w = 0; w < inner; w++) {
			int64_t t = panels_outer ? w : u, qq = panels_outer ? u : w;
			int64_t i0, i1, q = q0 + qq * kp, j0 = q * IGEMM_NR;
			int64_t nr = r->N - j0 < d->nr ? r->N - j0 : d->nr;
			int64_t jl = j0 - q0 * IGEMM_NR;   /* column within the task */

			igemm_tile_rows(d, m0, m1, t, tiles, &i0, &i1);

			if (q1 * IGEMM_NR - j0 < nr)
				nr = q1 * IGEMM_NR - j0;
			ep.row_off = r->row_off ? r->row_off + i0 : NULL;
			ep.rk_row = r->rk_row ? r->rk_row + i0 : NULL;
			ep.rk2_row = r->rk2_row ? r->rk2_row + i0 : NULL;
			ep.col_off = coff ? coff + jl : NULL;
			ep.rk_col = rk ? rk + jl : NULL;
			ep.rk2_col = rk2 ? rk2 + jl : NULL;
			ep.scale_row = o->scale_row ? o->scale_row + i0 : NULL;
			ep.scale_col = o->scale_col ? o->scale_col + j0 : NULL;
			ep.bias_row = o->bias_row ? o->bias_row + i0 : NULL;
			ep.bias_col = o->bias_col ? o->bias_col + j0 : NULL;
			ep.add = o->add ? o->add + i0 * o->ldc + j0 : NULL;
			bw.b = b + (q - q0) * pstride;
			d->kernel(r->A.a + i0 * r->A.lda + g0 * 4, r->A.lda, &bw,
				  (int32_t *)o->c + i0 * o->ldc + j0, o->ldc, (int)(i1 - i0), (int)nr,
				  &ep);
		}
}

static void task(void *arg, int64_t t, int member)
{
	const run *r = arg;
	const igemm_problem *p = r->p;
	int64_t im = t / r->tn, in = t % r->tn;
	int64_t m0 = im * r->rm, m1 = m0 + r->rm < r->M ? m0 + r->rm : r->M;
	int64_t q0 = in * r->cp, q1 = q0 + r->cp < r->panels ? q0 + r->cp : r->panels;
	int64_t ncols = (q1 - q0) * IGEMM_NR;
	uint8_t *scr = task_scratch(r, member);
	int8_t *bbuf = (int8_t *)scr;
	int32_t *csum = (int32_t *)(scr + (size_t)r->cp * (size_t)r->gs * 64);
	int32_t *coff = csum + r->cp * IGEMM_NR, *rk = coff + r->cp * IGEMM_NR;
	int32_t *rk2 = rk + r->cp * IGEMM_NR;
	const int32_t *use_off = r->col_off, *use_rk = r->rk_col, *use_rk2 = r->rk2_col;

	if (m0 >= m1 || q0 >= q1)
		return;
	if (r->B.panels) {
		use_off = r->col_off ? r->col_off + q0 * IGEMM_NR : NULL;
		use_rk = r->rk_col ? r->rk_col + q0 * IGEMM_NR : NULL;
		use_rk2 = r->rk2_col ? r->rk2_col + q0 * IGEMM_NR : NULL;
	} else {
		memset(csum, 0, (size_t)ncols * 4);
	}
	for (int64_t kb = 0; kb < r->nkb; kb++) {
		int64_t g0 = kb * r->gs, kg = r->G - g0 < r->gs ? r->G - g0 : r->gs;
		const int8_t *b;
		int64_t ps;

		if (r->B.panels) {
			b = r->B.panels + q0 * r->B.pstride + g0 * 64;
			ps = r->B.pstride;
		} else {
			if (p->b_pack)
				p->b_pack(p->b_pack_ctx, g0, kg, q0, q1, bbuf);
			else
				igemm_pack_b_block(p->b_raw, p->ldb_raw, r->B.off, r->K, r->N, g0, kg,
						   q0, q1, bbuf);
			b = bbuf;
			ps = kg * 64;
			if (r->need_colsum)
				for (int64_t q = q0; q < q1; q++)
					r->d->colsum(b + (q - q0) * ps, kg, csum + (q - q0) * IGEMM_NR);
			if (kb == r->nkb - 1) {
				int64_t n = r->N - q0 * IGEMM_NR < ncols ? r->N - q0 * IGEMM_NR : ncols;
				col_terms(r, r->need_colsum ? csum : NULL, q0 * IGEMM_NR, n,
					  r->ZA || p->za_row ? coff : NULL, rk, rk2);
				use_off = r->ZA && !p->za_row ? coff : NULL;
				use_rk = p->zb_col || p->za_row ? rk : NULL;
				use_rk2 = p->zb_col && p->za_row ? rk2 : NULL;
			}
		}
		block_tiles(r, m0, m1, q0, q1, g0, kg, b, ps, kb == 0, kb == r->nkb - 1, use_off,
			    use_rk, use_rk2);
	}
}

/* A as the kernels read it: in place when it is uint8 with K a multiple
 * of 4, else a copy (top bit flipped for int8, zero-padded to K4); row
 * sums when needed.  *own receives what to free. */
static int prepare_a(run *r, int need_rowsum, void **own)
{
	const igemm_problem *p = r->p;
	int64_t K4 = igemm_k4(r->K), M = r->M;
	int copy = p->a_signed || r->K % 4;
	int32_t *sums;
	uint8_t *rows;

	*own = NULL;
	if (p->A.a) {
		r->A = p->A;
		if (!need_rowsum || r->A.rowsum)
			return 0;
	} else {
		r->A.a = p->a_raw;
		r->A.lda = p->lda_raw;
		r->A.rowsum = NULL;
		r->A.off = p->a_signed ? 128 : 0;
		if (!need_rowsum && !copy)
			return 0;
	}
	copy = copy && !p->A.a;
	if (!(*own = malloc((size_t)M * 4 + (copy ? (size_t)(M * K4) : 0) + 64)))
		return -ENOMEM;
	sums = *own;
	rows = (uint8_t *)(sums + M);
	for (int64_t i = 0; i < M; i++) {
		const uint8_t *src = r->A.a + i * r->A.lda;
		uint32_t s = 0;
		if (copy) {
			uint8_t flip = p->a_signed ? 0x80 : 0;
			for (int64_t k = 0; k < r->K; k++)
				s += rows[i * K4 + k] = src[k] ^ flip;
			memset(rows + i * K4 + r->K, 0, (size_t)(K4 - r->K));
		} else {
			for (int64_t k = 0; k < r->K; k++)
				s += src[k];
		}
		sums[i] = (int32_t)s;
	}
	if (copy) {
		r->A.a = rows;
		r->A.lda = K4;
	}
	r->A.rowsum = sums;
	return 0;
}

/* The per-row terms (see the file comment). */
static void row_terms(run *r)
{
	const igemm_problem *p = r->p;
	uint32_t K = (uint32_t)r->K;

	for (int64_t i = 0; i < r->M; i++) {
		uint32_t za = p->za_row ? (uint32_t)p->za_row[i] + (uint32_t)r->A.off : (uint32_t)r->ZA;
		uint32_t rs = r->A.rowsum ? (uint32_t)r->A.rowsum[i] : 0u;
		uint32_t zterm = K * za - rs;        /* multiplies ZB */
		if (r->row_off)
			r->row_off[i] = (int32_t)((uint32_t)r->ZB * zterm);
		if (r->rk_row)
			r->rk_row[i] = (int32_t)(p->zb_col ? zterm : 0u - za);
		if (r->rk2_row)
			r->rk2_row[i] = (int32_t)(0u - za);
	}
}

/* Task grid and block sizes for `threads` threads. */
static void plan(run *r, int threads, int packed_b)
{
	const igemm_isa_desc *d = r->d;
	int64_t kp = d->nr / IGEMM_NR, want, cp_max, n_chunks;
	double macs = (double)r->M * (double)r->N * (double)r->K;

	r->nkb = (r->G + KG_MAX - 1) / KG_MAX;
	r->gs = (r->G + r->nkb - 1) / r->nkb;
	cp_max = L2_BLOCK / (r->gs * 64) / kp * kp;
	cp_max = cp_max < kp ? kp : cp_max;
	if (macs / MIN_MACS_PER_THREAD < threads)
		threads = (int)(macs / MIN_MACS_PER_THREAD) + 1;
	want = threads > 1 ? 3 * threads : 1;
	r->cp = (r->panels + want - 1) / want;
	r->cp = (r->cp + kp - 1) / kp * kp;
	r->cp = r->cp > cp_max ? cp_max : r->cp < kp ? kp : r->cp;
	n_chunks = (r->panels + r->cp - 1) / r->cp;
	r->tn = n_chunks;
	r->tm = 1;
	r->rm = r->M;
	/* Few column chunks of a packed B: split the rows too (nothing is
	 * packed twice). */
	if (packed_b && threads > 1 && n_chunks < want && r->M > d->mr) {
		int64_t tm = (want + n_chunks - 1) / n_chunks, tiles = (r->M + d->mr - 1) / d->mr;
		tm = tm > tiles ? tiles : tm;
		r->rm = (tiles + tm - 1) / tm * d->mr;
		r->tm = (r->M + r->rm - 1) / r->rm;
	}
}

static int check(const igemm_problem *p)
{
	const igemm_out *o = &p->out;

	if (p->M < 0 || p->N < 0 || p->K < 0 || !o->c || o->ldc < p->N)
		return -EINVAL;
	if (!p->A.a && !p->a_raw && p->M && p->K)
		return -EINVAL;
	if (p->a_raw && p->lda_raw < p->K)
		return -EINVAL;
	if (!p->B.panels && !p->b_raw && !p->b_pack && p->N && p->K)
		return -EINVAL;
	if (p->b_raw && p->ldb_raw < p->N)
		return -EINVAL;
	if (p->A.a && (p->A.lda < igemm_k4(p->K) || (p->A.off != 0 && p->A.off != 128)))
		return -EINVAL;
	if (p->B.panels && (p->B.pstride < igemm_k4(p->K) * IGEMM_NR || p->B.pstride % 64))
		return -EINVAL;
	if (o->add && (!o->is_float || p->K > IGEMM_KBLOCK))
		return -EINVAL;
	return 0;
}

/* K == 0: every sum is 0 and so is every correction. */
static void empty_k(const igemm_problem *p)
{
	igemm_tile_ep ep = {0};

	ep.is_float = p->out.is_float;
	ep.scale = p->out.scale;
	igemm_ep_clamp(&ep, &p->out);
	for (int64_t i = 0; i < p->M; i++)
		for (int64_t j = 0; j < p->N; j++) {
			ep.scale_row = p->out.scale_row ? p->out.scale_row + i : NULL;
			ep.scale_col = p->out.scale_col ? p->out.scale_col + j : NULL;
			ep.bias_row = p->out.bias_row ? p->out.bias_row + i : NULL;
			ep.bias_col = p->out.bias_col ? p->out.bias_col + j : NULL;
			igemm_ep_one(&ep, 0, 0, 0u, (int32_t *)p->out.c + i * p->out.ldc + j,
				     p->out.add ? p->out.add + i * p->out.ldc + j : NULL);
		}
}

void igemm_finish_row(const igemm_out *o, int64_t i, int64_t j0, int64_t n, const int32_t *acc,
		      void *c, const float *add)
{
	igemm_tile_ep ep = {0};

	ep.finish = 1;
	ep.is_float = o->is_float;
	ep.scale = o->scale;
	ep.scale_row = o->scale_row ? o->scale_row + i : NULL;
	ep.scale_col = o->scale_col ? o->scale_col + j0 : NULL;
	ep.bias_row = o->bias_row ? o->bias_row + i : NULL;
	ep.bias_col = o->bias_col ? o->bias_col + j0 : NULL;
	igemm_ep_clamp(&ep, o);
	if (!ep.is_float) {
		memcpy(c, acc, (size_t)n * 4);
		return;
	}
	for (int64_t j = 0; j < n; j++)
		igemm_ep_one(&ep, 0, (int)j, (uint32_t)acc[j], (int32_t *)c + j, add ? add + j : NULL);
}

void igemm_finish_row_f(const igemm_out *o, int64_t i, int64_t n, const float *acc, void *c,
			const float *add)
{
	float s = o->scale_row ? o->scale_row[i] : o->scale, b = o->bias_row ? o->bias_row[i] : 0.0f;
	float *y = c;

	if (!o->is_float) {
		for (int64_t j = 0; j < n; j++)
			((int32_t *)c)[j] = (int32_t)acc[j];
		return;
	}
	/* the steps of igemm_ep_one with the row's constants hoisted; one pass
	 * per element, since add may be c itself (a residual summed in place);
	 * (float)(int32_t)v is v for these sums */
	for (int64_t j = 0; j < n; j++) {
		float v = acc[j] * s;
		if (o->bias_row)
			v = v + b;
		if (add)
			v = v + add[j];
		if (o->clamp)
			v = igemm_clampf(v, o->lo, o->hi);
		y[j] = v;
	}
}

int igemm_compute(cpu_pool *pool, igemm_isa isa, const igemm_problem *p)
{
	run r;
	void *own_a = NULL;
	int32_t *terms = NULL;
	int rc, mine = 0, threads, need_rowsum;

	memset(&r, 0, sizeof(r));
	if ((rc = check(p)))
		return rc;
	if (!(r.d = igemm_desc_for(isa, p->M, igemm_k4(p->K) / 4)))
		return -ENOTSUP;
	if (!p->M || !p->N)
		return 0;
	if (!p->K) {
		empty_k(p);
		return 0;
	}
	r.p = p;
	r.M = p->M;
	r.N = p->N;
	r.K = p->K;
	r.G = igemm_k4(p->K) / 4;
	r.panels = (p->N + IGEMM_NR - 1) / IGEMM_NR;
	if (p->B.panels) {
		r.B = p->B;
	} else {
		r.B.off = p->b_signed ? 0 : 128;
	}
	r.ZA = p->za + (p->A.a ? p->A.off : p->a_signed ? 128 : 0);
	r.ZB = p->zb - r.B.off;
	need_rowsum = r.ZB != 0 || p->zb_col;
	r.need_colsum = r.ZA != 0 || p->za_row;
	if ((rc = prepare_a(&r, need_rowsum, &own_a)))
		return rc;
	/* per-row terms, and per-column ones when B is packed ahead */
	if (!(terms = calloc((size_t)(3 * r.M + 3 * r.panels * IGEMM_NR), 4))) {
		rc = -ENOMEM;
		goto out;
	}
	r.row_off = !p->zb_col && r.ZB ? terms : NULL;
	r.rk_row = p->zb_col || p->za_row ? terms + r.M : NULL;
	r.rk2_row = p->zb_col && p->za_row ? terms + 2 * r.M : NULL;
	row_terms(&r);
	if (r.B.panels) {
		int32_t *ct = terms + 3 * r.M;
		int64_t np = r.panels * IGEMM_NR;
		if (r.need_colsum && !r.B.colsum) {
			rc = -EINVAL;
			goto out;
		}
		col_terms(&r, r.need_colsum ? r.B.colsum : NULL, 0, r.N,
			  r.ZA || p->za_row ? ct : NULL, ct + np, ct + 2 * np);
		r.col_off = r.ZA && !p->za_row ? ct : NULL;
		r.rk_col = p->zb_col || p->za_row ? ct + np : NULL;
		r.rk2_col = p->zb_col && p->za_row ? ct + 2 * np : NULL;
	}
	mine = pool && cpu_pool_try_begin(pool);
	threads = mine ? cpu_pool_threads(pool) : 1;
	plan(&r, threads, r.B.panels != NULL);
	r.task_bytes = r.B.panels ? 64 : (size_t)r.cp * (size_t)r.gs * 64 + (size_t)r.cp * IGEMM_NR * 16 + 64;
	if (mine) {
		r.pool = pool;
		if ((rc = cpu_pool_reserve(pool, r.task_bytes)))
			goto out;
		cpu_pool_for(pool, 0, r.tm * r.tn, task, &r);
	} else {
		if (!(r.own = aligned_alloc(64, (r.task_bytes + 63) & ~(size_t)63))) {
			rc = -ENOMEM;
			goto out;
		}
		for (int64_t t = 0; t < r.tm * r.tn; t++)
			task(&r, t, 0);
	}
out:
	if (mine)
		cpu_pool_end(pool);
	free(r.own);
	free(terms);
	free(own_a);
	return rc;
}
