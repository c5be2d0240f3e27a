#ifndef DIPTYCH_CMICROHTTPD_SHIM_H
#define DIPTYCH_CMICROHTTPD_SHIM_H
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>
#include <microhttpd.h>

/* MHD_start_daemon and MHD_get_daemon_info are variadic, and the external
   logger takes a va_list: Swift can call none of them. */

/** Receives one formatted libmicrohttpd log message. */
typedef void (*diptych_mhd_log_fn)(void *cls, const char *message);

struct diptych_mhd_logger { diptych_mhd_log_fn fn; void *cls; };

static inline void diptych_mhd_log_trampoline(void *cls, const char *fmt, va_list ap) {
    struct diptych_mhd_logger *l = (struct diptych_mhd_logger *)cls;
    char buf[512];
    vsnprintf(buf, sizeof buf, fmt, ap);
    if (l && l->fn) l->fn(l->cls, buf);
}

/** MHD_start_daemon bound to `addr` (a sockaddr_in, or a sockaddr_in6 with
    MHD_USE_IPv6 in `flags`), with a completion callback, a connection
    notifier, connection limits (in all and per client address), idle timeout
    (seconds), per-connection memory limit and a logger (`logger` must outlive
    the daemon). Returns NULL on failure (logged). */
static inline struct MHD_Daemon *diptych_mhd_start(unsigned int flags, uint16_t port, const struct sockaddr *addr,
                                                   MHD_AccessHandlerCallback handler, void *handler_cls,
                                                   MHD_RequestCompletedCallback completed, void *completed_cls,
                                                   MHD_NotifyConnectionCallback notify, void *notify_cls,
                                                   unsigned int connection_limit, unsigned int per_address_limit,
                                                   unsigned int timeout_seconds,
                                                   size_t memory_limit, struct diptych_mhd_logger *logger) {
    return MHD_start_daemon(flags, port, NULL, NULL, handler, handler_cls,
                            /* The logger first, so every later message goes to it. */
                            MHD_OPTION_EXTERNAL_LOGGER, diptych_mhd_log_trampoline, (void *)logger,
                            MHD_OPTION_SOCK_ADDR, addr,
                            MHD_OPTION_NOTIFY_COMPLETED, completed, completed_cls,
                            MHD_OPTION_NOTIFY_CONNECTION, notify, notify_cls,
                            MHD_OPTION_CONNECTION_LIMIT, connection_limit,
                            MHD_OPTION_PER_IP_CONNECTION_LIMIT, per_address_limit,
                            MHD_OPTION_CONNECTION_TIMEOUT, timeout_seconds,
                            MHD_OPTION_CONNECTION_MEMORY_LIMIT, memory_limit,
                            MHD_OPTION_END);
}

/** The socket of `connection`, or -1. */
static inline int diptych_mhd_connection_fd(struct MHD_Connection *connection) {
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
    return info ? info->connect_fd : -1;
}

/** The port the daemon listens on (the real one when 0 was asked for), or 0. */
static inline uint16_t diptych_mhd_bound_port(struct MHD_Daemon *daemon) {
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(daemon, MHD_DAEMON_INFO_BIND_PORT);
    return info ? info->port : 0;
}
#endif
