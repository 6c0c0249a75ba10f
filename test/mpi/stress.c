/*
 * Randomised point-to-point stress test: thousands of messages between all ranks, sizes
 * 0 B .. 16 MiB drawn log-uniformly (most small, some huge) under a total-volume budget,
 * random derived datatypes on both sides (same type signature, different memory layout),
 * wildcard receives and every send and receive flavour. Each payload is checked element
 * by element against the plan, against a checksum the sender sends in a separate message,
 * and for writes outside the receive layout.
 *
 * Every rank builds the same plan from the seed, so each receiver knows what to expect.
 * The plan runs in batches; within a batch every rank
 *   1. posts MPI_Irecv for its early receives (source and tag given) and for the
 *      checksum messages of all its receives (on a communicator of their own, so that no
 *      wildcard receive can match a checksum);
 *   2. sends its messages in plan order with MPI_Isend, MPI_Issend, MPI_Send or MPI_Ssend;
 *      blocking sends only target early receives, so a blocking send never waits for a
 *      receive that its peer posts after a blocking call of its own;
 *   3. receives the rest, blocking or not, in an order in which no receive can take a
 *      message another receive needs: source and tag given, then (ANY_SOURCE, tag), then
 *      (source, ANY_TAG), then (ANY_SOURCE, ANY_TAG); then completes everything.
 * A barrier ends each batch, so a wildcard receive only matches a message of its batch.
 *
 * Rank 0 prints the plan, the totals and "No Errors"; the exit status is non-zero when
 * any message was wrong. Run with --help for the options.
 */
#include "icbc_test.h"

#include <errno.h>
#include <unistd.h>
#include <inttypes.h>
#include <stdarg.h>

#define KiB ((size_t) 1 << 10)
#define MiB ((size_t) 1 << 20)
#define GiB ((size_t) 1 << 30)

#define RECV_SENTINEL                                                                              \
    0xA5                   /* receive buffers start as this; anything else outside the
                            * message's elements was written by someone */
#define SEND_GAP_FILL 0x5A /* gaps of send buffers: if they travel, elements are wrong */
#define MAX_BATCH 8192     /* tags are 0..batch-1, well below MPI_TAG_UB >= 32767 */
#define MAX_REPORTS 10     /* mismatch lines printed per rank */

/* ---- options -------------------------------------------------------------------------- */

struct opts {
    long count; /* data messages in the plan */
    uint64_t seed;
    size_t max_size; /* largest message, bytes */
    size_t total;    /* budget for the sum of all message sizes, bytes */
    size_t open_max; /* largest message received with MPI_ANY_TAG */
    int batch;       /* messages per batch; 0: 8 per rank */
    int verbose;
    int corrupt;    /* flip a received byte before the check (tests the check) */
    double stall;   /* report requests open this long (seconds; 0: never) */
    int print_plan; /* rank 0 lists every message first */
};

static void usage(void)
{
    printf("Usage: stress [options]\n"
           "Random point-to-point traffic between all ranks with checked payloads.\n"
           "  --count N         data messages (default 10000; each also has a checksum\n"
           "                    message)\n"
           "  --seed S          plan seed (default 1); every rank must be given the same\n"
           "  --max-size SIZE   largest message (default 16M, at most 1G)\n"
           "  --total SIZE      budget for the sum of all message sizes (default 1G: about\n"
           "                    2-3 minutes on 2 clusters x 2 nodes with 100 Mbit/s NICs)\n"
           "  --wildcard-max SIZE  largest message received with MPI_ANY_TAG (default 4M;\n"
           "                    such receives all need buffers of the largest candidate)\n"
           "  --batch N         messages per batch, 1..%d (default 8 per rank)\n"
           "  --quick           CI profile: --count 2000 --max-size 1M --total 64M\n"
           "                    (later options override it)\n"
           "  --verbose         a line per batch from rank 0\n"
           "  --print-plan      rank 0 lists every message (batch, ranks, tag, size, send and\n"
           "                    receive mode, layouts) before running\n"
           "  --stall-report S  after S seconds without completing a batch, every rank lists\n"
           "                    its open requests on stderr (default 60; 0: never)\n"
           "  --corrupt         flip one byte of the first non-empty message every rank\n"
           "                    receives, before the check (the run must then fail)\n"
           "  --help            this text\n"
           "SIZE takes K, M, G suffixes (binary). Half the budget goes to small messages,\n"
           "log-uniform from 1 byte up to the power of two that keeps their expected total\n"
           "within it (1/64 of them zero bytes), half to huge ones, log-uniform from there to\n"
           "the largest size (one exactly the largest); sizes are shuffled over the run.\n",
           MAX_BATCH);
}

static int parse_size(const char *s, size_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || s[0] == '-')
        return -1;
    unsigned long long mult = 1;
    if (*end == 'K' || *end == 'k')
        mult = KiB, end++;
    else if (*end == 'M' || *end == 'm')
        mult = MiB, end++;
    else if (*end == 'G' || *end == 'g')
        mult = GiB, end++;
    if (*end != '\0' || v > (unsigned long long) (SIZE_MAX / mult))
        return -1;
    *out = (size_t) (v * mult);
    return 0;
}

