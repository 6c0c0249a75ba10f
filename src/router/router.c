/* Router life cycle, event loop, timers and statistics; see router.h. */
#include "router.h"

#include <errno.h>
#include <malloc.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "icbc_log.h"
#include "icbc_netif.h"
#include "router_int.h"

static void on_stop_fd(int fd, uint32_t events, void *arg)
{
    uint64_t v;

    /* Only a wake-up: the loop reads the flags set before the write
     * (stopping, stats_wanted). */
    (void) arg;
    if (read(fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
        icbc_debug("router: eventfd read failed");
}

static void on_fabric_fd(int fd, uint32_t events, void *arg)
{
    /* Only a wake-up: the loop drives UCX at the top of every turn, and
     * ucp_worker_arm() clears the descriptor before the loop sleeps again. */
    (void) fd;
    (void) events;
    (void) arg;
}

icbc_status_t icbc_router_create(const icbc_router_config_t *cfg, icbc_router_t **out, char *err,
                                 size_t errlen)
{
    icbc_router_t *r;
    char host[ICBC_RF_HOST_MAX + 1];
    const icbc_rf_cluster_t *cl;
    icbc_status_t st;

    if (cfg->rf == NULL) {
        icbc_err(ICBC_ERR_INVALID, err, errlen, "router: no router file");
        return ICBC_ERR_INVALID;
    }
    if (cfg->streams < 0 || cfg->streams > ICBC_ROUTER_STREAMS_MAX) {
        icbc_err(ICBC_ERR_INVALID, err, errlen, "router: --streams must be 1..%d",
                 ICBC_ROUTER_STREAMS_MAX);
        return ICBC_ERR_INVALID;
    }
    r = calloc(1, sizeof(*r));
    if (r == NULL)
        return ICBC_ERR_NO_MEMORY;
    r->cfg = *cfg;
    r->rf = cfg->rf;
    r->stop_fd = -1;
    r->conn_tag = CONN_ROUTER;
    if (r->cfg.max_memory == 0)
        r->cfg.max_memory = ICBC_ROUTER_MAX_MEMORY_DEFAULT;
    if (r->cfg.max_pulls <= 0)
        r->cfg.max_pulls = ICBC_ROUTER_MAX_PULLS_DEFAULT;
    if (r->cfg.streams == 0)
        r->cfg.streams = ICBC_ROUTER_STREAMS_DEFAULT;
    if (r->cfg.stream_queue == 0)
        r->cfg.stream_queue = ICBC_ROUTER_STREAM_QUEUE_DEFAULT;
    if (r->cfg.notsent_lowat == 0)
        r->cfg.notsent_lowat = ICBC_ROUTER_NOTSENT_LOWAT_DEFAULT;
    if (r->cfg.register_ms <= 0)
        r->cfg.register_ms = ICBC_ROUTER_REGISTER_MS_DEFAULT;
    if (r->cfg.max_unregistered <= 0)
        r->cfg.max_unregistered = ICBC_ROUTER_MAX_UNREGISTERED_DEFAULT;
    if (r->cfg.trunk_wait_ms == 0)
        r->cfg.trunk_wait_ms = ICBC_ROUTER_TRUNK_WAIT_MS_DEFAULT;
    if (r->cfg.eager_window == 0) {
        r->cfg.eager_window = r->cfg.max_memory / 256;
        if (r->cfg.eager_window < ICBC_ROUTER_EAGER_WINDOW_MIN)
            r->cfg.eager_window = ICBC_ROUTER_EAGER_WINDOW_MIN;
        if (r->cfg.eager_window > ICBC_ROUTER_EAGER_WINDOW_MAX)
            r->cfg.eager_window = ICBC_ROUTER_EAGER_WINDOW_MAX;
    }
    icbc_hmap_init(&r->registry);
    icbc_hmap_init(&r->unreach_logged);
    icbc_hmap_init(&r->pstat_map);
    icbc_list_init(&r->pstats);
    icbc_list_init(&r->unregistered);
    icbc_list_init(&r->peers);
    icbc_list_init(&r->to_pump);
    icbc_list_init(&r->credit_pending);
    icbc_list_init(&r->mem_waiters);
    icbc_list_init(&r->pull_waiters);
    pthread_mutex_init(&r->pub_lock, NULL);

    if (cfg->host) {
        snprintf(host, sizeof(host), "%s", cfg->host);
    } else if (icbc_routerfile_self_host(host, sizeof(host)) != ICBC_OK) {
        icbc_err(ICBC_ERR_INVALID, err, errlen,
                 "router: cannot tell this host's name (set --host or ICBC_NODE)");
        st = ICBC_ERR_INVALID;
        goto fail;
    }
    r->self = icbc_routerfile_find_router(r->rf, host, &r->cluster);
    if (r->self == NULL) {
        icbc_err(ICBC_ERR_INVALID, err, errlen, "%s: no 'router %s' entry",
                 icbc_routerfile_name(r->rf), host);
        st = ICBC_ERR_NOT_FOUND;
        goto fail;
    }
    cl = icbc_routerfile_cluster(r->rf, (size_t) r->cluster);
    r->index = (int) (r->self - cl->routers);
    snprintf(r->name, sizeof(r->name), "%s/%d", cl->name, r->index);
    st = icbc_routerfile_read_key(r->rf, r->key, sizeof(r->key), &r->keylen, err, errlen);
    if (st != ICBC_OK)
        goto fail;

    st = bt_poller_create(&r->poller);
    if (st != ICBC_OK) {
        icbc_err(ICBC_ERR_INVALID, err, errlen, "router %s: cannot create the poller: %s", r->name,
                 icbc_status_str(st));
        goto fail;
    }
    r->stop_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (r->stop_fd < 0 ||
        bt_poller_add_fd(r->poller, r->stop_fd, EPOLLIN, on_stop_fd, r) != ICBC_OK) {
        icbc_err(ICBC_ERR_INVALID, err, errlen, "router %s: cannot set up the stop event: %s",
                 r->name, strerror(errno));
        st = ICBC_ERR_IO;
        goto fail;
    }

    /* On a core near the WAN NIC (--bind), before anything is allocated. */
    if (icbc_netif_holding((const struct sockaddr *) &r->self->wan.sa, r->wan_dev,
                           sizeof(r->wan_dev)) != ICBC_OK)
        r->wan_dev[0] = '\0';
    if (r->cfg.bind == NULL && cl->router_bind[0])
        r->cfg.bind = cl->router_bind; /* the router file's, for this cluster */
    if (!cfg->bind_thread) {
        char why[256];
        st = icbc_bind_apply(r->cfg.bind, r->wan_dev[0] ? r->wan_dev : NULL, 0, &r->bind, why,
                             sizeof(why));
        if (st != ICBC_OK) {
            icbc_err(st, err, errlen, "router %s: --bind: %s", r->name, why);
            goto fail;
        }
    }

    /* UCX on the fabric device alone: its ports must not face the WAN. */
    if (cfg->ucx_devices == NULL &&
        icbc_netif_holding((const struct sockaddr *) &r->self->fabric.sa, r->fabric_dev,
                           sizeof(r->fabric_dev)) != ICBC_OK) {
        icbc_err(ICBC_ERR_INVALID, err, errlen,
                 "router %s: fabric=%s is not an address of this host (%s:%d)", r->name,
                 r->self->fabric.text, icbc_routerfile_name(r->rf), r->self->line);
        st = ICBC_ERR_NOT_FOUND;
        goto fail;
    }
    mx_fabric_api_t api = cl->fabric_api == ICBC_RF_FABRIC_OFI ? MX_FABRIC_OFI : MX_FABRIC_UCX;
    if (cfg->fabric_api && mx_fabric_api_parse(cfg->fabric_api, &api) != ICBC_OK) {
        icbc_err(ICBC_ERR_INVALID, err, errlen, "router %s: --fabric-api '%s': want ucx or ofi",
                 r->name, cfg->fabric_api);
        st = ICBC_ERR_INVALID;
        goto fail;
    }
    if (!mx_fabric_api_available(api)) {
        icbc_err(ICBC_ERR_INVALID, err, errlen,
                 "router %s: fabric API %s is not part of this build (libfabric-dev was missing "
                 "when it was built)",
                 r->name, mx_fabric_api_name(api));
        st = ICBC_ERR_UNSUPPORTED;
        goto fail;
    }
    mx_server_opts_t mo = {
        .api = api,
        .ofi_provider = cfg->ofi_provider,
        .addr = (const struct sockaddr *) &r->self->fabric.sa,
        .addrlen = r->self->fabric.salen,
        .tls = cfg->ucx_tls,
        .devices = cfg->ucx_devices ? cfg->ucx_devices : r->fabric_dev,
        .rndv_thresh = cfg->rndv_thresh,
    };
    st = mx_server_create(&mo, &rt_fabric_cbs, r, &r->fabric);
    if (st != ICBC_OK) {
        icbc_err(ICBC_ERR_INVALID, err, errlen, "router %s: cannot open the fabric side on %s: %s",
                 r->name, r->self->fabric.text, icbc_status_str(st));
        goto fail;
    }
    st = bt_poller_add_fd(r->poller, mx_server_efd(r->fabric), EPOLLIN, on_fabric_fd, r);
    if (st != ICBC_OK) {
        icbc_err(ICBC_ERR_INVALID, err, errlen,
                 "router %s: cannot watch the fabric's event descriptor", r->name);
        goto fail;
    }
    st = rt_trunks_create(r, err, errlen);
    if (st != ICBC_OK)
        goto fail;
    if (r->cfg.max_rss) {
        /* Payload buffers of 64 KiB and more come from mmap and go back on
         * free, so the resident size follows what the router holds. */
        mallopt(M_MMAP_THRESHOLD, 64 << 10);
        mallopt(M_TRIM_THRESHOLD, 1 << 20);
        size_t rss = rt_resident_bytes();
        if (rss == 0 || rss >= r->cfg.max_rss) {
            icbc_err(ICBC_ERR_INVALID, err, errlen,
                     "router %s: --max-rss %zu is not above its resident size at "
                     "start (%zu bytes)",
                     r->name, r->cfg.max_rss, rss);
            st = ICBC_ERR_INVALID;
            goto fail;
        }
    }
    icbc_info("router %s: host %s, fabric %s (%s, device %s), WAN %s, %d trunk(s), %d "
              "streams each, max memory %zu bytes, max resident %zu bytes (0: none), at start %zu "
              "bytes",
              r->name, host, r->self->fabric.text, mx_server_describe(r->fabric), mo.devices,
              r->self->wan.text, r->ntrunks, r->cfg.streams, r->cfg.max_memory, r->cfg.max_rss,
              rt_resident_bytes());
    if (!cfg->bind_thread) {
        char text[512];
        icbc_info("router %s: %s", r->name, icbc_router_bind_text(r, text, sizeof(text)));
    }
    *out = r;
    return ICBC_OK;

fail:
    icbc_router_destroy(r);
    return st;
}

static void publish(icbc_router_t *r)
{
    pthread_mutex_lock(&r->pub_lock);
    r->pub = r->st;
    pthread_mutex_unlock(&r->pub_lock);
}

size_t rt_resident_bytes(void)
{
    unsigned long size, resident;
    FILE *f = fopen("/proc/self/statm", "r");
    int n = f ? fscanf(f, "%lu %lu", &size, &resident) : 0;

    if (f)
        fclose(f);
    return n == 2 ? (size_t) resident * (size_t) sysconf(_SC_PAGESIZE) : 0;
}

static long peak_rss_kb(void)
{
    struct rusage ru;
    return getrusage(RUSAGE_SELF, &ru) == 0 ? ru.ru_maxrss : -1;
}

void icbc_router_get_stats(icbc_router_t *r, icbc_router_stats_t *st)
{
    pthread_mutex_lock(&r->pub_lock);
    *st = r->pub;
    pthread_mutex_unlock(&r->pub_lock);
    st->peak_rss_kb = peak_rss_kb();
}

void icbc_router_format_stats(const icbc_router_stats_t *st, char *buf, size_t len)
{
    snprintf(
        buf, len,
        "stats: out %llu msgs %llu B, in %llu msgs %llu B, local %llu msgs %llu B, "
        "unreachable %llu, refused fabric %llu trunk %llu, buffered %llu B peak %llu B, "
        "registered %llu, trunks up %llu/%llu, clusters unreachable %llu, "
        "unpulled %llu peak %llu, peak RSS %ld KiB, unregistered fabric connections closed %llu",
        (unsigned long long) st->msgs_out, (unsigned long long) st->bytes_out,
        (unsigned long long) st->msgs_in, (unsigned long long) st->bytes_in,
        (unsigned long long) st->msgs_local, (unsigned long long) st->bytes_local,
        (unsigned long long) st->unreachable, (unsigned long long) st->refused_fabric,
        (unsigned long long) st->refused_trunk, (unsigned long long) st->buffered,
        (unsigned long long) st->peak_buffered, (unsigned long long) st->registered,
        (unsigned long long) st->trunks_up, (unsigned long long) st->trunks,
        (unsigned long long) st->clusters_unreachable, (unsigned long long) st->descs_held,
        (unsigned long long) st->peak_descs_held, st->peak_rss_kb,
        (unsigned long long) st->fabric_conns_closed);
}

/* Every counter of icbc_router_stats_t, for the JSON form. */
/* clang-format off */
#define ROUTER_STATS_U64(_) \
    _(msgs_out) _(bytes_out) _(msgs_in) _(bytes_in) _(msgs_local) _(bytes_local) \
    _(unreachable) _(refused_fabric) _(fabric_conns_closed) _(refused_trunk) _(buffered) \
    _(peak_buffered) _(registered) _(trunks) _(trunks_up) _(clusters_unreachable) \
    _(descs_held) _(peak_descs_held)
/* clang-format on */

void icbc_router_format_stats_json(const icbc_router_stats_t *st, char *buf, size_t len)
{
    size_t n = 0;

#define ROUTER_STATS_JSON_(field)                                                                  \
    if (n < len)                                                                                   \
        n += (size_t) snprintf(buf + n, len - n, "%s\"" #field "\": %llu", n ? ", " : "{",         \
                               (unsigned long long) st->field);
    ROUTER_STATS_U64(ROUTER_STATS_JSON_)
#undef ROUTER_STATS_JSON_
    if (n < len)
        snprintf(buf + n, len - n, ", \"peak_rss_kb\": %ld}", st->peak_rss_kb);
}

/* Appends to the JSON object in BUF (closing brace dropped and put back)
 * the counters of each trunk and of each process that registered (the
 * first STATS_PROCESSES_MAX; "processes_more" counts the rest). */
#define STATS_PROCESSES_MAX 128

const icbc_rf_router_t *icbc_router_entry(const icbc_router_t *r, int *cluster)
{
    *cluster = r->cluster;
    return r->self;
}

const char *icbc_router_bind_text(const icbc_router_t *r, char *buf, size_t len)
{
    if (r->bind.bound)
        snprintf(buf, len, "bound to CPU(s) %s (%s); host: %s", r->bind.cpus, r->bind.why,
                 r->bind.topology);
    else
        snprintf(buf, len, "not bound (%s); host: %s",
                 r->bind.why[0] ? r->bind.why : "none: where the system puts it",
                 r->bind.topology[0] ? r->bind.topology : "not read");
    return buf;
}

static size_t json_tail(icbc_router_t *r, char *buf, size_t len)
{
    size_t n = strlen(buf);
    int first = 1, shown = 0, more = 0;

#define OUT(...)                                                                                   \
    do {                                                                                           \
        if (n < len)                                                                               \
            n += (size_t) snprintf(buf + n, len - n, __VA_ARGS__);                                 \
    } while (0)
    if (n > 0 && buf[n - 1] == '}')
        n--;
    OUT(", \"bound_cpus\": \"%s\"", r->bind.cpus);
    OUT(", \"trunks\": [");
    for (int i = 0; i < r->ntrunks; i++) {
        const rt_trunk_t *t = &r->trunks[i];
        OUT("%s{\"cluster\": \"%s\", \"router\": %d, \"up\": %d, \"msgs_out\": %llu, "
            "\"bytes_out\": %llu, \"msgs_in\": %llu, \"bytes_in\": %llu, \"downs\": %llu}",
            first ? "" : ", ", icbc_routerfile_cluster(r->rf, (size_t) t->cluster)->name, t->peer,
            t->up, (unsigned long long) t->msgs_out, (unsigned long long) t->bytes_out,
            (unsigned long long) t->msgs_in, (unsigned long long) t->bytes_in,
            (unsigned long long) t->downs);
        first = 0;
    }
    OUT("], \"processes\": [");
    first = 1;
    for (icbc_list_t *e = r->pstats.next; e != &r->pstats; e = e->next) {
        const rt_pstat_t *p = ICBC_CONTAINER(e, rt_pstat_t, link);
        if (shown == STATS_PROCESSES_MAX) {
            more++;
            continue;
        }
        OUT("%s{\"job\": %llu, \"rank\": %u, \"msgs_from\": %llu, \"bytes_from\": %llu, "
            "\"msgs_to\": %llu, \"bytes_to\": %llu}",
            first ? "" : ", ", (unsigned long long) p->job, p->rank,
            (unsigned long long) p->msgs_from, (unsigned long long) p->bytes_from,
            (unsigned long long) p->msgs_to, (unsigned long long) p->bytes_to);
        first = 0;
        shown++;
    }
    OUT("], \"processes_more\": %d}", more);
#undef OUT
    return n;
}

static void stats_line(icbc_router_t *r)
{
    size_t cap = 4096 + (size_t) r->ntrunks * 192 + STATS_PROCESSES_MAX * 160;
    char *line = malloc(cap);
    icbc_router_stats_t st = r->st;

    if (line == NULL)
        return;
    st.peak_rss_kb = peak_rss_kb();
    icbc_router_format_stats(&st, line, cap);
    icbc_info("router %s: %s", r->name, line);
    icbc_router_format_stats_json(&st, line, cap);
    json_tail(r, line, cap);
    icbc_info("router %s: stats-json %s", r->name, line);
    icbc_info("router %s: %s", r->name, icbc_router_bind_text(r, line, cap));
    free(line);
}

icbc_status_t icbc_router_run(icbc_router_t *r)
{
    double now = icbc_clock_ms();

    r->next_stats = r->cfg.stats_interval > 0 ? now + r->cfg.stats_interval * 1e3 : 0;
    if (r->cfg.bind_thread) {
        char err[256];
        if (icbc_bind_apply(r->cfg.bind, r->wan_dev[0] ? r->wan_dev : NULL, 1, &r->bind, err,
                            sizeof(err)) != ICBC_OK)
            icbc_warn("router %s: %s; not bound", r->name, err);
        icbc_info("router %s: %s", r->name, icbc_router_bind_text(r, err, sizeof(err)));
    }
    while (!r->stopping) {
        double next;
        int n, timeout;

        mx_server_progress(r->fabric);
        rt_mem_kick(r);      /* rendezvous pulls queued by UCX callbacks */
        rt_pump_deferred(r); /* queues filled by UCX callbacks */
        rt_destroy_dead(r);
        now = icbc_clock_ms();
        next = now + 1000;
        rt_fabric_timers(r, now, &next);
        rt_trunk_timers(r, now, &next);
        if (r->stats_wanted) {
            r->stats_wanted = 0;
            stats_line(r);
        }
        if (r->next_stats > 0) {
            if (r->next_stats <= now) {
                stats_line(r);
                r->next_stats = now + r->cfg.stats_interval * 1e3;
            }
            if (r->next_stats < next)
                next = r->next_stats;
        }
        publish(r);
        /* mx_server_progress drove UCX until it found nothing (one more
         * call would only ask the kernel again); what this turn queued
         * since (pumps, credits) is served by another turn, and UCX work it
         * started makes the arm below fail. */
        if (!icbc_list_empty(&r->to_pump) || !icbc_list_empty(&r->credit_pending))
            continue;
        /* bt_lib runs deferred work (send completions) at the start of a
         * wait, and that work may start UCX operations: run it before the
         * worker is armed, so that the wait below only sleeps. */
        if (bt_poller_run_deferred(r->poller) > 0)
            continue;
        if (mx_server_arm(r->fabric) == ICBC_ERR_BUSY)
            continue;
        timeout = next > now ? (int) (next - now) + 1 : 0;
        n = bt_poller_wait(r->poller, timeout);
        if (n < 0)
            goto poller_failed;
    }
    rt_trunks_shutdown(r);
    r->st.peak_rss_kb = peak_rss_kb();
    publish(r);
    stats_line(r);
    return ICBC_OK;

poller_failed:
    icbc_error("router %s: poller failed", r->name);
    return ICBC_ERR_IO;
}

void icbc_router_stop(icbc_router_t *r)
{
    uint64_t one = 1;

    r->stopping = 1;
    if (r->stop_fd >= 0 && write(r->stop_fd, &one, sizeof(one)) < 0) {
        /* the flag alone stops the loop at its next wake-up */
    }
}

void icbc_router_request_stats(icbc_router_t *r)
{
    uint64_t one = 1;

    r->stats_wanted = 1;
    if (r->stop_fd >= 0 && write(r->stop_fd, &one, sizeof(one)) < 0) {
        /* the flag alone is read at the loop's next wake-up (at most 1 s) */
    }
}

void icbc_router_destroy(icbc_router_t *r)
{
    if (r == NULL)
        return;
    r->destroying = 1;
    rt_trunks_destroy(r);
    rt_fabric_destroy(r);
    if (r->fabric) {
        if (r->poller)
            bt_poller_del_fd(r->poller, mx_server_efd(r->fabric));
        mx_server_destroy(r->fabric);
    }
    if (r->poller)
        bt_poller_destroy(r->poller);
    if (r->stop_fd >= 0)
        close(r->stop_fd);
    icbc_hmap_free(&r->registry);
    icbc_hmap_free(&r->unreach_logged);
    icbc_hmap_free(&r->pstat_map);
    while (!icbc_list_empty(&r->pstats)) {
        rt_pstat_t *ps = ICBC_CONTAINER(r->pstats.next, rt_pstat_t, link);
        icbc_list_del(&ps->link);
        free(ps);
    }
    free(r->dead);
    pthread_mutex_destroy(&r->pub_lock);
    memset(r->key, 0, sizeof(r->key));
    free(r);
}
