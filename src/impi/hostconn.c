/* Connections between IMPI hosts: who connects, and what an accepting host
 * believes; see impi_hostconn.h. */
#include "impi_hostconn.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>

#include "icbc_bytes.h"

uint32_t impi_host_v4(const impi_host_t *h)
{
    uint32_t v4;

    memcpy(&v4, h->addr + 12, 4);
    return v4;
}

icbc_status_t impi_host_accept_check(const impi_layout_t *l, int self, const uint8_t *rank,
                                     uint32_t src_v4, const uint8_t *connected, int *host,
                                     char *err, size_t errlen)
{
    uint32_t r = icbc_get32(rank);
    char from[INET_ADDRSTRLEN], want[INET_ADDRSTRLEN];

    *host = -1;
    inet_ntop(AF_INET, &src_v4, from, sizeof(from));
    if (r >= (uint32_t) l->nhosts_total) {
        snprintf(err, errlen, "a connection from %s names host %u; the job has %d hosts", from, r,
                 l->nhosts_total);
        return ICBC_ERR_INVALID;
    }
    if (!impi_host_connects((int) r, self)) {
        snprintf(err, errlen,
                 "a connection from %s names host %u, which does not connect to host %d "
                 "(only hosts of higher rank do)",
                 from, r, self);
        return ICBC_ERR_INVALID;
    }
    uint32_t v4 = impi_host_v4(&l->hosts[r]);
    if (v4 != src_v4) {
        inet_ntop(AF_INET, &v4, want, sizeof(want));
        snprintf(err, errlen,
                 "a connection from %s names host %u, which advertised %s (a host connects from "
                 "the address it advertised)",
                 from, r, want);
        return ICBC_ERR_INVALID;
    }
    if (connected[r]) {
        snprintf(err, errlen, "a second connection from host %u (%s)", r, from);
        return ICBC_ERR_INVALID;
    }
    *host = (int) r;
    return ICBC_OK;
}
