/*
 * ortmk: an ONNX inference runtime whose execution providers run as separate
 * processes.  This is the whole public C API.
 *
 * Conventions
 *  - Handles are opaque; every `*_create` has a `*_destroy` (NULL is a no-op).
 *  - Structs the library fills or reads start with `struct_size`, which the
 *    caller sets to sizeof(the struct) as its header declares it: a library
 *    of a later version fills (or reads) only the fields that size covers,
 *    so a program built against this header keeps working.
 *  - Every call that can fail returns ortmk_status (ORTMK_OK == 0) and sets a
 *    thread-local one-line message readable with ortmk_last_error().
 *  - Out-parameters come last.  Strings returned by the library stay valid
 *    until the handle they came from is destroyed.
 *  - Tensors are dense and row-major; element types use ONNX's numbering
 *    (ORTMK_FLOAT == 1, ORTMK_INT64 == 7, ...).
 *
 * Threads
 *  - An environment, a session and a value may be used from any thread.
 *  - ortmk_session_run / ortmk_session_run_binding may be called on one
 *    session from several threads at once, and several sessions may share
 *    a provider process: up to "max_concurrent_runs" runs of a session
 *    are in flight at once, each on a thread of the provider (runs with
 *    device values or a stream take turns per provider).
 *  - Creating and destroying sessions and values is safe concurrently with
 *    runs of other sessions.  Destroying a handle while another thread uses
 *    it is not.
 *  - An io binding, a stream and a session options object belong to one
 *    thread at a time (the caller serializes).
 *  - ortmk_last_error() is per thread.
 *
 * Minimal use:
 *   ortmk_env *env; ortmk_session *s;
 *   ortmk_env_create(&env);
 *   ortmk_session_create(env, "model.onnx", NULL, &s);
 *   ortmk_value *in, *out;
 *   int64_t shape[2] = {1, 16};
 *   ortmk_value_create(env, ORTMK_FLOAT, shape, 2, &in);
 *   ... fill ortmk_value_data(in) ...
 *   const char *names[] = {"x"}; const char *onames[] = {"y"};
 *   ortmk_session_run(s, names, (const ortmk_value *const[]){in}, 1, onames, 1, &out);
 */
#ifndef ORTMK_H
#define ORTMK_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The version of this header.  ortmk_version() says which library was
 * loaded; ORTMK_API_VERSION grows by one whenever a declaration here
 * changes or is added (ortmk_api_version() of the library must be at least
 * the one a program was built with). */
#define ORTMK_VERSION_MAJOR 0
#define ORTMK_VERSION_MINOR 2
#define ORTMK_VERSION_PATCH 0
#define ORTMK_VERSION_STRING "0.2.0"
#define ORTMK_API_VERSION 3

/* libortmk is built with hidden visibility; these are its exports. */
#pragma GCC visibility push(default)

typedef enum ortmk_status {
	ORTMK_OK = 0,
	ORTMK_ERR_INVALID_ARGUMENT = 1, /* a NULL handle, bad name, bad option */
	ORTMK_ERR_MODEL = 2,            /* malformed model, bad external data */
	ORTMK_ERR_NOT_IMPLEMENTED = 3,  /* an op/dtype no provider implements */
	ORTMK_ERR_INPUT = 4,            /* wrong input name, dtype or shape */
	ORTMK_ERR_PROVIDER_DIED = 5,    /* the provider process died */
	ORTMK_ERR_PROVIDER = 6,         /* the provider reported an error */
	ORTMK_ERR_PROTOCOL = 7,         /* a malformed or unexpected message */
	ORTMK_ERR_TIMEOUT = 8,          /* a deadline passed */
	ORTMK_ERR_NO_MEMORY = 9,
	ORTMK_ERR_IO = 10,              /* a file or system call failed */
	ORTMK_ERR_INTERNAL = 11,
	ORTMK_ERR_UNAVAILABLE = 12,     /* a provider asked for with strict
	                                   placement cannot run here */
	ORTMK_ERR_CANCELLED = 13,       /* ortmk_run_options_set_terminate */
} ortmk_status;

