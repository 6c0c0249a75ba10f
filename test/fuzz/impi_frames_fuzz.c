/*
 * Fuzzes impi_frames_feed (src/impi/agent.c): the frames on a local link
 * of a node's IMPI host, which a process of the node (or anything that
 * reaches the link) writes. The input is the DATALEN bound (1 byte: 1024
 * times 1..16), the size of the pieces the bytes arrive in (1 byte), then
 * the bytes.
 * Checks:
 *   - every frame delivered has a known kind and at most the bound's bytes,
 *     a PACKET at least a packet header;
 *   - a refusal comes with a reason.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_check.h"
#include "impi_agent.h"
#include "impi_proto.h"

static uint32_t bound;

static void on_frame(void *arg, uint32_t kind, uint32_t host, const uint8_t *body, size_t len)
{
    FUZZ_CHECK(kind >= IMPI_FRAME_PACKET && kind <= IMPI_FRAME_LOST);
    FUZZ_CHECK(len <= bound);
    FUZZ_CHECK(kind != IMPI_FRAME_PACKET || len >= IMPI_PKT_HDR_SIZE);
    if (len > 0)
        FUZZ_CHECK(body[0] == body[0] && body[len - 1] == body[len - 1]); /* readable */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    impi_frames_t f;
    char err[256];

    if (size < 2)
        return 0;
    uint32_t datalen = 1024u * (1 + data[0] % 16);
    size_t piece = 1 + data[1] % 200;
    FUZZ_CHECK(impi_frames_init(&f, datalen) == ICBC_OK);
    bound = f.max_len;
    for (size_t i = 2; i < size; i += piece) {
        size_t n = size - i < piece ? size - i : piece;
        uint8_t *copy = malloc(n); /* exactly its bytes, for ASan */
        memcpy(copy, data + i, n);
        err[0] = '\0';
        icbc_status_t st = impi_frames_feed(&f, copy, n, on_frame, NULL, err, sizeof(err));
        free(copy);
        if (st != ICBC_OK) {
            FUZZ_CHECK(err[0] != '\0');
            break;
        }
    }
    impi_frames_free(&f);
    return 0;
}
