/* Legality suite: an in-place shift, a[i] = 0.5 * a[i + 1] + 1. Iteration i reads the
 * element iteration i + 1 overwrites (an anti dependence carried by the loop): running the
 * loop backwards or in parallel changes the result. */
#include <stdio.h>

#define N 400

double a[N + 1];

int main(void)
{
    for (int i = 0; i <= N; i++) {
        a[i] = i * 0.25 + 1.0 / (i + 1);
    }
    for (int i = 0; i < N; i++) {
        a[i] = 0.5 * a[i + 1] + 1;
    }
    for (int i = 0; i <= N; i++) {
        printf("%a\n", a[i]);
    }
    return 0;
}
