/* Legality suite: a 2-D five-point stencil into a separate output array: every loop of the
 * nest is parallel. */
#include <stdio.h>

#define N 40

double in[N][N];
double out[N][N];

int main(void)
{
    for (int i = 0; i < N; i++) {
        for (int j = 0; j < N; j++) {
            in[i][j] = ((i * 3 + j * 5) % 17) / 4.0;
        }
    }
    for (int i = 1; i < N - 1; i++) {
        for (int j = 1; j < N - 1; j++) {
            out[i][j] = in[i][j] * 0.5 + (in[i - 1][j] + in[i + 1][j] + in[i][j - 1] + in[i][j + 1]) * 0.125;
        }
    }
    for (int i = 0; i < N; i++) {
        for (int j = 0; j < N; j++) {
            printf("%a\n", out[i][j]);
        }
    }
    return 0;
}
