/* a[i] = a[i-1] + 1 (a distance-1 flow dependence) and b[i] = c[i] (none carried). */
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 32;
    int *a = calloc(n, sizeof(int)), *b = malloc(sizeof(int) * n), *c = malloc(sizeof(int) * n);
    for (int i = 0; i < n; i++)
        c[i] = i;
    for (int i = 1; i < n; i++)
        a[i] = a[i - 1] + 1; /* CHAIN */
    for (int i = 0; i < n; i++)
        b[i] = c[i]; /* COPY */
    printf("%d %d\n", a[n - 1], b[n - 1]);
    return 0;
}
