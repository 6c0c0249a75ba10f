/*
 * icbc-router's command line: one table (router_opts.c) from which the
 * parser, --help and the SYNOPSIS and OPTIONS of docs/router.md all come
 * (`icbc-router --help-markdown` prints the latter; a unit test holds the
 * manual to it).
 */
#ifndef ICBC_ROUTER_OPTS_H
#define ICBC_ROUTER_OPTS_H

#include <stdio.h>

#include "icbc_log.h"
#include "router.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rt_cli {
    icbc_router_config_t cfg; /* .rf is the caller's to set */
    const char *rf_path;      /* default: $ICBC_ROUTERFILE */
    const char *pidfile;
    const char *logfile;
    int daemon;
    icbc_log_level_t level; /* default: $ICBC_LOG_LEVEL, else info */
    int help;               /* 1: --help, 2: --help-markdown */
} rt_cli_t;

/* Parses ARGV into CLI (defaults first). 0: done; 2: a bad option or value,
 * with the message (naming the option and what a good value looks like)
 * in ERR. */
int rt_cli_parse(int argc, char **argv, rt_cli_t *cli, char *err, size_t errlen);

/* --help */
void rt_cli_usage(FILE *f);
/* The SYNOPSIS and OPTIONS sections of docs/router.md. */
void rt_cli_markdown(FILE *f);

#ifdef __cplusplus
}
#endif

#endif /* ICBC_ROUTER_OPTS_H */
