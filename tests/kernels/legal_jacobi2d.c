/* Legality suite: 2-D Jacobi with two arrays: the spatial loops are parallel. */
#include <stdio.h>

#define N 24
#define T 4

double A[N][N];
double B[N][N];

int main(void)
{
    for (int i = 0; i < N; i++) {
        for (int j = 0; j < N; j++) {
            A[i][j] = ((i * (j + 2)) % N) / (double)N;
            B[i][j] = 0.0;
        }
    }
    for (int t = 0; t < T; t++) {
        for (int i = 1; i < N - 1; i++) {
            for (int j = 1; j < N - 1; j++) {
                B[i][j] = 0.2 * (A[i][j] + A[i][j - 1] + A[i][j + 1] + A[i + 1][j] + A[i - 1][j]);
            }
        }
        for (int i = 1; i < N - 1; i++) {
            for (int j = 1; j < N - 1; j++) {
                A[i][j] = B[i][j];
            }
        }
    }
    for (int i = 0; i < N; i++) {
        for (int j = 0; j < N; j++) {
            printf("%a\n", A[i][j]);
        }
    }
    return 0;
}
