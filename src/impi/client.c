/*
 * IMPI start-up, client side, over a blocking socket with a time limit on
 * every answer; see impi_client.h. The server's answers are parsed by
 * impi_cmd_hdr_parse and impi_layout_add before anything is used.
 */
#include "impi_client.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "icbc_bytes.h"
#include "icbc_clock.h"

struct impi_client {
    int fd;
    char server[64];
    int timeout_ms;
};

/* LEN bytes sent (SENDING) or received, each part within the answer's time
 * limit: a server that stops reading or writing is a timeout, not a hang. */
static icbc_status_t xfer_all(impi_client_t *c, void *buf, size_t len, int sending)
{
    uint8_t *p = buf;
    double deadline = icbc_clock_ms() + c->timeout_ms;

    while (len > 0) {
        struct pollfd pfd = { .fd = c->fd, .events = sending ? POLLOUT : POLLIN };
        double left = deadline - icbc_clock_ms();
        if (left <= 0)
            return ICBC_ERR_TIMEOUT;
        int r = poll(&pfd, 1, (int) left + 1);
        if (r < 0 && errno == EINTR)
            continue;
        if (r == 0)
            return ICBC_ERR_TIMEOUT;
        ssize_t n = sending ? send(c->fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT)
                            : recv(c->fd, p, len, MSG_DONTWAIT);
        if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK))
            continue;
        if (n <= 0)
            return ICBC_ERR_PEER_FAILED;
        p += n;
        len -= (size_t) n;
    }
    return ICBC_OK;
}

static icbc_status_t send_all(impi_client_t *c, const void *buf, size_t len)
{
    return xfer_all(c, (void *) buf, len, 1);
}

static icbc_status_t recv_all(impi_client_t *c, void *buf, size_t len)
{
    return xfer_all(c, buf, len, 0);
}

static const char *why(icbc_status_t st)
{
    switch (st) {
    case ICBC_ERR_TIMEOUT: return "no answer in time";
    case ICBC_ERR_PEER_FAILED: return "the connection closed";
    default: return icbc_status_str(st);
    }
}

static icbc_status_t send_cmd(impi_client_t *c, uint32_t cmd, const void *payload, size_t len)
{
    uint8_t hdr[IMPI_CMD_HDR_SIZE];
    icbc_status_t st;

    impi_cmd_hdr_pack(cmd, (uint32_t) len, hdr);
    st = send_all(c, hdr, sizeof(hdr));
    return st == ICBC_OK && len > 0 ? send_all(c, payload, len) : st;
}

/* The next command from the server, which must be CMD; its payload in
 * *BODY (malloc'd, *LEN bytes). */
static icbc_status_t recv_cmd(impi_client_t *c, uint32_t cmd, uint8_t **body, size_t *len,
                              char *err, size_t errlen)
{
    uint8_t hdr[IMPI_CMD_HDR_SIZE];
    impi_cmd_hdr_t h;
    icbc_status_t st = recv_all(c, hdr, sizeof(hdr));

    *body = NULL;
    *len = 0;
    if (st != ICBC_OK)
        return icbc_err(st, err, errlen, "IMPI server %s: waiting for %s: %s", c->server,
                        impi_cmd_name(cmd), why(st));
    if (impi_cmd_hdr_parse(hdr, &h) != ICBC_OK || h.cmd != cmd)
        return icbc_err(ICBC_ERR_INVALID, err, errlen,
                        "IMPI server %s: sent command 0x%08x of %u bytes where %s was due",
                        c->server, h.cmd, h.len, impi_cmd_name(cmd));
    if (h.len > 0) {
        *body = malloc(h.len);
        if (*body == NULL)
            return ICBC_ERR_NO_MEMORY;
        st = recv_all(c, *body, h.len);
        if (st != ICBC_OK) {
            free(*body);
            *body = NULL;
            return icbc_err(st, err, errlen, "IMPI server %s: in the middle of %s: %s", c->server,
                            impi_cmd_name(cmd), why(st));
        }
    }
    *len = h.len;
    return ICBC_OK;
}

static icbc_status_t dial(impi_client_t *c, const char *server, char *err, size_t errlen)
{
    struct sockaddr_in sin = { .sin_family = AF_INET };
    char host[64];
    const char *colon = strrchr(server, ':');
    char *end;
    long port;
    int one = 1;

    if (colon == NULL || (size_t) (colon - server) >= sizeof(host))
        return icbc_err(ICBC_ERR_INVALID, err, errlen, "IMPI server '%s': not ADDR:PORT", server);
    memcpy(host, server, (size_t) (colon - server));
    host[colon - server] = '\0';
    port = strtol(colon + 1, &end, 10);
    if (*end != '\0' || port < 1 || port > 65535 || inet_pton(AF_INET, host, &sin.sin_addr) != 1)
        return icbc_err(ICBC_ERR_INVALID, err, errlen, "IMPI server '%s': not an IPv4 ADDR:PORT",
                        server);
    sin.sin_port = htons((uint16_t) port);
    c->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (c->fd < 0)
        return icbc_err(ICBC_ERR_NO_MEMORY, err, errlen, "socket: %s", strerror(errno));
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (connect(c->fd, (struct sockaddr *) &sin, sizeof(sin)) != 0)
        return icbc_err(ICBC_ERR_UNREACHABLE, err, errlen, "IMPI server %s: connect: %s", server,
                        strerror(errno));
    return ICBC_OK;
}

