/*
 * log: ortmk's one logging function, shared by the core and the providers.
 * Errors and warnings by default; ORTMK_LOG=error|warn|info|debug sets the
 * level.  Writes one line to stderr, prefixed with the process role.
 */
#ifndef ORTMK_LOG_H
#define ORTMK_LOG_H

enum ipc_log_level { IPC_LOG_ERROR = 0, IPC_LOG_WARN, IPC_LOG_INFO, IPC_LOG_DEBUG };

/* Role printed before each line ("ortmk", "ort-ep-cpu"). */
void ipc_log_set_role(const char *role);
int ipc_log_enabled(enum ipc_log_level level);
/* The level's name ("warn"), what a child is given as ORTMK_LOG. */
const char *ipc_log_level_name(void);

/* Where lines go instead of stderr, and the level (ORTMK_LOG, when set,
 * still decides the level).  Returns a token for ipc_log_reset_sink, which
 * goes back to stderr and the default level only if no later sink replaced
 * this one.  fn NULL: stderr at `level`. */
typedef void (*ipc_log_fn)(void *user, enum ipc_log_level level, const char *line);
unsigned ipc_log_set_sink(enum ipc_log_level level, ipc_log_fn fn, void *user);
void ipc_log_reset_sink(unsigned token);
void ipc_log(enum ipc_log_level level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#endif
