/* A 2-D loop nest with bounds from the command line (so no optimisation level unrolls it). */
#include <stdio.h>
#include <stdlib.h>

int a[64][64];

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 8;
    if (n > 64)
        n = 64;
    for (int i = 0; i < n; i++) /* OUTER */
        for (int j = 0; j < n; j++) /* INNER */
            a[i][j] = i * 3 + j; /* BODY */
    printf("%d\n", a[n - 1][n - 1]);
    return 0;
}
