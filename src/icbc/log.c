/* Line-oriented logging to stderr; see icbc_log.h. */
#include "icbc_log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static char log_ident[64] = "icbc";
#define LEVEL_UNSET (-2)
static int log_level = LEVEL_UNSET; /* not read from the environment yet */

static int log_level_from_env(void)
{
    const char *s = getenv("ICBC_LOG_LEVEL");
    if (s == NULL)
        return ICBC_LOG_WARN;
    if (!strcasecmp(s, "off"))
        return ICBC_LOG_OFF;
    if (!strcasecmp(s, "error"))
        return ICBC_LOG_ERROR;
    if (!strcasecmp(s, "warn"))
        return ICBC_LOG_WARN;
    if (!strcasecmp(s, "info"))
        return ICBC_LOG_INFO;
    if (!strcasecmp(s, "debug"))
        return ICBC_LOG_DEBUG;
    return ICBC_LOG_WARN;
}

void icbc_log_set_ident(const char *ident)
{
    snprintf(log_ident, sizeof(log_ident), "%s", ident);
}

void icbc_log_set_level(icbc_log_level_t level)
{
    log_level = level;
}

int icbc_log_enabled(icbc_log_level_t level)
{
    if (log_level == LEVEL_UNSET)
        log_level = log_level_from_env();
    return (int) level <= log_level;
}

void icbc_log(icbc_log_level_t level, const char *fmt, ...)
{
    static const char *names[] = { "error", "warn", "info", "debug" };
    char line[1024], *text = line;
    va_list ap;
    int n;

    if (!icbc_log_enabled(level))
        return;
    va_start(ap, fmt);
    n = vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    /* a long line (a router's stats with its trunks and processes) whole */
    if (n >= (int) sizeof(line) && (text = malloc((size_t) n + 1)) != NULL) {
        va_start(ap, fmt);
        vsnprintf(text, (size_t) n + 1, fmt, ap);
        va_end(ap);
    } else if (text == NULL) {
        text = line;
    }
    fprintf(stderr, "[%s] %s: %s\n", log_ident, names[level], text);
    if (text != line)
        free(text);
}
