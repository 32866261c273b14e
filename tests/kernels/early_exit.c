/* A search loop (Rodinia b+tree's `find`): its `break` is never taken on this input, so the
 * trace shows a loop that runs every iteration, but no `omp for` can run it. */
#include <stdio.h>

#define N 2000

static int keys[N], seen[N], found[20];

static int __attribute__((noinline)) find(int n, int key)
{
    int i;
    for (i = 0; i < n; i++) { /* MARK find */
        if (keys[i] == key)
            break;
        seen[i] = keys[i] - key;
    }
    return i;
}

int main(void)
{
    for (int i = 0; i < N; i++)
        keys[i] = 2 * i;
    for (int q = 0; q < 20; q++)
        found[q] = find(N, 2 * q + 1);
    printf("%d %d %d\n", found[0], found[19], seen[N - 1]);
    return 0;
}
