/*
 * The global phase of IMPI collectives: what the clients' masters send to
 * and receive from each other, as a list of steps, without moving bytes.
 * Inside one client a collective runs with that MPI's own algorithms (the
 * local phase); between clients only the masters talk: the lowest rank of
 * each client in the communicator, numbered in client order. Up to
 * MAXLINEAR masters talk linearly, more in a binomial tree.
 *
 *   barrier  masters report to master 0, which answers each (tree: up to
 *            the root and back down)
 *   bcast    the root sends to the master of every other client (tree:
 *            rooted at the root's client, the root standing in for its
 *            master)
 *   reduce   the master of every other client sends its client's partial
 *            result to the root, which reduces each into its result (tree:
 *            partial results combine on the way up)
 *
 * Tags and context ids are those LAM/MPI 7.1.4 puts on the wire
 * (docs/impi.md): the collective runs on the communicator's point-to-point
 * context id + 1.
 */
#ifndef ICBC_IMPI_COLL_H
#define ICBC_IMPI_COLL_H

#ifdef __cplusplus
extern "C" {
#endif

#define IMPI_TAG_BARRIER 110
#define IMPI_TAG_BCAST 120
#define IMPI_TAG_GATHER 130
#define IMPI_TAG_GATHERV 140
#define IMPI_TAG_SCATTER 150
#define IMPI_TAG_SCATTERV 160
#define IMPI_TAG_ALLTOALL 170
#define IMPI_TAG_ALLTOALLV 180
#define IMPI_TAG_REDUCE 190
#define IMPI_TAG_SCAN 200

/* LAM/MPI 7.1.4 runs across clients only Barrier, Bcast and Reduce (and
 * Allreduce from them) as IMPI says; every other collective it composes
 * from point-to-point messages of its own (its lam_basic module), on its
 * collective context -(context id) - 1, with these tags (its blktype.h). */
#define LAM_TAG_ALLTOALL 9
#define LAM_TAG_ALLTOALLV 10
#define LAM_TAG_GATHER 46
#define LAM_TAG_GATHERV 47
#define LAM_TAG_SCAN 92
#define LAM_TAG_SCATTER 93
#define LAM_TAG_SCATTERV 94
#define LAM_TAG_EXSCAN 178

/* A communicator as the global phase sees it: the client of each rank. */
typedef struct impi_coll_group {
    int size;
    const int *client; /* size entries */
    int maxlinear;     /* masters joined linearly (IMPI_DEFAULT_COLL_MAXLINEAR) */
} impi_coll_group_t;

typedef enum impi_coll_op {
    IMPI_COLL_SEND,        /* send the buffer to PEER */
    IMPI_COLL_RECV,        /* receive the buffer from PEER */
    IMPI_COLL_RECV_REDUCE, /* receive from PEER and reduce it into the buffer */
} impi_coll_op_t;

typedef struct impi_coll_step {
    impi_coll_op_t op;
    int peer; /* rank in the communicator */
} impi_coll_step_t;

/* Steps of a collective take at most this many (2 per dimension of the
 * tree of 32 clients, or a pair per master). */
#define IMPI_COLL_STEPS_MAX (2 * 32 + 2)

int impi_coll_nmasters(const impi_coll_group_t *g);
/* The rank of master NUM, or -1. */
int impi_coll_master_rank(const impi_coll_group_t *g, int num);
/* The master number of RANK, or -1 when RANK is not a master. */
int impi_coll_master_num(const impi_coll_group_t *g, int rank);
/* The master of RANK's client. */
int impi_coll_local_master(const impi_coll_group_t *g, int rank);

/* The steps of RANK (into STEPS, at most IMPI_COLL_STEPS_MAX), or -1 for
 * a rank or root outside the group. Ranks that are not masters (and, in
 * bcast and reduce, not the root) have none: they only take part in the
 * local phases. */
int impi_coll_barrier(const impi_coll_group_t *g, int rank, impi_coll_step_t *steps);
int impi_coll_bcast(const impi_coll_group_t *g, int rank, int root, impi_coll_step_t *steps);
/* For a commutative operation: the root's client reduces locally to the
 * root, every other client to its master, then these steps. */
int impi_coll_reduce(const impi_coll_group_t *g, int rank, int root, impi_coll_step_t *steps);

#ifdef __cplusplus
}
#endif

#endif /* ICBC_IMPI_COLL_H */
