/*
 * mx_guard: a bound, in number and in time, on the connections a router's
 * fabric ports hold for hosts that have no registered process.
 *
 * UCX accepts TCP connections on its connection-manager listener and on its
 * TCP transport's own port (libfabric's tcp provider on its listener), and
 * keeps a connection that never completes a handshake for as long as the
 * other side stays silent; neither has a limit of its own. The router
 * cannot reach into the fabric library, but the sockets are its process's:
 * the guard learns which listening sockets the router's fabric opened
 * (those that appear between mx_guard_begin and mx_guard_end),
 * and mx_guard_scan looks at the connections accepted on them. A connection
 * is trusted while a process on its remote host is registered, and for the
 * registration timeout after the last one left; an untrusted connection is
 * shut down once it is older than the timeout, and beyond MAX untrusted
 * connections the oldest are shut down at once. The fabric then sees the
 * end of the stream and drops the endpoint as it would for a peer that went
 * away.
 *
 * Ages count from the scan that first saw a connection, so a silent
 * connection is closed between TIMEOUT and TIMEOUT + the scan period after
 * it was accepted.
 *
 * Not thread-safe: the guard belongs to the thread that runs the server.
 */
#ifndef MX_GUARD_H
#define MX_GUARD_H

#include <stddef.h>
#include <sys/socket.h>

#include "icbc_status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mx_guard mx_guard_t;

/* Notes the listening sockets of this process before the fabric is set up. */
icbc_status_t mx_guard_begin(mx_guard_t **out);
/* Every listening socket that is new since mx_guard_begin is guarded;
 * returns how many there are. */
size_t mx_guard_end(mx_guard_t *g);
void mx_guard_free(mx_guard_t *g);

/* A process on HOST (its port is ignored) registered (+1) or left (-1). */
void mx_guard_trust(mx_guard_t *g, const struct sockaddr *host, int delta, double now_ms);

/* Shuts down untrusted connections older than TIMEOUT_MS, and the oldest
 * beyond MAX_UNTRUSTED; returns how many it shut down this time. */
size_t mx_guard_scan(mx_guard_t *g, double now_ms, double timeout_ms, size_t max_untrusted);

/* Untrusted connections seen by the last scan (not counting those shut down). */
size_t mx_guard_untrusted(const mx_guard_t *g);

#ifdef __cplusplus
}
#endif

#endif /* MX_GUARD_H */