static int parse_long(const char *s, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end != '\0' || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

/* Returns 0 to run, 1 after --help, -1 on a bad option (message printed by rank 0). */
static int parse_opts(int argc, char **argv, int rank, struct opts *o)
{
    *o = (struct opts){ .count = 10000,
                        .seed = 1,
                        .max_size = 16 * MiB,
                        .total = GiB,
                        .open_max = 4 * MiB,
                        .stall = 60 };
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        long l;
        int bad = 0;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            if (rank == 0)
                usage();
            return 1;
        } else if (!strcmp(a, "--quick")) {
            o->count = 2000, o->max_size = MiB, o->total = 64 * MiB;
            continue;
        } else if (!strcmp(a, "--verbose")) {
            o->verbose = 1;
            continue;
        } else if (!strcmp(a, "--print-plan")) {
            o->print_plan = 1;
            continue;
        } else if (!strcmp(a, "--corrupt")) {
            o->corrupt = 1;
            continue;
        }
        static const char *const with_value[] = { "--count",       "--seed",         "--max-size",
                                                  "--total",       "--wildcard-max", "--batch",
                                                  "--stall-report" };
        int known = 0;
        for (size_t k = 0; k < sizeof(with_value) / sizeof(with_value[0]); k++)
            known |= !strcmp(a, with_value[k]);
        if (!known) {
            if (rank == 0)
                fprintf(stderr, "stress: unknown option '%s' (see --help)\n", a);
            return -1;
        }
        if (!v) {
            if (rank == 0)
                fprintf(stderr, "stress: %s needs a value (see --help)\n", a);
            return -1;
        }
        if (!strcmp(a, "--count"))
            bad = parse_long(v, 1, 100000000, &o->count);
        else if (!strcmp(a, "--seed")) {
            char *end;
            errno = 0;
            o->seed = strtoull(v, &end, 10);
            bad = errno || end == v || *end != '\0' || v[0] == '-';
        } else if (!strcmp(a, "--max-size"))
            bad = parse_size(v, &o->max_size) || o->max_size > GiB;
        else if (!strcmp(a, "--total"))
            bad = parse_size(v, &o->total);
        else if (!strcmp(a, "--wildcard-max"))
            bad = parse_size(v, &o->open_max);
        else if (!strcmp(a, "--stall-report")) {
            char *end;
            o->stall = strtod(v, &end);
            bad = end == v || *end != '\0' || !(o->stall >= 0 && o->stall <= 1e6);
        } else { /* --batch */
            bad = parse_long(v, 1, MAX_BATCH, &l);
            o->batch = (int) l;
        }
        if (bad) {
            if (rank == 0)
                fprintf(stderr, "stress: bad value '%s' for %s (see --help)\n", v, a);
            return -1;
        }
        i++;
    }
    return 0;
}

/* ---- deterministic randomness ---------------------------------------------------------- */

