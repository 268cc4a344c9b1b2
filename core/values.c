/*
 * values: every ortmk_value_* of the public API.  A host value lives in its
 * own sealed memfd segment so a provider maps it instead of copying; the
 * segments of destroyed values are pooled for the next ones.  String
 * tensors, sequences and empty optionals keep their bytes in
 * ipc/value_codec.h's layout in that segment, so a provider reads them in
 * place exactly like a numeric tensor.  A device value (device.c) is a
 * buffer in a provider's memory; destroying one hands it back there.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "value_codec.h"

/* ---- host values ---------------------------------------------------------- */

/* A pooled segment at least `n` bytes and not much larger; 1 if found. */
static int pool_take(ortmk_env *env, size_t n, shm_segment *out)
{
	int found = 0;

	pthread_mutex_lock(&env->lock);
	for (int i = 0; i < env->n_pool; i++) {
		size_t sz = env->pool[i].size;

		if (sz >= n && sz <= 2 * n + 4096) {
			*out = env->pool[i];
			env->pool[i] = env->pool[--env->n_pool];
			env->pool_bytes -= sz;
			found = 1;
			break;
		}
	}
	pthread_mutex_unlock(&env->lock);
	return found;
}

/* Keeps a destroyed value's segment for reuse; 1 if kept. */
static int pool_put(ortmk_env *env, shm_segment *seg)
{
	int kept = 0;

	pthread_mutex_lock(&env->lock);
	if (env->n_pool < CORE_VALUE_POOL && env->pool_bytes + seg->size <= CORE_VALUE_POOL_BYTES) {
		env->pool[env->n_pool++] = *seg;
		env->pool_bytes += seg->size;
		kept = 1;
	}
	pthread_mutex_unlock(&env->lock);
	return kept;
}

void core_value_pool_drain(ortmk_env *env)
{
	while (env->n_pool > 0)
		shm_segment_destroy(&env->pool[--env->n_pool]);
	env->pool_bytes = 0;
}

/* MemAvailable of /proc/meminfo in bytes; 0 when it cannot be read. */
static uint64_t mem_available(void)
{
	FILE *f = fopen("/proc/meminfo", "r");
	char line[128];
	unsigned long long kb = 0;

	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1)
			break;
	if (f)
		fclose(f);
	return (uint64_t)kb << 10;
}

/* Small requests are not worth reading /proc for: only those of 64 MiB and
 * more are checked against the available memory. */
ortmk_status core_mem_check(const ortmk_env *env, uint64_t bytes, const char *what)
{
	uint64_t limit = env->mem_limit;

	if (!limit && bytes < ((uint64_t)64 << 20))
		return ORTMK_OK;
	if (!limit && !(limit = mem_available()))
		return ORTMK_OK;
	if (bytes <= limit)
		return ORTMK_OK;
	return core_fail(ORTMK_ERR_NO_MEMORY, "%s needs %llu MiB of shared memory, more than the %s (%llu MiB)",
			 what, (unsigned long long)(bytes >> 20),
			 env->mem_limit ? "memory limit (ortmk_env_options.memory_limit_mb)" :
			 "memory available on this machine", (unsigned long long)(limit >> 20));
}

ortmk_status core_value_new(ortmk_env *env, int32_t dtype, const int64_t *dims,
			    size_t rank, ortmk_value **out)
{
	size_t esz = graph_dtype_size(dtype), n = esz;
	ortmk_value *v;
	int rc;

	if (!env || !out || (rank && !dims) || rank > GRAPH_MAX_RANK)
		return core_fail(ORTMK_ERR_INVALID_ARGUMENT, "value: bad arguments");
	if (!esz)
		return core_fail(ORTMK_ERR_INVALID_ARGUMENT, "value: unsupported dtype %d", dtype);
	for (size_t i = 0; i < rank; i++) {
		if (dims[i] < 0 || (dims[i] && n > (SIZE_MAX >> 2) / (size_t)dims[i]))
			return core_fail(ORTMK_ERR_INVALID_ARGUMENT, "value: bad dim %lld",
					 (long long)dims[i]);
		n *= (size_t)dims[i];
	}
	if (core_mem_check(env, n, "value") != ORTMK_OK)
		return ORTMK_ERR_NO_MEMORY;
	v = calloc(1, sizeof(*v));
	if (!v)
		return core_fail(ORTMK_ERR_NO_MEMORY, "out of memory");
	rc = pool_take(env, n ? n : 1, &v->seg) ? 0 :
		shm_segment_create("ortmk-value", n ? n : 1, core_env_next_id(env), &v->seg);
	if (rc) {
		free(v);
		return core_fail(ORTMK_ERR_NO_MEMORY, "value: cannot create %zu bytes of shared memory: %s",
				 n, strerror(-rc));
	}
	v->env = env;
	v->pend.slot = -1;
	v->dtype = dtype;
	v->rank = rank;
	if (rank)
		memcpy(v->dims, dims, rank * sizeof(int64_t));
	v->nbytes = n;
	*out = v;
	return ORTMK_OK;
}

