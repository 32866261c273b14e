/* Legality suite: PolyBench's symm. `temp2` accumulates along k; the store to C[i][j] at the
 * end of iteration (i, j) reads C[i][j]'s value from before the nest: that element is live as
 * long as temp2 is, so it cannot hold temp2 (no map_scalar_to_array onto C). */
#include <stdio.h>

#define M 14
#define N 18

double A[M][M];
double B[M][N];
double C[M][N];

int main(void)
{
    double alpha = 1.5;
    double beta = 1.2;
    double temp2;
    for (int i = 0; i < M; i++) {
        for (int j = 0; j < N; j++) {
            C[i][j] = (double)((i + j) % 100) / M;
            B[i][j] = (double)((N + i - j) % 100) / M;
        }
    }
    for (int i = 0; i < M; i++) {
        for (int j = 0; j < M; j++) {
            A[i][j] = (double)((i + j) % 100) / M;
        }
    }
    for (int i = 0; i < M; i++) {
        for (int j = 0; j < N; j++) {
            temp2 = 0;
            for (int k = 0; k < i; k++) {
                C[k][j] += alpha * B[i][j] * A[i][k];
                temp2 += B[k][j] * A[i][k];
            }
            C[i][j] = beta * C[i][j] + alpha * B[i][j] * A[i][i] + alpha * temp2;
        }
    }
    for (int i = 0; i < M; i++) {
        for (int j = 0; j < N; j++) {
            printf("%a\n", C[i][j]);
        }
    }
    return 0;
}
