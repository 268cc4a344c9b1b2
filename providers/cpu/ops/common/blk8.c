/*
 * blk8: NCHW <-> NCHWc8 (blk8.h).
 */
#include <string.h>

#include "blk8.h"
#include "par.h"
#include "vfloat.h"

#define CB CPU_BLK8

typedef struct reorder_arg {
	const float *src;
	float *dst;
	const float *add;    /* to plain: added on the way (dst's layout), or NULL */
	int64_t blocks, P;   /* per image: C / 8 blocks of P pixels */
	int to_blocked;
} reorder_arg;

/* Blocks [b0, b1) (image-major) through 8 x 8 transposes. */
CPU_MULTIVERSION
static void reorder_range(void *arg, int64_t b0, int64_t b1, int member)
{
	const reorder_arg *a = arg;
	int64_t P = a->P;

	(void)member;
	for (int64_t b = b0; b < b1; b++) {
		const float *s = a->src + b * CB * P;
		float *d = a->dst + b * CB * P;
		int64_t p = 0;

		for (; p + 8 <= P; p += 8) {
			vf8 v[8];

			for (int k = 0; k < 8; k++)
				v[k] = a->to_blocked ? vf_load(s + k * P + p) : vf_load(s + (p + k) * CB);
			vf_transpose8(v);
			for (int k = 0; k < 8; k++) {
				if (a->add)
					v[k] += vf_load(a->add + b * CB * P + k * P + p);
				vf_store(a->to_blocked ? d + (p + k) * CB : d + k * P + p, v[k]);
			}
		}
		for (; p < P; p++)
			for (int k = 0; k < CB; k++) {
				if (a->to_blocked)
					d[p * CB + k] = s[k * P + p];
				else
					d[k * P + p] = s[p * CB + k] +
						       (a->add ? a->add[b * CB * P + k * P + p] : 0.0f);
			}
	}
}

void cpu_blk8_reorder(cpu_ctx *ctx, const float *src, float *dst, int64_t N, int64_t C,
		      int64_t P, int to_blocked)
{
	reorder_arg a = {src, dst, NULL, C / CB, P, to_blocked};

	/* ~0.25 ns a float each way */
	cpu_par_for(ctx, N * a.blocks, 0.5 * (double)(CB * P), 1, reorder_range, &a);
}

void cpu_blk8_unblock_add(cpu_ctx *ctx, const float *src, float *dst, const float *add,
			  int64_t N, int64_t C, int64_t P)
{
	reorder_arg a = {src, dst, add, C / CB, P, 0};

	cpu_par_for(ctx, N * a.blocks, 0.7 * (double)(CB * P), 1, reorder_range, &a);
}

int cpu_blk8_block_inplace(cpu_ctx *ctx, cpu_tensor *t)
{
	int64_t P = 1, n = cpu_numel(t);
	float *tmp;

	if (n == 0)
		return 0;
	if (t->rank < 2 || t->dims[1] % CB)
		return cpu_fail(ctx, CPU_E_INTERNAL, "a channel-blocked value of %lld channels",
				t->rank < 2 ? 0LL : (long long)t->dims[1]);
	for (int i = 2; i < t->rank; i++)
		P *= t->dims[i];
	if (!(tmp = cpu_scratch(ctx, (size_t)n * sizeof(float))))
		return CPU_E_NOMEM;
	memcpy(tmp, t->data, (size_t)n * sizeof(float));
	cpu_blk8_reorder(ctx, tmp, t->data, t->dims[0], t->dims[1], P, 1);
	return 0;
}


int cpu_blk8_plain(cpu_ctx *ctx, const cpu_tensor *t, cpu_tensor *plain)
{
	int64_t P = 1;

	*plain = *t;
	for (int i = 2; i < t->rank; i++)
		P *= t->dims[i];
	if (P <= 1 || cpu_numel(t) == 0)
		return 0;
	if (t->rank < 2 || t->dims[1] % CB)
		return cpu_fail(ctx, CPU_E_INTERNAL, "a channel-blocked value of %lld channels",
				t->rank < 2 ? 0LL : (long long)t->dims[1]);
	if (!(plain->data = cpu_scratch(ctx, t->nbytes + 1)))
		return CPU_E_NOMEM;
	cpu_blk8_reorder(ctx, t->data, plain->data, t->dims[0], t->dims[1], P, 0);
	return 0;
}
