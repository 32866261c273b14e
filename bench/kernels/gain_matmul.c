/* gain_bench: C = A * B in the i-j-k order (VARIANT 0), interchanged to i-k-j as polyprof
 * advises (VARIANT 1), or with B transposed, its alternative (VARIANT 2). Usage: gain_matmul N.
 * Prints the kernel's seconds on stderr. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#ifndef VARIANT
#define VARIANT 0
#endif

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 32;
    double (*A)[n] = malloc(sizeof(double) * n * n);
    double (*B)[n] = malloc(sizeof(double) * n * n);
    double (*C)[n] = malloc(sizeof(double) * n * n);
    if (!A || !B || !C)
        return 1;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            A[i][j] = (i + j) % 5;
            B[i][j] = (i * j) % 3;
            C[i][j] = 0;
        }
    double t0 = now();
#if VARIANT == 0
    for (int i = 0; i < n; i++) /* KERNEL */
        for (int j = 0; j < n; j++)
            for (int k = 0; k < n; k++)
                C[i][j] += A[i][k] * B[k][j];
#elif VARIANT == 1
    for (int i = 0; i < n; i++)
        for (int k = 0; k < n; k++)
            for (int j = 0; j < n; j++)
                C[i][j] += A[i][k] * B[k][j];
#else
    double (*T)[n] = malloc(sizeof(double) * n * n);
    if (!T)
        return 1;
    for (int k = 0; k < n; k++)
        for (int j = 0; j < n; j++)
            T[j][k] = B[k][j];
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
            for (int k = 0; k < n; k++)
                C[i][j] += A[i][k] * T[j][k];
#endif
    double t1 = now();
    double trace = 0;
    for (int i = 0; i < n; i++)
        trace += C[i][i];
    printf("trace(C) = %g\n", trace);
    fprintf(stderr, "seconds %.6f\n", t1 - t0);
    return 0;
}
