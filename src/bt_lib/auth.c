/* Mutual HMAC-SHA256 challenge-response (see bt_lib.h):
 *   acceptor  -> HELLO   Na
 *   connector -> AUTH    Nc | HMAC(key, "icbc-bt-c" | Na | Nc | id), payload id
 *   acceptor  -> AUTH_OK HMAC(key, "icbc-bt-a" | Nc | Na)
 * Distinct labels keep one side's proof from being replayed as the other's;
 * fresh nonces on both sides keep an old exchange from being replayed. */
#include "bt_impl.h"

#include <string.h>
#include <sys/socket.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include "icbc_log.h"

#define LABEL_LEN 9 /* "icbc-bt-c", "icbc-bt-a" */

static bool mac(const bt_conn_t *c, const char *label, const unsigned char *n1,
                const unsigned char *n2, const unsigned char *id, size_t idlen,
                unsigned char out[BT_MAC_SIZE])
{
    unsigned char msg[LABEL_LEN + 2 * BT_NONCE_SIZE + BT_ID_MAX];
    unsigned int outlen = 0;

    memcpy(msg, label, LABEL_LEN);
    memcpy(msg + LABEL_LEN, n1, BT_NONCE_SIZE);
    memcpy(msg + LABEL_LEN + BT_NONCE_SIZE, n2, BT_NONCE_SIZE);
    if (idlen > 0)
        memcpy(msg + LABEL_LEN + 2 * BT_NONCE_SIZE, id, idlen);
    return HMAC(EVP_sha256(), c->cfg->key, (int) c->cfg->o.keylen, msg,
                LABEL_LEN + 2 * BT_NONCE_SIZE + idlen, out, &outlen) != NULL &&
           outlen == BT_MAC_SIZE;
}

/* Ids are printed in logs: keep them printable. */
static void printable(char *dst, const unsigned char *src, size_t len)
{
    for (size_t i = 0; i < len; i++)
        dst[i] = (src[i] >= 0x20 && src[i] < 0x7f) ? (char) src[i] : '?';
    dst[len] = '\0';
}

bool bt_auth_done(const bt_conn_t *c)
{
    return c->state == BT_CONN_READY || c->state == BT_CONN_DRAINING || c->state == BT_CONN_LINGER;
}

static void become_ready(bt_conn_t *c)
{
    c->state = BT_CONN_READY;
    bt_conn_set_deadline(c, 0);
    icbc_debug("bt_lib: %s%s%s: authenticated", c->peer_text, c->peer_id[0] ? " " : "", c->peer_id);
    if (!bt_send_flush(c)) /* AUTH_OK and any DATA queued meanwhile */
        return;
    if (c->cbs.on_ready)
        c->cbs.on_ready(c, c->arg);
}

void bt_auth_start_acceptor(bt_conn_t *c)
{
    if (RAND_bytes(c->nonce_local, BT_NONCE_SIZE) != 1) {
        bt_conn_fail(c, ICBC_ERR_IO, "no random bytes for the nonce (RAND_bytes failed)");
        return;
    }
    if (bt_send_ctl(c, BT_FRAME_HELLO, c->nonce_local, BT_NONCE_SIZE, NULL, 0) != ICBC_OK)
        bt_conn_fail(c, ICBC_ERR_NO_MEMORY, "no memory for HELLO");
}

void bt_auth_on_hello(bt_conn_t *c)
{
    unsigned char h[BT_NONCE_SIZE + BT_MAC_SIZE];

    memcpy(c->nonce_peer, c->hdrbuf, BT_NONCE_SIZE);
    if (RAND_bytes(c->nonce_local, BT_NONCE_SIZE) != 1) {
        bt_conn_fail(c, ICBC_ERR_IO, "no random bytes for the nonce (RAND_bytes failed)");
        return;
    }
    memcpy(h, c->nonce_local, BT_NONCE_SIZE);
    if (!mac(c, "icbc-bt-c", c->nonce_peer, c->nonce_local, (const unsigned char *) c->cfg->id,
             c->cfg->idlen, h + BT_NONCE_SIZE)) {
        bt_conn_fail(c, ICBC_ERR_IO, "HMAC-SHA256 failed");
        return;
    }
    if (bt_send_ctl(c, BT_FRAME_AUTH, h, sizeof(h), c->cfg->id, c->cfg->idlen) != ICBC_OK) {
        bt_conn_fail(c, ICBC_ERR_NO_MEMORY, "no memory for AUTH");
        return;
    }
    c->state = BT_CONN_WAIT_AUTH_OK;
    bt_send_flush(c);
}

/* Tells a refused connector why the connection ends, if that costs nothing:
 * only when no other frame is half written. */
static void send_refusal(bt_conn_t *c)
{
    unsigned char buf[BT_FRAME_HDR_SIZE];
    bt_frame_t f = { .type = BT_FRAME_CLOSE };

    if (!icbc_queue_empty(&c->ctlq) || c->fd < 0)
        return;
    bt_frame_pack(&f, buf);
    (void) !send(c->fd, buf, sizeof(buf), MSG_NOSIGNAL | MSG_DONTWAIT);
}

void bt_auth_on_auth(bt_conn_t *c)
{
    unsigned char expect[BT_MAC_SIZE], h[BT_MAC_SIZE];
    size_t idlen = (size_t) c->f.payload_len; /* <= BT_ID_MAX: checked by the parser */
    char id[BT_ID_MAX + 1];

    printable(id, c->auth_id, idlen);
    memcpy(c->nonce_peer, c->hdrbuf, BT_NONCE_SIZE);
    if (!mac(c, "icbc-bt-c", c->nonce_local, c->nonce_peer, c->auth_id, idlen, expect)) {
        bt_conn_fail(c, ICBC_ERR_IO, "HMAC-SHA256 failed");
        return;
    }
    if (CRYPTO_memcmp(expect, c->hdrbuf + BT_NONCE_SIZE, BT_MAC_SIZE) != 0) {
        send_refusal(c);
        bt_conn_fail(c, ICBC_ERR_AUTH, "authentication refused: wrong key (peer says it is \"%s\")",
                     id);
        return;
    }
    memcpy(c->peer_id, id, idlen + 1);
    if (!mac(c, "icbc-bt-a", c->nonce_peer, c->nonce_local, NULL, 0, h)) {
        bt_conn_fail(c, ICBC_ERR_IO, "HMAC-SHA256 failed");
        return;
    }
    if (bt_send_ctl(c, BT_FRAME_AUTH_OK, h, sizeof(h), NULL, 0) != ICBC_OK) {
        bt_conn_fail(c, ICBC_ERR_NO_MEMORY, "no memory for AUTH_OK");
        return;
    }
    become_ready(c);
}

void bt_auth_on_auth_ok(bt_conn_t *c)
{
    unsigned char expect[BT_MAC_SIZE];

    if (!mac(c, "icbc-bt-a", c->nonce_local, c->nonce_peer, NULL, 0, expect)) {
        bt_conn_fail(c, ICBC_ERR_IO, "HMAC-SHA256 failed");
        return;
    }
    if (CRYPTO_memcmp(expect, c->hdrbuf, BT_MAC_SIZE) != 0) {
        bt_conn_fail(c, ICBC_ERR_AUTH,
                     "authentication refused: the acceptor's proof does not match our key");
        return;
    }
    become_ready(c);
}
