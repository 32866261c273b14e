/* A 2-D loop nest with bounds from the command line (so no optimisation level unrolls it). */
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 8;
    int *a = malloc(sizeof(int) * n * n);
    if (!a)
        return 1;
    for (int i = 0; i < n; i++) /* OUTER */
        for (int j = 0; j < n; j++) /* INNER */
            a[i * n + j] = i * 3 + j; /* BODY */
    printf("%d\n", a[n * n - 1]);
    free(a);
    return 0;
}
