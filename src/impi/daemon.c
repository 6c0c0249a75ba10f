/*
 * The IMPI server daemon: a listening socket and a poll loop around the
 * protocol of server.c; see impi_server.h.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* accept4 */
#endif
#include "impi_server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "icbc_clock.h"
#include "icbc_log.h"

struct impi_server {
    impi_server_config_t cfg;
    impi_srv_t *srv;
    int listen_fd;
    uint16_t port;
    int *fds;        /* per slot, -1: none */
    double progress; /* when start-up last moved */
};

icbc_status_t impi_server_create(const impi_server_config_t *cfg, impi_server_t **out, char *err,
                                 size_t errlen)
{
    impi_server_t *s = calloc(1, sizeof(*s));
    struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(cfg->port) };
    socklen_t sl = sizeof(sin);
    int one = 1;

    if (s == NULL)
        return ICBC_ERR_NO_MEMORY;
    s->cfg = *cfg;
    s->listen_fd = -1;
    if (impi_srv_create(&cfg->proto, &s->srv) != ICBC_OK) {
        snprintf(err, errlen, "-server %d: want 1..32 clients", cfg->proto.nclients);
        free(s);
        return ICBC_ERR_INVALID;
    }
    s->fds = malloc(2 * (size_t) cfg->proto.nclients * sizeof(int));
    if (s->fds == NULL) {
        impi_server_destroy(s);
        return ICBC_ERR_NO_MEMORY;
    }
    for (int i = 0; i < 2 * cfg->proto.nclients; i++)
        s->fds[i] = -1;
    if (cfg->listen_addr && inet_pton(AF_INET, cfg->listen_addr, &sin.sin_addr) != 1) {
        snprintf(err, errlen, "'%s' is not an IPv4 address", cfg->listen_addr);
        impi_server_destroy(s);
        return ICBC_ERR_INVALID;
    }
    s->listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (s->listen_fd < 0 ||
        setsockopt(s->listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
        bind(s->listen_fd, (struct sockaddr *) &sin, sizeof(sin)) < 0 ||
        listen(s->listen_fd, 64) < 0 ||
        getsockname(s->listen_fd, (struct sockaddr *) &sin, &sl) < 0) {
        snprintf(err, errlen, "cannot listen on %s:%u: %s",
                 cfg->listen_addr ? cfg->listen_addr : "0.0.0.0", cfg->port, strerror(errno));
        impi_server_destroy(s);
        return ICBC_ERR_IO;
    }
    s->port = ntohs(sin.sin_port);
    *out = s;
    return ICBC_OK;
}

uint16_t impi_server_port(const impi_server_t *s)
{
    return s->port;
}

void impi_server_destroy(impi_server_t *s)
{
    if (s == NULL)
        return;
    if (s->fds) {
        for (int i = 0; i < 2 * s->cfg.proto.nclients; i++)
            if (s->fds[i] >= 0)
                close(s->fds[i]);
        free(s->fds);
    }
    if (s->listen_fd >= 0)
        close(s->listen_fd);
    impi_srv_destroy(s->srv);
    free(s);
}

static void accept_all(impi_server_t *s)
{
    for (;;) {
        struct sockaddr_in peer;
        socklen_t pl = sizeof(peer);
        int fd =
            accept4(s->listen_fd, (struct sockaddr *) &peer, &pl, SOCK_CLOEXEC | SOCK_NONBLOCK);
        char text[64], addr[INET_ADDRSTRLEN];
        int one = 1;

        if (fd < 0)
            return;
        inet_ntop(AF_INET, &peer.sin_addr, addr, sizeof(addr));
        snprintf(text, sizeof(text), "%s:%u", addr, ntohs(peer.sin_port));
        int slot = impi_srv_accept(s->srv, text);
        if (slot < 0) {
            icbc_warn("refused connection %s: every slot is taken", text);
            close(fd);
            continue;
        }
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        s->fds[slot] = fd;
    }
}

static void drop(impi_server_t *s, int slot)
{
    close(s->fds[slot]);
    s->fds[slot] = -1;
}

/* Reads what SLOT sent. ICBC_OK, or a fatal error with the message in ERR. */
static icbc_status_t read_slot(impi_server_t *s, int slot, char *err, size_t errlen)
{
    uint8_t buf[65536];
    ssize_t n = read(s->fds[slot], buf, sizeof(buf));
    icbc_status_t st;

    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return ICBC_OK;
    if (n <= 0) {
        st = impi_srv_closed(s->srv, slot, err, errlen);
        drop(s, slot);
        return st;
    }
    s->progress = icbc_clock_now();
    st = impi_srv_input(s->srv, slot, buf, (size_t) n, err, errlen);
    if (st == ICBC_ERR_AUTH) {
        /* a stranger, refused alone */
        icbc_warn("refused %s", err);
        drop(s, slot);
        return ICBC_OK;
    }
    return st;
}

static void write_slot(impi_server_t *s, int slot)
{
    size_t len;
    const void *p = impi_srv_output(s->srv, slot, &len);

    if (len == 0)
        return;
    ssize_t n = write(s->fds[slot], p, len);
    if (n > 0)
        impi_srv_consume(s->srv, slot, (size_t) n);
}

icbc_status_t impi_server_run(impi_server_t *s, char *err, size_t errlen)
{
    int nslots = 2 * s->cfg.proto.nclients;
    struct pollfd *pfd = calloc((size_t) nslots + 1, sizeof(*pfd));
    icbc_status_t st = ICBC_OK;

    if (pfd == NULL)
        return ICBC_ERR_NO_MEMORY;
    s->progress = icbc_clock_now();
    while (st == ICBC_OK && !impi_srv_finished(s->srv)) {
        pfd[0].fd = s->listen_fd;
        pfd[0].events = POLLIN;
        for (int i = 0; i < nslots; i++) {
            size_t len;
            pfd[i + 1].fd = s->fds[i];
            pfd[i + 1].events = 0;
            pfd[i + 1].revents = 0;
            if (s->fds[i] < 0)
                continue;
            pfd[i + 1].events = POLLIN;
            impi_srv_output(s->srv, i, &len);
            if (len)
                pfd[i + 1].events |= POLLOUT;
        }
        if (poll(pfd, (nfds_t) nslots + 1, 1000) < 0 && errno != EINTR) {
            snprintf(err, errlen, "poll: %s", strerror(errno));
            st = ICBC_ERR_IO;
            break;
        }
        if (pfd[0].revents & POLLIN)
            accept_all(s);
        for (int i = 0; i < nslots && st == ICBC_OK; i++) {
            if (s->fds[i] < 0 || pfd[i + 1].fd < 0)
                continue;
            if (pfd[i + 1].revents & POLLOUT)
                write_slot(s, i);
            if (pfd[i + 1].revents & (POLLIN | POLLHUP | POLLERR))
                st = read_slot(s, i, err, errlen);
        }
        if (st == ICBC_OK && !impi_srv_started(s->srv) && s->cfg.timeout > 0 &&
            icbc_clock_now() - s->progress > s->cfg.timeout) {
            char what[256];
            impi_srv_waiting_for(s->srv, what, sizeof(what));
            snprintf(err, errlen, "start-up made no progress for %.0f s; waiting for %s",
                     s->cfg.timeout, what);
            st = ICBC_ERR_TIMEOUT;
        }
    }
    free(pfd);
    return st;
}
