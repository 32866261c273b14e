/* Legality suite: PolyBench's jacobi-2d at its MINI size, counters declared at the top. At
 * -O3 with AVX2, gcc unrolls the j loops (28 iterations, 7 vectors) completely: no instruction
 * is left on their `for` lines, yet parallelizing an i loop needs `j` private. */
#include <stdio.h>

#define N 30

double A[N][N];
double B[N][N];

static void kernel(int tsteps)
{
    int t, i, j;
    for (t = 0; t < tsteps; t++) {
        for (i = 1; i < N - 1; i++) {
            for (j = 1; j < N - 1; j++) {
                B[i][j] = 0.2 * (A[i][j] + A[i][j - 1] + A[i][1 + j] + A[1 + i][j] + A[i - 1][j]);
            }
        }
        for (i = 1; i < N - 1; i++) {
            for (j = 1; j < N - 1; j++) {
                A[i][j] = 0.2 * (B[i][j] + B[i][j - 1] + B[i][1 + j] + B[1 + i][j] + B[i - 1][j]);
            }
        }
    }
}

int main(void)
{
    for (int i = 0; i < N; i++) {
        for (int j = 0; j < N; j++) {
            A[i][j] = ((double)i * (j + 2) + 2) / N;
            B[i][j] = ((double)i * (j + 3) + 3) / N;
        }
    }
    kernel(4);
    for (int i = 0; i < N; i++) {
        for (int j = 0; j < N; j++) {
            printf("%a\n", A[i][j]);
        }
    }
    return 0;
}
