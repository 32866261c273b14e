/* Benchmark kernel: a 1-D three-point stencil over time, no library calls in the hot loop.
   argv[1] = time steps (default 100). About 2.1 K instructions per time step at -O1. */
#include <stdio.h>
#include <stdlib.h>

#define N 256
double a[N], b[N];

int main(int argc, char **argv) {
    int steps = argc > 1 ? atoi(argv[1]) : 100;
    for (int i = 0; i < N; i++)
        a[i] = i % 7;
    for (int t = 0; t < steps; t++) {
        for (int i = 1; i < N - 1; i++)
            b[i] = (a[i - 1] + a[i] + a[i + 1]) / 3.0;
        for (int i = 1; i < N - 1; i++)
            a[i] = b[i];
    }
    printf("%f\n", a[N / 2]);
    return 0;
}