typedef enum ortmk_dtype {
	ORTMK_UNDEFINED = 0, ORTMK_FLOAT = 1, ORTMK_UINT8 = 2, ORTMK_INT8 = 3,
	ORTMK_UINT16 = 4, ORTMK_INT16 = 5, ORTMK_INT32 = 6, ORTMK_INT64 = 7,
	ORTMK_STRING = 8, ORTMK_BOOL = 9, ORTMK_FLOAT16 = 10, ORTMK_DOUBLE = 11,
	ORTMK_UINT32 = 12, ORTMK_UINT64 = 13, ORTMK_BFLOAT16 = 16,
} ortmk_dtype;

/* Values other than numeric tensors (ONNX string tensors, sequences,
 * optionals, maps).  A numeric or string tensor is ORTMK_VALUE_TENSOR. */
typedef enum ortmk_value_kind {
	ORTMK_VALUE_TENSOR = 0,
	ORTMK_VALUE_SEQUENCE = 1,
	ORTMK_VALUE_NONE = 2,          /* an optional holding nothing */
	ORTMK_VALUE_MAP = 3,           /* an element of a sequence of maps */
} ortmk_value_kind;

typedef struct ortmk_env ortmk_env;
typedef struct ortmk_session_options ortmk_session_options;
typedef struct ortmk_session ortmk_session;
typedef struct ortmk_value ortmk_value;

/* "0.2.0": the version of the loaded library. */
const char *ortmk_version(void);
/* The ORTMK_API_VERSION the loaded library was built with. */
int ortmk_api_version(void);

/* The message of the last failed call on this thread ("" when none). */
const char *ortmk_last_error(void);
const char *ortmk_status_name(ortmk_status s);
/* Bytes per element; 0 for strings and unknown types. */
size_t ortmk_dtype_size(ortmk_dtype t);
const char *ortmk_dtype_name(ortmk_dtype t);

/* An environment owns the provider processes and the private directory
 * their sockets live in.
 *
 * Provider binaries (ort-ep-<name>) are looked up, first found wins, in:
 *  1. $ORTMK_EP_DIR (as <dir>/ort-ep-<name> or <dir>/<name>/ort-ep-<name>);
 *  2. relative to the file the library's code was loaded from (dladdr):
 *     an installed libortmk in <prefix>/<libdir> uses
 *     <prefix>/<libexecdir>/ortmk; a libortmk in a build tree uses that
 *     build tree's providers/;
 *  3. the `_providers` directory beside that file (the Python package's
 *     extension module, which holds the library's code itself).
 * No absolute path is compiled in. */
ortmk_status ortmk_env_create(ortmk_env **out);
void ortmk_env_destroy(ortmk_env *env);

/* Log severities, ONNX Runtime's numbering. */
typedef enum ortmk_log_severity {
	ORTMK_LOG_VERBOSE = 0, ORTMK_LOG_INFO = 1, ORTMK_LOG_WARNING = 2,
	ORTMK_LOG_ERROR = 3, ORTMK_LOG_FATAL = 4,
} ortmk_log_severity;
/* Receives one line (no newline) at a time, from whatever thread logs it;
 * must not call back into ortmk. */
typedef void (*ortmk_log_fn)(void *user, ortmk_log_severity severity, const char *line);

