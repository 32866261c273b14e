/* Two-buffer 1-D Jacobi stencil over time. */
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 32, steps = argc > 2 ? atoi(argv[2]) : 8;
    double *a = malloc(sizeof(double) * n), *b = malloc(sizeof(double) * n);
    for (int i = 0; i < n; i++) a[i] = b[i] = i % 5;
    for (int t = 0; t < steps; t++) {        /* JA_T */
        for (int i = 1; i < n - 1; i++)      /* JA_I1 */
            b[i] = (a[i - 1] + a[i] + a[i + 1]) / 3.0;
        for (int i = 1; i < n - 1; i++)      /* JA_I2 */
            a[i] = b[i];
    }
    printf("%g\n", a[n / 2]);
    return 0;
}
