/* IMPI command and packet headers; see impi_proto.h. */
#include "impi_proto.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "icbc_bytes.h"

void impi_cmd_hdr_pack(uint32_t cmd, uint32_t len, void *buf)
{
    icbc_put32(buf, cmd);
    icbc_put32((uint8_t *) buf + 4, len);
}

icbc_status_t impi_cmd_hdr_parse(const void *buf, impi_cmd_hdr_t *hdr)
{
    hdr->cmd = icbc_get32(buf);
    hdr->len = icbc_get32((const uint8_t *) buf + 4);
    switch (hdr->cmd) {
    case IMPI_CMD_AUTH:
    case IMPI_CMD_IMPI: return hdr->len == 4 ? ICBC_OK : ICBC_ERR_INVALID;
    case IMPI_CMD_DONE:
    case IMPI_CMD_FINI: return hdr->len == 0 ? ICBC_OK : ICBC_ERR_INVALID;
    case IMPI_CMD_COLL:
        return hdr->len >= 4 && hdr->len <= IMPI_CMD_LEN_MAX ? ICBC_OK : ICBC_ERR_INVALID;
    default: return ICBC_ERR_INVALID;
    }
}

const char *impi_cmd_name(uint32_t cmd)
{
    switch (cmd) {
    case IMPI_CMD_AUTH: return "AUTH";
    case IMPI_CMD_IMPI: return "IMPI";
    case IMPI_CMD_COLL: return "COLL";
    case IMPI_CMD_DONE: return "DONE";
    case IMPI_CMD_FINI: return "FINI";
    default: return "?";
    }
}

static void put_proc(uint8_t *p, const impi_proc_t *proc)
{
    memcpy(p, proc->host, 16);
    icbc_put64(p + 16, (uint64_t) proc->pid);
}

static void get_proc(const uint8_t *p, impi_proc_t *proc)
{
    memcpy(proc->host, p, 16);
    proc->pid = (int64_t) icbc_get64(p + 16);
}

void impi_pkt_hdr_pack(const impi_pkt_hdr_t *h, void *buf)
{
    uint8_t *p = buf;

    icbc_put32(p, h->type);
    icbc_put32(p + 4, h->len);
    put_proc(p + 8, &h->src);
    put_proc(p + 32, &h->dest);
    icbc_put64(p + 56, h->srqid);
    icbc_put64(p + 64, h->drqid);
    icbc_put64(p + 72, h->msglen);
    icbc_put32(p + 80, (uint32_t) h->lsrank);
    icbc_put32(p + 84, (uint32_t) h->tag);
    icbc_put64(p + 88, h->cid);
    icbc_put64(p + 96, h->seqnum);
    icbc_put64(p + 104, (uint64_t) h->count);
    icbc_put64(p + 112, h->dtype);
    icbc_put64(p + 120, h->reserved);
}

void impi_pkt_fini_pack(void *buf)
{
    impi_pkt_hdr_t h;

    memset(&h, 0, sizeof(h));
    h.type = IMPI_PK_FINI;
    h.src.pid = h.dest.pid = -1;
    h.lsrank = h.tag = -1;
    h.count = -1;
    impi_pkt_hdr_pack(&h, buf);
}

icbc_status_t impi_pkt_hdr_parse(const void *buf, uint32_t datalen, impi_pkt_hdr_t *h)
{
    const uint8_t *p = buf;

    h->type = icbc_get32(p);
    h->len = icbc_get32(p + 4);
    get_proc(p + 8, &h->src);
    get_proc(p + 32, &h->dest);
    h->srqid = icbc_get64(p + 56);
    h->drqid = icbc_get64(p + 64);
    h->msglen = icbc_get64(p + 72);
    h->lsrank = (int32_t) icbc_get32(p + 80);
    h->tag = (int32_t) icbc_get32(p + 84);
    h->cid = icbc_get64(p + 88);
    h->seqnum = icbc_get64(p + 96);
    h->count = (int64_t) icbc_get64(p + 104);
    h->dtype = icbc_get64(p + 112);
    h->reserved = icbc_get64(p + 120);
    switch (h->type) {
    case IMPI_PK_DATA:
    case IMPI_PK_DATASYNC:
        return h->len <= datalen && h->len <= h->msglen ? ICBC_OK : ICBC_ERR_INVALID;
    case IMPI_PK_ICBC:
        /* a first packet: its header, then payload; a continuation:
         * payload within the message */
        if (h->len > datalen || h->count < 0 || (uint64_t) h->count > h->len)
            return ICBC_ERR_INVALID;
        if (h->count == 0)
            return h->len > 0 && h->seqnum < h->msglen && h->len <= h->msglen - h->seqnum
                       ? ICBC_OK
                       : ICBC_ERR_INVALID;
        return h->seqnum == 0 && h->len - (uint64_t) h->count <= h->msglen ? ICBC_OK
                                                                           : ICBC_ERR_INVALID;
    case IMPI_PK_PROTOACK:
    case IMPI_PK_SYNCACK:
    case IMPI_PK_CANCEL:
    case IMPI_PK_CANCELYES:
    case IMPI_PK_CANCELNO:
    case IMPI_PK_FINI:
        h->len = 0; /* a control packet has no payload, whatever it says */
        return ICBC_OK;
    default: return ICBC_ERR_INVALID;
    }
}

icbc_status_t impi_key_read(const char *path, uint64_t *key, char *err, size_t errlen)
{
    FILE *f = fopen(path, "r");
    char line[64] = "", *end;

    if (f == NULL)
        return icbc_err(ICBC_ERR_IO, err, errlen, "cannot read key file %s: %s", path,
                        strerror(errno));
    if (fgets(line, sizeof(line), f) == NULL)
        line[0] = '\0';
    fclose(f);
    errno = 0;
    *key = strtoull(line, &end, 10);
    if (end == line || errno || (*end && *end != '\n'))
        return icbc_err(ICBC_ERR_INVALID, err, errlen, "%s:1: want the key as a decimal number",
                        path);
    return ICBC_OK;
}
