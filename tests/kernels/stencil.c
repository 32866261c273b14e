/* A 2-D five-point Jacobi stencil on doubles over a few time steps. */
#include <math.h>
#include <stdio.h>

#define N 8
#define T 2
double u[N][N], v[N][N];

int main(void)
{
    for (int i = 0; i < N; i++)
        for (int j = 0; j < N; j++)
            u[i][j] = (i * 7 + j * 3) % 11 - 5.5;
    for (int t = 0; t < T; t++) {
        for (int i = 1; i < N - 1; i++)
            for (int j = 1; j < N - 1; j++)
                v[i][j] = 0.2 * (u[i][j] + u[i - 1][j] + u[i + 1][j] + u[i][j - 1] + u[i][j + 1]);
        for (int i = 1; i < N - 1; i++)
            for (int j = 1; j < N - 1; j++)
                u[i][j] = v[i][j] > 0 ? v[i][j] : -0.5 * v[i][j];
    }
    double s = 0, m = -1e300;
    for (int i = 0; i < N; i++)
        for (int j = 0; j < N; j++) {
            s += u[i][j];
            m = fmax(m, u[i][j]);
        }
    printf("sum=%.17g max=%.17g\n", s, m);
    return 0;
}
