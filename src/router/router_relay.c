/* The relay thread of icbc-router; see router_relay.h. */
#include "router_relay.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "icbc_clock.h"
#include "icbc_log.h"
#include "impi_proto.h"
#include "impi_relay.h"

#define RT_RELAY_TIMEOUT 600 /* seconds, as impi-relay's -timeout */

typedef struct rt_relay {
    impi_relay_config_t cfg;
    char server[64], inside[INET_ADDRSTRLEN], outside[INET_ADDRSTRLEN];
    char leader[64], followers[IMPI_RELAY_TRUNKS_MAX * (INET_ADDRSTRLEN + 1)];
    const char *name;  /* "relay 1 of 2 of cluster a" */
    unsigned long job; /* the job it waits for or serves, from 1 */
    char name_buf[96];
} rt_relay_t;

static int ipv4_text(const icbc_rf_addr_t *a, char *buf, size_t len, uint16_t *port)
{
    const struct sockaddr_in *in = (const struct sockaddr_in *) &a->sa;

    if (a->sa.ss_family != AF_INET)
        return -1;
    if (port)
        *port = ntohs(in->sin_port);
    return inet_ntop(AF_INET, &in->sin_addr, buf, (socklen_t) len) ? 0 : -1;
}

static void on_started(void *arg, int client, int inside_hosts, int outside_hosts)
{
    rt_relay_t *rl = arg;

    icbc_info("impi %s: job %lu started: client %d, %d inside host(s), %d outside host(s)",
              rl->name, rl->job, client, inside_hosts, outside_hosts);
}

static void *relay_thread(void *arg)
{
    rt_relay_t *rl = arg;
    sigset_t all;
    int complained = 0;
    double failing_since = 0;

    /* the daemon's signals go to its main thread */
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);
    for (unsigned long job = 1;; rl->job = job) {
        impi_relay_t *relay;
        char err[512];

        if (impi_relay_create(&rl->cfg, &relay, err, sizeof(err)) != ICBC_OK) {
            /* a follower before its leader listens again (between two jobs
             * for a moment), an address not up yet: tried every second,
             * said once when it is the first job or lasts 10 s */
            double now = icbc_clock_now();
            if (failing_since == 0)
                failing_since = now;
            if (!complained && (job == 1 || now - failing_since >= 10)) {
                icbc_warn("impi %s: %s; trying again every second", rl->name, err);
                complained = 1;
            }
            sleep(1);
            continue;
        }
        if (complained || job == 1) {
            if (rl->cfg.rank == 0)
                icbc_info("impi %s: waiting for job %lu (the job inside starts up at %s:%u)",
                          rl->name, job, impi_relay_inside_addr(relay), impi_relay_port(relay));
            else
                icbc_info("impi %s: waiting for job %lu with the leader at %s", rl->name, job,
                          rl->leader);
        }
        complained = 0;
        failing_since = 0;
        icbc_status_t st = impi_relay_run(relay, err, sizeof(err));
        impi_relay_counts_t n;
        impi_relay_counts(relay, &n);
        if (st == ICBC_OK)
            icbc_info("impi %s: job %lu ended; relayed %llu packet(s): %llu cut through, %llu "
                      "whole (%llu of them behind a packet in progress)",
                      rl->name, job, (unsigned long long) (n.cut + n.whole),
                      (unsigned long long) n.cut, (unsigned long long) n.whole,
                      (unsigned long long) n.behind);
        else if (impi_relay_started(relay))
            icbc_warn("impi %s: job %lu ended with an error: %s", rl->name, job, err);
        else /* no job came in time, or its relays did not all meet: waits anew */
            icbc_info("impi %s: before job %lu started: %s; waiting again", rl->name, job, err);
        if (st == ICBC_OK || impi_relay_started(relay))
            job++;
        impi_relay_destroy(relay);
    }
    return NULL;
}

/* The leader's start-up port: the router's, open from one job to the
 * next, so that a job started as the last one ends waits in its backlog. */
