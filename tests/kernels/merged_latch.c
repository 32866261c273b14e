/* A triangular solve: at -O2, gcc lets the inner loop's exit jump straight back to the outer
 * loop's header, so the outer loop's back edge carries the inner loop's line. */
#include <stdio.h>

#define N 40

double a[N][N];
double x[N];

int main(void)
{
    for (int i = 0; i < N; i++) {
        x[i] = 1.0 + i % 3;
        for (int j = 0; j < N; j++)
            a[i][j] = (i + 2 * j) % 5 * 0.25;
    }
    for (int i = 0; i < N; i++) { /* outer */
        double s = x[i];
        for (int j = 0; j < i; j++) /* inner */
            s -= a[i][j] * x[j];
        x[i] = s / (a[i][i] + 1.0);
    }
    printf("%a\n", x[N - 1]);
    return 0;
}
