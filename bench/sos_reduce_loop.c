/* Sandia OpenSHMEM's own reduce in a loop, every value checked (docs/libraries.md, "The collectives hang on
 * Sandia OpenSHMEM"): ITERS sums of 50,000 doubles on the world team, optionally while every PE takes a
 * signal every US microseconds (a handler that does nothing; SA_RESTART when a third argument is given).
 * PE 0 prints every 10th reduction's milliseconds; a wrong value exits 3 naming the PE and the element.
 *
 *   $SOS/install/bin/oshcc -O2 -o sos_reduce_loop bench/sos_reduce_loop.c
 *   OSHRUN_LAUNCHER=mpiexec.hydra FI_PROVIDER=sockets SHMEM_SYMMETRIC_SIZE=8M \
 *       timeout -s KILL 900 $SOS/install/bin/oshrun -n 4 ./sos_reduce_loop 2000 100   # US=0: no signals
 */
#include <shmem.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <signal.h>
#include <string.h>
#include <sys/time.h>
static volatile long hits;
static void noop(int s) { (void) s; hits++; }
#define N 50000
int main(int argc, char **argv) {
    long iters = argc > 1 ? atol(argv[1]) : 100;
    long us = argc > 2 ? atol(argv[2]) : 0;
    shmem_init();
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = noop;
    sa.sa_flags = argc > 3 ? SA_RESTART : 0;
    sigaction(SIGALRM, &sa, NULL);
    if (us > 0) {
        struct itimerval every = {{0, us}, {0, us}};
        setitimer(ITIMER_REAL, &every, NULL);
    }
    int me = shmem_my_pe(), np = shmem_n_pes();
    double *src = shmem_malloc(N * sizeof(double)), *dst = shmem_malloc(N * sizeof(double));
    struct timespec t0, t1;
    for (long it = 0; it < iters; it++) {
        for (int i = 0; i < N; i++) { src[i] = me + (i + it) % 7; dst[i] = 0; }
        shmem_barrier_all();
        clock_gettime(CLOCK_MONOTONIC, &t0);
        shmem_double_sum_reduce(SHMEM_TEAM_WORLD, dst, src, N);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        for (int i = 0; i < N; i++) {
            double want = np * (np - 1) / 2 + np * ((i + it) % 7);
            if (dst[i] != want) {
                printf("PE %d iter %ld: dst[%d]=%g want %g\n", me, it, i, dst[i], want);
                fflush(stdout);
                shmem_global_exit(3);
            }
        }
        if (me == 0 && it % 10 == 0) {
            printf("iter %ld hits %ld %.1f ms\n", it, hits, (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6);
            fflush(stdout);
        }
    }
    if (me == 0) printf("done\n");
    shmem_finalize();
    return 0;
}
