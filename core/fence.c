/*
 * fence: an environment's fence words (docs/DEVICE.md).  Fences are
 * shm_fence words in one per-environment segment the core shares with every
 * provider that signals them; a slot is a word and its reference count (a
 * stream owns one as its timeline, a pending copy or an ortmk_fence holds a
 * reference).  When a provider process fails, env.c calls
 * core_dev_proc_lost(), which marks the words its streams had not reached
 * failed, so every waiter wakes with ORTMK_ERR_PROVIDER_DIED.  Part of the
 * process layer with env.c: it reads the streams' records that device.c
 * makes, it never calls up into device.c.
 */
#include <string.h>

#include "core.h"

shm_fence *core_dev_fence(ortmk_env *env, int slot)
{
	return (shm_fence *)((uint8_t *)env->fences.base + (size_t)slot * IPC_FENCE_ALIGN);
}

/* A free slot with one reference, its fence at 0; -1 when none. */
int core_dev_slot_new(ortmk_env *env)
{
	int slot = -1;

	pthread_mutex_lock(&env->dev_lock);
	if (!env->fences.base &&
	    shm_segment_create("ortmk-fences", CORE_FENCE_SLOTS * IPC_FENCE_ALIGN,
			       core_env_next_id(env), &env->fences))
		memset(&env->fences, 0, sizeof(env->fences));
	for (int i = 0; env->fences.base && i < CORE_FENCE_SLOTS; i++) {
		if (!env->fence_refs[i]) {
			env->fence_refs[i] = 1;
			shm_fence_init(core_dev_fence(env, i), 0);
			slot = i;
			break;
		}
	}
	pthread_mutex_unlock(&env->dev_lock);
	return slot;
}

void core_dev_slot_get(ortmk_env *env, int slot)
{
	pthread_mutex_lock(&env->dev_lock);
	env->fence_refs[slot]++;
	pthread_mutex_unlock(&env->dev_lock);
}

void core_dev_slot_put(ortmk_env *env, int slot)
{
	if (slot < 0)
		return;
	pthread_mutex_lock(&env->dev_lock);
	if (env->fence_refs[slot])
		env->fence_refs[slot]--;
	pthread_mutex_unlock(&env->dev_lock);
}

void core_dev_proc_lost(core_ep *ep, const core_proc *p)
{
	ortmk_env *env = ep->env;

	pthread_mutex_lock(&env->dev_lock);
	for (ortmk_stream *st = env->streams; st; st = st->next) {
		shm_fence *f;

		if (st->ep != ep || st->exec != p->exec_id || st->slot < 0)
			continue;
		f = core_dev_fence(env, st->slot);
		if ((shm_fence_read(f) & ~SHM_FENCE_FAILED) < st->issued)
			shm_fence_fail(f);
	}
	pthread_mutex_unlock(&env->dev_lock);
}