static icbc_status_t authenticate(impi_client_t *c, const impi_client_params_t *p, char *err,
                                  size_t errlen)
{
    uint8_t mask[4], reply[IMPI_AUTH_REPLY_SIZE], key[IMPI_AUTH_KEY_SIZE];
    icbc_status_t st;

    icbc_put32(mask, p->have_key ? IMPI_AUTH_MASK_KEY : IMPI_AUTH_MASK_NONE);
    st = send_cmd(c, IMPI_CMD_AUTH, mask, sizeof(mask));
    if (st == ICBC_OK)
        st = recv_all(c, reply, sizeof(reply));
    if (st == ICBC_ERR_PEER_FAILED)
        return icbc_err(ICBC_ERR_AUTH, err, errlen,
                        "IMPI server %s: refused this client at authentication (it closed the "
                        "connection; %s)",
                        c->server,
                        p->have_key ? "is it the key the server was given?"
                                    : "a server started with -auth key:FILE wants its key");
    if (st != ICBC_OK)
        return icbc_err(st, err, errlen, "IMPI server %s: authentication: %s", c->server, why(st));
    uint32_t which = icbc_get32(reply), len = icbc_get32(reply + 4);
    if (which == IMPI_AUTH_NONE && len == 0 && !p->have_key)
        return ICBC_OK;
    if (which == IMPI_AUTH_KEY && len == IMPI_AUTH_KEY_SIZE && p->have_key) {
        icbc_put64(key, p->key);
        st = send_all(c, key, sizeof(key));
        return st == ICBC_OK ? ICBC_OK
                             : icbc_err(st, err, errlen, "IMPI server %s: sending the key: %s",
                                        c->server, why(st));
    }
    return icbc_err(ICBC_ERR_AUTH, err, errlen,
                    "IMPI server %s: wants authentication %u (%u bytes); this client offers %s",
                    c->server, which, len, p->have_key ? "a key" : "none (no key given)");
}

/* IMPI: this client's rank; the answer is the number of clients. */
static icbc_status_t join(impi_client_t *c, const impi_client_params_t *p, int *nclients, char *err,
                          size_t errlen)
{
    uint8_t rank[4], *body;
    size_t len;
    icbc_status_t st;

    icbc_put32(rank, (uint32_t) p->client);
    st = send_cmd(c, IMPI_CMD_IMPI, rank, sizeof(rank));
    if (st != ICBC_OK && !(st == ICBC_ERR_PEER_FAILED && p->have_key))
        return icbc_err(st, err, errlen, "IMPI server %s: IMPI: %s", c->server, why(st));
    if (st == ICBC_OK)
        st = recv_cmd(c, IMPI_CMD_IMPI, &body, &len, err, errlen);
    /* a server (or relay) that checks the key closes as it reads it: the
     * close is the answer to the key */
    if (st == ICBC_ERR_PEER_FAILED && p->have_key)
        return icbc_err(ICBC_ERR_AUTH, err, errlen,
                        "IMPI server %s: refused this client's key (it closed the connection; "
                        "is it the key the server was given?)",
                        c->server);
    if (st != ICBC_OK)
        return st;
    *nclients = (int) icbc_get32(body);
    free(body);
    if (*nclients < 1 || *nclients > IMPI_MAX_CLIENTS || p->client >= *nclients)
        return icbc_err(ICBC_ERR_INVALID, err, errlen,
                        "IMPI server %s: says the job has %d clients (this one is client %d)",
                        c->server, *nclients, p->client);
    return ICBC_OK;
}

