/* The put/get loop of putget_kernel.py in C, plus memcpy on this machine.
 *
 *   oshcc -O2 -o put_get put_get.c
 *   oshrun -n 2 ./put_get REPEATS SIZE:ITERS [SIZE:ITERS ...]
 *
 * PE 0 prints {"put": {"SIZE": [s, ...]}, "get": {...}, "memcpy": {...}}:
 * seconds per operation, one entry per repeat.
 */
#include <shmem.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_SIZES 16

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    int repeats = argc > 1 ? atoi(argv[1]) : 1, nsizes = 0;
    size_t sizes[MAX_SIZES], iters[MAX_SIZES], max_size = 1;
    for (int i = 2; i < argc && nsizes < MAX_SIZES; i++, nsizes++) {
        sscanf(argv[i], "%zu:%zu", &sizes[nsizes], &iters[nsizes]);
        if (sizes[nsizes] > max_size) max_size = sizes[nsizes];
    }
    double *t[3];  /* put, get, memcpy: [size][repeat] */
    for (int k = 0; k < 3; k++) t[k] = calloc((size_t)nsizes * repeats, sizeof(double));

    shmem_init();
    int me = shmem_my_pe();
    char *src = shmem_malloc(max_size), *dst = shmem_malloc(max_size);
    char *a = malloc(max_size), *b = malloc(max_size);
    memset(src, 1, max_size);
    memset(a, 1, max_size);
    memset(b, 0, max_size);
    shmem_barrier_all();

    for (int i = 0; i < nsizes; i++) {
        size_t size = sizes[i], n = iters[i], warm = n / 10 ? n / 10 : 1;
        for (int r = 0; r < repeats; r++) {
            for (int op = 0; op < 2; op++) {
                shmem_barrier_all();
                if (me == 0) {
                    for (size_t j = 0; j < warm; j++) {
                        if (op == 0) shmem_putmem(dst, src, size, 1);
                        else shmem_getmem(src, dst, size, 1);
                    }
                    shmem_quiet();
                    double start = now();
                    if (op == 0) {
                        for (size_t j = 0; j < n; j++) {
                            shmem_putmem(dst, src, size, 1);
                            shmem_quiet();
                        }
                    } else {
                        for (size_t j = 0; j < n; j++) shmem_getmem(src, dst, size, 1);
                    }
                    t[op][i * repeats + r] = (now() - start) / n;
                }
                shmem_barrier_all();
            }
            if (me == 0) {  /* local memcpy between private buffers: the machine's limit */
                for (size_t j = 0; j < warm; j++) memcpy(b, a, size);
                double start = now();
                for (size_t j = 0; j < n; j++) {
                    memcpy(b, a, size);
                    __asm__ __volatile__("" : : "r"(b) : "memory");  /* keep every copy */
                }
                t[2][i * repeats + r] = (now() - start) / n;
            }
        }
    }

    if (me == 0) {
        const char *names[3] = {"put", "get", "memcpy"};
        printf("{");
        for (int k = 0; k < 3; k++) {
            printf("%s\"%s\": {", k ? ", " : "", names[k]);
            for (int i = 0; i < nsizes; i++) {
                printf("%s\"%zu\": [", i ? ", " : "", sizes[i]);
                for (int r = 0; r < repeats; r++) printf("%s%.9e", r ? ", " : "", t[k][i * repeats + r]);
                printf("]");
            }
            printf("}");
        }
        printf("}\n");
    }
    shmem_barrier_all();
    shmem_free(src);
    shmem_free(dst);
    shmem_finalize();
    return 0;
}
