/*
 * vk_f16: float16 <-> float32 on the host, for devices without 16-bit
 * storage (vk_dev.f16 = 0): there float16 tensors live on the device as
 * float32, widened when they are staged for upload and narrowed when they
 * come back (vk_record.c), and float16 weights are widened once at load.
 * IEEE binary16 through the compiler's _Float16 (round to nearest even,
 * subnormals, infinities and NaNs kept).
 */
#include "vk_ops.h"

void vk_f16_widen(float *dst, const void *src, size_t n)
{
	const _Float16 *s = src;

	for (size_t i = 0; i < n; i++)
		dst[i] = (float)s[i];
}

void vk_f16_narrow(void *dst, const float *src, size_t n)
{
	_Float16 *d = dst;

	for (size_t i = 0; i < n; i++)
		d[i] = (_Float16)src[i];
}
