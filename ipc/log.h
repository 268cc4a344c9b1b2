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
void ipc_log(enum ipc_log_level level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#endif
