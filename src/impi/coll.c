/* The global phase of IMPI collectives; see impi_coll.h. */
#include "impi_coll.h"

/* Smallest DIM with 2^DIM >= N. */
static int cube_dim(int n)
{
    int dim = 0;

    while ((1 << dim) < n)
        dim++;
    return dim;
}

/* The highest bit set in NUM below DIM, or -1 for NUM 0. */
static int high_bit(int num, int dim)
{
    for (int i = dim - 1; i >= 0; i--)
        if (num & (1 << i))
            return i;
    return -1;
}

/* Whether client C has a rank before RANK (so RANK is not its master). */
static int seen_before(const impi_coll_group_t *g, int rank, int c)
{
    for (int r = 0; r < rank; r++)
        if (g->client[r] == c)
            return 1;
    return 0;
}

int impi_coll_nmasters(const impi_coll_group_t *g)
{
    int n = 0;

    for (int r = 0; r < g->size; r++)
        n += !seen_before(g, r, g->client[r]);
    return n;
}

/* Masters are numbered in client order: master NUM is the lowest rank of
 * the NUM-th client (by client rank) that the group has. */
int impi_coll_master_rank(const impi_coll_group_t *g, int num)
{
    int lowest_client = -1;

    for (int k = 0; k <= num; k++) {
        int next = -1;
        for (int r = 0; r < g->size; r++)
            if (g->client[r] > lowest_client && (next < 0 || g->client[r] < next))
                next = g->client[r];
        if (next < 0)
            return -1;
        lowest_client = next;
    }
    for (int r = 0; r < g->size; r++)
        if (g->client[r] == lowest_client)
            return r;
    return -1;
}

int impi_coll_master_num(const impi_coll_group_t *g, int rank)
{
    int n = impi_coll_nmasters(g);

    for (int k = 0; k < n; k++)
        if (impi_coll_master_rank(g, k) == rank)
            return k;
    return -1;
}

int impi_coll_local_master(const impi_coll_group_t *g, int rank)
{
    for (int r = 0; r < g->size; r++)
        if (g->client[r] == g->client[rank])
            return r;
    return -1;
}

static int linear(const impi_coll_group_t *g, int nmasters)
{
    int maxlinear = g->maxlinear > 0 ? g->maxlinear : 4;

    return nmasters <= maxlinear;
}

static void add(impi_coll_step_t *steps, int *n, impi_coll_op_t op, int peer)
{
    steps[*n].op = op;
    steps[*n].peer = peer;
    (*n)++;
}

int impi_coll_barrier(const impi_coll_group_t *g, int rank, impi_coll_step_t *steps)
{
    int n = 0;

    if (rank < 0 || rank >= g->size)
        return -1;
    int me = impi_coll_master_num(g, rank);
    if (me < 0)
        return 0;
    int nm = impi_coll_nmasters(g);
    if (linear(g, nm)) {
        if (me == 0) {
            for (int k = 1; k < nm; k++)
                add(steps, &n, IMPI_COLL_RECV, impi_coll_master_rank(g, k));
            for (int k = 1; k < nm; k++)
                add(steps, &n, IMPI_COLL_SEND, impi_coll_master_rank(g, k));
        } else {
            add(steps, &n, IMPI_COLL_SEND, impi_coll_master_rank(g, 0));
            add(steps, &n, IMPI_COLL_RECV, impi_coll_master_rank(g, 0));
        }
        return n;
    }
    int dim = cube_dim(nm), hibit = high_bit(me, dim);
    for (int i = dim - 1; i > hibit; i--)
        if ((me | (1 << i)) < nm)
            add(steps, &n, IMPI_COLL_RECV, impi_coll_master_rank(g, me | (1 << i)));
    if (me > 0) {
        int parent = impi_coll_master_rank(g, me & ~(1 << hibit));
        add(steps, &n, IMPI_COLL_SEND, parent);
        add(steps, &n, IMPI_COLL_RECV, parent);
    }
    for (int i = hibit + 1; i < dim; i++)
        if ((me | (1 << i)) < nm)
            add(steps, &n, IMPI_COLL_SEND, impi_coll_master_rank(g, me | (1 << i)));
    return n;
}

