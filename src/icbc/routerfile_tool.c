/*
 * icbc-routerfile: checks a router file and prints what it describes.
 * Exit status 0 if the file is valid, 1 if not, 2 on a usage error.
 */
#include "icbc_log.h"
#include "icbc_routerfile.h"
#include "icbc_status.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f)
{
    fprintf(f, "Usage: icbc-routerfile [--check] [--hosts] [--self] [FILE]\n"
               "Checks an ICBC router file (format: docs/routerfile.md) and prints a summary:\n"
               "policy, key file, clusters with their host count and routers, impi entries.\n"
               "An error is printed as FILE:LINE: what is wrong.\n"
               "\n"
               "  FILE       the router file (default: $ICBC_ROUTERFILE)\n"
               "  --check    print only 'FILE: OK' (or the error)\n"
               "  --hosts    list the hosts of every cluster too\n"
               "  --self     print the cluster of this host ($ICBC_NODE, else the host name)\n"
               "             and whether it runs a router; exit 1 if it is in no cluster\n"
               "  --help     this text\n"
               "\n"
               "Environment: ICBC_ROUTERFILE (default FILE), ICBC_NODE (this host's name),\n"
               "ICBC_LOG_LEVEL (error, warn, info, debug).\n"
               "Exit status: 0 valid, 1 invalid or unreadable, 2 usage error.\n");
}

static void print_summary(const icbc_routerfile_t *rf, int hosts)
{
    const char *key = icbc_routerfile_key_path(rf);
    size_t i, j;

    printf("%s: OK\n", icbc_routerfile_name(rf));
    printf("policy    %s\n", icbc_rf_policy_name(icbc_routerfile_policy(rf)));
    printf("key       %s\n", key ? key : "(none)");
    printf("clusters  %zu (%zu hosts)\n", icbc_routerfile_num_clusters(rf),
           icbc_routerfile_num_hosts(rf));
    for (i = 0; i < icbc_routerfile_num_clusters(rf); i++) {
        const icbc_rf_cluster_t *c = icbc_routerfile_cluster(rf, i);
        printf("  cluster %s: %zu hosts, %zu routers\n", c->name, c->nhosts, c->nrouters);
        for (j = 0; j < c->nrouters; j++)
            printf("    router %s fabric=%s wan=%s\n", c->routers[j].host,
                   c->routers[j].fabric.text, c->routers[j].wan.text);
        if (c->relay_line)
            printf("    impi-relay server=%s port=%u auth=%s%s (run by its routers; the jobs "
                   "inside start up at %s:%u)\n",
                   c->relay_server.text, c->relay_port, c->relay_key_path ? "key:" : "none",
                   c->relay_key_path ? c->relay_key_path : "",
                   inet_ntoa(((const struct sockaddr_in *) &c->routers[0].fabric.sa)->sin_addr),
                   c->relay_port);
        if (hosts) {
            printf("    hosts");
            for (j = 0; j < c->nhosts; j++)
                printf(" %s", c->hosts[j]);
            printf("\n");
        }
    }
    printf("impi      %zu\n", icbc_routerfile_num_impi(rf));
    for (i = 0; i < icbc_routerfile_num_impi(rf); i++) {
        const icbc_rf_impi_t *m = icbc_routerfile_impi(rf, i);
        printf("  impi %s server=%s\n", m->name, m->server.text);
    }
}

static int print_self(const icbc_routerfile_t *rf)
{
    char host[ICBC_RF_HOST_MAX + 1], err[ICBC_RF_ERR_LEN];
    const icbc_rf_router_t *r;
    int ci;

    if (icbc_routerfile_self_cluster(rf, &ci, host, sizeof(host), err, sizeof(err)) != ICBC_OK) {
        icbc_error("%s", err);
        return 1;
    }
    r = icbc_routerfile_find_router(rf, host, NULL);
    printf("self      %s in cluster %s", host, icbc_routerfile_cluster(rf, (size_t) ci)->name);
    if (r != NULL)
        printf(", router fabric=%s wan=%s (line %d)\n", r->fabric.text, r->wan.text, r->line);
    else
        printf(", no router\n");
    return 0;
}

int main(int argc, char **argv)
{
    const char *path = NULL;
    int check = 0, hosts = 0, self = 0, i, rc = 0;
    char err[ICBC_RF_ERR_LEN];
    icbc_routerfile_t *rf;
    icbc_status_t st;

    icbc_log_set_ident("icbc-routerfile");
    for (i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(argv[i], "--check")) {
            check = 1;
        } else if (!strcmp(argv[i], "--hosts")) {
            hosts = 1;
        } else if (!strcmp(argv[i], "--self")) {
            self = 1;
        } else if (argv[i][0] == '-' && argv[i][1] != '\0') {
            icbc_error("unknown option '%s' (see --help)", argv[i]);
            return 2;
        } else if (path == NULL) {
            path = argv[i];
        } else {
            icbc_error("more than one FILE given (see --help)");
            return 2;
        }
    }
    if (path != NULL) {
        st = icbc_routerfile_load(path, &rf, err, sizeof(err));
    } else {
        st = icbc_routerfile_load_env(&rf, err, sizeof(err));
        if (st == ICBC_ERR_NOT_FOUND) {
            icbc_error("no FILE given and %s", err);
            return 2;
        }
    }
    if (st != ICBC_OK) {
        icbc_error("%s", err);
        return 1;
    }
    if (check)
        printf("%s: OK\n", icbc_routerfile_name(rf));
    else
        print_summary(rf, hosts);
    if (self)
        rc = print_self(rf);
    icbc_routerfile_free(rf);
    return rc;
}