typedef struct ortmk_env_options {
	size_t struct_size;           /* sizeof(ortmk_env_options) */
	/* Lines at least this severe are reported (default
	 * ORTMK_LOG_WARNING; the ORTMK_LOG variable overrides it). */
	ortmk_log_severity log_severity;
	ortmk_log_fn log_fn;          /* NULL: one line per message on stderr */
	void *log_user;
	/* The most shared memory one value, weight segment or run's memory
	 * plan may take, in MiB: larger ones fail with ORTMK_ERR_NO_MEMORY
	 * naming the size, before anything is allocated.  0 (the default):
	 * the machine's available memory (MemAvailable) at that moment. */
	size_t memory_limit_mb;
	/* 1: provider processes run without their system-call filter (no
	 * seccomp, core dumps and debuggers allowed), for debugging; the same
	 * as ORTMK_SANDBOX=0 in the environment.  0 (the default): each
	 * provider is confined once it has started (docs/SECURITY.md). */
	int disable_sandbox;
} ortmk_env_options;

/* ortmk_env_create with options (NULL: the defaults).  The log settings
 * are the process's, as in ONNX Runtime: the core's lines go to the
 * callback and severity of the environment created last with options,
 * until it is destroyed.  Provider processes write their own lines to
 * stderr, filtered by the same severity. */
ortmk_status ortmk_env_create_with_options(const ortmk_env_options *opts, ortmk_env **out);

/* The providers this installation can start ("cpu", "vulkan", "cuda"):
 * their binaries are found as above.  Whether a device is present is only
 * known once one starts (a session warns, or fails with strict placement).
 * Writes up to cap names (static strings) and returns how many there are. */
size_t ortmk_available_providers(const char **names, size_t cap);

/* Session options.  Keys:
 *   "providers"     comma-separated list in priority order ("cpu")
 *   "threads"       intra-op threads per provider (default: cores); runs
 *                   in flight at once share them (docs/ARCHITECTURE.md)
 *   "max_concurrent_runs"  runs of this session in flight at once
 *                   (1..64, default 4); more wait for one to end
 *   "run_timeout_ms" deadline of one run (default 0: none); a provider past
 *                   it is killed (and restarted on next use)
 *   "retry"         "1": a run that failed because its provider died, hung
 *                   or broke the protocol is run once more, transparently
 *   "save_prepacked" "1": write the weights kernels pre-pack to a cache
 *                   file beside the model (MODEL.<provider><step>.ortmk-prepack),
 *                   used in place by later sessions (docs/PREPACK.md)
 *   "crash_loop_n", "crash_loop_window_ms"  a provider failing n times
 *                   within the window (default 5 in 10000 ms) is disabled
 *                   for the session, which moves its nodes to the next
 *                   provider of its list (cpu last)
 *   "graph_optimization_level"  "disable" (or "0"): every node runs as the
 *                   model has it; "basic" ("1"): constants folded;
 *                   "extended" ("2") and "all" ("99", the default): also
 *                   fusions (Conv+activation, attention, ...)
 *   "enable_profiling" "1": when the process is traced (ORTMK_TRACE,
 *                   ort-trace record), providers time every node of every
 *                   run (the CPU provider; nodes inside If/Loop/Scan bodies
 *                   too) and the core writes the spans, and each run's wall
 *                   time, to the trace (docs/TRACE.md, "Profiling");
 *                   untraced, nothing is timed
 *   "strict_placement" "1": a provider of "providers" that cannot run here
 *                   (no binary, no device) fails session creation with
 *                   ORTMK_ERR_UNAVAILABLE; "0" (default): a warning is
 *                   logged and its nodes go to the next provider
 */
ortmk_status ortmk_session_options_create(ortmk_session_options **out);
void ortmk_session_options_destroy(ortmk_session_options *o);
ortmk_status ortmk_session_options_set(ortmk_session_options *o, const char *key,
				       const char *value);

/* Loads, checks, partitions and compiles a model (opts may be NULL).
 * Thread-safe: sessions of one env may be created (and destroyed) while
 * other threads run others; destroying a session while a thread runs it is
 * the caller's error. */
ortmk_status ortmk_session_create(ortmk_env *env, const char *model_path,
				  const ortmk_session_options *opts,
				  ortmk_session **out);
