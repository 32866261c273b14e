/* Forward substitution with a lower-triangular matrix: the inner loop runs i times. */
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 12;
    double *L = malloc(sizeof(double) * n * n), *x = malloc(sizeof(double) * n);
    for (int i = 0; i < n * n; i++)
        L[i] = 1.0 / (1 + i % 5);
    for (int i = 0; i < n; i++)
        x[i] = i;
    for (int i = 0; i < n; i++)           /* TRI_I */
        for (int j = 0; j < i; j++)       /* TRI_J */
            x[i] -= L[i * n + j] * x[j];  /* TRI_BODY */
    printf("%g\n", x[n - 1]);
    return 0;
}