ortmk_status ortmk_value_create(ortmk_env *env, ortmk_dtype dtype, const int64_t *dims,
				size_t rank, ortmk_value **out)
{
	return core_value_new(env, (int32_t)dtype, dims, rank, out);
}

ortmk_status ortmk_value_create_copy(ortmk_env *env, ortmk_dtype dtype, const int64_t *dims,
				     size_t rank, const void *data, size_t nbytes,
				     ortmk_value **out)
{
	ortmk_status st = core_value_new(env, (int32_t)dtype, dims, rank, out);

	if (st)
		return st;
	if (nbytes != (*out)->nbytes || (nbytes && !data)) {
		size_t want = (*out)->nbytes;

		ortmk_value_destroy(*out);
		*out = NULL;
		return core_fail(ORTMK_ERR_INVALID_ARGUMENT,
				 "value: %zu bytes given for a shape of %zu bytes", nbytes, want);
	}
	if (nbytes)
		memcpy((*out)->seg.base, data, nbytes);
	return ORTMK_OK;
}

void ortmk_value_destroy(ortmk_value *v)
{
	if (!v)
		return;
	if (v->dev) {
		core_dev_value_free(v);
		return;
	}
	/* A copy into it may still be running. */
	if (v->pend.slot >= 0) {
		core_dev_pend_wait(v->env, &v->pend, shm_now_ns() + (uint64_t)CORE_CONTROL_MS * 1000000u);
		core_dev_slot_put(v->env, v->pend.slot);
	}
	/* A pooled segment stays mapped in the providers; its next value
	 * overwrites every byte it uses before a provider reads it. */
	if (v->env && pool_put(v->env, &v->seg)) {
		free(v);
		return;
	}
	/* Providers that mapped the segment are told to drop it. */
	for (int i = 0; v->env && i < v->env->n_eps; i++) {
		core_ep *ep = v->env->eps[i];

		pthread_mutex_lock(&ep->lock);
		if (ipc_segtab_find(&ep->p.segs, v->seg.id))
			core_ep_release_segment(ep, v->seg.id);
		pthread_mutex_unlock(&ep->lock);
	}
	shm_segment_destroy(&v->seg);
	free(v);
}

void *ortmk_value_data(ortmk_value *v)
{
	return v ? v->seg.base : NULL;
}

const void *ortmk_value_data_const(const ortmk_value *v)
{
	return v ? v->seg.base : NULL;
}

size_t ortmk_value_nbytes(const ortmk_value *v)
{
	return v ? v->nbytes : 0;
}

ortmk_dtype ortmk_value_dtype(const ortmk_value *v)
{
	/* A sequence of maps has no element dtype to give (its maps say theirs). */
	if (!v || (v->kind == ORTMK_VALUE_SEQUENCE && v->dtype == IPC_MAP_DTYPE))
		return ORTMK_UNDEFINED;
	return (ortmk_dtype)v->dtype;
}

size_t ortmk_value_rank(const ortmk_value *v)
{
	return v ? v->rank : 0;
}

const int64_t *ortmk_value_dims(const ortmk_value *v)
{
	return v ? v->dims : NULL;
}

/* ---- strings, sequences, optionals ------------------------------------------ */

ortmk_value_kind ortmk_value_kind_of(const ortmk_value *v)
{
	return v ? v->kind : ORTMK_VALUE_NONE;
}