/* The same from a serialized model in memory (copied; the caller may free
 * it on return).  External data is resolved against external_data_dir,
 * with the same checks as beside a model file; NULL refuses external data.
 * "save_prepacked" needs a model path and is refused here. */
ortmk_status ortmk_session_create_from_buffer(ortmk_env *env, const void *data, size_t size,
					      const char *external_data_dir,
					      const ortmk_session_options *opts,
					      ortmk_session **out);
void ortmk_session_destroy(ortmk_session *s);

/* Model signature.  A dim of -1 is dynamic (named or not in the model);
 * an unknown rank reads as rank 0 here: ortmk_session_input_meta tells it
 * from a scalar. */
size_t ortmk_session_input_count(const ortmk_session *s);
size_t ortmk_session_output_count(const ortmk_session *s);
ortmk_status ortmk_session_input_info(const ortmk_session *s, size_t i,
				      const char **name, ortmk_dtype *dtype,
				      const int64_t **dims, size_t *rank);
ortmk_status ortmk_session_output_info(const ortmk_session *s, size_t i,
				       const char **name, ortmk_dtype *dtype,
				       const int64_t **dims, size_t *rank);

typedef struct ortmk_io_info {
	size_t struct_size;           /* sizeof(ortmk_io_info) */
	const char *name;
	ortmk_value_kind kind;        /* ORTMK_VALUE_TENSOR or _SEQUENCE (of
	                                 tensors or maps), _MAP */
	int optional;                 /* 1: declared optional(...) */
	ortmk_dtype dtype;            /* element type; ORTMK_UNDEFINED when unknown */
	int rank_known;               /* 0: no rank (dims, dim_names NULL, rank 0) */
	size_t rank;                  /* 0 with rank_known: a scalar */
	const int64_t *dims;          /* -1 where the dim is not a fixed number */
	const char *const *dim_names; /* rank entries: the symbolic name of a
	                                 dim that has one, else NULL */
	ortmk_dtype map_key_dtype;    /* a (sequence of) map(key, tensor(dtype)):
	                                 the key type; ORTMK_UNDEFINED otherwise */
} ortmk_io_info;
ortmk_status ortmk_session_input_meta(const ortmk_session *s, size_t i, ortmk_io_info *out);
ortmk_status ortmk_session_output_meta(const ortmk_session *s, size_t i, ortmk_io_info *out);

/* The model's own description.  Strings are "" when the model has none. */
typedef struct ortmk_model_metadata {
	size_t struct_size;           /* sizeof(ortmk_model_metadata) */
	const char *producer_name, *producer_version;
	const char *domain;
	const char *description;      /* ModelProto.doc_string */
	const char *graph_name;
	const char *graph_description;  /* GraphProto.doc_string */
	int64_t version;              /* ModelProto.model_version */
	size_t n_props;               /* metadata_props */
	const char *const *prop_keys;
	const char *const *prop_values;
} ortmk_model_metadata;
ortmk_status ortmk_session_model_metadata(const ortmk_session *s, ortmk_model_metadata *out);

/* How many nodes each provider runs ("cpu" -> 42). */
size_t ortmk_session_provider_count(const ortmk_session *s);
ortmk_status ortmk_session_provider_nodes(const ortmk_session *s, size_t i,
					  const char **provider, size_t *nodes);
/* Process id of the provider process serving provider i (for tools). */
ortmk_status ortmk_session_provider_pid(const ortmk_session *s, size_t i, int *pid);

/* What a provider process is doing and what happened to it.  Strings stay
 * valid until the environment is destroyed; last_failure is overwritten by
 * the next failure. */