static inline uint64_t mix64(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

struct rng {
    uint64_t s;
};

static inline uint64_t rng_next(struct rng *r)
{
    r->s += 0x9e3779b97f4a7c15ULL;
    return mix64(r->s);
}

/* uniform in [0, n) for n >= 1 (the bias of the modulo is irrelevant here) */
static inline uint64_t rng_below(struct rng *r, uint64_t n)
{
    return rng_next(r) % n;
}

/* ---- the plan ------------------------------------------------------------------------- */

enum base { BASE_BYTE, BASE_INT, BASE_DOUBLE, NBASE };
static const char *const base_name[NBASE] = { "byte", "int", "double" };
static const size_t base_size[NBASE] = { 1, 4, 8 };

static MPI_Datatype base_type(int b)
{
    return b == BASE_BYTE ? MPI_BYTE : b == BASE_INT ? MPI_INT : MPI_DOUBLE;
}

enum send_mode { SEND_ISEND, SEND_ISSEND, SEND_SEND, SEND_SSEND, NSEND };
static const char *const send_name[NSEND] = { "Isend", "Issend", "Send", "Ssend" };

/* In the order the receiver posts them within a batch (see the top of the file). */
enum recv_mode {
    RECV_EARLY,      /* MPI_Irecv(source, tag) before any send */
    RECV_SPECIFIC,   /* after the sends, source and tag given */
    RECV_ANY_SOURCE, /* (MPI_ANY_SOURCE, tag) */
    RECV_ANY_TAG,    /* (source, MPI_ANY_TAG): may get any open message of that source */
    RECV_ANY_BOTH,   /* (MPI_ANY_SOURCE, MPI_ANY_TAG): may get any open message */
    NRECV
};
static const char *const recv_name[NRECV] = { "early Irecv", "specific", "ANY_SOURCE", "ANY_TAG",
                                              "ANY_SOURCE+ANY_TAG" };

/* A receive is open when it may match another message than the one planned for it. */
static inline int recv_is_open(int mode)
{
    return mode == RECV_ANY_TAG || mode == RECV_ANY_BOTH;
}

enum layout_kind {
    LAY_PLAIN,
    LAY_CONTIG,
    LAY_VECTOR,
    LAY_INDEXED,
    LAY_STRUCT,
    LAY_RESIZED,
    NLAYOUT
};
static const char *const layout_name[NLAYOUT] = { "plain",   "contiguous", "vector",
                                                  "indexed", "struct",     "resized" };

struct msg {
    int src, dst, tag; /* tag: index within the batch */
    int base;          /* element type; open messages of a batch share one */
    size_t n;          /* elements */
    int send_mode, recv_mode;
    int send_blocking;    /* derived from send_mode */
    int recv_blocking;    /* for modes after the sends: MPI_Recv rather than MPI_Irecv */
    uint64_t send_layout; /* seeds of the two layouts */
    uint64_t recv_layout;
    uint64_t pattern; /* seed of the payload */
};

struct plan {
    struct msg *m;
    long count;
    int batch;
    long nbatches;
    size_t bytes;
};

static int log2_floor(size_t v)
{
    int k = 0;
    while (v >>= 1)
        k++;
    return k;
}

/* Log-uniform in [lo, hi] (lo >= 1) by octaves: an octave [2^k, 2^(k+1)) chosen uniformly,
 * then a size uniformly within it (clipped to [lo, hi]). No libm needed. */
static size_t draw_range(struct rng *r, size_t lo, size_t hi)
{
    int k0 = log2_floor(lo), k1 = log2_floor(hi);
    int k = k0 + (int) rng_below(r, (uint64_t) (k1 - k0 + 1));
    size_t a = (size_t) 1 << k, b = ((size_t) 2 << k) - 1;
    if (a < lo)
        a = lo;
    if (b > hi)
        b = hi;
    return a + (size_t) rng_below(r, b - a + 1);
}

/* Mean size of draw_range(1, 2^(c+1) - 1) with 1/64 zero-byte messages. */
static double mean_small(int c)
{
    double sum = 0;
    for (int k = 0; k <= c; k++)
        sum += 1.5 * (double) ((size_t) 1 << k) - 0.5;
    return sum / (c + 1) * 63.0 / 64.0;
}

/*
 * Message sizes under the budget. Log-uniform sizes up to 16 MiB average about 1 MiB, far
 * more than a budget allows for 10,000 messages, so there are two tiers: small messages,
 * log-uniform from 1 byte up to the largest octave whose expected total fits half the
 * budget (plus 1/64 of zero bytes), and huge messages, log-uniform from there to the
 * largest size, as many as the other half holds (the first of them exactly the largest
 * size). The sizes are then shuffled. The total never exceeds the budget.
 */
static void draw_sizes(struct rng *r, const struct opts *o, size_t *sizes)
{
    long count = o->count, nhuge = 0, i;
    size_t small_budget = o->total / 2, left;
    int c = log2_floor(o->max_size ? o->max_size : 1);
    while (c >= 0 && mean_small(c) * (double) count > (double) small_budget)
        c--;
    size_t small_cap = c < 0 ? 0 : ((size_t) 2 << c) - 1;
    if (small_cap >= o->max_size) {
        small_cap = o->max_size;
        small_budget = o->total;
    }
    left = o->total - small_budget;
    while (small_cap < o->max_size && nhuge < count) {
        size_t s = nhuge == 0 ? o->max_size : draw_range(r, small_cap + 1, o->max_size);
        if (s > left)
            break;
        sizes[nhuge++] = s;
        left -= s;
    }
    left += small_budget;
    for (i = nhuge; i < count; i++) {
        size_t s = small_cap == 0 || rng_below(r, 64) == 0 ? 0 : draw_range(r, 1, small_cap);
        sizes[i] = s > left ? left : s;
        left -= sizes[i];
    }
    for (i = count - 1; i > 0; i--) {
        long j = (long) rng_below(r, (uint64_t) i + 1);
        size_t t = sizes[i];
        sizes[i] = sizes[j], sizes[j] = t;
    }
}

static void build_plan(const struct opts *o, int nranks, struct plan *p)
{
    struct rng r = { o->seed * 0x2545f4914f6cdd1dULL + 17 };
    long count = o->count;
    size_t *sizes = malloc(sizeof(size_t) * count);

    draw_sizes(&r, o, sizes);
    p->count = count;
    p->batch = o->batch ? o->batch : (8 * nranks > MAX_BATCH ? MAX_BATCH : 8 * nranks);
    p->nbatches = (count + p->batch - 1) / p->batch;
    p->m = calloc((size_t) count, sizeof(struct msg));
    p->bytes = 0;
    int open_base = 0;
    for (long i = 0; i < count; i++) {
        struct msg *m = &p->m[i];
        if (i % p->batch == 0)
            open_base = (int) rng_below(&r, NBASE);
        m->src = (int) rng_below(&r, (uint64_t) nranks);
        m->dst = (int) rng_below(&r, (uint64_t) nranks - 1);
        if (m->dst >= m->src)
            m->dst++;
        m->tag = (int) (i % p->batch);
        m->recv_mode = (int) rng_below(&r, NRECV);
        if (recv_is_open(m->recv_mode) && sizes[i] > o->open_max)
            m->recv_mode = RECV_EARLY;
        m->base = recv_is_open(m->recv_mode) ? open_base : (int) rng_below(&r, NBASE);
        m->n = sizes[i] / base_size[m->base];
        /* Blocking sends only to early receives (see the top of the file). */
        m->send_mode = (int) rng_below(&r, m->recv_mode == RECV_EARLY ? NSEND : 2);
        m->send_blocking = m->send_mode == SEND_SEND || m->send_mode == SEND_SSEND;
        m->recv_blocking = m->recv_mode != RECV_EARLY && rng_below(&r, 2);
        m->send_layout = rng_next(&r);
        m->recv_layout = rng_next(&r);
        m->pattern = rng_next(&r);
        p->bytes += m->n * base_size[m->base];
    }
    free(sizes);
}

static void print_plan(const struct opts *o, const struct plan *p, int nranks)
{
    long by_send[NSEND] = { 0 }, by_recv[NRECV] = { 0 }, by_base[NBASE] = { 0 };
    long by_size[5] = { 0 };
    size_t largest = 0;
    for (long i = 0; i < p->count; i++) {
        const struct msg *m = &p->m[i];
        size_t b = m->n * base_size[m->base];
        by_send[m->send_mode]++, by_recv[m->recv_mode]++, by_base[m->base]++;
        by_size[b == 0 ? 0 : b <= KiB ? 1 : b <= 64 * KiB ? 2 : b <= MiB ? 3 : 4]++;
        if (b > largest)
            largest = b;
    }
    printf("stress: %d ranks, seed %" PRIu64 ", %ld messages in %ld batches of %d, "
           "%zu payload bytes (budget %zu), largest %zu\n",
           nranks, o->seed, p->count, p->nbatches, p->batch, p->bytes, o->total, largest);
    printf("stress: sizes 0 B: %ld, 1 B-1 KiB: %ld, -64 KiB: %ld, -1 MiB: %ld, >1 MiB: %ld\n",
           by_size[0], by_size[1], by_size[2], by_size[3], by_size[4]);
    printf("stress: sends");
    for (int k = 0; k < NSEND; k++)
        printf(" %s %ld", send_name[k], by_send[k]);
    printf("; receives");
    for (int k = 0; k < NRECV; k++)
        printf(" %s %ld", recv_name[k], by_recv[k]);
    printf("; elements");
    for (int k = 0; k < NBASE; k++)
        printf(" %s %ld", base_name[k], by_base[k]);
    printf("\n");
    fflush(stdout);
}

/* ---- layouts -------------------------------------------------------------------------- */

/*
 * Where the elements of a message lie in a buffer, described independently of the MPI
 * datatype built for it, so that the check does not trust MPI's datatype engine: `units`
 * repetitions, unit u at u * unit_ext elements, each unit the blocks (disp, len) in
 * type-map order (memory order may differ). Offsets are in elements of the base type
 * and start at 0 (the buffer begins at the layout's lower bound).
 */
struct layout {
    int kind;
    int base;
    MPI_Datatype type; /* committed derived type, or the base type for LAY_PLAIN */
    int derived;       /* type must be freed */
    int count;         /* count argument of the MPI call */
    size_t n;          /* elements described */
    size_t units, unit_ext;
    int nblocks;
    size_t *disp, *len;
    size_t span; /* buffer length in elements */
};

/* A divisor of n in 1..16 (any of them when n is 0), chosen at random. */
static size_t pick_divisor(struct rng *r, size_t n)
{
    size_t d = 1 + rng_below(r, 16);
    while (n != 0 && n % d != 0)
        d--;
    return d;
}

static void layout_blocks(struct layout *l, int nblocks)
{
    l->nblocks = nblocks;
    l->disp = calloc((size_t) nblocks + 1, sizeof(size_t));
    l->len = calloc((size_t) nblocks + 1, sizeof(size_t));
}

static int fits_int(size_t v)
{
    return v <= (size_t) 0x7fffffff;
}

/* Builds a layout of n elements of `base` from `seed`. Returns -1 when a count does not
 * fit in an int (not with the sizes this test allows). */
static int layout_make(struct layout *l, uint64_t seed, int base, size_t n)
{
    struct rng r = { seed };
    MPI_Datatype bt = base_type(base), t = MPI_DATATYPE_NULL, u;
    MPI_Aint es = (MPI_Aint) base_size[base];

    memset(l, 0, sizeof(*l));
    if (!fits_int(n))
        return -1;
    l->kind = (int) rng_below(&r, NLAYOUT);
    l->base = base;
    l->n = n;
    switch (l->kind) {
    case LAY_PLAIN:
        layout_blocks(l, 1);
        l->len[0] = n, l->units = 1, l->unit_ext = n;
        l->count = (int) n;
        t = bt;
        break;
    case LAY_CONTIG: {
        size_t d = pick_divisor(&r, n);
        layout_blocks(l, 1);
        l->len[0] = d, l->units = n / d, l->unit_ext = d;
        l->count = (int) (n / d);
        MPI_Type_contiguous((int) d, bt, &t);
        break;
    }
    case LAY_VECTOR: {
        /* one vector type for the whole message: n/bl blocks of bl, gap 1..bl */
        size_t bl = pick_divisor(&r, n), gap = 1 + rng_below(&r, bl);
        layout_blocks(l, 1);
        l->len[0] = bl, l->units = n / bl, l->unit_ext = bl + gap;
        l->count = 1;
        MPI_Type_vector((int) l->units, (int) bl, (int) (bl + gap), bt, &t);
        break;
    }
    case LAY_INDEXED: {
        /* up to 64 blocks of uneven (possibly zero) length, gaps of 0..3, and in one case
         * of four placed in memory in reverse order of the type map */
        int nb = (int) (1 + rng_below(&r, 64));
        if ((size_t) nb > n)
            nb = n ? (int) n : 1;
        layout_blocks(l, nb);
        for (int i = 0; i < nb; i++)
            l->len[i] = n / nb;
        l->len[nb - 1] += n % nb;
        for (int i = 0; i + 1 < nb; i++) {
            size_t move = rng_below(&r, l->len[i] + 1) / 2;
            l->len[i] -= move, l->len[i + 1] += move;
        }
        int reverse = rng_below(&r, 4) == 0;
        size_t at = rng_below(&r, 4);
        for (int k = 0; k < nb; k++) {
            int i = reverse ? nb - 1 - k : k;
            l->disp[i] = at;
            at += l->len[i] + rng_below(&r, 4);
        }
        l->units = 1, l->unit_ext = at;
        l->count = 1;
        int *ilen = malloc(sizeof(int) * nb), *idisp = malloc(sizeof(int) * nb);
        for (int i = 0; i < nb; i++) {
            ilen[i] = (int) l->len[i], idisp[i] = (int) l->disp[i];
        }
        MPI_Type_indexed(nb, ilen, idisp, bt, &t);
        free(ilen), free(idisp);
        break;
    }
    case LAY_STRUCT: {
        /* unit of d elements in two blocks with gaps before, between and after */
        size_t d = pick_divisor(&r, n), l1 = rng_below(&r, d + 1);
        size_t g0 = rng_below(&r, 3), g1 = 1 + rng_below(&r, 3), g2 = rng_below(&r, 3);
        layout_blocks(l, 2);
        l->disp[0] = g0, l->len[0] = l1;
        l->disp[1] = g0 + l1 + g1, l->len[1] = d - l1;
        l->units = n / d, l->unit_ext = g0 + d + g1 + g2;
        l->count = (int) (n / d);
        int bl[2] = { (int) l->len[0], (int) l->len[1] };
        MPI_Aint bd[2] = { (MPI_Aint) l->disp[0] * es, (MPI_Aint) l->disp[1] * es };
        MPI_Datatype bts[2] = { bt, bt };
        MPI_Type_create_struct(2, bl, bd, bts, &u);
        MPI_Type_create_resized(u, 0, (MPI_Aint) l->unit_ext * es, &t);
        MPI_Type_free(&u);
        break;
    }
    default: { /* LAY_RESIZED: contiguous d elements padded to d + pad */
        size_t d = pick_divisor(&r, n), pad = 1 + rng_below(&r, 4);
        layout_blocks(l, 1);
        l->len[0] = d, l->units = n / d, l->unit_ext = d + pad;
        l->count = (int) (n / d);
        MPI_Type_contiguous((int) d, bt, &u);
        MPI_Type_create_resized(u, 0, (MPI_Aint) l->unit_ext * es, &t);
        MPI_Type_free(&u);
        break;
    }
    }
    if (t != bt) {
        MPI_Type_commit(&t);
        l->derived = 1;
    }
    l->type = t;
    /* the last element of the last unit bounds the buffer */
    size_t end = 0;
    for (int b = 0; b < l->nblocks; b++)
        if (l->len[b] && l->disp[b] + l->len[b] > end)
            end = l->disp[b] + l->len[b];
    l->span = l->units ? (l->units - 1) * l->unit_ext + end : 0;
    return 0;
}

static void layout_free(struct layout *l)
{
    if (l->derived)
        MPI_Type_free(&l->type);
    free(l->disp), free(l->len);
    l->disp = l->len = NULL;
}

/* --print-plan (an open receive's layout is built for the batch's largest open message,
 * not for this one's size as listed). */
static void list_plan(const struct plan *p)
{
    for (long i = 0; i < p->count; i++) {
        const struct msg *m = &p->m[i];
        struct layout ls, lr;
        int ok = layout_make(&ls, m->send_layout, m->base, m->n) == 0 &&
                 layout_make(&lr, m->recv_layout, m->base, m->n) == 0;
        printf("plan: message %ld batch %ld: %d -> %d tag %d, %zu x %s (%zu B), %s (%s) -> %s%s "
               "(%s)\n",
               i, i / p->batch, m->src, m->dst, m->tag, m->n, base_name[m->base],
               m->n * base_size[m->base], send_name[m->send_mode], ok ? layout_name[ls.kind] : "?",
               recv_name[m->recv_mode],
               m->recv_mode != RECV_EARLY && m->recv_blocking ? " blocking" : "",
               ok ? layout_name[lr.kind] : "?");
        if (ok)
            layout_free(&ls), layout_free(&lr);
    }
    fflush(stdout);
}

/* ---- payload ---------------------------------------------------------------------------- */

/* Element i of a message: at most 8 bytes of a hash. Doubles keep bit 62 clear so they are
 * finite (a NaN's bits could legally change in a floating-point copy). */
static inline uint64_t element_value(int base, uint64_t pattern, size_t i)
{
    uint64_t v = mix64(pattern ^ (i * 0x9e3779b97f4a7c15ULL));
    if (base == BASE_DOUBLE)
        v &= ~((uint64_t) 1 << 62);
    return v;
}

static inline uint64_t load_elem(const unsigned char *p, size_t es)
{
    uint64_t v = 0;
    memcpy(&v, p, es); /* little-endian: the low es bytes */
    return v;
}

static inline uint64_t checksum_step(uint64_t h, uint64_t v)
{
    h = (h ^ v) * 0x100000001b3ULL;
    return h ^ (h >> 29);
}

#define CHECKSUM_INIT 0xcbf29ce484222325ULL

/* Runs the statements for every block of the first nmax elements of layout l, in type-map
 * order, with ptr the block's first byte in buf, idx the index of its first element and
 * cnt its number of elements. */
#define LAYOUT_FOR_BLOCKS(l, buf, nmax, ptr, idx, cnt, ...)                                        \
    do {                                                                                           \
        size_t idx = 0;                                                                            \
        const size_t es_ = base_size[(l)->base];                                                   \
        for (size_t u_ = 0; u_ < (l)->units && idx < (nmax); u_++)                                 \
            for (int b_ = 0; b_ < (l)->nblocks && idx < (nmax); b_++) {                            \
                size_t cnt = (l)->len[b_];                                                         \
                if (cnt > (nmax) -idx)                                                             \
                    cnt = (nmax) -idx;                                                             \
                unsigned char *ptr = (buf) + (u_ * (l)->unit_ext + (l)->disp[b_]) * es_;           \
                __VA_ARGS__;                                                                       \
                idx += cnt;                                                                        \
            }                                                                                      \
    } while (0)

/* Fills the elements of a send buffer (its gaps hold SEND_GAP_FILL); returns the checksum of the elements in type-map order. */
static uint64_t fill_send(const struct layout *l, unsigned char *buf, uint64_t pattern)
{
    size_t es = base_size[l->base];
    uint64_t h = CHECKSUM_INIT;
    LAYOUT_FOR_BLOCKS(l, buf, l->n, p, first, cnt, {
        for (size_t j = 0; j < cnt; j++) {
            uint64_t v = element_value(l->base, pattern, first + j);
            memcpy(p + j * es, &v, es);
            h = checksum_step(h, load_elem(p + j * es, es));
        }
    });
    return h;
}

/* Checksum of the first n elements as they are in the buffer. */
static uint64_t checksum_of(const struct layout *l, unsigned char *buf, size_t n)
{
    size_t es = base_size[l->base];
    uint64_t h = CHECKSUM_INIT;
    LAYOUT_FOR_BLOCKS(l, buf, n, p, first, cnt, {
        (void) first;
        for (size_t j = 0; j < cnt; j++)
            h = checksum_step(h, load_elem(p + j * es, es));
    });
    return h;
}

/* ---- results ------------------------------------------------------------------------------ */

enum fault {
    F_COUNT,
    F_SOURCE,
    F_TAG,
    F_PAYLOAD,
    F_CHECKSUM,
    F_OUTSIDE,
    F_SENDBUF,
    F_UNPLANNED,
    NFAULT
};
static const char *const fault_name[NFAULT] = { "count",    "source",  "tag",         "payload",
                                                "checksum", "outside", "send-buffer", "unplanned" };

struct tally {
    long long msgs, ck_msgs, bytes;
    long long faults[NFAULT];
    int reports;
};

static int my_rank;
static int corrupt_next; /* --corrupt: the next non-empty message received gets a bad byte */

static void fault(struct tally *t, int kind, long id, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void fault(struct tally *t, int kind, long id, const char *fmt, ...)
{
    t->faults[kind]++;
    icbc_test_errors++;
    if (t->reports++ >= MAX_REPORTS)
        return;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "[rank %d] message %ld: %s mismatch: ", my_rank, id, fault_name[kind]);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

/* ---- one batch ------------------------------------------------------------------------ */

struct ck { /* the checksum message */
    uint64_t sum, n, id;
};

struct sendop {
    long id;
    struct layout lay;
    unsigned char *buf;
    uint64_t sum;
    struct ck ck;
};

struct recvop {
    long planned; /* the message this receive was posted for */
    long got;     /* the message it matched (differs for open receives) */
    struct layout lay;
    unsigned char *buf;
    MPI_Status st;
    int req; /* index in the request array, -1 for blocking */
};

static unsigned char *alloc_buf(const struct layout *l, int fill)
{
    size_t bytes = l->span * base_size[l->base];
    unsigned char *b = malloc(bytes ? bytes : 1);
    if (!b) {
        fprintf(stderr, "[rank %d] stress: out of memory (%zu bytes)\n", my_rank, bytes);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    memset(b, fill, bytes);
    return b;
}

static void make_layout(struct layout *l, uint64_t seed, int base, size_t n, long id)
{
    if (layout_make(l, seed, base, n) != 0) {
        fprintf(stderr, "[rank %d] stress: message %ld: %zu elements do not fit an int count\n",
                my_rank, id, n);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
}

/* Verifies a completed receive of message `id` into r->buf and resets the elements it
 * checked to the sentinel, so that any other byte that is not the sentinel was written
 * outside the message. */
static void verify_recv(struct tally *t, const struct plan *p, struct recvop *r, long id,
                        const struct ck *ck)
{
    const struct msg *m = &p->m[id];
    const struct layout *l = &r->lay;
    size_t es = base_size[l->base];
    MPI_Count got = 0;
    MPI_Get_elements_x(&r->st, l->type, &got);
    t->msgs++;
    if (got < 0 || (size_t) got != m->n) {
        fault(t, F_COUNT, id, "%lld elements of %s received, %zu sent", (long long) got,
              base_name[m->base], m->n);
        return;
    }
    t->bytes += (long long) (m->n * es);
    if (corrupt_next && m->n > 0) {
        int done = 0;
        LAYOUT_FOR_BLOCKS(l, r->buf, m->n, q, first, cnt, {
            (void) first;
            if (!done && cnt > 0)
                q[0] ^= 0x40, done = 1;
        });
        corrupt_next = 0;
    }
    size_t bad = (size_t) -1;
    uint64_t h = CHECKSUM_INIT;
    LAYOUT_FOR_BLOCKS(l, r->buf, m->n, q, first, cnt, {
        for (size_t j = 0; j < cnt; j++) {
            uint64_t v = load_elem(q + j * es, es);
            uint64_t want = element_value(m->base, m->pattern, first + j);
            if (bad == (size_t) -1 && memcmp(q + j * es, &want, es) != 0)
                bad = first + j;
            h = checksum_step(h, v);
        }
        memset(q, RECV_SENTINEL, cnt * es);
    });
    if (bad != (size_t) -1)
        fault(t, F_PAYLOAD, id, "element %zu of %zu (%s, %s layout, from rank %d) is wrong", bad,
              m->n, base_name[m->base], layout_name[l->kind], m->src);
    if (ck->id != (uint64_t) id || ck->n != m->n || ck->sum != h)
        fault(t, F_CHECKSUM, id,
              "sender says id %" PRIu64 " n %" PRIu64 " sum %016" PRIx64
              ", received n %zu sum %016" PRIx64,
              ck->id, ck->n, ck->sum, m->n, h);
    for (size_t k = 0; k < l->span * es; k++)
        if (r->buf[k] != RECV_SENTINEL) {
            fault(t, F_OUTSIDE, id,
                  "byte %zu of the receive buffer (%s layout) was written "
                  "but holds no element",
                  k, layout_name[l->kind]);
            break;
        }
}

/* What each request of a batch is for, to report one that never completes. */
struct reqdesc {
    const char *op;
    long id;
};

static inline void note_req(struct reqdesc *what, int i, const char *op, long id)
{
    what[i].op = op, what[i].id = id;
}

static double stall_secs = 60; /* --stall-report */

/* Once per batch, after stall_secs without completion: which requests are still open. */
static void stall_check(const struct plan *p, long b, const struct reqdesc *what,
                        const MPI_Request *reqs, int nreq, double since, int *reported)
{
    if (*reported || stall_secs <= 0 || MPI_Wtime() - since < stall_secs)
        return;
    *reported = 1;
    for (int i = 0; i < nreq; i++) {
        if (reqs[i] == MPI_REQUEST_NULL)
            continue;
        const struct msg *m = &p->m[what[i].id];
        fprintf(stderr,
                "[rank %d] stalled %.0f s in batch %ld: %s of message %ld (%d -> %d, "
                "tag %d, %zu x %s, %s, %s) not complete\n",
                my_rank, stall_secs, b, what[i].op, what[i].id, m->src, m->dst, m->tag, m->n,
                base_name[m->base], send_name[m->send_mode], recv_name[m->recv_mode]);
    }
}

static void run_batch(const struct plan *p, long b, MPI_Comm comm, MPI_Comm ckcomm, struct tally *t)
{
    long lo = b * p->batch, hi = lo + p->batch < p->count ? lo + p->batch : p->count;
    int nmsg = (int) (hi - lo);
    struct sendop *sends = calloc((size_t) nmsg, sizeof(*sends));
    struct recvop *recvs = calloc((size_t) nmsg, sizeof(*recvs));
    struct ck *cks = calloc((size_t) nmsg, sizeof(*cks));
    long *ck_of = calloc((size_t) nmsg, sizeof(long)); /* tag -> index in cks */
    /* requests: one per send, checksum send, receive and checksum receive */
    MPI_Request *reqs = malloc(sizeof(MPI_Request) * 4 * (size_t) nmsg);
    MPI_Status *stats = malloc(sizeof(MPI_Status) * 4 * (size_t) nmsg);
    struct reqdesc *what = malloc(sizeof(*what) * 4 * (size_t) nmsg);
    int nreq = 0, nsend = 0, nrecv = 0, nck = 0;
    size_t open_cap = 0;

    /* 1. early receives and every checksum receive */
    for (long id = lo; id < hi; id++) {
        const struct msg *m = &p->m[id];
        if (m->dst != my_rank)
            continue;
        ck_of[m->tag] = nck;
        note_req(what, nreq, "checksum receive", id);
        MPI_Irecv(&cks[nck++], 3, MPI_UINT64_T, m->src, m->tag, ckcomm, &reqs[nreq++]);
        if (recv_is_open(m->recv_mode) && m->n > open_cap)
            open_cap = m->n;
        if (m->recv_mode != RECV_EARLY)
            continue;
        struct recvop *r = &recvs[nrecv++];
        r->planned = r->got = id;
        make_layout(&r->lay, m->recv_layout, m->base, m->n, id);
        r->buf = alloc_buf(&r->lay, RECV_SENTINEL);
        r->req = nreq;
        note_req(what, nreq, "early Irecv", id);
        MPI_Irecv(r->buf, r->lay.count, r->lay.type, m->src, m->tag, comm, &reqs[nreq++]);
    }

    /* 2. sends in plan order */
    for (long id = lo; id < hi; id++) {
        const struct msg *m = &p->m[id];
        if (m->src != my_rank)
            continue;
        struct sendop *s = &sends[nsend++];
        s->id = id;
        make_layout(&s->lay, m->send_layout, m->base, m->n, id);
        s->buf = alloc_buf(&s->lay, SEND_GAP_FILL);
        s->sum = fill_send(&s->lay, s->buf, m->pattern);
        s->ck = (struct ck){ s->sum, m->n, (uint64_t) id };
        note_req(what, nreq, "checksum Isend", id);
        MPI_Isend(&s->ck, 3, MPI_UINT64_T, m->dst, m->tag, ckcomm, &reqs[nreq++]);
        note_req(what, nreq, send_name[m->send_mode], id);
        switch (m->send_mode) {
        case SEND_ISEND:
            MPI_Isend(s->buf, s->lay.count, s->lay.type, m->dst, m->tag, comm, &reqs[nreq++]);
            break;
        case SEND_ISSEND:
            MPI_Issend(s->buf, s->lay.count, s->lay.type, m->dst, m->tag, comm, &reqs[nreq++]);
            break;
        case SEND_SEND: MPI_Send(s->buf, s->lay.count, s->lay.type, m->dst, m->tag, comm); break;
        default: MPI_Ssend(s->buf, s->lay.count, s->lay.type, m->dst, m->tag, comm); break;
        }
    }

    /* 3. the other receives, one mode after the other; open receives are sized for the
     *    largest open message of this rank in the batch, because they may get any of them */
    for (int mode = RECV_SPECIFIC; mode < NRECV; mode++) {
        for (long id = lo; id < hi; id++) {
            const struct msg *m = &p->m[id];
            if (m->dst != my_rank || m->recv_mode != mode)
                continue;
            struct recvop *r = &recvs[nrecv++];
            int src = m->src, tag = m->tag;
            size_t n = recv_is_open(mode) ? open_cap : m->n;
            if (mode == RECV_ANY_SOURCE || mode == RECV_ANY_BOTH)
                src = MPI_ANY_SOURCE;
            if (recv_is_open(mode))
                tag = MPI_ANY_TAG;
            r->planned = r->got = id;
            make_layout(&r->lay, m->recv_layout, m->base, n, id);
            r->buf = alloc_buf(&r->lay, RECV_SENTINEL);
            if (m->recv_blocking) {
                r->req = -1;
                MPI_Recv(r->buf, r->lay.count, r->lay.type, src, tag, comm, &r->st);
            } else {
                r->req = nreq;
                note_req(what, nreq, recv_name[mode], id);
                MPI_Irecv(r->buf, r->lay.count, r->lay.type, src, tag, comm, &reqs[nreq++]);
            }
        }
    }

    /* Complete everything: in some batches all at once, in others piecewise, so completion
     * order varies too. Polling (MPI_Testall, MPI_Testsome) rather than waiting, so that a
     * request that never completes is reported with what it was for. */
    double since = MPI_Wtime();
    int reported = 0;
    if (b % 3 != 2) {
        int flag = 0;
        while (!flag) {
            MPI_Testall(nreq, reqs, &flag, stats);
            if (!flag)
                stall_check(p, b, what, reqs, nreq, since, &reported);
        }
    } else {
        int left = nreq, outcount, *idx = malloc(sizeof(int) * (size_t) (nreq ? nreq : 1));
        MPI_Status *st = malloc(sizeof(MPI_Status) * (size_t) (nreq ? nreq : 1));
        while (left > 0) {
            MPI_Testsome(nreq, reqs, &outcount, idx, st);
            if (outcount == MPI_UNDEFINED)
                break;
            for (int k = 0; k < outcount; k++)
                stats[idx[k]] = st[k];
            left -= outcount;
            if (left > 0)
                stall_check(p, b, what, reqs, nreq, since, &reported);
        }
        free(idx), free(st);
    }
    t->ck_msgs += nck;

    /* Send buffers must be unchanged by sending. */
    for (int k = 0; k < nsend; k++) {
        struct sendop *s = &sends[k];
        uint64_t h = checksum_of(&s->lay, s->buf, s->lay.n);
        if (h != s->sum)
            fault(t, F_SENDBUF, s->id, "send buffer changed while it was sent");
        layout_free(&s->lay), free(s->buf);
    }

    /* Which message did each receive get? Specific ones must have got their own; open
     * ones any open message of this rank in the batch, each exactly once. */
    char *taken = calloc((size_t) nmsg, 1);
    for (int k = 0; k < nrecv; k++) {
        struct recvop *r = &recvs[k];
        const struct msg *m = &p->m[r->planned];
        if (r->req >= 0)
            r->st = stats[r->req];
        int src = r->st.MPI_SOURCE, tag = r->st.MPI_TAG;
        long id = tag >= 0 && tag < nmsg ? lo + tag : -1;
        if (!recv_is_open(m->recv_mode)) {
            if (src != m->src)
                fault(t, F_SOURCE, r->planned, "from rank %d, expected %d", src, m->src);
            if (tag != m->tag)
                fault(t, F_TAG, r->planned, "tag %d, expected %d", tag, m->tag);
            if (src != m->src || tag != m->tag)
                continue;
            id = r->planned;
        } else if (id < 0 || p->m[id].dst != my_rank || p->m[id].src != src ||
                   !recv_is_open(p->m[id].recv_mode) || taken[id - lo] ||
                   (m->recv_mode == RECV_ANY_TAG && src != m->src)) {
            fault(t, F_UNPLANNED, r->planned, "%s receive got source %d tag %d",
                  recv_name[m->recv_mode], src, tag);
            continue;
        }
        taken[id - lo] = 1;
        r->got = id;
        verify_recv(t, p, r, id, &cks[ck_of[p->m[id].tag]]);
    }
    for (int k = 0; k < nrecv; k++)
        layout_free(&recvs[k].lay), free(recvs[k].buf);
    free(taken), free(sends), free(recvs), free(cks), free(ck_of), free(reqs), free(stats);
    free(what);
}

/* ---- main ----------------------------------------------------------------------------- */

/* An MPI error (a lost peer or router) ends the job, as MPI_ERRORS_ARE_FATAL
 * would, but only after the message had a moment to reach mpiexec: the
 * process manager tears the job down on the abort and may drop output that
 * its proxy has not forwarded yet. */
static void fatal_after_report(MPI_Comm *comm, int *code, ...)
{
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;

    MPI_Error_string(*code, msg, &len);
    fprintf(stderr, "stress: rank %d: MPI error: %s\n", my_rank, msg);
    fflush(stderr);
    sleep(1);
    MPI_Abort(*comm, *code);
}

int main(int argc, char **argv)
{
    int nranks;
    struct opts o;
    struct plan p;
    struct tally t = { 0 };
    MPI_Comm comm, ckcomm;

    MPI_Errhandler fatal;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &my_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    MPI_Comm_create_errhandler(fatal_after_report, &fatal);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, fatal);
    int rc = parse_opts(argc, argv, my_rank, &o);
    if (rc != 0) {
        MPI_Finalize();
        return rc > 0 ? 0 : 2;
    }
    if (nranks < 2) {
        if (my_rank == 0)
            fprintf(stderr, "stress: needs at least 2 ranks\n");
        MPI_Finalize();
        return 2;
    }
    if (o.open_max > o.max_size)
        o.open_max = o.max_size;
    /* the same plan on every rank needs the same options on every rank */
    uint64_t mine[5] = { (uint64_t) o.count, o.seed, o.max_size, o.total, (uint64_t) o.batch };
    uint64_t root[5];
    memcpy(root, mine, sizeof(root));
    MPI_Bcast(root, 5, MPI_UINT64_T, 0, MPI_COMM_WORLD);
    int differ = memcmp(root, mine, sizeof(root)) != 0, any_differ;
    MPI_Allreduce(&differ, &any_differ, 1, MPI_INT, MPI_LOR, MPI_COMM_WORLD);
    if (any_differ) {
        if (my_rank == 0)
            fprintf(stderr, "stress: ranks were given different options\n");
        MPI_Finalize();
        return 2;
    }

    corrupt_next = o.corrupt;
    stall_secs = o.stall;
    build_plan(&o, nranks, &p);
    if (my_rank == 0)
        print_plan(&o, &p, nranks);
    if (my_rank == 0 && o.print_plan)
        list_plan(&p);
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    MPI_Comm_dup(MPI_COMM_WORLD, &ckcomm);

    MPI_Barrier(comm);
    double t0 = MPI_Wtime();
    for (long b = 0; b < p.nbatches; b++) {
        run_batch(&p, b, comm, ckcomm, &t);
        MPI_Barrier(comm);
        if (o.verbose && my_rank == 0)
            printf("stress: batch %ld/%ld done at %.1f s\n", b + 1, p.nbatches, MPI_Wtime() - t0);
    }
    double secs = MPI_Wtime() - t0;

    long long mine_v[3 + NFAULT] = { t.msgs, t.ck_msgs, t.bytes }, sum_v[3 + NFAULT];
    for (int k = 0; k < NFAULT; k++)
        mine_v[3 + k] = t.faults[k];
    MPI_Reduce(mine_v, sum_v, 3 + NFAULT, MPI_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    if (my_rank == 0) {
        long long bad = 0;
        for (int k = 0; k < NFAULT; k++)
            bad += sum_v[3 + k];
        printf("stress: %lld messages, %lld checksum messages, %lld payload bytes received "
               "in %.2f s (%.1f MB/s), %lld mismatches\n",
               sum_v[0], sum_v[1], sum_v[2], secs, secs > 0 ? (double) sum_v[2] / secs / 1e6 : 0.0,
               bad);
        if (bad) {
            printf("stress: mismatches by kind:");
            for (int k = 0; k < NFAULT; k++)
                printf(" %s %lld", fault_name[k], sum_v[3 + k]);
            printf("\n");
        }
        if (sum_v[0] != p.count) {
            printf("stress: %ld messages planned, %lld checked\n", p.count, sum_v[0]);
            icbc_test_errors++; /* rank 0's count enters the final reduction */
        }
    }
    free(p.m);
    MPI_Comm_free(&comm);
    MPI_Comm_free(&ckcomm);
    return icbc_test_finish();
}
