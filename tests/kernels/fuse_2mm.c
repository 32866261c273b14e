/* 2mm's shape (PolyBench): two matrix products sharing the temporary `tmp`, D = (A.B).C.
 * Each row of tmp is finished by the first nest's iteration i before the second nest's
 * iteration i reads it: the outer loops may be fused (-DFUSED builds them fused). With
 * -DCOLUMN the second nest reads tmp by columns, rows the first nest has not written yet at
 * that iteration: fusion is illegal. */
#include <stdio.h>

#ifndef N
#define N 12
#endif

double A[N][N], B[N][N], C[N][N], D[N][N], tmp[N][N];

int main(void)
{
    for (int i = 0; i < N; i++) {
        for (int j = 0; j < N; j++) {
            A[i][j] = (double)((i * j + 1) % N) / N;
            B[i][j] = (double)(i * (j + 1) % N) / N;
            C[i][j] = (double)((i * (j + 3) + 1) % N) / N;
            D[i][j] = (double)(i * (j + 2) % N) / N;
        }
    }
#ifdef COLUMN
#define TMP(i, k) tmp[k][i]
#else
#define TMP(i, k) tmp[i][k]
#endif
#ifdef FUSED
    for (int i = 0; i < N; i++) {
        for (int j = 0; j < N; j++) {
            tmp[i][j] = 0.0;
            for (int k = 0; k < N; k++)
                tmp[i][j] += 1.5 * A[i][k] * B[k][j];
        }
        for (int j = 0; j < N; j++) {
            D[i][j] *= 1.2;
            for (int k = 0; k < N; k++)
                D[i][j] += TMP(i, k) * C[k][j];
        }
    }
#else
    for (int i = 0; i < N; i++) { /* FIRST */
        for (int j = 0; j < N; j++) {
            tmp[i][j] = 0.0;
            for (int k = 0; k < N; k++)
                tmp[i][j] += 1.5 * A[i][k] * B[k][j];
        }
    }
    for (int i = 0; i < N; i++) { /* SECOND */
        for (int j = 0; j < N; j++) {
            D[i][j] *= 1.2;
            for (int k = 0; k < N; k++)
                D[i][j] += TMP(i, k) * C[k][j];
        }
    }
#endif
    double s = 0.0;
    for (int i = 0; i < N; i++)
        for (int j = 0; j < N; j++)
            s += D[i][j];
    printf("%a\n", s);
    return 0;
}