typedef struct ortmk_provider_status {
	size_t struct_size;        /* sizeof(ortmk_provider_status) */
	const char *name;          /* "cpu" */
	const char *binary;        /* the executable now serving it */
	int pid;                   /* -1 when not running */
	const char *state;         /* "running", "dead" (restarts on next use),
	                              "disabled" (session only: crash loop),
	                              "unavailable" (runs nothing here: no device) */
	unsigned restarts;         /* processes started after a failure */
	unsigned swaps;            /* hot swaps done */
	unsigned failures;         /* deaths, timeouts, protocol violations */
	const char *last_failure;  /* "" when none */
	double last_restart_ms;    /* failure noticed -> replayed and ready */
} ortmk_provider_status;

size_t ortmk_env_provider_count(const ortmk_env *env);
ortmk_status ortmk_env_provider_status(ortmk_env *env, size_t i, ortmk_provider_status *out);
/* As seen by a session: state is "disabled" once the session gave up on it. */
ortmk_status ortmk_session_provider_status(const ortmk_session *s, size_t i,
					   ortmk_provider_status *out);
/* Hot swap: starts `binary` as the new process of `provider`, replays the
 * provider's state into it (segments, external-data files, subgraphs),
 * switches between runs and stops the old process.  A run in progress
 * finishes on the old process; none fails because of the swap.
 * Thread-safe: callable while other threads run sessions of env. */
ortmk_status ortmk_env_swap_provider(ortmk_env *env, const char *provider, const char *binary);

/* Counters of a session's runs. */
typedef struct ortmk_session_stats {
	size_t struct_size;            /* sizeof(ortmk_session_stats) */
	unsigned runs, failed_runs, retried_runs;
	double prepack_ms;             /* spent packing weights at creation */
	unsigned prepack_hits;         /* packed weights found in the cache */
	unsigned prepack_misses;       /* packed at creation */
	uint64_t arena_bytes;          /* the largest memory plan of its input
					* shapes so far: activations' bytes in
					* shared memory for one run in flight */
} ortmk_session_stats;
ortmk_status ortmk_session_get_stats(const ortmk_session *s, ortmk_session_stats *out);

/* Runs the model.  outputs[i] receives a new value the caller destroys.
 * A run whose provider dies returns ORTMK_ERR_PROVIDER_DIED; the session
 * stays usable (later issues restart the provider).
 * Thread-safe: several threads may run one session; up to
 * "max_concurrent_runs" of its runs are in flight at once, sessions on
 * one provider too (docs/ARCHITECTURE.md, "Concurrent runs"). */
ortmk_status ortmk_session_run(ortmk_session *s,
			       const char *const *input_names,
			       const ortmk_value *const *inputs, size_t n_inputs,
			       const char *const *output_names, size_t n_outputs,
			       ortmk_value **outputs);

/* Options of one run (or of several: the same options may serve many runs,
 * in turn or at once).  Destroyed before their environment, and not while
 * a run uses them. */
typedef struct ortmk_run_options ortmk_run_options;
ortmk_status ortmk_run_options_create(ortmk_run_options **out);
void ortmk_run_options_destroy(ortmk_run_options *ro);
/* A label ort-trace shows with the run's messages (at most 127 bytes). */
ortmk_status ortmk_run_options_set_tag(ortmk_run_options *ro, const char *tag);
/* The run's deadline in ms, instead of the session's "run_timeout_ms"
 * (0: the session's); as there, a provider past it is killed. */
ortmk_status ortmk_run_options_set_timeout_ms(ortmk_run_options *ro, int timeout_ms);
/* From any thread, at any time: terminate != 0 makes the runs using ro
 * stop and return ORTMK_ERR_CANCELLED: before their next step, and inside
 * a step between two nodes (a Loop between iterations), so within the
 * node running now plus a few ms; the provider stays up and serves the
 * next run.  It stays set (later runs with ro are cancelled at once) until
 * set to 0 again. */
void ortmk_run_options_set_terminate(ortmk_run_options *ro, int terminate);

