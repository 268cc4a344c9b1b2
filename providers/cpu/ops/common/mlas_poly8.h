/*
 * mlas_poly8: the polynomial of MLAS's exp kernels on 8 lanes (AVX2 +
 * FMA), p(r) ~ exp(r) for |r| <= ln2 / 2 by FMAs in MLAS's order, shared by
 * the two exps whose bits must be ONNX Runtime's on a CPU without AVX-512:
 * Exp's (fuse_tail.c, vm_exp_mlas's range reduction and scaling) and
 * Softmax's sum-exp (softmax.c, its FMA3 kernel's).  Include it inside an
 * x86 gcc block that has included <immintrin.h>.
 */
#ifndef ORTMK_CPU_MLAS_POLY8_H
#define ORTMK_CPU_MLAS_POLY8_H

__attribute__((target("avx2,fma"))) static inline __m256 mlas_exp_poly8(__m256 r)
{
	__m256 p = _mm256_fmadd_ps(_mm256_set1_ps(0x1.694000p-10f), r,
				   _mm256_set1_ps(0x1.125edcp-7f));

	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0x1.555b5ap-5f));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0x1.555450p-3f));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0x1.fffff6p-2f));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
	return _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
}

#endif
