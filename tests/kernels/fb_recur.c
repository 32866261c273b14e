/* a[i] = a[i-1] * c: a recurrence. */
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 64;
    double c = argc > 2 ? atof(argv[2]) : 1.5;
    double *a = malloc(sizeof(double) * n);
    a[0] = 1.0;
    for (int i = 1; i < n; i++)              /* RC_I */
        a[i] = a[i - 1] * c;                 /* RC_BODY */
    printf("%g\n", a[n - 1]);
    return 0;
}