/* ortmk_session_run with options (ro NULL: as ortmk_session_run). */
ortmk_status ortmk_session_run_with_options(ortmk_session *s, ortmk_run_options *ro,
					    const char *const *input_names,
					    const ortmk_value *const *inputs, size_t n_inputs,
					    const char *const *output_names, size_t n_outputs,
					    ortmk_value **outputs);

/* A host tensor in shared memory (zero copy into the CPU provider). */
ortmk_status ortmk_value_create(ortmk_env *env, ortmk_dtype dtype,
				const int64_t *dims, size_t rank, ortmk_value **out);
/* Copies `nbytes` from `data` into a new value. */
ortmk_status ortmk_value_create_copy(ortmk_env *env, ortmk_dtype dtype,
				     const int64_t *dims, size_t rank,
				     const void *data, size_t nbytes,
				     ortmk_value **out);
void ortmk_value_destroy(ortmk_value *v);


ortmk_value_kind ortmk_value_kind_of(const ortmk_value *v);
/* A tensor of strings (dtype ORTMK_STRING), copied from strs (numel of
 * them, row-major; NULL entries become ""). */
ortmk_status ortmk_value_create_strings(ortmk_env *env, const int64_t *dims, size_t rank,
					const char *const *strs, ortmk_value **out);
/* String i of a string tensor, NULL when out of range or not strings. */
const char *ortmk_value_string(const ortmk_value *v, size_t i);
/* A sequence holding copies of n tensors of one element type (n may be 0). */
ortmk_status ortmk_value_create_sequence(ortmk_env *env, ortmk_dtype elem_dtype,
					 const ortmk_value *const *items, size_t n,
					 ortmk_value **out);
size_t ortmk_value_sequence_length(const ortmk_value *v);
/* A copy of element i of a sequence: a tensor, or a map (ORTMK_VALUE_MAP,
 * ortmk_value_dtype its values' type) for a sequence of maps (whose own
 * ortmk_value_dtype is ORTMK_UNDEFINED).  Maps are only outputs: a value
 * fed to a model's map input is refused. */
ortmk_status ortmk_value_sequence_get(const ortmk_value *v, size_t i, ortmk_value **out);
/* Maps: ai.onnx.ml ZipMap's output is a sequence of them (its elements,
 * from ortmk_value_sequence_get, are of kind ORTMK_VALUE_MAP).  Keys are
 * int64 or strings, values float; pairs keep the order the model gave
 * them (ZipMap: its class labels').  The pointers returned live as long as
 * the map value. */
typedef struct ortmk_map_info {
	size_t struct_size;           /* sizeof(ortmk_map_info) */
	ortmk_dtype key_dtype;        /* ORTMK_INT64 or ORTMK_STRING */
	ortmk_dtype value_dtype;      /* ORTMK_FLOAT */
	size_t count;                 /* number of (key, value) pairs */
} ortmk_map_info;
ortmk_status ortmk_value_map_info(const ortmk_value *v, ortmk_map_info *out);
/* Pairs in a map; 0 for a value that is not a map. */
size_t ortmk_value_map_count(const ortmk_value *v);
/* The count int64 keys; NULL when the keys are strings or v is no map. */
const int64_t *ortmk_value_map_int64_keys(const ortmk_value *v);
/* String key i; NULL when out of range, the keys are int64 or v is no map. */
const char *ortmk_value_map_string_key(const ortmk_value *v, size_t i);
/* The count values (value_dtype); NULL when v is no map or empty. */
const void *ortmk_value_map_values(const ortmk_value *v);
/* An optional that holds nothing (an optional that holds a value is passed
 * as that value itself). */
ortmk_status ortmk_value_create_none(ortmk_env *env, ortmk_value **out);
void *ortmk_value_data(ortmk_value *v);
const void *ortmk_value_data_const(const ortmk_value *v);
size_t ortmk_value_nbytes(const ortmk_value *v);
ortmk_dtype ortmk_value_dtype(const ortmk_value *v);
size_t ortmk_value_rank(const ortmk_value *v);
const int64_t *ortmk_value_dims(const ortmk_value *v);

