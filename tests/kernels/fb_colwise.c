/* Column-wise traversal of a row-major array. */
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 16;
    double *a = malloc(sizeof(double) * n * n);
    for (int i = 0; i < n * n; i++) a[i] = i;
    for (int j = 0; j < n; j++)        /* COL_J */
        for (int i = 0; i < n; i++)    /* COL_I */
            a[i * n + j] = a[i * n + j] * 2.0 + 1.0;
    printf("%g\n", a[n * n - 1]);
    return 0;
}
