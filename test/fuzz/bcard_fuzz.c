/*
 * Fuzzes icbc_bcard_parse (icbc_bcard.h) with the input as a business card
 * read from PMI. Checks:
 *   - a refused card comes with a non-empty message, also into a short
 *     error buffer (which must stay terminated and in bounds), and the
 *     status does not depend on the error buffer;
 *   - an accepted card has a terminated node name of 1..63 printable bytes,
 *     a fabric address inside the input (NULL when empty) and 0..4 valid
 *     TCP endpoints;
 *   - re-encoding the card (icbc_bcard_encode_tcp) reproduces the input up
 *     to what the input held (header, name, address, endpoints, machine id)
 *     and parses again to the same card; so does icbc_bcard_encode for a
 *     card without endpoints and machine id.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "icbc_bcard.h"
#include "fuzz_check.h"

#define MACHINE_SIZE 8

static int valid_tcp(const icbc_bcard_tcp_t *t)
{
    return (t->role == ICBC_BCARD_TCP_WAN || t->role == ICBC_BCARD_TCP_FABRIC) &&
           (t->family == 4 || t->family == 6) && t->port != 0;
}

static int same_card(const icbc_bcard_t *a, const icbc_bcard_t *b)
{
    if (strcmp(a->node, b->node) != 0 || a->fabric_addr_len != b->fabric_addr_len ||
        a->ntcp != b->ntcp || a->machine != b->machine)
        return 0;
    if (a->fabric_addr_len > 0 && memcmp(a->fabric_addr, b->fabric_addr, a->fabric_addr_len) != 0)
        return 0;
    for (int i = 0; i < a->ntcp; i++)
        if (memcmp(&a->tcp[i], &b->tcp[i], sizeof(a->tcp[i])) != 0)
            return 0;
    return 1;
}

/* Encodes CARD with ENCODE_TCP (or the plain encoder), checks the bytes
 * against the input and parses them back. */
static void round_trip(const icbc_bcard_t *card, const uint8_t *data, size_t size, int with_tcp)
{
    size_t cap, len = 0, body, full;
    icbc_bcard_t again;
    uint8_t *enc;

    body = icbc_bcard_size(card->node, card->fabric_addr_len);
    cap = with_tcp ? icbc_bcard_size_tcp(card->node, card->fabric_addr_len, card->ntcp) : body;
    enc = malloc(cap);
    FUZZ_CHECK(enc != NULL);
    if (with_tcp)
        FUZZ_CHECK(icbc_bcard_encode_tcp(card->node, card->fabric_addr, card->fabric_addr_len,
                                         card->tcp, card->ntcp, card->machine, enc, cap,
                                         &len) == ICBC_OK);
    else
        FUZZ_CHECK(icbc_bcard_encode(card->node, card->fabric_addr, card->fabric_addr_len, enc, cap,
                                     &len) == ICBC_OK);
    FUZZ_CHECK(len == cap);

    /* Header, name and address are the input's own bytes. */
    FUZZ_CHECK(body <= size);
    FUZZ_CHECK(memcmp(enc, data, body) == 0);
    /* With the count, endpoints and machine id present in full, every byte
     * matches; a shorter input lacks the machine id (it reads as 0). */
    full = body + 1 + (size_t) card->ntcp * ICBC_BCARD_TCP_SIZE + MACHINE_SIZE;
    if (with_tcp && size >= full)
        FUZZ_CHECK(memcmp(enc, data, full) == 0);

    memset(&again, 0, sizeof(again));
    FUZZ_CHECK(icbc_bcard_parse(enc, len, &again, NULL, 0) == ICBC_OK);
    FUZZ_CHECK(same_card(card, &again));
    free(enc);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    icbc_bcard_t card, card2;
    char err[256], *small;
    size_t smalllen;
    icbc_status_t st, st2;

    memset(&card, 0, sizeof(card));
    err[0] = '\0';
    st = icbc_bcard_parse(data, size, &card, err, sizeof(err));
    FUZZ_CHECK(st == ICBC_OK || st == ICBC_ERR_INVALID);
    FUZZ_CHECK(memchr(err, '\0', sizeof(err)) != NULL);

    /* Same status without an error buffer and with a short one. */
    st2 = icbc_bcard_parse(data, size, &card2, NULL, 0);
    FUZZ_CHECK(st2 == st);
    smalllen = 1 + (size > 0 ? data[size - 1] % 16 : 0);
    small = malloc(smalllen);
    FUZZ_CHECK(small != NULL);
    memset(small, 'x', smalllen);
    st2 = icbc_bcard_parse(data, size, &card2, small, smalllen);
    FUZZ_CHECK(st2 == st);
    if (st != ICBC_OK) {
        FUZZ_CHECK(err[0] != '\0');
        FUZZ_CHECK(memchr(small, '\0', smalllen) != NULL);
        FUZZ_CHECK(strncmp(small, err, smalllen - 1) == 0);
        free(small);
        return 0;
    }
    free(small);

    /* The parsed card. */
    size_t n = strnlen(card.node, sizeof(card.node));
    FUZZ_CHECK(n >= 1 && n <= ICBC_BCARD_MAX_NAME);
    for (size_t i = 0; i < n; i++)
        FUZZ_CHECK(card.node[i] >= 0x21 && card.node[i] <= 0x7e);
    FUZZ_CHECK(size >= ICBC_BCARD_HEADER_SIZE + n + card.fabric_addr_len);
    if (card.fabric_addr_len == 0) {
        FUZZ_CHECK(card.fabric_addr == NULL);
    } else {
        const uint8_t *a = card.fabric_addr;
        FUZZ_CHECK(a == data + ICBC_BCARD_HEADER_SIZE + n);
        FUZZ_CHECK(card.fabric_addr_len <= size - (size_t) (a - data));
    }
    FUZZ_CHECK(card.ntcp >= 0 && card.ntcp <= ICBC_BCARD_MAX_TCP);
    for (int i = 0; i < card.ntcp; i++) {
        FUZZ_CHECK(valid_tcp(&card.tcp[i]));
        FUZZ_CHECK(icbc_bcard_find_tcp(&card, card.tcp[i].role) != NULL);
    }

    round_trip(&card, data, size, 1);
    if (card.ntcp == 0 && card.machine == 0)
        round_trip(&card, data, size, 0);
    return 0;
}
