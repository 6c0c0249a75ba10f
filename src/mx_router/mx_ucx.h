/*
 * UCX settings every icbc process applies before ucp_init: compute
 * processes (the netmod) and routers (mx_server) alike.
 */
#ifndef MX_UCX_H
#define MX_UCX_H

#include <stdlib.h>

/* UCX's TCP transport handles the events of one epoll_wait() in turn. When
 * a peer dies, the error handling of its first socket closes the peer's
 * other sockets, whose events may wait later in the same batch; UCX 1.13
 * (Debian 12) then aborts on an assertion in uct_tcp_iface_handle_events
 * (a router killed during a transfer took a compute process with it about
 * one time in five). One event per epoll_wait() leaves no stale event
 * behind a failure. The transport reads the setting from the environment
 * only (a ucp_config_modify key would be refused, with a warning, by every
 * process that does not use TCP); a UCX_TCP_MAX_POLL the user set is kept.
 * Call before ucp_init. */
static inline void mx_ucx_env_defaults(void)
{
    setenv("UCX_TCP_MAX_POLL", "1", 0);
}

#endif /* MX_UCX_H */
