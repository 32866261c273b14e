/* A value one iteration computes and the next only compares (`if (x > 5)`): gcc -O0 compares
 * it in memory (`cmpl $5, -4(%rbp)`), -O2 in a register. Either way the loop carries a flow
 * dependence through `x` and cannot run in parallel, nor with `x` private. The control loop
 * computes the value it compares earlier in the same iteration: it is parallel with `y`
 * private. The last loop compares the partial sum `s` of a reduction, which each thread's
 * copy would not hold: no reduction. */
#include <stdio.h>

#define N 1000
int a[N], b[N], c[N], d[N];

int main(void)
{
    int x = 0, y = 0;
    for (int i = 0; i < N; i++)
        c[i] = (i * 7) % 11;
    for (int i = 0; i < N; i++) { /* MARK carried */
        if (x > 5)
            a[i] = 1;
        else
            a[i] = 2 + c[i];
        x = a[i] + c[i] % 3;
    }
    for (int i = 0; i < N; i++) { /* MARK control */
        y = c[i] * 3;
        if (y > 5)
            b[i] = 1;
        else
            b[i] = 2 + c[i];
    }
    int p = 0;
    for (int i = 0; i < N; i++) { /* MARK partial */
        p += c[i];
        if (p > 2000)
            d[i] = 1;
        else
            d[i] = 2;
    }
    long s = 0;
    for (int i = 0; i < N; i++)
        s += a[i] * (i + 1) + b[i] * (i + 2) + d[i] * (i + 3);
    printf("%ld %d %d\n", s, x, p);
    return 0;
}
