/* A value one iteration computes and the next only compares (`if (x > 5)`): gcc -O0 compares
 * it in memory (`cmpl $5, -4(%rbp)`), -O2 in a register. Either way the loop carries a flow
 * dependence through `x` and cannot run in parallel, nor with `x` private. */
#include <stdio.h>

#define N 1000
int a[N];

int main(void)
{
    int x = 0;
    for (int i = 0; i < N; i++) { /* MARK carried */
        if (x > 5)
            a[i] = 1;
        else
            a[i] = 2 + i % 7;
        x = a[i] + (i % 3);
    }
    long s = 0;
    for (int i = 0; i < N; i++)
        s += a[i] * (i + 1);
    printf("%ld\n", s);
    return 0;
}
