/*
 * The layout the IMPI fuzz targets share: three clients, six hosts at
 * 10.0.C.H (client 0: hosts of 1 and 2 processes, client 1: one of 3,
 * client 2: three of 1), pids counting from 0 in each client; clients 0 and
 * 1 are ICBC, client 2 another MPI (no ICBC labels); built once
 * through impi_local_part and impi_layout_add, as a client learns a job.
 */
#ifndef ICBC_IMPI_FUZZ_LAYOUT_H
#define ICBC_IMPI_FUZZ_LAYOUT_H

#include <stdlib.h>
#include <string.h>

#include "fuzz_check.h"
#include "impi_client.h"

#define NCLIENTS 3

static impi_layout_t layout;

static inline void build_layout(void)
{
    static const uint32_t per_client[NCLIENTS][3] = { { 1, 2, 0 }, { 3, 0, 0 }, { 1, 1, 1 } };
    impi_host_t hosts[NCLIENTS][3];
    impi_proc_t procs[NCLIENTS][8];
    impi_local_t local[NCLIENTS];
    int n;
    const uint32_t *labels = impi_layout_labels(&n);
    char err[256];

    memset(hosts, 0, sizeof(hosts));
    memset(procs, 0, sizeof(procs));
    for (int c = 0; c < NCLIENTS; c++) {
        uint32_t nh = 0, np = 0;
        for (int h = 0; h < 3 && per_client[c][h]; h++, nh++) {
            impi_host_t *ho = &hosts[c][h];
            ho->addr[12] = 10;
            ho->addr[14] = (uint8_t) c;
            ho->addr[15] = (uint8_t) h;
            ho->port = 6000 + (uint32_t) h;
            ho->nprocs = per_client[c][h];
            for (uint32_t k = 0; k < per_client[c][h]; k++, np++) {
                memcpy(procs[c][np].host, ho->addr, 16);
                procs[c][np].pid = np;
            }
        }
        local[c] = (impi_local_t){ nh, np, hosts[c], procs[c], 0, 0, -1, -1 };
    }
    FUZZ_CHECK(impi_layout_init(&layout, NCLIENTS) == ICBC_OK);
    for (int i = 0; i < n; i++) {
        uint8_t buf[1024];
        size_t len = 0;
        /* client 2 stands for another MPI: it gives no ICBC label */
        int icbc_only = labels[i] == IMPI_C_ICBC_DATAREP || labels[i] == IMPI_C_ICBC_HOSTS;
        uint32_t mask = icbc_only ? 3u : (1u << NCLIENTS) - 1;
        for (int c = 0; c < NCLIENTS; c++) {
            if (!(mask >> c & 1))
                continue;
            uint8_t *part;
            size_t plen;
            FUZZ_CHECK(impi_local_part(&local[c], labels[i], &part, &plen) == ICBC_OK);
            memcpy(buf + len, part, plen);
            len += plen;
            free(part);
        }
        FUZZ_CHECK(impi_layout_add(&layout, labels[i], mask, buf, len, err, sizeof(err)) ==
                   ICBC_OK);
    }
    FUZZ_CHECK(impi_layout_check(&layout, err, sizeof(err)) == ICBC_OK);
}

#endif /* ICBC_IMPI_FUZZ_LAYOUT_H */
