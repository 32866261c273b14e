/* Legality suite: a transposing copy, b[j][i] = a[i][j]: both loops are parallel and may be
 * interchanged. */
#include <stdio.h>

#define N 40

double a[N][N];
double b[N][N];

int main(void)
{
    for (int i = 0; i < N; i++) {
        for (int j = 0; j < N; j++) {
            a[i][j] = i * 0.5 + 1.0 / (j + 1);
        }
    }
    for (int i = 0; i < N; i++) {
        for (int j = 0; j < N; j++) {
            b[j][i] = a[i][j];
        }
    }
    for (int i = 0; i < N; i++) {
        for (int j = 0; j < N; j++) {
            printf("%a\n", b[i][j]);
        }
    }
    return 0;
}
