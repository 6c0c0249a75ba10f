/*
 * icbc-router: the router daemon. Loads the router file, picks its own
 * 'router' entry, and runs the router core (router.h) until SIGTERM or
 * SIGINT, then prints a final stats line; SIGUSR1 prints one at once.
 * Where the router file makes the cluster's routers its IMPI relays
 * ('impi-relay'), a thread serves them (router_relay.h). docs/router.md is
 * its manual.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "icbc_log.h"
#include "icbc_routerfile.h"
#include "router.h"
#include "router_opts.h"
#include "router_relay.h"

static icbc_router_t *the_router;

static void on_signal(int sig)
{
    if (the_router == NULL)
        return;
    if (sig == SIGUSR1)
        icbc_router_request_stats(the_router);
    else
        icbc_router_stop(the_router);
}

/* Detach; the parent exits with the status the child reports through
 * FDS once the router is up (0) or failed to start (1). */
static int daemonize(int fds[2])
{
    pid_t pid;

    if (pipe(fds) < 0)
        return -1;
    pid = fork();
    if (pid < 0)
        return -1;
    if (pid > 0) {
        char c = 1;
        close(fds[1]);
        if (read(fds[0], &c, 1) != 1)
            c = 1;
        _exit(c);
    }
    close(fds[0]);
    if (setsid() < 0)
        return -1;
    pid = fork();
    if (pid < 0)
        return -1;
    if (pid > 0)
        _exit(0);
    if (chdir("/") < 0)
        return -1;
    int null = open("/dev/null", O_RDWR);
    if (null >= 0) {
        dup2(null, 0);
        dup2(null, 1);
        if (null > 2)
            close(null);
    }
    return 0;
}

int main(int argc, char **argv)
{
    rt_cli_t cli;
    icbc_routerfile_t *rf = NULL;
    char err[ICBC_RF_ERR_LEN];
    int fds[2] = { -1, -1 };
    icbc_status_t st;

    if (rt_cli_parse(argc, argv, &cli, err, sizeof(err)) != 0) {
        fprintf(stderr, "%s\n", err);
        return 2;
    }
    if (cli.help) {
        if (cli.help == 2)
            rt_cli_markdown(stdout);
        else
            rt_cli_usage(stdout);
        return 0;
    }
    icbc_router_config_t cfg = cli.cfg;
    const char *rf_path = cli.rf_path, *pidfile = cli.pidfile, *logfile = cli.logfile;
    int daemon_mode = cli.daemon;
    icbc_log_level_t level = cli.level;

    icbc_log_set_level(level);
    if (rf_path == NULL || !*rf_path) {
        fprintf(stderr, "icbc-router: no router file: give --routerfile or set ICBC_ROUTERFILE\n");
        return 2;
    }
    st = icbc_routerfile_load(rf_path, &rf, err, sizeof(err));
    if (st != ICBC_OK) {
        fprintf(stderr, "icbc-router: %s\n", err);
        return 1;
    }
    if (logfile) {
        int fd = open(logfile, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (fd < 0) {
            fprintf(stderr, "icbc-router: cannot open --logfile %s: %s\n", logfile,
                    strerror(errno));
            return 1;
        }
        dup2(fd, 2);
        close(fd);
    }
    /* Fork before UCX starts its threads. */
    if (daemon_mode && daemonize(fds) < 0) {
        fprintf(stderr, "icbc-router: cannot daemonize: %s\n", strerror(errno));
        return 1;
    }

    char ident[64];
    snprintf(ident, sizeof(ident), "icbc-router %d", (int) getpid());
    icbc_log_set_ident(ident);
    signal(SIGPIPE, SIG_IGN);

    /* Room for --max-unregistered silent connections beside the processes
     * and trunks the router serves: the soft descriptor limit goes up to the
     * hard one. */
    struct rlimit nofile;
    if (getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur < nofile.rlim_max) {
        nofile.rlim_cur = nofile.rlim_max;
        setrlimit(RLIMIT_NOFILE, &nofile);
    }

    cfg.rf = rf;
    st = icbc_router_create(&cfg, &the_router, err, sizeof(err));
    if (st != ICBC_OK) {
        icbc_error("%s", err);
        icbc_routerfile_free(rf);
        return 1;
    }
    int cluster;
    const icbc_rf_router_t *self = icbc_router_entry(the_router, &cluster);
    const icbc_rf_cluster_t *cl = icbc_routerfile_cluster(rf, (size_t) cluster);
    if (cl->relay_line &&
        rt_relay_start(rf, cluster, (int) (self - cl->routers), err, sizeof(err)) != ICBC_OK) {
        icbc_error("%s", err);
        icbc_router_destroy(the_router);
        icbc_routerfile_free(rf);
        return 1;
    }
    if (pidfile) {
        FILE *f = fopen(pidfile, "w");
        if (f == NULL || fprintf(f, "%d\n", (int) getpid()) < 0 || fclose(f) != 0) {
            icbc_error("cannot write --pidfile %s: %s", pidfile, strerror(errno));
            icbc_router_destroy(the_router);
            icbc_routerfile_free(rf);
            return 1;
        }
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGUSR1, &sa, NULL);
    if (fds[1] >= 0) {
        char ok = 0;
        if (write(fds[1], &ok, 1) != 1) { /* the parent then reports failure */
        }
        close(fds[1]);
    }

    st = icbc_router_run(the_router);
    icbc_router_t *r = the_router;
    the_router = NULL; /* a late signal finds nothing to stop */
    icbc_router_destroy(r);
    icbc_routerfile_free(rf);
    if (pidfile)
        unlink(pidfile);
    return st == ICBC_OK ? 0 : 1;
}
