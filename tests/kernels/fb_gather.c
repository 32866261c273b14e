/* A gather through an index array: the load's addresses are not affine. */
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 64;
    int *idx = malloc(sizeof(int) * n);
    double *a = malloc(sizeof(double) * n);
    unsigned r = 12345;
    for (int i = 0; i < n; i++) {
        r = r * 1103515245u + 12345u;
        idx[i] = (r >> 8) % n;
        a[i] = i;
    }
    double s = 0;
    for (int i = 0; i < n; i++)   /* GA_I */
        s += a[idx[i]];           /* GA_BODY */
    printf("%g\n", s);
    return 0;
}
