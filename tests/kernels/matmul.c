/* Dense matrix product C = A * B on doubles (N = 8 by default, argv[1] to change). */
#include <stdio.h>
#include <stdlib.h>

#define MAXN 64
double A[MAXN][MAXN], B[MAXN][MAXN], C[MAXN][MAXN];

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 8;
    if (n < 1 || n > MAXN)
        return 2;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            A[i][j] = (double)(i + 2 * j) / 3.0;
            B[i][j] = (double)(i - j) * 0.25;
            C[i][j] = 0.0;
        }
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
            for (int k = 0; k < n; k++)
                C[i][j] += A[i][k] * B[k][j];
    double trace = 0;
    for (int i = 0; i < n; i++)
        trace += C[i][i];
    printf("trace=%.17g c01=%.17g\n", trace, C[0][1]);
    return 0;
}
