/*
 * Logging for libicbc, the routers and the tools. One line per event on
 * stderr, prefixed with the component and the process identity set by
 * icbc_log_set_ident(). ICBC_LOG_LEVEL (off, error, warn, info, debug) filters.
 */
#ifndef ICBC_LOG_H
#define ICBC_LOG_H

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    ICBC_LOG_OFF = -1, /* nothing (a fuzzer's hostile peers, for example) */
    ICBC_LOG_ERROR = 0,
    ICBC_LOG_WARN = 1,
    ICBC_LOG_INFO = 2,
    ICBC_LOG_DEBUG = 3,
} icbc_log_level_t;

void icbc_log_set_ident(const char *ident);
void icbc_log_set_level(icbc_log_level_t level);
int icbc_log_enabled(icbc_log_level_t level);
void icbc_log(icbc_log_level_t level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define icbc_error(...) icbc_log(ICBC_LOG_ERROR, __VA_ARGS__)
#define icbc_warn(...) icbc_log(ICBC_LOG_WARN, __VA_ARGS__)
#define icbc_info(...) icbc_log(ICBC_LOG_INFO, __VA_ARGS__)
#define icbc_debug(...)                                                                            \
    do {                                                                                           \
        if (icbc_log_enabled(ICBC_LOG_DEBUG))                                                      \
            icbc_log(ICBC_LOG_DEBUG, __VA_ARGS__);                                                 \
    } while (0)

#ifdef __cplusplus
}
#endif

#endif /* ICBC_LOG_H */
