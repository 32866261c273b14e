/* Legality suite: an imperfect matrix-product nest, C[i][j] set before its k loop and scaled
 * after it. Interchanging j and k is legal once those two statements go to copies of the j
 * loop before and after the interchanged ones (the k order of each C[i][j] is kept). */
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
        }
    }
    for (int i = 0; i < N; i++) {
        for (int j = 0; j < N; j++) {
            C[i][j] = 0.5;
            for (int k = 0; k < N; k++) {
                C[i][j] += A[i][k] * B[k][j];
            }
            C[i][j] = C[i][j] * 0.25;
        }
    }
    for (int i = 0; i < N; i++) {
        for (int j = 0; j < N; j++) {
            printf("%a\n", C[i][j]);
        }
    }
    return 0;
}