/*
 * Device memory, IO binding, streams and fences (docs/DEVICE.md).
 *
 * A value lives either on the host (shared memory, what ortmk_value_create
 * makes; every provider reads it in place) or in the memory of one provider
 * process that has its own (vulkan, cuda).  The same application code runs
 * on any provider list: where a provider has no device memory (cpu), the
 * calls below give host values and copies are plain memcpy.
 *
 * A device value belongs to the provider process that allocated it.  When
 * that process dies (or is replaced by a restart or a hot swap) its device
 * values are lost, by design: every later use of one fails with
 * ORTMK_ERR_PROVIDER_DIED and a message naming the provider; destroying it
 * is still fine.  Host values survive any provider failure.
 */
typedef struct ortmk_stream ortmk_stream;
typedef struct ortmk_fence ortmk_fence;
typedef struct ortmk_io_binding ortmk_io_binding;

/* A numeric tensor in `provider`'s memory ("vulkan"), allocated there
 * (contents unspecified).  A provider without device memory ("cpu") gives
 * a host value, as ortmk_value_create.  The provider process is started if
 * it is not running yet. */
ortmk_status ortmk_value_create_on(ortmk_env *env, const char *provider, ortmk_dtype dtype,
				   const int64_t *dims, size_t rank, ortmk_value **out);
/* "host", or the name of the provider whose memory holds the value.
 * ortmk_value_data() of a device value is NULL: copy it to a host value
 * (ortmk_copy_tensors) to read it. */
const char *ortmk_value_location(const ortmk_value *v);

/* A stream orders work on one provider: copies (and runs given the stream)
 * start after the stream's earlier work, and a fence marks a point of it.
 * A stream of a provider without device memory completes everything at
 * once. */
ortmk_status ortmk_stream_create(ortmk_env *env, const char *provider, ortmk_stream **out);
/* Waits for the stream's pending work first (no deadline).  Streams,
 * fences and values are destroyed before their environment. */
void ortmk_stream_destroy(ortmk_stream *st);
/* Waits until everything enqueued on the stream so far is done.
 * timeout_ms < 0: no deadline; ORTMK_ERR_TIMEOUT past it (the work goes
 * on); ORTMK_ERR_PROVIDER_DIED when the provider died before finishing. */
ortmk_status ortmk_stream_synchronize(ortmk_stream *st, int timeout_ms);

/* Copies src[i] into dst[i] (same dtype and byte size; host or device
 * values).  Host to device, device to host and device to device on one
 * provider are enqueued on `stream`, which must belong to the provider of
 * the device side(s), and the call returns once the provider has accepted
 * them: wait with ortmk_stream_synchronize or a fence before reading dst.
 * Device to device across providers goes through host memory (the first
 * leg is waited for).  stream NULL: the copies are done when the call
 * returns.  Host to host is a memcpy.  dst must not be in use by a run. */
ortmk_status ortmk_copy_tensors(ortmk_env *env, const ortmk_value *const *src,
				ortmk_value *const *dst, size_t n, ortmk_stream *stream);

/* A fence for everything enqueued on the stream so far.  The caller
 * destroys it. */
ortmk_status ortmk_stream_fence(ortmk_stream *st, ortmk_fence **out);
/* Waits for the fence: ORTMK_OK when its work is done, ORTMK_ERR_TIMEOUT
 * when timeout_ms (< 0: none, 0: just check) passed first,
 * ORTMK_ERR_PROVIDER_DIED when its provider died before completing it,
 * ORTMK_ERR_PROVIDER when the work failed. */
ortmk_status ortmk_fence_wait(const ortmk_fence *f, int timeout_ms);
void ortmk_fence_destroy(ortmk_fence *f);

