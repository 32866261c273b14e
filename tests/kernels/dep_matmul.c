/* Matrix product with the accumulation in C[i][j]: a flow dependence from k-1 to k. */
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 6;
    double *A = malloc(sizeof(double) * n * n), *B = malloc(sizeof(double) * n * n);
    double *C = calloc(n * n, sizeof(double));
    for (int i = 0; i < n * n; i++) {
        A[i] = i % 7;
        B[i] = i % 5;
    }
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
            for (int k = 0; k < n; k++)
                C[i * n + j] += A[i * n + k] * B[k * n + j]; /* ACCUMULATE */
    printf("%g\n", C[n * n - 1]);
    return 0;
}
