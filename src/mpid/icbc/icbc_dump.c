/*
 * A hang's diagnosis: on MPIR_CVAR_CH4_ICBC_DUMP_SIGNAL (SIGUSR2 by default)
 * the next progress call prints, on stderr, what this process's netmod is
 * waiting for: the routers (windows, sends held back), striped sends and
 * receives, the RMA operations still outstanding per window and target, and
 * the first words of each window (often the flags a waiter spins on).
 * The handler only sets a flag; the dump runs in progress, where the state
 * is consistent.
 */
#include <mpidimpl.h>
#include "icbc_impl.h"
#include "icbc_xfer.h"
#include "icbc_pacing.h"
#include "core/icbc_bind.h"

#include <signal.h>
#include <unistd.h>

volatile sig_atomic_t MPIDI_ICBC_dump_requested;

#define DUMP_WINDOWS_MAX 256

static MPIR_Win *windows[DUMP_WINDOWS_MAX];

static void on_dump_signal(int sig)
{
    MPIDI_ICBC_dump_requested = 1;
}

void MPIDI_ICBC_dump_init(void)
{
    struct sigaction sa, old;
    int sig = MPIR_CVAR_CH4_ICBC_DUMP_SIGNAL;

    if (sig <= 0 || sig >= NSIG || sigaction(sig, NULL, &old) != 0 || old.sa_handler != SIG_DFL)
        return;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_dump_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(sig, &sa, NULL);
}

void MPIDI_ICBC_dump_win_add(MPIR_Win *win)
{
    for (int i = 0; i < DUMP_WINDOWS_MAX; i++)
        if (windows[i] == NULL) {
            windows[i] = win;
            return;
        }
}

void MPIDI_ICBC_dump_win_del(MPIR_Win *win)
{
    for (int i = 0; i < DUMP_WINDOWS_MAX; i++)
        if (windows[i] == win)
            windows[i] = NULL;
}

static void dump_windows(FILE *f)
{
    for (int i = 0; i < DUMP_WINDOWS_MAX; i++) {
        MPIR_Win *win = windows[i];
        if (win == NULL)
            continue;
        fprintf(f,
                "  window %d (comm size %d): ops issued, not complete: local %d, remote %d; "
                "access epoch %d, exposure epoch %d\n",
                win->handle, win->comm_ptr->local_size,
                MPIR_cc_get(MPIDIG_WIN(win, local_cmpl_cnts)),
                MPIR_cc_get(MPIDIG_WIN(win, remote_cmpl_cnts)),
                MPIDIG_WIN(win, sync).access_epoch_type, MPIDIG_WIN(win, sync).exposure_epoch_type);
        /* the first words of the window: often the flags a waiter spins on */
        if (win->base && win->size >= (MPI_Aint) sizeof(int)) {
            int n = (int) MPL_MIN(win->size / (MPI_Aint) sizeof(int), 8);
            fprintf(f, "    memory (int):");
            for (int k = 0; k < n; k++)
                fprintf(f, " %d", ((volatile int *) win->base)[k]);
            fprintf(f, "\n");
        }
        MPIDIG_win_target_t *t, *tmp;
        HASH_ITER(hash_handle, MPIDIG_WIN(win, targets), t, tmp)
        {
            int lc = MPIR_cc_get(t->local_cmpl_cnts), rc = MPIR_cc_get(t->remote_cmpl_cnts);
            int ac = MPIR_cc_get(t->remote_acc_cmpl_cnts);
            if (lc || rc || ac)
                fprintf(f, "    target %d: local %d, remote %d, accumulates %d outstanding\n",
                        t->rank, lc, rc, ac);
        }
    }
}

/* The CPUs this process may run on, and why when a router shares its host. */
static void dump_placement(FILE *f)
{
    char where[64];

    if (MPIDI_ICBC_router_embed_placement()[0]) {
        fprintf(f, "  placement: %s\n", MPIDI_ICBC_router_embed_placement());
        return;
    }
    icbc_bind_where(where, sizeof(where));
    fprintf(f, "  placement: CPUs %s (as the launcher or the system placed it)\n", where);
}

/* Every line carries the rank: the dumps of all ranks meet in one stream. */
static void write_prefixed(const char *text)
{
    const char *line = text, *nl;

    while (*line) {
        nl = strchr(line, '\n');
        int len = nl ? (int) (nl - line) : (int) strlen(line);
        fprintf(stderr, "icbc dump [%d]: %.*s\n", MPIR_Process.rank, len, line);
        line += len + (nl != NULL);
    }
}

void MPIDI_ICBC_dump(void)
{
    char host[64] = "?";
    char *text = NULL;
    size_t len = 0;
    FILE *f;

    MPIDI_ICBC_dump_requested = 0;
    gethostname(host, sizeof(host) - 1);
    f = open_memstream(&text, &len);
    if (f == NULL)
        return;
    fprintf(f, "rank %d on %s:\n", MPIR_Process.rank, host);
    dump_placement(f);
    MPIDI_ICBC_path_dump(f);
    MPIDI_ICBC_pace_dump(f);
    MPIDI_ICBC_xfer_dump(f);
    dump_windows(f);
    fprintf(f, "end\n");
    fclose(f);
    write_prefixed(text);
    free(text);
    fflush(stderr);
}
