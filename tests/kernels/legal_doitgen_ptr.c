/* Legality suite: doitgen as PolyBench writes it, its arrays on the heap and passed to the
 * kernel as parameters. The temporary `sum` is a pointer there: `private(sum)` would give each
 * thread an undefined pointer, so the r and q loops are parallel only once the body uses an
 * array of its own in place of `sum`. */
#include <stdio.h>
#include <stdlib.h>

#define NR 8
#define NQ 8
#define NP 12

__attribute__((noinline)) static void kernel(double A[NR][NQ][NP], double C4[NP][NP],
                                             double sum[NP])
{
    int r, q, p, s;

    for (r = 0; r < NR; r++) {
        for (q = 0; q < NQ; q++) {
            for (p = 0; p < NP; p++) {
                sum[p] = 0.0;
                for (s = 0; s < NP; s++) {
                    sum[p] += A[r][q][s] * C4[s][p];
                }
            }
            for (p = 0; p < NP; p++) {
                A[r][q][p] = sum[p];
            }
        }
    }
}

int main(void)
{
    double (*A)[NQ][NP] = malloc(sizeof(double[NR][NQ][NP]));
    double (*C4)[NP] = malloc(sizeof(double[NP][NP]));
    double *sum = malloc(sizeof(double[NP]));
    for (int r = 0; r < NR; r++) {
        for (int q = 0; q < NQ; q++) {
            for (int p = 0; p < NP; p++) {
                A[r][q][p] = ((r * q + p) % NP) / (double)NP;
            }
        }
    }
    for (int i = 0; i < NP; i++) {
        for (int j = 0; j < NP; j++) {
            C4[i][j] = (i * j % NP) / (double)NP;
        }
    }
    kernel(A, C4, sum);
    for (int r = 0; r < NR; r++) {
        for (int q = 0; q < NQ; q++) {
            for (int p = 0; p < NP; p++) {
                printf("%a\n", A[r][q][p]);
            }
        }
    }
    free(A);
    free(C4);
    free(sum);
    return 0;
}
