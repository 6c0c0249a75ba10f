/* The options impi-server and impi-relay share; see impi_cli.h. */
#include "impi_cli.h"
#include "impi_proto.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int impi_cli_bad(const char *prog, const char *opt, const char *val, const char *want)
{
    fprintf(stderr, "%s: bad %s '%s': %s\n", prog, opt, val ? val : "", want);
    return 2;
}

int impi_cli_next(const char *prog, int argc, char **argv, int *i, const char **opt,
                  const char **val)
{
    *opt = argv[*i];
    *val = *i + 1 < argc ? argv[*i + 1] : NULL;
    if (!strcmp(*opt, "-help") || !strcmp(*opt, "--help") || !strcmp(*opt, "-h"))
        return 1;
    if (*val == NULL)
        return impi_cli_bad(prog, *opt, "", "unknown option or missing value (see -help)");
    (*i)++;
    return 0;
}

int impi_cli_int(const char *prog, const char *opt, const char *val, long lo, long hi,
                 const char *want, int *out)
{
    char *end;
    long n = strtol(val, &end, 10);

    if (*val == '\0' || *end || n < lo || n > hi)
        return impi_cli_bad(prog, opt, val, want);
    *out = (int) n;
    return 0;
}

int impi_cli_port(const char *prog, const char *opt, const char *val, uint16_t *port)
{
    int p;

    if (impi_cli_int(prog, opt, val, 0, 65535, "want 0..65535", &p))
        return 2;
    *port = (uint16_t) p;
    return 0;
}

int impi_cli_auth(const char *prog, const char *opt, const char *val, int *require_key,
                  uint64_t *key)
{
    char err[256];

    if (!strcmp(val, "none")) {
        *require_key = 0;
        return 0;
    }
    if (strncmp(val, "key:", 4) || !val[4])
        return impi_cli_bad(prog, opt, val, "want none or key:FILE");
    if (impi_key_read(val + 4, key, err, sizeof(err)) != ICBC_OK) {
        fprintf(stderr, "%s: %s\n", prog, err);
        return 2;
    }
    *require_key = 1;
    return 0;
}

int impi_cli_seconds(const char *prog, const char *opt, const char *val, double *seconds)
{
    char *end;
    double t = strtod(val, &end);

    if (*val == '\0' || *end || !(t >= 0 && t <= 86400))
        return impi_cli_bad(prog, opt, val, "want seconds, 0..86400");
    *seconds = t;
    return 0;
}

int impi_cli_ipv4(const char *prog, const char *opt, const char *val)
{
    struct in_addr a;

    return inet_pton(AF_INET, val, &a) == 1 ? 0
                                            : impi_cli_bad(prog, opt, val, "want an IPv4 address");
}

int impi_cli_parse(const char *prog, int argc, char **argv, void (*usage)(FILE *),
                   const impi_cli_common_t *common, impi_cli_option_t one, void *cfg)
{
    for (int i = 1; i < argc; i++) {
        const char *o, *v;
        int r = impi_cli_next(prog, argc, argv, &i, &o, &v);

        if (r == 1) {
            usage(stdout);
            return -1;
        }
        if (r == 0 && !strcmp(o, "-port"))
            r = impi_cli_port(prog, o, v, common->port);
        else if (r == 0 && !strcmp(o, "-auth"))
            r = impi_cli_auth(prog, o, v, common->require_key, common->key);
        else if (r == 0 && !strcmp(o, "-timeout"))
            r = impi_cli_seconds(prog, o, v, common->timeout);
        else if (r == 0 && (r = one(cfg, o, v)) < 0)
            r = impi_cli_bad(prog, o, v, "unknown option (see -help)");
        if (r)
            return r;
    }
    return 0;
}