/*
 * IO binding: inputs and outputs fixed ahead of runs, so that a loop keeps
 * its data where the provider computes (no copy to the host between runs).
 *
 *   ortmk_io_binding *b;  ortmk_io_binding_create(s, &b);
 *   ortmk_io_binding_bind_input(b, "ids", ids);            // host or device
 *   ortmk_io_binding_bind_output_to_device(b, "cache", "vulkan");
 *   for (...) {
 *       ortmk_session_run_binding(s, b);
 *       ortmk_io_binding_bind_input(b, "past", ortmk_io_binding_output(b, "cache"));
 *   }
 *
 * A graph input bound to a device value of the provider that runs the
 * nodes reading it goes in without a copy; elsewhere the runtime stages it
 * through the host.  An output bound to a device is written there by the
 * provider that computes it when possible, else copied there after the
 * run.  Outputs of one run may be bound as inputs of the next: the previous
 * outputs stay alive until the next run has finished.
 */
ortmk_status ortmk_io_binding_create(ortmk_session *s, ortmk_io_binding **out);
/* Destroys the binding and the outputs it still owns. */
void ortmk_io_binding_destroy(ortmk_io_binding *b);
/* Borrows v (host or device): keep it alive until the runs using it are
 * done.  Binding a name again replaces the earlier value. */
ortmk_status ortmk_io_binding_bind_input(ortmk_io_binding *b, const char *name,
					 const ortmk_value *v);
/* The output is written into v (borrowed; host or device; dtype and shape
 * must be what the run produces, else the run fails with ORTMK_ERR_INPUT). */
ortmk_status ortmk_io_binding_bind_output(ortmk_io_binding *b, const char *name, ortmk_value *v);
/* The runtime allocates the output in `provider`'s memory on each run,
 * whatever its shape turns out to be ("cpu" or any provider without device
 * memory: on the host). */
ortmk_status ortmk_io_binding_bind_output_to_device(ortmk_io_binding *b, const char *name,
						    const char *provider);
/* Runs after the work already enqueued on st (its copies into the bound
 * inputs need no wait by the application); NULL: no stream.  Inputs with
 * copies pending on other streams are waited for before the run. */
ortmk_status ortmk_io_binding_set_stream(ortmk_io_binding *b, ortmk_stream *st);
void ortmk_io_binding_clear_inputs(ortmk_io_binding *b);
/* Unbinds every output and destroys the values the binding allocated. */
void ortmk_io_binding_clear_outputs(ortmk_io_binding *b);
/* Waits for copies pending into the bound inputs / out of the bound
 * outputs (timeout_ms < 0: none). */
ortmk_status ortmk_io_binding_synchronize_inputs(ortmk_io_binding *b, int timeout_ms);
ortmk_status ortmk_io_binding_synchronize_outputs(ortmk_io_binding *b, int timeout_ms);

/* Runs the session on the binding.  Every graph input must be bound;
 * outputs not bound are not returned.  Thread-safe as ortmk_session_run,
 * but one binding serves one run at a time: the caller serializes the
 * runs of a binding (and its bind_* and clear_* calls). */
ortmk_status ortmk_session_run_binding(ortmk_session *s, ortmk_io_binding *b);
/* The bound outputs, in the order they were bound. */
size_t ortmk_io_binding_output_count(const ortmk_io_binding *b);
const char *ortmk_io_binding_output_name(const ortmk_io_binding *b, size_t i);
/* The value of output `name` after the last run (NULL before the first
 * run or when not bound): borrowed, valid until the next run has finished
 * or the outputs are cleared.  For an output bound with bind_output it is
 * the caller's value. */
ortmk_value *ortmk_io_binding_output(const ortmk_io_binding *b, const char *name);
/* Hands the value of output `name` to the caller (who destroys it); the
 * next run allocates a new one. */
ortmk_status ortmk_io_binding_take_output(ortmk_io_binding *b, const char *name,
					  ortmk_value **out);

#pragma GCC visibility pop

#ifdef __cplusplus
}
#endif
#endif