static int64_t numel(const int64_t *dims, size_t rank)
{
	return ipc_numel((int)rank, dims);
}

ortmk_status core_value_new_blob(ortmk_env *env, ortmk_value_kind kind, int32_t dtype,
				 const int64_t *dims, size_t rank, uint64_t nbytes,
				 ortmk_value **out)
{
	/* Borrow core_value_new's checks and pooling with a byte tensor. */
	int64_t n = (int64_t)nbytes;
	ortmk_status st = core_value_new(env, ORTMK_UINT8, &n, 1, out);

	if (st)
		return st;
	(*out)->kind = kind;
	(*out)->dtype = dtype;
	(*out)->rank = rank;
	if (rank)
		memcpy((*out)->dims, dims, rank * sizeof(int64_t));
	return ORTMK_OK;
}

int core_value_blob_ok(ortmk_value_kind kind, int32_t dtype, const int64_t *dims, size_t rank,
		       const void *data, uint64_t nbytes)
{
	uint32_t count;
	const ipc_seq_entry *e;
	ipc_map_view m;
	int64_t n;

	switch (kind) {
	case ORTMK_VALUE_NONE:
		return 1;
	case ORTMK_VALUE_SEQUENCE:
		return ipc_seq_check(data, nbytes, &count, &e) == 0;
	case ORTMK_VALUE_MAP:
		return ipc_map_check(data, nbytes, &m) == 0 && m.value_dtype == dtype;
	default:
		n = numel(dims, rank);
		if (n < 0)
			return 0;
		if (dtype == ORTMK_STRING)
			return ipc_strings_decode(data, nbytes, (size_t)n, NULL) == 0;
		return graph_dtype_size(dtype) * (uint64_t)n == nbytes;
	}
}

ortmk_status ortmk_value_create_strings(ortmk_env *env, const int64_t *dims, size_t rank,
					const char *const *strs, ortmk_value **out)
{
	int64_t n = dims || !rank ? numel(dims, rank) : -1;
	ortmk_status st;

	if (!env || !out || n < 0 || (n && !strs) || rank > GRAPH_MAX_RANK)
		return core_fail(ORTMK_ERR_INVALID_ARGUMENT, "strings: bad arguments");
	st = core_value_new_blob(env, ORTMK_VALUE_TENSOR, ORTMK_STRING, dims, rank,
				 ipc_strings_size((size_t)n, strs), out);
	if (st)
		return st;
	ipc_strings_encode((*out)->seg.base, (*out)->nbytes, (size_t)n, strs);
	return ORTMK_OK;
}

const char *ortmk_value_string(const ortmk_value *v, size_t i)
{
	uint64_t count, off;
	const uint8_t *b;

	if (!v || v->kind != ORTMK_VALUE_TENSOR || v->dtype != ORTMK_STRING)
		return NULL;
	b = v->seg.base;
	memcpy(&count, b, 8);
	if (i >= count)
		return NULL;
	memcpy(&off, b + 8 + 8 * i, 8);
	return (const char *)b + 8 + 8 * (count + 1) + off;
}

static uint64_t align64(uint64_t x)
{
	return (x + 63) & ~(uint64_t)63;
}

ortmk_status ortmk_value_create_sequence(ortmk_env *env, ortmk_dtype elem_dtype,
					 const ortmk_value *const *items, size_t n,
					 ortmk_value **out)
{
	uint64_t total = ipc_seq_header_size(n);
	ipc_seq_header h = {IPC_SEQ_MAGIC, (uint32_t)n, (int32_t)elem_dtype, 0};
	ortmk_status st;
	uint8_t *b;

	if (!env || !out || (n && !items) || n > (1u << 24))
		return core_fail(ORTMK_ERR_INVALID_ARGUMENT, "sequence: bad arguments");
	for (size_t i = 0; i < n; i++) {
		if (items[i] && items[i]->dev)
			return core_fail(ORTMK_ERR_INVALID_ARGUMENT,
					 "sequence: element %zu is in '%s' memory; copy it to a host value first",
					 i, items[i]->dev->name);
		if (!items[i] || items[i]->kind != ORTMK_VALUE_TENSOR ||
		    items[i]->dtype != (int32_t)elem_dtype)
			return core_fail(ORTMK_ERR_INVALID_ARGUMENT,
					 "sequence: element %zu is not a %s tensor", i,
					 graph_dtype_name((int32_t)elem_dtype));
		total = align64(total) + items[i]->nbytes;
	}
	st = core_value_new_blob(env, ORTMK_VALUE_SEQUENCE, (int32_t)elem_dtype, NULL, 0, total, out);
	if (st)
		return st;
	b = (*out)->seg.base;
	memcpy(b, &h, sizeof(h));
	total = ipc_seq_header_size(n);
	for (size_t i = 0; i < n; i++) {
		ipc_seq_entry e = {.dtype = items[i]->dtype, .rank = (int32_t)items[i]->rank};

		memcpy(e.dims, items[i]->dims, items[i]->rank * sizeof(int64_t));
		e.offset = align64(total);
		e.nbytes = items[i]->nbytes;
		memcpy(b + e.offset, items[i]->seg.base, e.nbytes);
		memcpy(b + sizeof(h) + i * sizeof(e), &e, sizeof(e));
		total = e.offset + e.nbytes;
	}
	return ORTMK_OK;
}

