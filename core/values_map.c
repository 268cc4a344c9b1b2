/*
 * values_map: the public accessors of map values (ortmk.h, "Maps").  A map
 * is what ortmk_value_sequence_get gives for an element of a sequence of
 * maps (ai.onnx.ml ZipMap's output); its bytes are ipc/value_codec.h's map
 * blob, checked again here before any pointer is made from it.
 */
#include <string.h>

#include "core.h"
#include "value_codec.h"

/* v's map, checked; 0 when v is not a (well-formed) map. */
static int map_of(const ortmk_value *v, ipc_map_view *m)
{
	return v && v->kind == ORTMK_VALUE_MAP && !v->dev &&
	       ipc_map_check(v->seg.base, v->nbytes, m) == 0;
}

ortmk_status ortmk_value_map_info(const ortmk_value *v, ortmk_map_info *out)
{
	ipc_map_view m;
	ortmk_map_info full = {.struct_size = sizeof(full)};

	if (!out)
		return core_fail(ORTMK_ERR_INVALID_ARGUMENT, "map info: NULL out");
	if (!map_of(v, &m))
		return core_fail(ORTMK_ERR_INVALID_ARGUMENT, "map info: the value is not a map");
	full.key_dtype = (ortmk_dtype)m.key_dtype;
	full.value_dtype = (ortmk_dtype)m.value_dtype;
	full.count = (size_t)m.count;
	return core_out_struct(out, &full, sizeof(full), "map info");
}

size_t ortmk_value_map_count(const ortmk_value *v)
{
	ipc_map_view m;

	return map_of(v, &m) ? (size_t)m.count : 0;
}

const int64_t *ortmk_value_map_int64_keys(const ortmk_value *v)
{
	ipc_map_view m;

	if (!map_of(v, &m) || m.key_dtype != IPC_INT64_DTYPE)
		return NULL;
	return m.keys;
}

const char *ortmk_value_map_string_key(const ortmk_value *v, size_t i)
{
	ipc_map_view m;
	const uint8_t *k;
	uint64_t off;

	if (!map_of(v, &m) || m.key_dtype != IPC_STRING_DTYPE || i >= m.count)
		return NULL;
	k = m.keys;
	memcpy(&off, k + 8 + 8 * i, 8);
	return (const char *)k + 8 + 8 * (m.count + 1) + off;
}

const void *ortmk_value_map_values(const ortmk_value *v)
{
	ipc_map_view m;

	return map_of(v, &m) && m.count ? m.values : NULL;
}
