/* In-place 1-D three-point stencil over time (Gauss-Seidel). */
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 32, steps = argc > 2 ? atoi(argv[2]) : 8;
    double *a = malloc(sizeof(double) * n);
    for (int i = 0; i < n; i++) a[i] = i % 5;
    for (int t = 0; t < steps; t++)          /* GS_T */
        for (int i = 1; i < n - 1; i++)      /* GS_I */
            a[i] = (a[i - 1] + a[i] + a[i + 1]) / 3.0;
    printf("%g\n", a[n / 2]);
    return 0;
}
