/* A loop calling a function that holds a loop: one 2-D interprocedural nest. */
#include <stdio.h>
#include <stdlib.h>

__attribute__((noinline)) static double row_sum(const double *row, int n)
{
    double s = 0;
    for (int j = 0; j < n; j++) /* CALLEE_LOOP */
        s += row[j];
    return s;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 8;
    double *v = malloc(sizeof(double) * n * n);
    if (!v)
        return 1;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
            v[i * n + j] = i - j;
    double t = 0;
    for (int i = 0; i < n; i++) /* CALLER_LOOP */
        t += row_sum(v + i * n, n);
    printf("%g\n", t);
    free(v);
    return 0;
}
