/* gain_bench: an out-of-place transpose, B = A^T (VARIANT 0), tiled by 32 as polyprof advises
 * (VARIANT 1). Usage: gain_tile N REPS. Prints the kernel's seconds on stderr. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#ifndef VARIANT
#define VARIANT 0
#endif
#define T 32

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static int min(int a, int b) { return a < b ? a : b; }

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 64;
    int reps = argc > 2 ? atoi(argv[2]) : 1;
    double (*A)[n] = malloc(sizeof(double) * n * n);
    double (*B)[n] = malloc(sizeof(double) * n * n);
    if (!A || !B)
        return 1;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
            A[i][j] = i - j, B[i][j] = 0;
    double t0 = now();
    for (int r = 0; r < reps; r++) {
#if VARIANT == 0
        for (int i = 0; i < n; i++) /* KERNEL */
            for (int j = 0; j < n; j++)
                B[i][j] += A[j][i];
#else
        for (int ii = 0; ii < n; ii += T)
            for (int jj = 0; jj < n; jj += T)
                for (int i = ii; i < min(ii + T, n); i++)
                    for (int j = jj; j < min(jj + T, n); j++)
                        B[i][j] += A[j][i];
#endif
    }
    double t1 = now();
    double sum = 0;
    for (int i = 0; i < n; i++)
        sum += B[i][(i * 7) % n];
    printf("sum = %g\n", sum);
    fprintf(stderr, "seconds %.6f\n", t1 - t0);
    return 0;
}
