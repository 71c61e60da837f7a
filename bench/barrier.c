/* barrier_all in C: SAMPLES samples of ITERS calls each; PE 0 prints each sample's mean us per call.
 *
 *   oshcc -O2 -o barrier barrier.c && oshrun -n 2 ./barrier [SAMPLES [ITERS]]
 *
 * bench/sos_waits.py builds it with each library's oshcc and runs it under each wait setting. */
#include <shmem.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
int main(int argc, char **argv) {
    int samples = argc > 1 ? atoi(argv[1]) : 7, iters = argc > 2 ? atoi(argv[2]) : 200;
    shmem_init();
    int me = shmem_my_pe();
    for (int s = 0; s < samples; s++) {
        shmem_barrier_all();
        double t0 = now();
        for (int i = 0; i < iters; i++) shmem_barrier_all();
        double dt = (now() - t0) / iters * 1e6;
        if (me == 0) printf("%.3f\n", dt);
    }
    shmem_finalize();
    return 0;
}
