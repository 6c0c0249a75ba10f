/* Pacing: a token bucket for a process's inter-cluster sending (icbc_pace.h). */
#include "icbc_pace.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#define RATE_MAX 1e15 /* bits/s */

void icbc_pace_init(icbc_pace_t *p)
{
    memset(p, 0, sizeof(*p));
}

/* Tokens accrued since the last update, up to the burst. */
static void refill(icbc_pace_t *p, double now)
{
    if (now > p->t) {
        p->tokens += (now - p->t) * p->rate;
        if (p->tokens > p->burst)
            p->tokens = p->burst;
    }
    p->t = now;
}

void icbc_pace_set_rate(icbc_pace_t *p, uint64_t bits_per_s, double now)
{
    double rate = (double) bits_per_s / 8.0;

    if (rate == p->rate)
        return;
    if (p->rate > 0) {
        refill(p, now); /* at the old rate until now */
    } else if (rate > 0 && p->t > 0 && now > p->t) {
        /* on again: a debt left when it went off is repaid at the new rate
         * over the time it was off (collectives paced back to back pace
         * as one) */
        p->tokens += (now - p->t) * rate;
    }
    p->rate = rate;
    p->t = now;
    p->burst = rate * ICBC_PACE_BURST_SECONDS;
    if (p->burst < ICBC_PACE_BURST_MIN)
        p->burst = ICBC_PACE_BURST_MIN;
    if (p->tokens > p->burst)
        p->tokens = p->burst;
}

uint64_t icbc_pace_rate(const icbc_pace_t *p)
{
    return (uint64_t) (p->rate * 8.0 + 0.5);
}

int icbc_pace_may_send(icbc_pace_t *p, double now)
{
    if (p->rate <= 0)
        return 1;
    refill(p, now);
    if (p->tokens >= 0)
        return 1;
    p->waits++;
    return 0;
}

void icbc_pace_charge(icbc_pace_t *p, size_t bytes)
{
    p->bytes += bytes;
    if (p->rate > 0)
        p->tokens -= (double) bytes * ICBC_PACE_WIRE_BYTES / ICBC_PACE_SEGMENT_PAYLOAD;
}

double icbc_pace_wait(const icbc_pace_t *p, double now)
{
    double tokens;

    if (p->rate <= 0)
        return 0;
    tokens = p->tokens + (now > p->t ? (now - p->t) * p->rate : 0);
    return tokens >= 0 ? 0 : -tokens / p->rate;
}

icbc_status_t icbc_pace_parse_rate(const char *text, uint64_t *bits_per_s)
{
    static const struct {
        const char *name;
        double scale;
    } units[] = { { "", 1 }, { "bit", 1 }, { "kbit", 1e3 }, { "mbit", 1e6 }, { "gbit", 1e9 } };
    const char *p = text;
    double v = 0, frac = 0.1;
    int digits = 0;

    if (text == NULL)
        return ICBC_ERR_INVALID;
    /* by hand, not strtod: no sign, exponent, hex or locale */
    for (; isdigit((unsigned char) *p); p++, digits++)
        v = v * 10 + (*p - '0');
    if (*p == '.') {
        for (p++; isdigit((unsigned char) *p); p++, digits++, frac /= 10)
            v += (*p - '0') * frac;
    }
    if (digits == 0 || digits > 20)
        return ICBC_ERR_INVALID;
    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
        if (strcmp(p, units[i].name) == 0) {
            v *= units[i].scale;
            if (!(v <= RATE_MAX))
                return ICBC_ERR_INVALID;
            *bits_per_s = (uint64_t) (v + 0.5);
            return ICBC_OK;
        }
    }
    return ICBC_ERR_INVALID;
}
