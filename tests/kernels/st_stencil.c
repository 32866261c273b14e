/* A 1-D stencil stored as A[t][i] over time: only two rows are live at a time. */
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 32, steps = argc > 2 ? atoi(argv[2]) : 8;
    double *A = calloc((size_t)(steps + 1) * n, sizeof(double));
    for (int i = 0; i < n; i++)
        A[i] = i % 7;
    for (int t = 1; t <= steps; t++)                /* ST_T */
        for (int i = 1; i < n - 1; i++)             /* ST_I */
            A[t * n + i] = (A[(t - 1) * n + i - 1] + A[(t - 1) * n + i] + A[(t - 1) * n + i + 1]) / 3.0;
    printf("%g\n", A[steps * n + n / 2]);
    return 0;
}
