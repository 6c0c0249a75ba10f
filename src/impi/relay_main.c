/*
 * impi-relay: the IMPI relay of a cluster with private addresses
 * (docs/impi-relay.md).
 *
 *   impi-relay -server ADDR:PORT [-port P] [-auth none|key:FILE]
 *              [-inside ADDR] [-outside ADDR] [-timeout S] [-trunks K]
 *              [-persona-addrs A1,..]
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
#include "impi_cli.h"
#include "impi_proto.h"
#include "impi_relay.h"

#define PROG "impi-relay"

static void usage(FILE *f)
{
    fputs("Usage: impi-relay -server ADDR:PORT [OPTION]...\n"
          "IMPI relay of a cluster with private addresses: the client inside reaches the\n"
          "IMPI job through it. Prints INSIDE_ADDR:PORT, the server address the client\n"
          "inside is given, then relays start-up and every packet between the two sides\n"
          "(a packet still arriving goes on as it comes); at the end it prints how many\n"
          "packets went through.\n"
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
          "  -followers A1,..   the leader: the inside addresses of relays 1 .. K-1; a\n"
          "                     relay joins only from its own (default: any address)\n"
          "  -persona-addrs A1,..\n"
          "                     addresses of this node inside, one for each other client\n"
          "                     of the job in client order, where the relay stands in\n"
          "                     for it (used again from A1 when fewer; default: -inside).\n"
          "                     A LAM/MPI client inside with two or more other clients\n"
          "                     needs them: LAM tells hosts apart by address\n"
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

/* An option of impi-relay's own; see impi_cli_option_t. */
static int relay_option(void *arg, const char *o, const char *v)
{
    impi_relay_config_t *cfg = arg;

    if (!strcmp(o, "-server"))
        cfg->server = v;
    else if (!strcmp(o, "-inside") || !strcmp(o, "-outside")) {
        if (impi_cli_ipv4(PROG, o, v))
            return 2;
        *(!strcmp(o, "-inside") ? &cfg->inside_addr : &cfg->outside_addr) = v;
    } else if (!strcmp(o, "-trunks"))
        return impi_cli_int(PROG, o, v, 1, IMPI_RELAY_TRUNKS_MAX, "want 1..16", &cfg->trunks);
    else if (!strcmp(o, "-rank"))
        return impi_cli_int(PROG, o, v, 1, IMPI_RELAY_TRUNKS_MAX, "want 1..16", &cfg->rank);
    else if (!strcmp(o, "-followers"))
        cfg->followers = v;
    else if (!strcmp(o, "-persona-addrs"))
        cfg->persona_addrs = v;
    else if (!strcmp(o, "-leader"))
        cfg->leader = v;
    else
        return -1;
    return 0;
}

int main(int argc, char **argv)
{
    impi_relay_config_t cfg = { .timeout = 600 };
    impi_cli_common_t common = { &cfg.port, &cfg.require_key, &cfg.key, &cfg.timeout };
    char err[512];
    impi_relay_t *relay;
    icbc_status_t st;
    int r = impi_cli_parse(PROG, argc, argv, usage, &common, relay_option, &cfg);

    if (r)
        return r < 0 ? 0 : r;
    if (cfg.server == NULL)
        return impi_cli_bad(PROG, "-server", "", "impi-server's ADDR:PORT is required");
    if ((cfg.leader != NULL) != (cfg.rank > 0) || (cfg.leader && cfg.trunks))
        return impi_cli_bad(PROG, cfg.leader ? "-leader" : "-rank", "",
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
