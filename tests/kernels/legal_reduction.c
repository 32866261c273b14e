/* Legality suite: scalar sum reductions, one in floating point (reassociating it changes the
 * rounding) and one on integers. Neither loop is parallel as written. */
#include <stdio.h>

#define N 1000

double a[N];
long b[N];

int main(void)
{
    for (int i = 0; i < N; i++) {
        a[i] = 1.0 / (i + 1);
        b[i] = (i * 7919) % 1009;
    }
    double s = 0.0;
    for (int i = 0; i < N; i++) {
        s += a[i];
    }
    long t = 0;
    for (int i = 0; i < N; i++) {
        t += b[i] * b[i];
    }
    printf("%a\n", s);
    printf("%ld\n", t);
    return 0;
}
