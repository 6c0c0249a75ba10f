/* Peer table; see icbc_peer.h. */
#include "icbc_peer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *icbc_path_name(icbc_path_t path)
{
    switch (path) {
    case ICBC_PATH_NONE: return "none";
    case ICBC_PATH_SHM: return "shm";
    case ICBC_PATH_DIRECT: return "direct";
    case ICBC_PATH_ROUTED: return "routed";
    case ICBC_PATH_TCP_DIRECT: return "tcp-direct";
    case ICBC_PATH_IMPI: return "impi";
    }
    return "unknown";
}

static void peer_init(icbc_peer_t *peer, int rank)
{
    memset(peer, 0, sizeof(*peer));
    peer->rank = rank;
    peer->cluster = -1;
    peer->path = ICBC_PATH_NONE;
    peer->state = ICBC_PEER_OK;
}

icbc_status_t icbc_peer_table_init(icbc_peer_table_t *table, int size)
{
    table->size = 0;
    table->capacity = 0;
    table->peers = NULL;
    return icbc_peer_table_grow(table, size);
}

icbc_status_t icbc_peer_table_grow(icbc_peer_table_t *table, int new_size)
{
    if (new_size < table->size)
        return ICBC_ERR_INVALID;
    if (new_size > table->capacity) {
        int cap = table->capacity ? table->capacity : 16;
        while (cap < new_size)
            cap *= 2;
        icbc_peer_t *p = realloc(table->peers, (size_t) cap * sizeof(*p));
        if (p == NULL)
            return ICBC_ERR_NO_MEMORY;
        table->peers = p;
        table->capacity = cap;
    }
    for (int r = table->size; r < new_size; r++)
        peer_init(&table->peers[r], r);
    table->size = new_size;
    return ICBC_OK;
}

void icbc_peer_table_destroy(icbc_peer_table_t *table)
{
    for (int r = 0; r < table->size; r++)
        free(table->peers[r].fabric_addr);
    free(table->peers);
    table->peers = NULL;
    table->size = table->capacity = 0;
}

icbc_status_t icbc_peer_set_address(icbc_peer_t *peer, const char *node, const void *fabric_addr,
                                    size_t fabric_addr_len)
{
    void *copy = NULL;

    if (fabric_addr_len > 0) {
        copy = malloc(fabric_addr_len);
        if (copy == NULL)
            return ICBC_ERR_NO_MEMORY;
        memcpy(copy, fabric_addr, fabric_addr_len);
    }
    free(peer->fabric_addr);
    peer->fabric_addr = copy;
    peer->fabric_addr_len = fabric_addr_len;
    snprintf(peer->node, sizeof(peer->node), "%s", node);
    return ICBC_OK;
}
