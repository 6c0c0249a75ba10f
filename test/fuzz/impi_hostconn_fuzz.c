/*
 * Fuzzes impi_host_accept_check (src/impi/hostconn.c): what an IMPI host
 * believes of a connection it accepted, from its first 4 bytes and its
 * source address. The layout is fixed (three clients, six hosts at
 * 10.0.C.H); the input is this host's index (1 byte), the claimed rank (4
 * bytes), the source address (4 bytes) and a byte of "connected already"
 * flags per host.
 * Checks:
 *   - a connection is taken only from a host of the job, of higher rank than
 *     this one, from the address that host advertised, not connected yet,
 *     and the host it names is the one returned;
 *   - a refusal comes with a reason that names the source address.
 */
#include <arpa/inet.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_check.h"
#include "icbc_bytes.h"
#include "impi_fuzz_layout.h"
#include "impi_hostconn.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (layout.nclients == 0)
        build_layout();
    if (size < 9)
        return 0;
    int self = data[0] % layout.nhosts_total;
    uint8_t rank[IMPI_HOST_RANK_SIZE];
    memcpy(rank, data + 1, sizeof(rank));
    uint32_t src;
    memcpy(&src, data + 5, 4);
    uint8_t *connected = calloc((size_t) layout.nhosts_total, 1);
    for (int h = 0; h < layout.nhosts_total && 9 + (size_t) h < size; h++)
        connected[h] = data[9 + h] & 1;
    char err[256] = "";
    int host = 42;
    icbc_status_t rc =
        impi_host_accept_check(&layout, self, rank, src, connected, &host, err, sizeof(err));
    uint32_t r = icbc_get32(rank);
    if (rc == ICBC_OK) {
        FUZZ_CHECK(host >= 0 && (uint32_t) host == r && host < layout.nhosts_total);
        FUZZ_CHECK(host > self && !connected[host]);
        FUZZ_CHECK(impi_host_v4(&layout.hosts[host]) == src);
    } else {
        char from[INET_ADDRSTRLEN];
        inet_ntop(AF_INET, &src, from, sizeof(from));
        FUZZ_CHECK(rc == ICBC_ERR_INVALID && host == -1);
        FUZZ_CHECK(strstr(err, from) != NULL);
    }
    free(connected);
    return 0;
}
