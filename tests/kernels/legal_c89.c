/* Legality suite: PolyBench's style. The kernel, inlined at -O2, declares its counters at the
 * top (`int i, j, k;`) and is made of its loop nest alone: parallelizing the i loop needs `j`
 * and `k` private, or the threads share them. */
#include <stdio.h>

#define N 24

double A[N][N];
double B[N][N];
double C[N][N];

static void kernel(double alpha)
{
    int i, j, k;
    for (i = 0; i < N; i++) {
        for (j = 0; j < N; j++) {
            C[i][j] *= 0.5;
        }
        for (k = 0; k < N; k++) {
            for (j = 0; j < N; j++) {
                C[i][j] += alpha * A[i][k] * B[k][j];
            }
        }
    }
}

int main(void)
{
    for (int i = 0; i < N; i++) {
        for (int j = 0; j < N; j++) {
            A[i][j] = (double)((i * j + 1) % N) / N;
            B[i][j] = (double)((i * (j + 1) + 2) % N) / N;
            C[i][j] = (double)((i * (j + 2) + 3) % N) / N;
        }
    }
    kernel(1.5);
    for (int i = 0; i < N; i++) {
        for (int j = 0; j < N; j++) {
            printf("%a\n", C[i][j]);
        }
    }
    return 0;
}
