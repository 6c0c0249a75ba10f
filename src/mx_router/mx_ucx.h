/*
 * UCX as every icbc process uses it, compute processes (the netmod) and
 * routers (mx_server) alike: the settings applied before ucp_init, and the
 * two active-message operations all of them post.
 */
#ifndef MX_UCX_H
#define MX_UCX_H

#include <stdlib.h>
#include <ucp/api/ucp.h>

/* Posts active message ID on EP: HDR, then LEN bytes of PAYLOAD, eagerly or
 * by rendezvous as FLAGS say (UCP_AM_SEND_FLAG_*); CB(request, status, ARG)
 * when a posted send ends. Returns NULL when it completed at once, a UCS
 * error pointer, or the request. */
static inline ucs_status_ptr_t mx_ucx_am_send(ucp_ep_h ep, unsigned id, const void *hdr,
                                              size_t hdr_len, const void *payload, size_t len,
                                              uint32_t flags, ucp_send_nbx_callback_t cb, void *arg)
{
    ucp_request_param_t param = {
        .op_attr_mask =
            UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_FLAGS,
        .cb.send = cb,
        .user_data = arg,
        .flags = flags,
    };
    return ucp_am_send_nbx(ep, id, hdr, hdr_len, payload, len, &param);
}

/* Receives the rendezvous payload DESC names (LEN bytes) into BUF;
 * CB(request, status, length, ARG) when a posted receive ends. Returns as
 * mx_ucx_am_send. */
static inline ucs_status_ptr_t mx_ucx_am_recv(ucp_worker_h worker, void *desc, void *buf,
                                              size_t len, ucp_am_recv_data_nbx_callback_t cb,
                                              void *arg)
{
    ucp_request_param_t param = {
        .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA,
        .cb.recv_am = cb,
        .user_data = arg,
    };
    return ucp_am_recv_data_nbx(worker, desc, buf, len, &param);
}

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

/* For a process whose peers may die while it runs: the routers (whose
 * processes and jobs come and go) and the processes that talk to routers
 * (which may be killed and restarted under them). UCX 1.13's TCP transport
 * aborts on an assertion in uct_tcp_ep_handle_put_ack (tcp_ep.c:939) when
 * the acknowledgement of a PUT, the zero-copy way its rendezvous moves
 * data, arrives for a connection whose failure it has already handled (a
 * process aborted about once in twenty runs that killed routers under
 * load). Without PUT the rendezvous moves the data as active-message
 * fragments; errors end it as an MPI error. Set from the environment, like
 * the setting above; a UCX_TCP_PUT_ENABLE the user set is kept. Call
 * before ucp_init. */
static inline void mx_ucx_env_peers_may_fail(void)
{
    setenv("UCX_TCP_PUT_ENABLE", "n", 0);
}

#endif /* MX_UCX_H */
