/* Legality suite: an initialisation loop, a[i] = i % 7: parallel and vectorizable. */
#include <stdio.h>

#define N 1000

int a[N];

int main(void)
{
    for (int i = 0; i < N; i++) {
        a[i] = i % 7;
    }
    for (int i = 0; i < N; i++) {
        printf("%d\n", a[i]);
    }
    return 0;
}
