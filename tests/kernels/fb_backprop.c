/* A backprop-style layer: outer j, inner k reducing into a scalar, a libm call per j. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
static double squash(double x) { return 1.0 / (1.0 + exp(-x)); }
__attribute__((noinline)) void layerforward(double *l1, double *l2, double *conn, int n1, int n2) {
    for (int j = 1; j <= n2; j++) {          /* BP_J */
        double sum = 0.0;
        for (int k = 0; k <= n1; k++)        /* BP_K */
            sum += conn[k * (n2 + 1) + j] * l1[k];
        l2[j] = squash(sum);
    }
}
int main(int argc, char **argv) {
    int n1 = argc > 1 ? atoi(argv[1]) : 32, n2 = argc > 2 ? atoi(argv[2]) : 16;
    double *l1 = malloc(sizeof(double) * (n1 + 1)), *l2 = malloc(sizeof(double) * (n2 + 1));
    double *conn = calloc((n1 + 1) * (n2 + 1), sizeof(double));
    for (int k = 0; k <= n1; k++) l1[k] = k * 0.01;
    layerforward(l1, l2, conn, n1, n2);
    printf("%g\n", l2[n2]);
    return 0;
}
