/*
 * sdnotify.h: the systemd notify protocol (sd_notify(3)) without
 * libsystemd.  Each call sends one datagram of "KEY=VALUE\n" lines to the
 * AF_UNIX socket named by $NOTIFY_SOCKET (a path, or an abstract name
 * written with a leading '@').  When NOTIFY_SOCKET is unset every call is a
 * no-op that returns 0, so the daemon calls these unconditionally.
 *
 * Returns: 0 sent (or nothing to do), -1 with errno on a failure to send;
 * the caller logs it (a lost notification is worth a warning, not an exit).
 * Blocking: a datagram to a local socket; non-blocking, so a full queue
 * fails with EAGAIN instead of stalling the loop.
 */
#ifndef MIRRORD_SDNOTIFY_H
#define MIRRORD_SDNOTIFY_H

#include <stdint.h>

#include "compat.h"

/* Longest message sent; longer STATUS texts are cut. */
#define SDNOTIFY_MAX_MSG 2048

/* Send msg as it is (one or more "KEY=VALUE" lines). */
int sdnotify_send(const char *msg);
/* READY=1: start-up is done (after the listeners are bound). */
int sdnotify_ready(void);
/* RELOADING=1 with MONOTONIC_USEC= (CLOCK_MONOTONIC now), at SIGHUP; send
 * sdnotify_ready() when the reload is over, whatever its outcome. */
int sdnotify_reloading(void);
/* STOPPING=1: graceful shutdown began. */
int sdnotify_stopping(void);
/* STATUS=<text>, shown by systemctl status; newlines become spaces. */
int sdnotify_status(const char *fmt, ...) PRINTF_LIKE(1, 2);
/* WATCHDOG=1: the loop is alive. */
int sdnotify_watchdog(void);
/* EXTEND_TIMEOUT_USEC=: ask for more time for a long start or stop. */
int sdnotify_extend_timeout(uint64_t usec);
/*
 * The watchdog interval: 1 and *usec set when $WATCHDOG_USEC is set (and
 * $WATCHDOG_PID, if set, is this process), 0 when no watchdog is expected,
 * -1 with errno EINVAL when the variables are malformed.  Ping at half the
 * interval.
 */
int sdnotify_watchdog_usec(uint64_t *usec);

#endif