static int listen_startup(const char *addr, uint16_t port)
{
    struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(port) };
    int one = 1, fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

    if (fd < 0)
        return -1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (inet_pton(AF_INET, addr, &sin.sin_addr) != 1 ||
        bind(fd, (struct sockaddr *) &sin, sizeof(sin)) != 0 || listen(fd, 128) != 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

icbc_status_t rt_relay_start(const icbc_routerfile_t *rf, int cluster, int index, char *err,
                             size_t errlen)
{
    const icbc_rf_cluster_t *cl = icbc_routerfile_cluster(rf, (size_t) cluster);
    const icbc_rf_router_t *self = &cl->routers[index];
    rt_relay_t *rl = calloc(1, sizeof(*rl));
    icbc_status_t st = ICBC_ERR_INVALID;
    pthread_attr_t attr;
    pthread_t thread;
    char why[256];
    uint16_t port;
    size_t n = 0;
    int rc;

    if (rl == NULL)
        return icbc_err(ICBC_ERR_NO_MEMORY, err, errlen, "impi-relay: out of memory");
    if (cl->nrouters > IMPI_RELAY_TRUNKS_MAX) {
        icbc_err(st, err, errlen,
                 "impi-relay: cluster %s has %zu routers; a trunk has at most %d relays", cl->name,
                 cl->nrouters, IMPI_RELAY_TRUNKS_MAX);
        goto fail;
    }
    /* the router file holds the relay line to IPv4 for the server and
     * router 0's fabric address */
    if (ipv4_text(&cl->relay_server, rl->server, sizeof(rl->server) - 8, &port) != 0 ||
        ipv4_text(&self->fabric, rl->inside, sizeof(rl->inside), NULL) != 0 ||
        ipv4_text(&self->wan, rl->outside, sizeof(rl->outside), NULL) != 0 ||
        ipv4_text(&cl->routers[0].fabric, rl->leader, sizeof(rl->leader) - 8, NULL) != 0) {
        icbc_err(st, err, errlen, "impi-relay: router %s needs IPv4 fabric and wan addresses",
                 self->host);
        goto fail;
    }
    snprintf(rl->server + strlen(rl->server), 8, ":%u", port);
    snprintf(rl->leader + strlen(rl->leader), 8, ":%u", cl->relay_port);
    snprintf(rl->name_buf, sizeof(rl->name_buf), "relay %d of %zu of cluster %s", index,
             cl->nrouters, cl->name);
    rl->name = rl->name_buf;
    rl->cfg.server = rl->server;
    rl->cfg.inside_addr = rl->inside;
    rl->cfg.outside_addr = rl->outside;
    /* start-up that makes no progress for that long (no job inside, a
     * connection to its port that stays silent) starts over */
    rl->cfg.timeout = RT_RELAY_TIMEOUT;
    rl->cfg.lazy_server = 1;
    rl->cfg.on_started = on_started;
    rl->cfg.arg = rl;
    rl->job = 1;
    if (cl->relay_key_path) {
        if (impi_key_read(cl->relay_key_path, &rl->cfg.key, why, sizeof(why)) != ICBC_OK) {
            icbc_err(st, err, errlen, "impi-relay (line %d): %s", cl->relay_line, why);
            goto fail;
        }
        rl->cfg.require_key = 1;
    }
    if (index == 0) {
        rl->cfg.startup_fd = listen_startup(rl->inside, cl->relay_port);
        if (rl->cfg.startup_fd < 0) {
            st = icbc_err(ICBC_ERR_IO, err, errlen,
                          "impi-relay (line %d): cannot listen on %s:%u: %s", cl->relay_line,
                          rl->inside, cl->relay_port, strerror(errno));
            goto fail;
        }
        rl->cfg.given_startup_fd = 1;
        rl->cfg.trunks = (int) cl->nrouters;
        for (size_t j = 1; j < cl->nrouters; j++) {
            char a[INET_ADDRSTRLEN];
            if (ipv4_text(&cl->routers[j].fabric, a, sizeof(a), NULL) == 0)
                n += (size_t) snprintf(rl->followers + n, sizeof(rl->followers) - n, "%s%s",
                                       n ? "," : "", a);
        }
        rl->cfg.followers = n ? rl->followers : NULL;
    } else {
        rl->cfg.leader = rl->leader;
        rl->cfg.rank = index;
    }
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    rc = pthread_create(&thread, &attr, relay_thread, rl);
    pthread_attr_destroy(&attr);
    if (rc == 0)
        return ICBC_OK;
    st = icbc_err(ICBC_ERR_NO_MEMORY, err, errlen, "impi-relay: cannot start its thread: %s",
                  strerror(rc));
fail:
    if (rl->cfg.given_startup_fd)
        close(rl->cfg.startup_fd);
    free(rl);
    return st;
}
