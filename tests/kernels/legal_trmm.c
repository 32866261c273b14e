/* Legality suite: PolyBench trmm at its MINI size. At -O3 gcc runs the bound of the k loop
 * (`_PB_M - i - 1`) down in a 32-bit register, to -1 on the last i iteration: zero-extended,
 * its values were not affine, so it stayed a statement carrying a dependence across i, and
 * the i loop was not called parallel (it is, at -O2). The outer loop is parallel once each
 * iteration reads B from a copy: B[i][j] reads the rows k > i, which later iterations write. */
#include <stdio.h>

#define M 20
#define N 30

double A[M][M];
double B[M][N];

static void init_array(int m, int n)
{
    for (int i = 0; i < m; i++) {
        for (int j = 0; j < m; j++) {
            A[i][j] = (double)((i + j) % m) / m;
        }
        for (int j = 0; j < n; j++) {
            B[i][j] = (double)((n + (i - j)) % n) / n;
        }
    }
}

__attribute__((noinline)) static void kernel_trmm(int m, int n, double alpha)
{
    int i, j, k;
    for (i = 0; i < m; i++) {
        for (j = 0; j < n; j++) {
            for (k = i + 1; k < m; k++) {
                B[i][j] += A[k][i] * B[k][j];
            }
            B[i][j] = alpha * B[i][j];
        }
    }
}

int main(void)
{
    init_array(M, N);
    kernel_trmm(M, N, 1.5);
    for (int i = 0; i < M; i++) {
        for (int j = 0; j < N; j++) {
            printf("%a\n", B[i][j]);
        }
    }
    return 0;
}
