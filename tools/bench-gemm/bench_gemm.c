/*
 * bench-gemm: how fast the CPU GEMM (providers/cpu/gemm) is on this
 * machine, against this machine's own fp32 FMA ceiling.
 *
 *   bench-gemm [--isa auto|avx512|avx2|scalar] [--threads 1,2]
 *              [--shapes MxNxK,...] [--seconds S] [--windows W] [--unpacked]
 *              [--trans-b]
 *
 * It measures (1) the peak: independent FMA chains on the ISA's widest
 * registers, one core; (2) the microkernel alone on one full tile, with A
 * and the B panel hot in L1; (3) whole GEMMs with B pre-packed (as weights
 * are), or packed on every call with --unpacked, at each thread count;
 * --trans-b stores B as N x K (ONNX Gemm with transB=1, nn.Linear).
 * Percentages are of threads x the measured one-core peak.  Each figure
 * is the best of W timed windows (default 5) spread over S seconds (0.5)
 * per figure, since a shared VM is noisy; one
 * thread is timed by its CPU time, more threads by the wall clock.
 * docs/PERFORMANCE.md records the results.
 */
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gemm.h"
#include "gemm_kern.h"

static double clock_s(clockid_t id)
{
	struct timespec t;

	clock_gettime(id, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* ---- the FMA ceiling ---- */

#define CHAINS(F)                                                         \
	for (long i = 0; i < n; i++) {                                       \
		a0 = F(a0, m, c); a1 = F(a1, m, c); a2 = F(a2, m, c);        \
		a3 = F(a3, m, c); a4 = F(a4, m, c); a5 = F(a5, m, c);        \
		a6 = F(a6, m, c); a7 = F(a7, m, c); a8 = F(a8, m, c);        \
		a9 = F(a9, m, c); a10 = F(a10, m, c); a11 = F(a11, m, c);    \
	}

__attribute__((target("avx512f"))) static float fma_avx512(long n)
{
	__m512 m = _mm512_set1_ps(0.9999f), c = _mm512_set1_ps(1e-4f), s;
	__m512 a0 = _mm512_set1_ps(0.1f), a1 = _mm512_set1_ps(0.2f), a2 = _mm512_set1_ps(0.3f);
	__m512 a3 = _mm512_set1_ps(0.4f), a4 = _mm512_set1_ps(0.5f), a5 = _mm512_set1_ps(0.6f);
	__m512 a6 = _mm512_set1_ps(0.7f), a7 = _mm512_set1_ps(0.8f), a8 = _mm512_set1_ps(0.9f);
	__m512 a9 = _mm512_set1_ps(1.1f), a10 = _mm512_set1_ps(1.2f), a11 = _mm512_set1_ps(1.3f);

	CHAINS(_mm512_fmadd_ps)
	s = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)),
			  _mm512_add_ps(_mm512_add_ps(a4, a5), _mm512_add_ps(a6, a7)));
	s = _mm512_add_ps(s, _mm512_add_ps(_mm512_add_ps(a8, a9), _mm512_add_ps(a10, a11)));
	return _mm512_reduce_add_ps(s);
}

__attribute__((target("avx2,fma"))) static float fma_avx2(long n)
{
	__m256 m = _mm256_set1_ps(0.9999f), c = _mm256_set1_ps(1e-4f), s;
	__m256 a0 = _mm256_set1_ps(0.1f), a1 = _mm256_set1_ps(0.2f), a2 = _mm256_set1_ps(0.3f);
	__m256 a3 = _mm256_set1_ps(0.4f), a4 = _mm256_set1_ps(0.5f), a5 = _mm256_set1_ps(0.6f);
	__m256 a6 = _mm256_set1_ps(0.7f), a7 = _mm256_set1_ps(0.8f), a8 = _mm256_set1_ps(0.9f);
	__m256 a9 = _mm256_set1_ps(1.1f), a10 = _mm256_set1_ps(1.2f), a11 = _mm256_set1_ps(1.3f);
	float out[8];

	CHAINS(_mm256_fmadd_ps)
	s = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)),
			  _mm256_add_ps(_mm256_add_ps(a4, a5), _mm256_add_ps(a6, a7)));
	s = _mm256_add_ps(s, _mm256_add_ps(_mm256_add_ps(a8, a9), _mm256_add_ps(a10, a11)));
	_mm256_storeu_ps(out, s);
	return out[0];
}

/* One core's fp32 FMA GFLOP/s on the ISA's registers (scalar: AVX2's,
 * what the compiler could at best use). */
static double peak(gemm_isa isa)
{
	int wide = isa == GEMM_ISA_AVX512;
	double best = 0.0;
	volatile float sink;

	for (int r = 0; r < 200; r++) {
		long n = 250000;   /* ~1 ms */
		double t = clock_s(CLOCK_THREAD_CPUTIME_ID), g;
		sink = wide ? fma_avx512(n) : fma_avx2(n);
		t = clock_s(CLOCK_THREAD_CPUTIME_ID) - t;
		g = (double)n * 12.0 * (wide ? 32.0 : 16.0) / t * 1e-9;
		best = g > best ? g : best;
	}
	(void)sink;
	return best;
}

