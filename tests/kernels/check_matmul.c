/* polyprof check: matrix product, i-j-k order as profiled. -DIKJ builds the i-k-j
 * interchange, -DJIK the j-i-k one, -DTILE=S the i-j-k band tiled by S (tile loops, then
 * the points in order), -DREVERSE_K the k loop run backwards: the tests compare their output
 * with the original's. */
#include <stdio.h>

#define N 20

double A[N][N];
double B[N][N];
double C[N][N];

static int min(int a, int b) { return a < b ? a : b; }

int main(void)
{
    for (int i = 0; i < N; i++) {
        for (int j = 0; j < N; j++) {
            A[i][j] = ((i * j + 1) % N) / (double)N + 1.0 / (i + j + 3);
            B[i][j] = ((i + 2 * j) % N) / (double)(N + 1) + 1.0 / (2 * i + j + 7);
            C[i][j] = 0.0;
        }
    }
#if defined(IKJ)
    for (int i = 0; i < N; i++)
        for (int k = 0; k < N; k++)
            for (int j = 0; j < N; j++)
                C[i][j] += A[i][k] * B[k][j];
#elif defined(JIK)
    for (int j = 0; j < N; j++)
        for (int i = 0; i < N; i++)
            for (int k = 0; k < N; k++)
                C[i][j] += A[i][k] * B[k][j];
#elif defined(TILE)
    for (int ti = 0; ti < N; ti += TILE)
        for (int tj = 0; tj < N; tj += TILE)
            for (int tk = 0; tk < N; tk += TILE)
                for (int i = ti; i < min(ti + TILE, N); i++)
                    for (int j = tj; j < min(tj + TILE, N); j++)
                        for (int k = tk; k < min(tk + TILE, N); k++)
                            C[i][j] += A[i][k] * B[k][j];
#elif defined(REVERSE_K)
    for (int i = 0; i < N; i++)
        for (int j = 0; j < N; j++)
            for (int k = N - 1; k >= 0; k--)
                C[i][j] += A[i][k] * B[k][j];
#else
    for (int i = 0; i < N; i++) {             /* loop i */
        for (int j = 0; j < N; j++) {         /* loop j */
            for (int k = 0; k < N; k++) {     /* loop k */
                C[i][j] += A[i][k] * B[k][j];
            }
        }
    }
#endif
    for (int i = 0; i < N; i++) {
        for (int j = 0; j < N; j++) {
            printf("%a\n", C[i][j]);
        }
    }
    return 0;
}
