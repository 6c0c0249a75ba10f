/*
 * Fuzzes impi_link_rx_feed (src/impi/relay_link.c): the frames on a link
 * between two relays of a trunk (impi_relay_link.h), which another relay
 * writes once its first frame and source address were taken (and anything
 * that reaches a relay's link port could try). The input is the bound on a
 * frame's body (1 byte: 128 + 1024 times 0..15), the size of the pieces the
 * bytes arrive in (1 byte), then the bytes.
 * Checks:
 *   - every frame delivered has a known kind and at most the bound's bytes,
 *     all of them readable;
 *   - a refusal comes with a reason, and every later piece is refused too.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_check.h"
#include "impi_relay_link.h"

static uint32_t bound;

static void on_frame(void *arg, uint32_t kind, uint32_t a, uint32_t b, const uint8_t *body,
                     size_t len)
{
    (void) arg;
    (void) a;
    (void) b;
    FUZZ_CHECK(kind == IMPI_LINK_HELLO ||
               (kind >= IMPI_LINK_CLIENTS && kind <= IMPI_LINK_FINI_OUT));
    FUZZ_CHECK(len <= bound);
    if (len > 0)
        FUZZ_CHECK(body[0] == body[0] && body[len - 1] == body[len - 1]); /* readable */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    impi_link_rx_t rx;
    char err[256];
    int refused = 0;

    if (size < 2)
        return 0;
    bound = 128 + 1024u * (data[0] % 16);
    size_t piece = 1 + data[1] % 200;
    impi_link_rx_init(&rx, bound);
    for (size_t i = 2; i < size; i += piece) {
        size_t n = size - i < piece ? size - i : piece;
        uint8_t *copy = malloc(n); /* exactly its bytes, for ASan */
        memcpy(copy, data + i, n);
        err[0] = '\0';
        icbc_status_t st = impi_link_rx_feed(&rx, copy, n, on_frame, NULL, err, sizeof(err));
        free(copy);
        FUZZ_CHECK(!refused || st != ICBC_OK);
        if (st != ICBC_OK) {
            FUZZ_CHECK(err[0] != '\0');
            refused = 1;
        }
    }
    impi_link_rx_free(&rx);
    return 0;
}
