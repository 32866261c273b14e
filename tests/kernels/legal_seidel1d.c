/* Legality suite: a 1-D Gauss-Seidel-like time loop, in place: no loop is parallel and
 * neither may run backwards; skewing makes the nest tilable. */
#include <stdio.h>

#define N 200
#define T 10

double a[N];

int main(void)
{
    for (int i = 0; i < N; i++) {
        a[i] = (i % 13) + 1.0 / (i + 1);
    }
    for (int t = 0; t < T; t++) {
        for (int i = 1; i < N - 1; i++) {
            a[i] = (a[i - 1] + a[i] + a[i + 1]) / 3.0;
        }
    }
    for (int i = 0; i < N; i++) {
        printf("%a\n", a[i]);
    }
    return 0;
}
