/* Parsing of rate, time and size strings, in the spelling tc uses. */
#include "wanemu.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

struct unit {
    const char *name;
    double mult;
    int case_sensitive;
};

/* Split "12.5mbit" into 12.5 and "mbit"; only digits and one dot are allowed
 * before the unit, so "-1", "1e3" and " 5ms" are rejected. */
static icbc_status_t split_number(const char *s, double *num, const char **unit)
{
    const char *p = s;
    int digits = 0, dot = 0;
    char *end;

    if (s == NULL || *s == '\0') return ICBC_ERR_INVALID;
    for (; *p; p++) {
        if (*p >= '0' && *p <= '9') {
            digits++;
        } else if (*p == '.' && !dot && digits > 0) {
            dot = 1;
        } else {
            break;
        }
    }
    if (digits == 0 || p[-1] == '.') return ICBC_ERR_INVALID;
    errno = 0;
    *num = strtod(s, &end);
    if (errno != 0 || end != p || !isfinite(*num)) return ICBC_ERR_INVALID;
    *unit = p;
    return ICBC_OK;
}

static const struct unit *find_unit(const struct unit *units, const char *name)
{
    for (; units->name != NULL; units++) {
        if (units->case_sensitive ? !strcmp(name, units->name) : !strcasecmp(name, units->name))
            return units;
    }
    return NULL;
}

static icbc_status_t parse(const char *s, const struct unit *units, int bare_ok, double max,
                           double *out)
{
    double num;
    const char *u;
    const struct unit *unit;

    if (split_number(s, &num, &u) != ICBC_OK) return ICBC_ERR_INVALID;
    if (*u == '\0') {
        if (!bare_ok && num != 0) return ICBC_ERR_INVALID;
        *out = num;
    } else {
        unit = find_unit(units, u);
        if (unit == NULL) return ICBC_ERR_INVALID;
        *out = num * unit->mult;
    }
    if (*out > max) return ICBC_ERR_INVALID;
    return ICBC_OK;
}

icbc_status_t wanemu_parse_rate(const char *s, uint64_t *bps)
{
    static const struct unit units[] = {
        { "bit", 1, 0 },     { "kbit", 1e3, 0 }, { "mbit", 1e6, 0 }, { "gbit", 1e9, 0 },
        { "tbit", 1e12, 0 }, { "bps", 8, 0 },    { "kbps", 8e3, 0 }, { "mbps", 8e6, 0 },
        { "gbps", 8e9, 0 },  { NULL, 0, 0 },
    };
    double v;

    /* A bare number is only accepted as 0 (unlimited): "100" is ambiguous. */
    if (parse(s, units, 0, 1e13, &v) != ICBC_OK) return ICBC_ERR_INVALID;
    *bps = (uint64_t) llround(v);
    return ICBC_OK;
}

icbc_status_t wanemu_parse_time(const char *s, int64_t *ns)
{
    static const struct unit units[] = {
        { "ns", 1, 1 }, { "us", 1e3, 1 }, { "ms", 1e6, 1 }, { "s", 1e9, 1 }, { NULL, 0, 0 },
    };
    double v;

    if (parse(s, units, 0, 3600e9, &v) != ICBC_OK) return ICBC_ERR_INVALID;
    *ns = llround(v);
    return ICBC_OK;
}

icbc_status_t wanemu_parse_size(const char *s, uint64_t *bytes)
{
    static const struct unit units[] = {
        { "B", 1, 1 },           { "b", 1, 1 },           { "KiB", 1024.0, 1 },
        { "k", 1024.0, 1 },      { "K", 1024.0, 1 },      { "kb", 1024.0, 1 },
        { "MiB", 1048576.0, 1 }, { "M", 1048576.0, 1 },   { "m", 1048576.0, 1 },
        { "mb", 1048576.0, 1 },  { "GiB", 1073741824.0, 1 }, { "G", 1073741824.0, 1 },
        { "g", 1073741824.0, 1 }, { "gb", 1073741824.0, 1 }, { "KB", 1e3, 1 },
        { "MB", 1e6, 1 },        { "GB", 1e9, 1 },        { NULL, 0, 0 },
    };
    double v;

    if (parse(s, units, 1, 64.0 * 1073741824.0, &v) != ICBC_OK) return ICBC_ERR_INVALID;
    *bytes = (uint64_t) llround(v);
    return ICBC_OK;
}
