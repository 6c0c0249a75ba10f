/*
 * impi-server: the IMPI start-up server (docs/impi.md).
 *
 *   impi-server -server N [-port P] [-auth none|key:FILE] [-host ADDR]
 *               [-listen ADDR] [-timeout S]
 *
 * Prints ADDR:PORT on stdout once it listens, serves N clients, and exits 0
 * after every client sent FINI; 1 with a message naming the client and what
 * was wrong otherwise; 2 for a bad option.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "icbc_log.h"
#include "impi_cli.h"
#include "impi_proto.h"
#include "impi_server.h"

#define PROG "impi-server"

static void usage(FILE *f)
{
    fputs("Usage: impi-server -server N [OPTION]...\n"
          "Start-up server of an IMPI job of N clients (1..32): prints ADDR:PORT, the\n"
          "address clients are given, then serves AUTH, IMPI, COLL, DONE and FINI.\n"
          "\n"
          "  -server N        number of clients\n"
          "  -port P          port to listen on (default: any free port)\n"
          "  -auth METHOD     none (default), or key:FILE: clients must send the key\n"
          "                   in FILE (a decimal number, as LAM's IMPI_AUTH_KEY)\n"
          "  -host ADDR       address to print (default: the first non-loopback IPv4\n"
          "                   address of this host, else 127.0.0.1)\n"
          "  -listen ADDR     address to listen on (default: every IPv4 address)\n"
          "  -timeout S       seconds start-up may make no progress before the server\n"
          "                   gives up, naming whom it waits for (default 600; 0: never)\n"
          "  -help            this text\n"
          "\n"
          "Exit status: 0 after FINI from every client; 1 on an error (a malformed command,\n"
          "a client closing before FINI, a stalled start-up); 2 for a bad option.\n",
          f);
}

static void default_host(char *buf, size_t len)
{
    struct ifaddrs *ifa, *i;

    snprintf(buf, len, "127.0.0.1");
    if (getifaddrs(&ifa) != 0)
        return;
    for (i = ifa; i; i = i->ifa_next) {
        if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET && !(i->ifa_flags & IFF_LOOPBACK)) {
            inet_ntop(AF_INET, &((struct sockaddr_in *) i->ifa_addr)->sin_addr, buf,
                      (socklen_t) len);
            break;
        }
    }
    freeifaddrs(ifa);
}

/* What impi-server's options give it. */
typedef struct server_args {
    impi_server_config_t cfg;
    const char *host; /* the address to print */
} server_args_t;

/* An option of impi-server's own; see impi_cli_option_t. */
static int server_option(void *arg, const char *o, const char *v)
{
    server_args_t *a = arg;

    if (!strcmp(o, "-server"))
        return impi_cli_int(PROG, o, v, 1, IMPI_MAX_CLIENTS, "want 1..32 clients",
                            &a->cfg.proto.nclients);
    if (!strcmp(o, "-host")) {
        if (impi_cli_ipv4(PROG, o, v))
            return 2;
        a->host = v;
    } else if (!strcmp(o, "-listen"))
        a->cfg.listen_addr = v;
    else
        return -1;
    return 0;
}

int main(int argc, char **argv)
{
    server_args_t args = { .cfg = { .timeout = 600 } };
    impi_server_config_t *cfg = &args.cfg;
    impi_cli_common_t common = { &cfg->port, &cfg->proto.require_key, &cfg->proto.key,
                                 &cfg->timeout };
    const char *host;
    char hostbuf[INET_ADDRSTRLEN], err[512];
    impi_server_t *server;
    icbc_status_t st;
    int r = impi_cli_parse(PROG, argc, argv, usage, &common, server_option, &args);

    if (r)
        return r < 0 ? 0 : r;
    host = args.host;
    if (cfg->proto.nclients == 0)
        return impi_cli_bad(PROG, "-server", "", "the number of clients is required");
    icbc_log_set_ident("impi-server");
    signal(SIGPIPE, SIG_IGN);
    st = impi_server_create(cfg, &server, err, sizeof(err));
    if (st != ICBC_OK) {
        fprintf(stderr, "impi-server: %s\n", err);
        return 1;
    }
    if (host == NULL) {
        if (cfg->listen_addr) {
            host = cfg->listen_addr;
        } else {
            default_host(hostbuf, sizeof(hostbuf));
            host = hostbuf;
        }
    }
    printf("%s:%u\n", host, impi_server_port(server));
    fflush(stdout);
    st = impi_server_run(server, err, sizeof(err));
    impi_server_destroy(server);
    if (st != ICBC_OK) {
        fprintf(stderr, "impi-server: %s\n", err);
        return 1;
    }
    return 0;
}