static float *rand_floats(size_t n)
{
	float *p = aligned_alloc(64, (n * sizeof(float) + 63) / 64 * 64);

	if (!p) {
		fprintf(stderr, "bench-gemm: out of memory\n");
		exit(1);
	}
	for (size_t i = 0; i < n; i++)
		p[i] = (float)((i * 2654435761u) % 1000) * 1e-3f - 0.5f;
	return p;
}

/* Timed windows per figure; the best one counts.  One thread is timed by
 * its own CPU time: on a shared VM the wall clock also counts the time
 * other processes hold the core.  More threads need the wall clock, and a
 * window counts only if this process had all its threads on a CPU all
 * the time (CPU time >= 97% of threads x wall): the other windows measure
 * the neighbours.  Spinning counts as CPU time, so a thread that idles
 * waiting for another still shows as lost speed.  Short windows (many of
 * them) make it likelier that some are clean on a busy machine. */
static int windows = 20;
static int valid_windows;

typedef void run_fn(void *ctx);

static double best_gflops(run_fn *fn, void *ctx, int threads, double flops, double seconds)
{
	clockid_t clock = threads > 1 ? CLOCK_MONOTONIC : CLOCK_THREAD_CPUTIME_ID;
	double best = 0.0;
	long reps = 1;

	valid_windows = 0;
	fn(ctx);   /* warm-up: page faults, pool wake-up */
	for (int r = 0; r < windows; r++) {
		double t, cpu, g;
		for (;;) {
			cpu = clock_s(CLOCK_PROCESS_CPUTIME_ID);
			t = clock_s(clock);
			for (long i = 0; i < reps; i++)
				fn(ctx);
			t = clock_s(clock) - t;
			cpu = clock_s(CLOCK_PROCESS_CPUTIME_ID) - cpu;
			if (t >= seconds / windows || reps > (1L << 30))
				break;
			reps *= 2;
		}
		if (threads > 1 && cpu < 0.97 * threads * t)
			continue;
		valid_windows++;
		g = flops * (double)reps / t * 1e-9;
		best = g > best ? g : best;
	}
	return best;
}

/* ---- the microkernel ---- */

typedef struct kern_ctx {
	const gemm_isa_desc *d;
	int64_t kc;
	float *a, *b, *c;
	gemm_tile_ep ep;
} kern_ctx;

static void run_kernel(void *p)
{
	kern_ctx *k = p;

	k->d->kernel(k->kc, k->a, k->kc, k->b, k->c, k->d->nr, k->d->mr, k->d->nr, &k->ep);
}

static double kernel_gflops(const gemm_isa_desc *d, int64_t kc, double seconds)
{
	kern_ctx k;
	double g;

	memset(&k, 0, sizeof(k));
	k.d = d;
	k.kc = kc;
	k.a = rand_floats((size_t)(d->mr * kc));
	k.b = rand_floats((size_t)(kc * d->nr));
	k.c = rand_floats((size_t)(d->mr * d->nr));
	k.ep.alpha = 1.0f;
	k.ep.beta = 1.0f;
	g = best_gflops(run_kernel, &k, 1, 2.0 * d->mr * d->nr * (double)kc, seconds);
	free(k.a);
	free(k.b);
	free(k.c);
	return g;
}

/* ---- whole GEMMs ---- */

typedef struct gemm_ctx {
	cpu_pool *pool;
	gemm_isa isa;
	int64_t M, N, K;
	float *A, *B, *C;
	void *packed;
	int unpacked, transB;
} gemm_ctx;

static void run_gemm(void *p)
{
	gemm_ctx *g = p;
	int rc;

	if (g->unpacked)
		rc = gemm_sgemm(g->pool, g->isa, 0, g->transB, g->M, g->N, g->K, g->A, g->K, g->B,
				g->transB ? g->K : g->N, NULL, g->C, g->N);
	else
		rc = gemm_compute(g->pool, g->M, g->N, g->K, g->A, g->K, 0, g->packed, NULL,
				  g->C, g->N);
	if (rc) {
		fprintf(stderr, "bench-gemm: gemm failed (%d)\n", rc);
		exit(1);
	}
}

static double gemm_gflops(gemm_isa isa, cpu_pool *pool, int64_t M, int64_t N, int64_t K,
			  int unpacked, int transB, double seconds)
{
	gemm_ctx g = {pool, isa, M, N, K, rand_floats((size_t)(M * K)),
		      rand_floats((size_t)(K * N)), rand_floats((size_t)(M * N)), NULL, unpacked,
		      transB};
	size_t size = gemm_pack_b_size(isa, K, N);
	double r;

	g.packed = aligned_alloc(GEMM_PACK_ALIGN, (size + 63) / 64 * 64);
	if (!g.packed || gemm_pack_b(isa, g.B, transB ? K : N, transB, K, N, g.packed, size)) {
		fprintf(stderr, "bench-gemm: cannot pack B\n");
		exit(1);
	}
	r = best_gflops(run_gemm, &g, cpu_pool_threads(pool), 2.0 * (double)M * (double)N * (double)K,
			seconds);
	free(g.packed);
	free(g.A);
	free(g.B);
	free(g.C);
	return r;
}

