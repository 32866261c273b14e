/* Legality suite: array reductions over arrays a function reaches through pointers, a heap
 * block and a caller's stack array. Each outer loop accumulates into every element of the
 * array along its inner loop: parallel only as a reduction, which OpenMP accepts on a pointer
 * only as an array section (`reduction(+: y[0:16])`). Integers: reassociating is exact. */
#include <stdio.h>
#include <stdlib.h>

#define N 150
#define M 16

__attribute__((noinline)) void column_sums(long *y, const long *a)
{
    int i, j;
    for (i = 0; i < N; i++) {
        for (j = 0; j < M; j++) {
            y[j] += a[i * M + j];
        }
    }
}

__attribute__((noinline)) void column_xors(long *h, const long *a)
{
    int i, j;
    for (i = 0; i < N; i++) {
        for (j = 0; j < M; j++) {
            h[j] ^= a[i * M + j] * 31;
        }
    }
}

int main(void)
{
    long *a = malloc(sizeof(long) * N * M);
    long *y = calloc(M, sizeof(long));
    long h[M];
    if (!a || !y) {
        return 1;
    }
    for (int k = 0; k < N * M; k++) {
        a[k] = (k * 7919) % 1009;
    }
    for (int k = 0; k < M; k++) {
        h[k] = k;
    }
    column_sums(y, a);
    column_xors(h, a);
    for (int k = 0; k < M; k++) {
        printf("%ld %ld\n", y[k], h[k]);
    }
    free(a);
    free(y);
    return 0;
}
