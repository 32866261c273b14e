/* Legality suite: covariance's triangular nest (PolyBench) with its mirrored write
 * cov[j][i] = cov[i][j], which writes the diagonal element twice in one iteration: that pair
 * is inside one instance and must not block the interchange or count as carried. The i loop
 * is parallel (row i and column i of different iterations never meet). */
#include <stdio.h>

#define N 12
#define M 10

double data[N][M];
double cov[M][M];

int main(void)
{
    for (int k = 0; k < N; k++) {
        for (int j = 0; j < M; j++) {
            data[k][j] = ((k * j + 3) % N) / (double)M - 0.25 * j;
        }
    }
    for (int i = 0; i < M; i++) {
        for (int j = i; j < M; j++) {
            cov[i][j] = 0.0;
            for (int k = 0; k < N; k++) {
                cov[i][j] += data[k][i] * data[k][j];
            }
            cov[i][j] /= (N - 1.0);
            cov[j][i] = cov[i][j];
        }
    }
    for (int i = 0; i < M; i++) {
        for (int j = 0; j < M; j++) {
            printf("%a\n", cov[i][j]);
        }
    }
    return 0;
}
