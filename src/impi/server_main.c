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
#include "impi_proto.h"
#include "impi_server.h"

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

static int bad(const char *opt, const char *val, const char *want)
{
    fprintf(stderr, "impi-server: bad %s '%s': %s\n", opt, val ? val : "", want);
    return 2;
}

static int read_key(const char *path, uint64_t *key)
{
    char err[256];

    if (impi_key_read(path, key, err, sizeof(err)) != ICBC_OK) {
        fprintf(stderr, "impi-server: %s\n", err);
        return -1;
    }
    return 0;
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

int main(int argc, char **argv)
{
    impi_server_config_t cfg = { .timeout = 600 };
    const char *host = NULL;
    char hostbuf[INET_ADDRSTRLEN], err[512];
    impi_server_t *server;
    icbc_status_t st;

    for (int i = 1; i < argc; i++) {
        const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        char *end;
        if (!strcmp(o, "-help") || !strcmp(o, "--help") || !strcmp(o, "-h")) {
            usage(stdout);
            return 0;
        }
        if (v == NULL)
            return bad(o, "", "unknown option or missing value (see -help)");
        i++;
        if (!strcmp(o, "-server")) {
            long n = strtol(v, &end, 10);
            if (*end || n < 1 || n > IMPI_MAX_CLIENTS)
                return bad(o, v, "want 1..32 clients");
            cfg.proto.nclients = (int) n;
        } else if (!strcmp(o, "-port")) {
            long p = strtol(v, &end, 10);
            if (*end || p < 0 || p > 65535)
                return bad(o, v, "want 0..65535");
            cfg.port = (uint16_t) p;
        } else if (!strcmp(o, "-auth")) {
            if (!strcmp(v, "none")) {
                cfg.proto.require_key = 0;
            } else if (!strncmp(v, "key:", 4) && v[4]) {
                cfg.proto.require_key = 1;
                if (read_key(v + 4, &cfg.proto.key) < 0)
                    return 2;
            } else {
                return bad(o, v, "want none or key:FILE");
            }
        } else if (!strcmp(o, "-host")) {
            struct in_addr a;
            if (inet_pton(AF_INET, v, &a) != 1)
                return bad(o, v, "want an IPv4 address");
            host = v;
        } else if (!strcmp(o, "-listen")) {
            cfg.listen_addr = v;
        } else if (!strcmp(o, "-timeout")) {
            double t = strtod(v, &end);
            if (*end || !(t >= 0 && t <= 86400))
                return bad(o, v, "want seconds, 0..86400");
            cfg.timeout = t;
        } else {
            return bad(o, v, "unknown option (see -help)");
        }
    }
    if (cfg.proto.nclients == 0)
        return bad("-server", "", "the number of clients is required");
    icbc_log_set_ident("impi-server");
    signal(SIGPIPE, SIG_IGN);
    st = impi_server_create(&cfg, &server, err, sizeof(err));
    if (st != ICBC_OK) {
        fprintf(stderr, "impi-server: %s\n", err);
        return 1;
    }
    if (host == NULL) {
        if (cfg.listen_addr) {
            host = cfg.listen_addr;
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