/* Master number VNUM counted from the root's client, as a rank: the root
 * itself stands in for its client's master. */
static int tree_rank(const impi_coll_group_t *g, int vnum, int rootnum, int nm, int root)
{
    int num = (vnum + rootnum) % nm;

    return num == rootnum ? root : impi_coll_master_rank(g, num);
}

/* The master number of RANK in a rooted collective (the root counts as its
 * client's master), or -1 when RANK has no part in the global phase. */
static int rooted_num(const impi_coll_group_t *g, int rank, int root)
{
    int rootnum = impi_coll_master_num(g, impi_coll_local_master(g, root));

    if (rank == root)
        return rootnum;
    if (g->client[rank] == g->client[root])
        return -1;
    return impi_coll_master_num(g, rank);
}

/* The start of a rooted collective (bcast, reduce) among the masters: -1 on
 * bad ranks, 0 when RANK takes no part, else 1 with its master number *ME,
 * the number of masters *NM and the root's *ROOTNUM. */
static int rooted_start(const impi_coll_group_t *g, int rank, int root, int *me, int *nm,
                        int *rootnum)
{
    if (rank < 0 || rank >= g->size || root < 0 || root >= g->size)
        return -1;
    *me = rooted_num(g, rank, root);
    if (*me < 0)
        return 0;
    *nm = impi_coll_nmasters(g);
    *rootnum = impi_coll_master_num(g, impi_coll_local_master(g, root));
    return 1;
}

/* Few masters: the root does AT_ROOT with every other master, each of them
 * AT_MASTER with the root. */
static int rooted_linear(const impi_coll_group_t *g, int rank, int root, int nm, int rootnum,
                         impi_coll_op_t at_root, impi_coll_op_t at_master, impi_coll_step_t *steps)
{
    int n = 0;

    if (rank != root) {
        add(steps, &n, at_master, root);
        return n;
    }
    for (int k = 0; k < nm; k++)
        if (k != rootnum)
            add(steps, &n, at_root, impi_coll_master_rank(g, k));
    return n;
}

int impi_coll_bcast(const impi_coll_group_t *g, int rank, int root, impi_coll_step_t *steps)
{
    int n = 0, me, nm, rootnum, st = rooted_start(g, rank, root, &me, &nm, &rootnum);

    if (st <= 0)
        return st;
    if (linear(g, nm))
        return rooted_linear(g, rank, root, nm, rootnum, IMPI_COLL_SEND, IMPI_COLL_RECV, steps);
    int vnum = (me - rootnum + nm) % nm, dim = cube_dim(nm), hibit = high_bit(vnum, dim);
    if (vnum > 0)
        add(steps, &n, IMPI_COLL_RECV, tree_rank(g, vnum & ~(1 << hibit), rootnum, nm, root));
    for (int i = hibit + 1; i < dim; i++)
        if ((vnum | (1 << i)) < nm)
            add(steps, &n, IMPI_COLL_SEND, tree_rank(g, vnum | (1 << i), rootnum, nm, root));
    return n;
}

int impi_coll_reduce(const impi_coll_group_t *g, int rank, int root, impi_coll_step_t *steps)
{
    int n = 0, me, nm, rootnum, st = rooted_start(g, rank, root, &me, &nm, &rootnum);

    if (st <= 0)
        return st;
    if (linear(g, nm))
        return rooted_linear(g, rank, root, nm, rootnum, IMPI_COLL_RECV_REDUCE, IMPI_COLL_SEND,
                             steps);
    int vnum = (me - rootnum + nm) % nm, dim = cube_dim(nm);
    for (int i = 0; i < dim; i++) {
        int mask = 1 << i;
        if (vnum & mask) {
            add(steps, &n, IMPI_COLL_SEND, tree_rank(g, vnum & ~mask, rootnum, nm, root));
            break;
        }
        if ((vnum | mask) < nm)
            add(steps, &n, IMPI_COLL_RECV_REDUCE, tree_rank(g, vnum | mask, rootnum, nm, root));
    }
    return n;
}
