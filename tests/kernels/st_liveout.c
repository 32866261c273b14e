/* Single-assignment 2-D stencil A[t][i] = f(A[t-1][i], A[t][i-1]) whose last row and last
 * column are read after the loop: successive modulo along t keeps every row (the last column
 * spans them all), the storage hyperplane (1,-1) keeps 2N-1 cells (SMO).  Built with
 * -DCONTRACT=K it allocates K cells, and with -D'AT(i,j)=...' it indexes them as given (the
 * report's C mapping); -DCONTRACT=K alone uses A[(i - t) mod K]. */
#include <stdio.h>
#include <stdlib.h>

#ifndef AT
#ifdef CONTRACT
#define AT(t, i) A[((((i) - (t)) % CONTRACT) + CONTRACT) % CONTRACT]
#else
#define AT(t, i) A[(t) * n + (i)]
#endif
#endif

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 16;
#ifdef CONTRACT
    double *A = calloc(CONTRACT, sizeof(double));
#else
    double *A = calloc((size_t)n * n, sizeof(double));
#endif
    double *in = malloc((size_t)n * sizeof(double));
    for (int i = 0; i < n; i++)
        in[i] = (i % 5) * 0.25 + 1.0;
    for (int t = 0; t < n; t++)                       /* LO_T */
        for (int i = 0; i < n; i++) {                 /* LO_I */
            double up = t > 0 ? AT(t - 1, i) : in[i];
            double left = i > 0 ? AT(t, i - 1) : in[t];
            AT(t, i) = 0.5 * up + 0.25 * left + 0.125;
        }
    for (int i = 0; i < n; i++)
        printf("%a %a\n", AT(n - 1, i), AT(i, n - 1));
    return 0;
}
