/* Legality suite: gemm as PolyBench writes it. gcc -O2 inlines the kernel into main, and the
 * inlined copy's scope holds the i loop and nothing else; the counters `int i, j, k;` are
 * declared at the top of the kernel, outside the i loop, and every thread needs its own
 * `j` and `k`. */
#include <stdio.h>
#include <stdlib.h>

#define NI 20
#define NJ 25
#define NK 30

static void kernel(int ni, int nj, int nk, double alpha, double beta, double C[NI][NJ],
                   double A[NI][NK], double B[NK][NJ])
{
    int i, j, k;

    for (i = 0; i < ni; i++) {
        for (j = 0; j < nj; j++) {
            C[i][j] *= beta;
        }
        for (k = 0; k < nk; k++) {
            for (j = 0; j < nj; j++) {
                C[i][j] += alpha * A[i][k] * B[k][j];
            }
        }
    }
}

__attribute__((noinline)) static void print_array(int ni, int nj, double C[NI][NJ])
{
    for (int i = 0; i < ni; i++) {
        for (int j = 0; j < nj; j++) {
            printf("%a\n", C[i][j]);
        }
    }
}

int main(void)
{
    double (*A)[NK] = malloc(sizeof(double[NI][NK]));
    double (*B)[NJ] = malloc(sizeof(double[NK][NJ]));
    double (*C)[NJ] = malloc(sizeof(double[NI][NJ]));
    for (int i = 0; i < NI; i++) {
        for (int j = 0; j < NJ; j++) {
            C[i][j] = (double)((i * j + 1) % NI) / NI;
        }
    }
    for (int i = 0; i < NI; i++) {
        for (int k = 0; k < NK; k++) {
            A[i][k] = (double)(i * (k + 1) % NK) / NK;
        }
    }
    for (int k = 0; k < NK; k++) {
        for (int j = 0; j < NJ; j++) {
            B[k][j] = (double)(k * (j + 2) % NJ) / NJ;
        }
    }
    kernel(NI, NJ, NK, 1.5, 1.2, C, A, B);
    print_array(NI, NJ, C);
    free(A);
    free(B);
    free(C);
    return 0;
}
