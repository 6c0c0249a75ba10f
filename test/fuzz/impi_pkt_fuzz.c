/*
 * Fuzzes impi_pkt_hdr_parse (impi_proto.h) with the first 128 bytes of the
 * input as a packet header from another IMPI host, and the next four as the
 * negotiated DATALEN. Checks:
 *   - it accepts exactly the types 0..7 and ICBC's, DATA and DATASYNC only
 *     with a payload of at most DATALEN and of at most the message length,
 *     ICBC packets only when their header and payload bytes fit the packet
 *     and the message at its offset;
 *   - a control packet's payload length is 0 whatever it said;
 *   - an accepted DATA or ICBC packet packs back to the same 128 bytes.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "icbc_bytes.h"
#include "impi_proto.h"
#include "fuzz_check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t buf[IMPI_PKT_HDR_SIZE], again[IMPI_PKT_HDR_SIZE];
    uint32_t datalen = 65536;
    impi_pkt_hdr_t h;

    if (size < IMPI_PKT_HDR_SIZE)
        return 0;
    memcpy(buf, data, sizeof(buf));
    if (size >= IMPI_PKT_HDR_SIZE + 4)
        datalen = icbc_get32(data + IMPI_PKT_HDR_SIZE);
    uint32_t type = icbc_get32(buf), len = icbc_get32(buf + 4);
    uint64_t msglen = icbc_get64(buf + 72);
    int64_t count = (int64_t) icbc_get64(buf + 104);
    uint64_t seqnum = icbc_get64(buf + 96);
    int icbc = type == IMPI_PK_ICBC;
    int data_pkt = type == IMPI_PK_DATA || type == IMPI_PK_DATASYNC || icbc;
    int valid = type <= IMPI_PK_FINI && (!data_pkt || (len <= datalen && len <= msglen));
    if (icbc) {
        /* in wide arithmetic: no wrap-around hides a bad packet */
        unsigned __int128 end = (unsigned __int128) seqnum + len - (count > 0 ? count : 0);
        valid = len <= datalen && count >= 0 && (uint64_t) count <= len &&
                (count > 0 ? seqnum == 0 && end <= msglen : len > 0 && end <= msglen);
    }
    icbc_status_t st = impi_pkt_hdr_parse(buf, datalen, &h);
    FUZZ_CHECK((st == ICBC_OK) == valid);
    if (st != ICBC_OK)
        return 0;
    FUZZ_CHECK(data_pkt ? h.len == len : h.len == 0);
    FUZZ_CHECK(h.len <= datalen);
    if (data_pkt) {
        impi_pkt_hdr_pack(&h, again);
        FUZZ_CHECK(memcmp(buf, again, sizeof(buf)) == 0);
    }
    return 0;
}
