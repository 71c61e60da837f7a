/* Reductions checked against their closed form while every PE takes a signal every US microseconds
 * (a handler that does nothing, installed as Python installs its own: without SA_RESTART), as PEs take
 * SIGINT at an interrupt and SIGUSR1 when the tool looks at their stacks (docs/libraries.md, Sandia
 * OpenSHMEM with shared heaps). Exits 3 naming the PE and the reduction at the first wrong sum. An
 * OpenSHMEM 1.4 library (Open MPI's OSHMEM) runs shmem_long_sum_to_all; tests/test_signals.py runs it on
 * every library built here.
 *
 *   $SOS/install/bin/oshcc -O2 -o sos_signal_reduce bench/sos_signal_reduce.c
 *   OSHRUN_LAUNCHER=mpiexec.hydra FI_PROVIDER=sockets SHMEM_SYMMETRIC_SIZE=8M SHMEM_BARRIER_ALGORITHM=dissem \
 *       timeout -s KILL 60 $SOS/install/bin/oshrun -n 3 ./sos_signal_reduce 100000 100    # US=0: no signals
 */
#include <shmem.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

static volatile long hits;
#if SHMEM_MAJOR_VERSION == 1 && SHMEM_MINOR_VERSION < 5
static long pSync[2][SHMEM_REDUCE_SYNC_SIZE], pWrk[SHMEM_REDUCE_MIN_WRKDATA_SIZE];
#endif
static void noop(int s) { (void) s; hits++; }

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 100000, us = argc > 2 ? atol(argv[2]) : 100;
    shmem_init();
    int me = shmem_my_pe(), np = shmem_n_pes();
#if SHMEM_MAJOR_VERSION == 1 && SHMEM_MINOR_VERSION < 5
    for (int j = 0; j < SHMEM_REDUCE_SYNC_SIZE; j++) pSync[0][j] = pSync[1][j] = SHMEM_SYNC_VALUE;
    shmem_barrier_all();
#endif
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = noop;
    sa.sa_flags = SA_ONSTACK;
    sigaction(SIGALRM, &sa, NULL);
    if (us > 0) {
        struct itimerval every = {{0, us}, {0, us}};
        setitimer(ITIMER_REAL, &every, NULL);
    }
    long *s = shmem_malloc(4 * sizeof(long)), *d = shmem_malloc(4 * sizeof(long));
    for (long i = 0; i < n; i++) {
        for (int k = 0; k < 4; k++) s[k] = me + i + k;
#if SHMEM_MAJOR_VERSION == 1 && SHMEM_MINOR_VERSION < 5
        shmem_long_sum_to_all(d, s, 4, 0, 0, np, pWrk, pSync[i % 2]);
#else
        shmem_long_sum_reduce(SHMEM_TEAM_WORLD, d, s, 4);
#endif
        long want = (long) np * (np - 1) / 2 + np * i;
        if (d[0] != want || d[3] != want + 3 * np) {
            struct itimerval off = {{0, 0}, {0, 0}};
            setitimer(ITIMER_REAL, &off, NULL);
            printf("PE %d reduction %ld: %ld, %ld where %ld, %ld\n", me, i, d[0], d[3], want, want + 3 * np);
            fflush(stdout);
            shmem_global_exit(3);
        }
    }
    struct itimerval off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_REAL, &off, NULL);  /* a write to a full pipe cut short by a signal would lose the line */
    if (me == 0) printf("%ld reductions right, %ld signals on PE 0\n", n, hits);
    shmem_finalize();
    return 0;
}