/* Sizes from the issue #7 models: the MLP (batch 32 and 1), ResNet-18's
 * 3x3 convolutions as im2col(X)^T x W^T (M = H*W, N = C_out, K = 9 C_in)
 * and a 1x1 one, the BERT-like encoder's projections (M = sequence). */
static const char *DEFAULT_SHAPES =
	"32x1024x1024,1x1024x1024,3136x64x576,3136x64x64,784x128x1152,196x256x2304,"
	"49x512x4608,128x256x256,128x1024x256,128x256x1024,1024x1024x1024";

static gemm_isa parse_isa(const char *s)
{
	static const gemm_isa all[] = {GEMM_ISA_AUTO, GEMM_ISA_SCALAR, GEMM_ISA_AVX2,
				       GEMM_ISA_AVX512};
	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
		if (!strcmp(s, gemm_isa_name(all[i])))
			return all[i];
	fprintf(stderr, "bench-gemm: unknown ISA '%s'\n", s);
	exit(2);
}

static void usage(void)
{
	fprintf(stderr, "usage: bench-gemm [--isa auto|avx512|avx2|scalar] [--threads 1,2]\n"
			"                  [--shapes MxNxK,...] [--seconds S] [--windows W]\n"
			"                  [--unpacked] [--trans-b]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	const char *shapes = DEFAULT_SHAPES, *threads = "1,2";
	gemm_isa isa = GEMM_ISA_AUTO;
	double seconds = 0.5, pk;
	int unpacked = 0, transB = 0, nt = 0, tlist[16];
	const gemm_isa_desc *d;
	char *list, *save = NULL;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--isa") && i + 1 < argc)
			isa = parse_isa(argv[++i]);
		else if (!strcmp(argv[i], "--threads") && i + 1 < argc)
			threads = argv[++i];
		else if (!strcmp(argv[i], "--shapes") && i + 1 < argc)
			shapes = argv[++i];
		else if (!strcmp(argv[i], "--seconds") && i + 1 < argc)
			seconds = atof(argv[++i]);
		else if (!strcmp(argv[i], "--windows") && i + 1 < argc)
			windows = atoi(argv[++i]) > 0 ? atoi(argv[i]) : 1;
		else if (!strcmp(argv[i], "--unpacked"))
			unpacked = 1;
		else if (!strcmp(argv[i], "--trans-b"))
			transB = 1;
		else
			usage();
	}
	d = gemm_isa_desc_get(isa);
	if (!d) {
		fprintf(stderr, "bench-gemm: this CPU does not run %s\n", gemm_isa_name(isa));
		return 1;
	}
	isa = d->id;
	list = strdup(threads);
	for (char *t = strtok_r(list, ",", &save); t && nt < 16; t = strtok_r(NULL, ",", &save))
		if ((tlist[nt] = atoi(t)) > 0)
			nt++;
	free(list);

	pk = peak(isa);
	printf("isa %s: tile %d x %d, KC %d, NC %d\n", d->name, d->mr, d->nr, d->kc, d->nc);
	printf("peak (FMA chains, one core): %.1f GFLOP/s\n", pk);
	for (int64_t kc = 64; kc <= 256; kc *= 2) {
		double g = kernel_gflops(d, kc, seconds);
		printf("microkernel %dx%d kc %3ld (A, B panel hot in L1): %6.1f GFLOP/s  %5.1f%%\n",
		       d->mr, d->nr, (long)kc, g, 100.0 * g / pk);
	}
	printf("%-18s", unpacked ? (transB ? "GEMM (B^T unpacked)" : "GEMM (B unpacked)")
				 : "GEMM (B packed)");
	for (int t = 0; t < nt; t++)
		printf("   %2d thread%s GFLOP/s  %%peak", tlist[t], tlist[t] > 1 ? "s" : " ");
	printf("\n");
	list = strdup(shapes);
	save = NULL;
	for (char *s = strtok_r(list, ",", &save); s; s = strtok_r(NULL, ",", &save)) {
		long M, N, K;
		if (sscanf(s, "%ldx%ldx%ld", &M, &N, &K) != 3 || M < 1 || N < 1 || K < 1) {
			fprintf(stderr, "bench-gemm: bad shape '%s' (want MxNxK)\n", s);
			return 2;
		}
		printf("%-18s", s);
		for (int t = 0; t < nt; t++) {
			cpu_pool *pool = NULL;
			double g;
			if (tlist[t] > 1 && cpu_pool_create(tlist[t], &pool)) {
				fprintf(stderr, "bench-gemm: cannot start %d threads\n", tlist[t]);
				return 1;
			}
			g = gemm_gflops(isa, pool, M, N, K, unpacked, transB, seconds);
			if (valid_windows)
				printf("   %16.1f  %5.1f%%", g, 100.0 * g / (pk * tlist[t]));
			else
				printf("   %16s  %6s", "busy", "-");
			fflush(stdout);
			cpu_pool_destroy(pool);
		}
		printf("\n");
	}
	free(list);
	return 0;
}
