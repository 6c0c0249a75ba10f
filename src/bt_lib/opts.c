/* Options: defaults, validation, and the copy a listener shares with its
 * connections. */
#include "bt_impl.h"

#include <stdlib.h>
#include <string.h>

#include "icbc_log.h"

void bt_opts_init(bt_opts_t *opts)
{
    memset(opts, 0, sizeof(*opts));
    opts->sndbuf = BT_DEFAULT_SOCKBUF;
    opts->rcvbuf = BT_DEFAULT_SOCKBUF;
    opts->nodelay = 1; /* frames are gathered into one sendmsg: Nagle would only add delay */
    opts->max_queued = BT_DEFAULT_MAX_QUEUED;
    opts->max_hdr = BT_HDR_MAX;
    opts->max_payload = BT_DEFAULT_MAX_PAYLOAD;
    opts->handshake_ms = BT_DEFAULT_HANDSHAKE_MS;
}

icbc_status_t bt_cfg_create(const bt_opts_t *opts, bt_cfg_t **out)
{
    bt_cfg_t *cfg;
    size_t idlen;

    if (opts == NULL || opts->key == NULL || opts->keylen == 0) {
        icbc_error("bt_lib: options without a key (bt_opts_t.key/keylen are required)");
        return ICBC_ERR_INVALID;
    }
    if (opts->max_hdr > BT_HDR_MAX) {
        icbc_error("bt_lib: max_hdr %u above the limit of the frame format (%u)", opts->max_hdr,
                   BT_HDR_MAX);
        return ICBC_ERR_INVALID;
    }
    if (opts->handshake_ms < 0) {
        icbc_error("bt_lib: negative handshake_ms %d", opts->handshake_ms);
        return ICBC_ERR_INVALID;
    }
    idlen = opts->id ? strlen(opts->id) : 0;
    if (idlen > BT_ID_MAX) {
        icbc_error("bt_lib: id of %zu bytes is longer than %d", idlen, BT_ID_MAX);
        return ICBC_ERR_INVALID;
    }
    cfg = calloc(1, sizeof(*cfg) + opts->keylen);
    if (cfg == NULL)
        return ICBC_ERR_NO_MEMORY;
    cfg->refs = 1;
    cfg->o = *opts;
    memcpy(cfg->key, opts->key, opts->keylen);
    cfg->o.key = cfg->key;
    memcpy(cfg->id, opts->id ? opts->id : "", idlen);
    cfg->idlen = idlen;
    cfg->o.id = cfg->id;
    if (cfg->o.sndbuf == 0)
        cfg->o.sndbuf = BT_DEFAULT_SOCKBUF;
    if (cfg->o.rcvbuf == 0)
        cfg->o.rcvbuf = BT_DEFAULT_SOCKBUF;
    if (cfg->o.max_queued == 0)
        cfg->o.max_queued = BT_DEFAULT_MAX_QUEUED;
    if (cfg->o.max_hdr == 0)
        cfg->o.max_hdr = BT_HDR_MAX;
    if (cfg->o.max_payload == 0)
        cfg->o.max_payload = BT_DEFAULT_MAX_PAYLOAD;
    if (cfg->o.handshake_ms == 0)
        cfg->o.handshake_ms = BT_DEFAULT_HANDSHAKE_MS;
    *out = cfg;
    return ICBC_OK;
}

void bt_cfg_unref(bt_cfg_t *cfg)
{
    if (cfg != NULL && --cfg->refs == 0) {
        memset(cfg->key, 0, cfg->o.keylen); /* do not leave the key in freed memory */
        free(cfg);
    }
}
