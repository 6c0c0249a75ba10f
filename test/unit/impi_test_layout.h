/*
 * IMPI layouts for the unit tests: a client's part (hosts 10.0.C.H, ...)
 * and the server's answers built from several clients' parts, so that a
 * test can build the layout every client of a job would learn.
 */
#ifndef ICBC_TEST_IMPI_TEST_LAYOUT_H
#define ICBC_TEST_IMPI_TEST_LAYOUT_H

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <vector>

#include "impi_client.h"

typedef std::vector<uint8_t> Bytes;

/* A client's part: hosts 10.0.C.H, port 5000 + 10 C + H, PROCS[h] processes
 * on host h, pid 1000 C + global index within the client. */
struct Client {
    std::vector<impi_host_t> hosts;
    std::vector<impi_proc_t> procs;
    impi_local_t local{};

    Client(int c, std::vector<uint32_t> per_host, uint32_t datalen = 0, uint32_t ackmark = 0)
    {
        for (size_t h = 0; h < per_host.size(); h++) {
            impi_host_t host{};
            host.addr[12] = 10;
            host.addr[14] = (uint8_t) c;
            host.addr[15] = (uint8_t) h;
            host.port = 5000 + 10 * c + (uint32_t) h;
            host.nprocs = per_host[h];
            host.ackmark = ackmark;
            hosts.push_back(host);
            for (uint32_t k = 0; k < per_host[h]; k++) {
                impi_proc_t p{};
                memcpy(p.host, host.addr, 16);
                p.pid = 1000 * c + (int64_t) procs.size();
                procs.push_back(p);
            }
        }
        local.nhosts = (uint32_t) hosts.size();
        local.nprocs = (uint32_t) procs.size();
        local.hosts = hosts.data();
        local.procs = procs.data();
        local.datalen = datalen;
        local.coll_xsize = -1;
        local.coll_maxlinear = -1;
    }
    /* LOCAL with its pointers into this object (copies move the vectors) */
    const impi_local_t *get()
    {
        local.hosts = hosts.data();
        local.procs = procs.data();
        return &local;
    }
    Bytes part(uint32_t label) const
    {
        impi_local_t l = local;
        l.hosts = hosts.data();
        l.procs = procs.data();
        uint8_t *b;
        size_t n;
        EXPECT_EQ(ICBC_OK, impi_local_part(&l, label, &b, &n));
        Bytes v(b, b + n);
        free(b);
        return v;
    }
};

/* The server's answer to LABEL: the parts of the clients in MASK, in order. */
inline Bytes answer(const std::vector<Client> &cl, uint32_t label, uint32_t mask)
{
    Bytes b;
    for (size_t c = 0; c < cl.size(); c++)
        if (mask >> c & 1) {
            Bytes p = cl[c].part(label);
            b.insert(b.end(), p.begin(), p.end());
        }
    return b;
}

/* LAYOUT as every client of CL learns it: every label from every client. */
inline void impi_test_layout(const std::vector<Client> &cl, impi_layout_t *l)
{
    int n;
    const uint32_t *labels = impi_layout_labels(&n);
    uint32_t all = (1u << cl.size()) - 1;
    char err[256] = "";
    ASSERT_EQ(ICBC_OK, impi_layout_init(l, (int) cl.size()));
    for (int i = 0; i < n; i++) {
        Bytes b = answer(cl, labels[i], all);
        ASSERT_EQ(ICBC_OK, impi_layout_add(l, labels[i], all, b.data(), b.size(), err, sizeof(err)))
            << err;
    }
    ASSERT_EQ(ICBC_OK, impi_layout_check(l, err, sizeof(err))) << err;
}

#endif /* ICBC_TEST_IMPI_TEST_LAYOUT_H */