static icbc_status_t exchange(impi_client_t *c, const impi_client_params_t *p,
                              const impi_local_t *local, impi_layout_t *layout, char *err,
                              size_t errlen)
{
    int n;
    const uint32_t *labels = impi_layout_labels(&n);

    for (int i = 0; i < n; i++) {
        uint8_t *part, *msg, *body;
        size_t plen, blen;
        icbc_status_t st = impi_local_part(local, labels[i], &part, &plen);
        if (st != ICBC_OK)
            return icbc_err(st, err, errlen, "IMPI client %d: label 0x%x: %s", p->client, labels[i],
                            st == ICBC_ERR_NO_MEMORY
                                ? "out of memory"
                                : "its hosts' processes do not add up to its process count");
        msg = malloc(4 + plen);
        if (msg == NULL) {
            free(part);
            return ICBC_ERR_NO_MEMORY;
        }
        icbc_put32(msg, labels[i]);
        memcpy(msg + 4, part, plen);
        free(part);
        st = send_cmd(c, IMPI_CMD_COLL, msg, 4 + plen);
        free(msg);
        if (st != ICBC_OK)
            return icbc_err(st, err, errlen, "IMPI server %s: COLL 0x%x: %s", c->server, labels[i],
                            why(st));
        st = recv_cmd(c, IMPI_CMD_COLL, &body, &blen, err, errlen);
        if (st != ICBC_OK)
            return st;
        if (blen < 8 || icbc_get32(body) != labels[i]) {
            uint32_t got = blen >= 4 ? icbc_get32(body) : 0;
            free(body);
            return icbc_err(ICBC_ERR_INVALID, err, errlen,
                            "IMPI server %s: answered COLL label 0x%x to label 0x%x", c->server,
                            got, labels[i]);
        }
        char why_bad[256];
        st = impi_layout_add(layout, labels[i], icbc_get32(body + 4), body + 8, blen - 8, why_bad,
                             sizeof(why_bad));
        free(body);
        if (st != ICBC_OK)
            return icbc_err(st, err, errlen, "IMPI server %s: %s", c->server, why_bad);
        /* every client is ICBC: its processes are hosts of their own */
        if (labels[i] == IMPI_C_ICBC_HOSTS && p->local_own_hosts &&
            layout->icbc_hosts_mask ==
                (layout->nclients == 32 ? UINT32_MAX : (1u << layout->nclients) - 1))
            local = p->local_own_hosts;
    }
    return ICBC_OK;
}

icbc_status_t impi_client_startup(const impi_client_params_t *p, const impi_local_t *local,
                                  impi_client_t **out, impi_layout_t *layout, char *err,
                                  size_t errlen)
{
    impi_client_t *c = calloc(1, sizeof(*c));
    int nclients = 0;
    uint8_t *body;
    size_t len;
    icbc_status_t st;

    memset(layout, 0, sizeof(*layout));
    if (c == NULL)
        return ICBC_ERR_NO_MEMORY;
    c->fd = -1;
    c->timeout_ms = p->timeout_ms > 0 ? p->timeout_ms : 600000;
    snprintf(c->server, sizeof(c->server), "%s", p->server);
    if ((st = dial(c, p->server, err, errlen)) != ICBC_OK ||
        (st = authenticate(c, p, err, errlen)) != ICBC_OK ||
        (st = join(c, p, &nclients, err, errlen)) != ICBC_OK)
        goto fail;
    if ((st = impi_layout_init(layout, nclients)) != ICBC_OK ||
        (st = exchange(c, p, local, layout, err, errlen)) != ICBC_OK)
        goto fail;
    char why_bad[256];
    if ((st = impi_layout_check(layout, why_bad, sizeof(why_bad))) != ICBC_OK) {
        icbc_err(st, err, errlen, "IMPI server %s: %s", c->server, why_bad);
        goto fail;
    }
    if ((st = send_cmd(c, IMPI_CMD_DONE, NULL, 0)) != ICBC_OK) {
        icbc_err(st, err, errlen, "IMPI server %s: DONE: %s", c->server, why(st));
        goto fail;
    }
    if ((st = recv_cmd(c, IMPI_CMD_DONE, &body, &len, err, errlen)) != ICBC_OK)
        goto fail;
    free(body);
    *out = c;
    return ICBC_OK;

fail:
    impi_layout_free(layout);
    impi_client_destroy(c);
    *out = NULL;
    return st;
}

icbc_status_t impi_client_check(impi_client_t *c, char *err, size_t errlen)
{
    struct pollfd pfd = { .fd = c->fd, .events = POLLIN };
    uint8_t b[64];

    if (poll(&pfd, 1, 0) <= 0)
        return ICBC_OK;
    ssize_t r = recv(c->fd, b, sizeof(b), MSG_DONTWAIT);
    if (r < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK))
        return ICBC_OK;
    if (r == 0)
        return icbc_err(ICBC_ERR_PEER_FAILED, err, errlen,
                        "impi-server %s closed its connection before this client's FINI "
                        "(the IMPI job ended: another client's job ended or the server stopped)",
                        c->server);
    if (r < 0)
        return icbc_err(ICBC_ERR_PEER_FAILED, err, errlen, "impi-server %s: %s", c->server,
                        strerror(errno));
    return icbc_err(ICBC_ERR_PEER_FAILED, err, errlen,
                    "impi-server %s sent %zd bytes after start-up, which IMPI does not allow",
                    c->server, r);
}

icbc_status_t impi_client_fini(impi_client_t *c)
{
    icbc_status_t st = send_cmd(c, IMPI_CMD_FINI, NULL, 0);

    impi_client_destroy(c);
    return st;
}

void impi_client_destroy(impi_client_t *c)
{
    if (c == NULL)
        return;
    if (c->fd >= 0)
        close(c->fd);
    free(c);
}
