/*
 * Fuzzes impi_layout_add (src/impi/layout.c): the COLL answers of an IMPI
 * server, from which a client learns the job. The input is the number of
 * clients (1 byte), then records {label (1 byte: index into the labels, or
 * a raw label when >= 0x80 follows as 4 bytes), mask (4 bytes), length
 * (2 bytes), that many bytes}; each is given to impi_layout_add until one is
 * refused, then impi_layout_check.
 * Checks:
 *   - a refusal comes with a non-empty reason, also into a short buffer;
 *   - an accepted layout is consistent: clients' first hosts and ranks are
 *     prefix sums of their counts, every host belongs to its client, hosts'
 *     processes add up to their client's, and hosts' first ranks follow each
 *     other inside the world;
 *   - the negotiated values are within the bounds impi_client.h promises.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_check.h"
#include "impi_client.h"

static void check_layout(const impi_layout_t *l)
{
    int host = 0, rank = 0;

    for (int c = 0; c < l->nclients; c++) {
        FUZZ_CHECK(l->first_host[c] == host);
        FUZZ_CHECK(l->first_rank[c] == rank);
        FUZZ_CHECK(l->nhosts[c] >= 1 && l->nprocs[c] >= l->nhosts[c]);
        uint64_t sum = 0;
        for (uint32_t k = 0; k < l->nhosts[c]; k++) {
            const impi_host_t *h = &l->hosts[host + (int) k];
            FUZZ_CHECK(h->client == c);
            FUZZ_CHECK(h->first_rank == rank + (int) sum);
            FUZZ_CHECK(h->nprocs >= 1);
            FUZZ_CHECK(h->port >= 1 && h->port <= 65535);
            sum += h->nprocs;
        }
        FUZZ_CHECK(sum == l->nprocs[c]);
        host += (int) l->nhosts[c];
        rank += (int) l->nprocs[c];
    }
    FUZZ_CHECK(host == l->nhosts_total && rank == l->nprocs_total);
    FUZZ_CHECK(rank <= (int) IMPI_PROCS_MAX && host <= (int) IMPI_HOSTS_MAX);
    FUZZ_CHECK(l->datalen >= IMPI_DATALEN_MIN);
    FUZZ_CHECK(l->tagub >= IMPI_TAGUB_MIN);
    FUZZ_CHECK(l->coll_xsize >= 0 && l->coll_maxlinear >= 1);
    FUZZ_CHECK(l->ackmark >= 1 && l->hiwater >= 1);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    impi_layout_t l;
    char err[256], small[8];
    int nlabels;
    const uint32_t *labels = impi_layout_labels(&nlabels);
    size_t i = 1;
    icbc_status_t rc = ICBC_OK;

    if (size < 1 || impi_layout_init(&l, 1 + data[0] % IMPI_MAX_CLIENTS) != ICBC_OK)
        return 0;
    while (rc == ICBC_OK && i + 7 <= size) {
        uint32_t label = data[i] < 0x80 ? labels[data[i] % nlabels] : 0;
        i++;
        if (label == 0) {
            if (i + 4 > size)
                break;
            label = (uint32_t) data[i] << 24 | (uint32_t) data[i + 1] << 16 |
                    (uint32_t) data[i + 2] << 8 | data[i + 3];
            i += 4;
        }
        if (i + 6 > size)
            break;
        uint32_t mask = (uint32_t) data[i] << 24 | (uint32_t) data[i + 1] << 16 |
                        (uint32_t) data[i + 2] << 8 | data[i + 3];
        size_t len = (size_t) data[i + 4] << 8 | data[i + 5];
        i += 6;
        if (len > size - i)
            len = size - i;
        err[0] = '\0';
        /* exactly LEN bytes of their own, so a read past them is caught */
        uint8_t *copy = malloc(len ? len : 1);
        memcpy(copy, data + i, len);
        rc = impi_layout_add(&l, label, mask, copy, len, err, sizeof(err));
        free(copy);
        i += len;
        if (rc == ICBC_ERR_INVALID) {
            FUZZ_CHECK(err[0] != '\0');
        } else {
            FUZZ_CHECK(rc == ICBC_OK || rc == ICBC_ERR_NO_MEMORY);
        }
    }
    if (rc == ICBC_OK) {
        err[0] = '\0';
        small[0] = 'x';
        rc = impi_layout_check(&l, small, sizeof(small));
        FUZZ_CHECK(rc == ICBC_OK || (rc == ICBC_ERR_INVALID && small[0] != '\0' &&
                                     memchr(small, '\0', sizeof(small)) != NULL));
        if (rc == ICBC_OK)
            check_layout(&l);
    }
    impi_layout_free(&l);
    return 0;
}
