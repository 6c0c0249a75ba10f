/*
 * Fuzzes bt_lib's receive state machine and its authentication handshake
 * (recv.c, auth.c) through a real listener on 127.0.0.1: the input is what a
 * peer sends on an accepted connection. Its first byte chooses the peer's
 * standing: bit 0 set, the peer first runs the handshake with the right key
 * (so the rest reaches the DATA path); clear, the bytes arrive before
 * authentication. The rest is written to the socket, which is then shut for
 * writing, so every input ends in an end of stream.
 * Checks:
 *   - the accepted connection always closes, within 2 s of the end of the
 *     stream (no hang), with a status on_close promises for that standing
 *     and a non-empty message;
 *   - no DATA reaches the caller before authentication; every header and
 *     payload it sees is within the listener's limits, on_payload follows
 *     its own on_header, and the payload bytes land inside the buffer the
 *     caller gave (AddressSanitizer catches a write past it);
 *   - the listener still accepts the next connection (every input starts
 *     with one).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <poll.h>
#include <stddef.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "bt_lib.h"
#include "fuzz_check.h"
#include "icbc_log.h"

#define MAX_HDR 1024
#define MAX_PAYLOAD 65536

static const char key[] = "key of the bt_lib stream fuzzer";

static bt_poller_t *poller;
static bt_listener_t *listener;
static struct sockaddr_storage addr;
static socklen_t addrlen;

/* The one connection an input makes, as the server's callbacks saw it. */
static struct {
    bt_conn_t *c;
    int ready;
    int closed;
    icbc_status_t close_st;
    int in_payload;
    uint64_t plen;
    unsigned char payload[MAX_PAYLOAD];
} srv;

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void on_ready(bt_conn_t *c, void *arg)
{
    FUZZ_CHECK(c == srv.c && !srv.ready);
    srv.ready = 1;
}

static bt_recv_action_t on_header(bt_conn_t *c, const void *hdr, size_t hdr_len,
                                  uint64_t payload_len, void **dest, void *arg)
{
    FUZZ_CHECK(c == srv.c);
    FUZZ_CHECK(srv.ready);
    FUZZ_CHECK(!srv.in_payload);
    FUZZ_CHECK(hdr_len <= MAX_HDR && (hdr_len == 0 || hdr != NULL));
    FUZZ_CHECK(payload_len <= MAX_PAYLOAD);
    /* read every header byte: ASan sees a header shorter than announced */
    volatile unsigned char sum = 0;
    for (size_t i = 0; i < hdr_len; i++)
        sum += ((const unsigned char *) hdr)[i];
    (void) sum;
    srv.in_payload = 1;
    srv.plen = payload_len;
    if (payload_len & 1)
        return BT_RECV_DISCARD;
    /* a buffer of exactly the announced size, so a write past it is caught */
    *dest = srv.payload + (MAX_PAYLOAD - payload_len);
    return BT_RECV_INTO;
}

static void on_payload(bt_conn_t *c, void *arg)
{
    FUZZ_CHECK(c == srv.c && srv.in_payload);
    srv.in_payload = 0;
}

static void on_writable(bt_conn_t *c, void *arg)
{
}

static void on_close(bt_conn_t *c, icbc_status_t st, const char *msg, void *arg)
{
    FUZZ_CHECK(c == srv.c && !srv.closed);
    FUZZ_CHECK(msg != NULL && msg[0] != '\0');
    if (srv.ready)
        FUZZ_CHECK(st == ICBC_OK || st == ICBC_ERR_PEER_FAILED || st == ICBC_ERR_INVALID);
    else
        FUZZ_CHECK(st == ICBC_ERR_AUTH || st == ICBC_ERR_INVALID || st == ICBC_ERR_TIMEOUT ||
                   st == ICBC_ERR_PEER_FAILED);
    srv.closed = 1;
    srv.close_st = st;
}

static const bt_conn_cbs_t cbs = { on_ready, on_header, on_payload, on_writable, on_close };

static void accepted(bt_listener_t *l, bt_conn_t *c, void *arg)
{
    FUZZ_CHECK(srv.c == NULL);
    srv.c = c;
}

static void start(void)
{
    bt_opts_t o;
    struct sockaddr_in a;

    icbc_log_set_level(ICBC_LOG_OFF);
    FUZZ_CHECK(bt_poller_create(&poller) == ICBC_OK);
    bt_opts_init(&o);
    o.key = (const unsigned char *) key;
    o.keylen = sizeof(key) - 1;
    o.id = "fuzz server";
    o.max_hdr = MAX_HDR;
    o.max_payload = MAX_PAYLOAD;
    o.sndbuf = -1;
    o.rcvbuf = -1;
    o.handshake_ms = 1000;
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    FUZZ_CHECK(bt_listen(poller, (struct sockaddr *) &a, sizeof(a), &o, &cbs, accepted, NULL,
                         &listener) == ICBC_OK);
    FUZZ_CHECK(bt_listener_addr(listener, &addr, &addrlen) == ICBC_OK);
}

