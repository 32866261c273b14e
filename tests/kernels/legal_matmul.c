/* Legality suite: matrix product, i-j-k order. Interchanging j and k and tiling are legal
 * (the k order of each C[i][j] is kept). */
#include <stdio.h>

#define N 20

double A[N][N];
double B[N][N];
double C[N][N];

int main(void)
{
    for (int i = 0; i < N; i++) {
        for (int j = 0; j < N; j++) {
            A[i][j] = ((i * j + 1) % N) / (double)N;
            B[i][j] = ((i + 2 * j) % N) / (double)(N + 1);
            C[i][j] = 0.0;
        }
    }
    for (int i = 0; i < N; i++) {
        for (int j = 0; j < N; j++) {
            for (int k = 0; k < N; k++) {
                C[i][j] += A[i][k] * B[k][j];
            }
        }
    }
    for (int i = 0; i < N; i++) {
        for (int j = 0; j < N; j++) {
            printf("%a\n", C[i][j]);
        }
    }
    return 0;
}
