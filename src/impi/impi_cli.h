/*
 * The options impi-server and impi-relay share, read the same way by both:
 * single-dash options each followed by its value, -help alone. A bad value
 * is said on stderr as "PROG: bad OPT 'VAL': WANT", and the tool exits 2.
 */
#ifndef ICBC_IMPI_CLI_H
#define ICBC_IMPI_CLI_H

#include <stdint.h>
#include <stdio.h>

/* Where the options both tools have go: -port, -auth and -timeout. */
typedef struct impi_cli_common {
    uint16_t *port;
    int *require_key;
    uint64_t *key;
    double *timeout;
} impi_cli_common_t;

/* A tool's own option OPT with value VAL into CFG: 0; 2: a bad value (said
 * on stderr); -1: not one of its options. */
typedef int (*impi_cli_option_t)(void *cfg, const char *opt, const char *val);

/* Reads ARGV[1..]: -help prints USAGE on stdout and returns -1 (the tool
 * exits 0); the shared options go to COMMON, the others to ONE. Returns 0
 * once all are read, 2 at the first bad one (said on stderr). */
int impi_cli_parse(const char *prog, int argc, char **argv, void (*usage)(FILE *),
                   const impi_cli_common_t *common, impi_cli_option_t one, void *cfg);

/* Says what is wrong with option OPT's value VAL; returns 2 (the exit
 * status for a bad option). */
int impi_cli_bad(const char *prog, const char *opt, const char *val, const char *want);

/* The option at ARGV[*I] into *OPT and its value into *VAL, *I past both:
 * 0; 1: it asks for help; 2: it has no value (said on stderr). */
int impi_cli_next(const char *prog, int argc, char **argv, int *i, const char **opt,
                  const char **val);

/* -port P: 0..65535 (0: any free port). */
int impi_cli_port(const char *prog, const char *opt, const char *val, uint16_t *port);
/* -auth none|key:FILE: *REQUIRE_KEY, and the key read from FILE. */
int impi_cli_auth(const char *prog, const char *opt, const char *val, int *require_key,
                  uint64_t *key);
/* -timeout S: seconds, 0..86400 (0: never). */
int impi_cli_seconds(const char *prog, const char *opt, const char *val, double *seconds);
/* An IPv4 address in dotted form. */
int impi_cli_ipv4(const char *prog, const char *opt, const char *val);
/* A whole number LO..HI, WANT saying so. */
int impi_cli_int(const char *prog, const char *opt, const char *val, long lo, long hi,
                 const char *want, int *out);

#endif /* ICBC_IMPI_CLI_H */
