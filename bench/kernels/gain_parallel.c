/* gain_bench: an independent computation per element (VARIANT 0), run with OpenMP as polyprof
 * advises (VARIANT 1). Usage: gain_parallel N STEPS. Prints the kernel's seconds on stderr. */
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
    int n = argc > 1 ? atoi(argv[1]) : 256;
    int steps = argc > 2 ? atoi(argv[2]) : 64;
    double *a = malloc(sizeof(double) * n);
    double *b = malloc(sizeof(double) * n);
    if (!a || !b)
        return 1;
    for (int i = 0; i < n; i++)
        a[i] = 1.0 + (i % 7);
    double t0 = now();
#if VARIANT == 1
#pragma omp parallel for
#endif
    for (int i = 0; i < n; i++) { /* KERNEL */
        double x = a[i];
        for (int k = 0; k < steps; k++)
            x = 0.5 * x + 1.0 / (x + 1.0);
        b[i] = x;
    }
    double t1 = now();
    double sum = 0;
    for (int i = 0; i < n; i++)
        sum += b[i];
    printf("sum = %.6f\n", sum);
    fprintf(stderr, "seconds %.6f\n", t1 - t0);
    return 0;
}
