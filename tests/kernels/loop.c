/* A scalar loop writing a global array: a[i] = 3 * i. */
#include <stdio.h>

#define N 64

int a[N];

int main(void)
{
    for (int i = 0; i < N; i++)
        a[i] = i * 3;
    printf("a[%d] = %d\n", N - 1, a[N - 1]);
    return 0;
}
