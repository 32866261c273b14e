/* Legality suite: PolyBench trmm's init_array at its MINI size. At -O3 gcc unrolls and
 * vectorizes the j loops into the i loop, whose back edge then carries the line of the first
 * inner `for`: the loop is named after the inner loop, and advice for it (`private(i)`) applied
 * there would be wrong. */
#include <stdio.h>

#define M 20
#define N 30

double A[M][M];
double B[M][N];

static void init_array(int m, int n)
{
    int i, j;
    for (i = 0; i < m; i++) {
        for (j = 0; j < i; j++) {
            A[i][j] = (double)((i + j) % m) / m;
        }
        A[i][i] = 1.0;
        for (j = 0; j < n; j++) {
            B[i][j] = (double)((n + (i - j)) % n) / n;
        }
    }
}

int main(void)
{
    init_array(M, N);
    for (int i = 0; i < M; i++) {
        for (int j = 0; j < N; j++) {
            printf("%a\n", (j < M ? A[i][j] : 0.0) + B[i][j]);
        }
    }
    return 0;
}