size_t ortmk_value_sequence_length(const ortmk_value *v)
{
	ipc_seq_header h;

	if (!v || v->kind != ORTMK_VALUE_SEQUENCE || v->nbytes < sizeof(h))
		return 0;
	memcpy(&h, v->seg.base, sizeof(h));
	return h.count;
}

ortmk_status ortmk_value_sequence_get(const ortmk_value *v, size_t i, ortmk_value **out)
{
	const ipc_seq_entry *e;
	uint32_t count;
	ortmk_status st;

	if (!v || !out || v->kind != ORTMK_VALUE_SEQUENCE ||
	    ipc_seq_check(v->seg.base, v->nbytes, &count, &e) || i >= count)
		return core_fail(ORTMK_ERR_INVALID_ARGUMENT, "sequence: no element %zu", i);
	/* A map element keeps its blob as it is; its dtype is its values'. */
	if (e[i].dtype == IPC_MAP_DTYPE) {
		ipc_map_view m;

		ipc_map_check((const uint8_t *)v->seg.base + e[i].offset, e[i].nbytes, &m);
		st = core_value_new_blob(v->env, ORTMK_VALUE_MAP, m.value_dtype, e[i].dims, 1,
					 e[i].nbytes, out);
	} else {
		st = core_value_new_blob(v->env, ORTMK_VALUE_TENSOR, e[i].dtype, e[i].dims,
					 (size_t)e[i].rank, e[i].nbytes, out);
	}
	if (st == ORTMK_OK)
		memcpy((*out)->seg.base, (const uint8_t *)v->seg.base + e[i].offset, e[i].nbytes);
	return st;
}

ortmk_status ortmk_value_create_none(ortmk_env *env, ortmk_value **out)
{
	return core_value_new_blob(env, ORTMK_VALUE_NONE, 0, NULL, 0, 0, out);
}

/* ---- device values --------------------------------------------------------- */

ortmk_status ortmk_value_create_on(ortmk_env *env, const char *provider, ortmk_dtype dtype,
				   const int64_t *dims, size_t rank, ortmk_value **out)
{
	core_ep *ep;
	ortmk_status st;

	core_clear_error();
	if (!env || !provider || !out)
		return core_fail(ORTMK_ERR_INVALID_ARGUMENT, "value_create_on: NULL argument");
	*out = NULL;
	if (strcmp(provider, "host") == 0)
		return core_value_new(env, (int32_t)dtype, dims, rank, out);
	st = core_env_get_ep(env, provider, &ep);
	if (st)
		return st;
	pthread_mutex_lock(&ep->lock);
	st = core_ep_ensure(ep);
	if (st == ORTMK_OK && !ep->p.device_memory) {
		pthread_mutex_unlock(&ep->lock);
		return core_value_new(env, (int32_t)dtype, dims, rank, out);
	}
	if (st == ORTMK_OK)
		st = core_dev_value_alloc(ep, (int32_t)dtype, dims, rank, out);
	pthread_mutex_unlock(&ep->lock);
	return st;
}

const char *ortmk_value_location(const ortmk_value *v)
{
	if (!v)
		return NULL;
	return v->dev ? v->dev->name : "host";
}
