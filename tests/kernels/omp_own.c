/* The program's own OpenMP loops, each with a known verdict: a parallel stencil, a planted
 * race, a reduction with its clause, one without it, a shared temporary without `private`;
 * and a qsort comparator called back by the library. */
#include <stdio.h>
#include <stdlib.h>

#define N 400
static double a[N], b[N], c[N];

static int by_value(const void *x, const void *y)
{
    double p = *(const double *)x, q = *(const double *)y;
    return (p > q) - (p < q);
}

int main(void)
{
    for (int i = 0; i < N; i++)
        a[i] = (i * 37 % 101) * 0.5;
#pragma omp parallel for
    for (int i = 1; i < N - 1; i++) /* stencil */
        b[i] = 0.5 * a[i] + 0.25 * (a[i - 1] + a[i + 1]);
#pragma omp parallel for
    for (int i = 1; i < N; i++) /* race */
        c[i] = c[i - 1] + b[i];
    double s = 0;
#pragma omp parallel for reduction(+ : s)
    for (int i = 0; i < N; i++) /* reduction */
        s += b[i];
    double u = 0;
#pragma omp parallel for
    for (int i = 0; i < N; i++) /* unreduced */
        u += a[i] * b[i];
    double t;
#pragma omp parallel for
    for (int i = 0; i < N; i++) { /* shared temporary */
        t = a[i] + 1.0;
        b[i] = t * t;
    }
    qsort(a, N, sizeof(double), by_value);
    printf("%a %a %a %a %a\n", s, u, c[N - 1], b[7], a[N - 1]);
    return 0;
}