/* Polls until DONE is non-zero or LIMIT_MS pass; returns DONE. */
static int run_until(const int *done, double limit_ms)
{
    double end = now_ms() + limit_ms;
    while (!*done && now_ms() < end)
        FUZZ_CHECK(bt_poller_wait(poller, 5) >= 0);
    return *done;
}

static int connect_raw(void)
{
    static uint32_t n;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    /* a reset instead of TIME_WAIT on our side; the server's side, which
     * often closes first, keeps its TIME_WAIT, so each connection comes from
     * the next of 65536 loopback addresses (127.2.0.0/16): a million inputs
     * would otherwise use up the ephemeral ports of one address */
    struct linger lg = { 1, 0 };
    struct timeval tv = { 2, 0 };
    struct sockaddr_in src = { .sin_family = AF_INET };
    FUZZ_CHECK(fd >= 0);
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    int one = 1;
    src.sin_addr.s_addr = htonl(0x7f020000u | (n++ & 0xffffu));
    /* the port is chosen by connect, among those free for this destination */
    setsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof(one));
    FUZZ_CHECK(bind(fd, (struct sockaddr *) &src, sizeof(src)) == 0);
    if (connect(fd, (struct sockaddr *) &addr, addrlen) != 0) {
        /* libFuzzer's timer signal interrupts it; the connect goes on */
        struct pollfd pfd = { .fd = fd, .events = POLLOUT };
        int err = errno;
        socklen_t elen = sizeof(err);
        if (err == EINTR && poll(&pfd, 1, 2000) == 1)
            getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen);
        if (err != 0 && err != EINTR) {
            fprintf(stderr, "bt_stream_fuzz: connect from %s: %s\n", inet_ntoa(src.sin_addr),
                    strerror(err));
            FUZZ_CHECK(!"connect to the listener");
        }
    }
    int have = 0;
    double end = now_ms() + 2000;
    while (srv.c == NULL && now_ms() < end)
        FUZZ_CHECK(bt_poller_wait(poller, 5) >= 0);
    have = srv.c != NULL;
    FUZZ_CHECK(have); /* the listener accepts the next connection */
    return fd;
}

static void send_all(int fd, const void *buf, size_t len)
{
    const unsigned char *p = buf;
    while (len > 0) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) {
            p += n;
            len -= (size_t) n;
        } else if (srv.closed) {
            return; /* the server gave up on us: the rest cannot go */
        } else {
            FUZZ_CHECK(bt_poller_wait(poller, 1) >= 0);
        }
    }
}

/* The connector's half of the handshake (bt_lib.h), with the right key. */
static void authenticate(int fd)
{
    unsigned char hello[BT_FRAME_HDR_SIZE + BT_NONCE_SIZE];
    static const char id[] = "fuzz peer";
    unsigned char msg[9 + 2 * BT_NONCE_SIZE + sizeof(id) - 1];
    unsigned char out[BT_FRAME_HDR_SIZE + 2 * BT_NONCE_SIZE + sizeof(id) - 1];
    unsigned int maclen;
    bt_frame_t f = { BT_FRAME_AUTH, 2 * BT_NONCE_SIZE, sizeof(id) - 1 };

    for (size_t got = 0; got < sizeof(hello);) {
        ssize_t r = recv(fd, hello + got, sizeof(hello) - got, 0);
        FUZZ_CHECK(r > 0 || (r < 0 && errno == EINTR));
        if (r > 0)
            got += (size_t) r;
    }
    memcpy(msg, "icbc-bt-c", 9);
    memcpy(msg + 9, hello + BT_FRAME_HDR_SIZE, BT_NONCE_SIZE);
    memset(msg + 9 + BT_NONCE_SIZE, 0x5a, BT_NONCE_SIZE);
    memcpy(msg + 9 + 2 * BT_NONCE_SIZE, id, sizeof(id) - 1);
    bt_frame_pack(&f, out);
    memcpy(out + BT_FRAME_HDR_SIZE, msg + 9 + BT_NONCE_SIZE, BT_NONCE_SIZE);
    HMAC(EVP_sha256(), key, (int) sizeof(key) - 1, msg, sizeof(msg),
         out + BT_FRAME_HDR_SIZE + BT_NONCE_SIZE, &maclen);
    FUZZ_CHECK(maclen == BT_MAC_SIZE);
    memcpy(out + BT_FRAME_HDR_SIZE + 2 * BT_NONCE_SIZE, id, sizeof(id) - 1);
    send_all(fd, out, sizeof(out));
    FUZZ_CHECK(run_until(&srv.ready, 2000)); /* the right key is accepted */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (poller == NULL)
        start();
    if (size < 1)
        return 0;
    memset(&srv, 0, sizeof(srv) - sizeof(srv.payload));
    int fd = connect_raw();
    if (data[0] & 1)
        authenticate(fd);
    send_all(fd, data + 1, size - 1);
    shutdown(fd, SHUT_WR);
    FUZZ_CHECK(run_until(&srv.closed, 2000)); /* never a hang */
    bt_conn_destroy(srv.c);
    srv.c = NULL;
    close(fd);
    return 0;
}
