/*
 * Fuzzes the IMPI server's protocol (impi_server.h: impi_srv_input) with
 * what up to four connections send: the input is a sequence of records
 * {uint8 slot, uint8 n, n bytes}, each fed to that connection (a record
 * with slot 0xff closes the connection). The first bytes of the corpus
 * seeds are whole, valid start-ups, so the fuzzer works from there. Checks:
 *   - every call returns one of the statuses the header promises, with a
 *     message for every error;
 *   - a connection refused as a stranger (ICBC_ERR_AUTH) leaves the others
 *     untouched and the server usable; any other error ends the input;
 *   - what the server queued for a connection is a sequence of whole
 *     answers: the 8-byte AUTH reply, then commands whose headers parse;
 *   - once every client sent FINI the server says it is finished.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "icbc_bytes.h"
#include "impi_proto.h"
#include "impi_server.h"
#include "fuzz_check.h"

#define NCLIENTS 2

/* The answers queued for a connection, checked: AUTH reply first (when
 * AUTH was answered), then whole commands. */
static void check_output(impi_srv_t *srv, int slot, int *auth_seen)
{
    size_t len, off = 0;
    const uint8_t *p = impi_srv_output(srv, slot, &len);

    if (!*auth_seen && len >= IMPI_AUTH_REPLY_SIZE) {
        uint32_t which = icbc_get32(p);
        FUZZ_CHECK(which == IMPI_AUTH_NONE || which == IMPI_AUTH_KEY);
        off = IMPI_AUTH_REPLY_SIZE;
        *auth_seen = 1;
    }
    while (off < len) {
        impi_cmd_hdr_t h;
        FUZZ_CHECK(len - off >= IMPI_CMD_HDR_SIZE);
        FUZZ_CHECK(impi_cmd_hdr_parse(p + off, &h) == ICBC_OK);
        FUZZ_CHECK(h.cmd != IMPI_CMD_AUTH && h.cmd != IMPI_CMD_FINI);
        FUZZ_CHECK(len - off - IMPI_CMD_HDR_SIZE >= h.len);
        off += IMPI_CMD_HDR_SIZE + h.len;
    }
    impi_srv_consume(srv, slot, len);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    impi_srv_config_t cfg = { NCLIENTS, size > 0 && (data[0] & 1), 12345 };
    impi_srv_t *srv;
    int slots[4], auth_seen[4] = { 0 };
    char err[512];
    size_t off = 1;

    if (impi_srv_create(&cfg, &srv) != ICBC_OK)
        return 0;
    for (int i = 0; i < 4; i++)
        slots[i] = impi_srv_accept(srv, "fuzz");
    while (off + 2 <= size) {
        int which = data[off] & 3, close_it = data[off] == 0xff;
        size_t n = data[off + 1];
        off += 2;
        if (n > size - off)
            n = size - off;
        if (slots[which] < 0) {
            off += n;
            continue;
        }
        err[0] = '\0';
        icbc_status_t st = close_it
                               ? impi_srv_closed(srv, slots[which], err, sizeof(err))
                               : impi_srv_input(srv, slots[which], data + off, n, err, sizeof(err));
        off += n;
        FUZZ_CHECK(st == ICBC_OK || st == ICBC_ERR_AUTH || st == ICBC_ERR_INVALID ||
                   st == ICBC_ERR_PEER_FAILED || st == ICBC_ERR_NO_MEMORY);
        FUZZ_CHECK(st == ICBC_OK || err[0] != '\0');
        if (st == ICBC_ERR_AUTH || (close_it && st == ICBC_OK)) {
            slots[which] = -1; /* refused or closed: this connection is gone */
            continue;
        }
        if (st != ICBC_OK)
            break;
        check_output(srv, slots[which], &auth_seen[which]);
        if (impi_srv_finished(srv)) {
            FUZZ_CHECK(impi_srv_started(srv));
            break;
        }
    }
    impi_srv_destroy(srv);
    return 0;
}
