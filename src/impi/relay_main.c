/*
 * impi-relay: the IMPI relay of a cluster with private addresses
 * (docs/impi-relay.md).
 *
 *   impi-relay -server ADDR:PORT [-port P] [-auth none|key:FILE]
 *              [-inside ADDR] [-outside ADDR] [-timeout S] [-trunks K]
 *   impi-relay -server ADDR:PORT -leader ADDR:PORT -rank J [-inside ADDR]
 *              [-outside ADDR] [-timeout S]
 *
 * Prints the INSIDE_ADDR:PORT the client inside (and the other relays of a
 * trunk, -leader) are given,
 * serves one IMPI job, and exits 0 once every host on both sides said FINI
 * and the inside client sent FINI; 1 with a message naming the side and
 * what was wrong otherwise; 2 for a bad option.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "icbc_log.h"
#include "impi_proto.h"
#include "impi_relay.h"

static void usage(FILE *f)
{
    fputs("Usage: impi-relay -server ADDR:PORT [OPTION]...\n"
          "IMPI relay of a cluster with private addresses: the client inside reaches the\n"
          "IMPI job through it. Prints INSIDE_ADDR:PORT, the server address the client\n"
          "inside is given, then relays start-up and every packet between the two sides.\n"
          "\n"
          "  -server ADDR:PORT  impi-server's address\n"
          "  -port P            inside port for the client's start-up (default: any)\n"
          "  -auth METHOD       none (default), or key:FILE: the client inside must send\n"
          "                     the key in FILE, and the relay sends it to impi-server\n"
          "  -inside ADDR       the relay's address inside the cluster (default: the first\n"
          "                     IPv4 address of this node that is not the outside one)\n"
          "  -outside ADDR      the relay's address outside (default: the one this node\n"
          "                     reaches impi-server from)\n"
          "  -timeout S         seconds start-up, the hosts' connections or the end may\n"
          "                     make no progress (default 600; 0: never give up)\n"
          "  -trunks K          this relay leads K relays of the client (default 1): the\n"
          "                     others are started with -leader and -rank\n"
          "  -leader ADDR:PORT  this relay is one of a trunk: ADDR:PORT is what the\n"
          "                     leader printed\n"
          "  -rank J            its rank in the trunk, 1 .. K-1\n"
          "  -help              this text\n"
          "\n"
          "Exit status: 0 once the job ended with FINI on both sides; 1 on an error (a\n"
          "malformed command or packet, a host or the server closing early); 2 for a bad\n"
          "option.\n",
          f);
}

static int bad(const char *opt, const char *val, const char *want)
{
    fprintf(stderr, "impi-relay: bad %s '%s': %s\n", opt, val ? val : "", want);
    return 2;
}

int main(int argc, char **argv)
{
    impi_relay_config_t cfg = { .timeout = 600 };
    char err[512];
    impi_relay_t *relay;
    icbc_status_t st;

    for (int i = 1; i < argc; i++) {
        const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        char *end;
        struct in_addr a;
        if (!strcmp(o, "-help") || !strcmp(o, "--help") || !strcmp(o, "-h")) {
            usage(stdout);
            return 0;
        }
        if (v == NULL)
            return bad(o, "", "unknown option or missing value (see -help)");
        i++;
        if (!strcmp(o, "-server")) {
            cfg.server = v;
        } else if (!strcmp(o, "-port")) {
            long p = strtol(v, &end, 10);
            if (*end || p < 0 || p > 65535)
                return bad(o, v, "want 0..65535");
            cfg.port = (uint16_t) p;
        } else if (!strcmp(o, "-auth")) {
            if (!strcmp(v, "none")) {
                cfg.require_key = 0;
            } else if (!strncmp(v, "key:", 4) && v[4]) {
                cfg.require_key = 1;
                if (impi_key_read(v + 4, &cfg.key, err, sizeof(err)) != ICBC_OK) {
                    fprintf(stderr, "impi-relay: %s\n", err);
                    return 2;
                }
            } else {
                return bad(o, v, "want none or key:FILE");
            }
        } else if (!strcmp(o, "-inside") || !strcmp(o, "-outside")) {
            if (inet_pton(AF_INET, v, &a) != 1)
                return bad(o, v, "want an IPv4 address");
            if (o[1] == 'i')
                cfg.inside_addr = v;
            else
                cfg.outside_addr = v;
        } else if (!strcmp(o, "-trunks") || !strcmp(o, "-rank")) {
            long k = strtol(v, &end, 10);
            if (*end || k < 1 || k > IMPI_RELAY_TRUNKS_MAX)
                return bad(o, v, "want 1..16");
            if (o[1] == 't')
                cfg.trunks = (int) k;
            else
                cfg.rank = (int) k;
        } else if (!strcmp(o, "-leader")) {
            cfg.leader = v;
        } else if (!strcmp(o, "-timeout")) {
            double t = strtod(v, &end);
            if (*end || !(t >= 0 && t <= 86400))
                return bad(o, v, "want seconds, 0..86400");
            cfg.timeout = t;
        } else {
            return bad(o, v, "unknown option (see -help)");
        }
    }
    if (cfg.server == NULL)
        return bad("-server", "", "impi-server's ADDR:PORT is required");
    if ((cfg.leader != NULL) != (cfg.rank > 0) || (cfg.leader && cfg.trunks))
        return bad(cfg.leader ? "-leader" : "-rank", "",
                   "-leader and -rank go together, and -trunks is the leader's");
    icbc_log_set_ident("impi-relay");
    signal(SIGPIPE, SIG_IGN);
    st = impi_relay_create(&cfg, &relay, err, sizeof(err));
    if (st != ICBC_OK) {
        fprintf(stderr, "impi-relay: %s\n", err);
        return 1;
    }
    if (cfg.leader)
        printf("relay %d of the trunk led by %s, inside %s\n", cfg.rank, cfg.leader,
               impi_relay_inside_addr(relay));
    else
        printf("%s:%u\n", impi_relay_inside_addr(relay), impi_relay_port(relay));
    fflush(stdout);
    st = impi_relay_run(relay, err, sizeof(err));
    impi_relay_destroy(relay);
    if (st != ICBC_OK) {
        fprintf(stderr, "impi-relay: %s\n", err);
        return 1;
    }
    return 0;
}
