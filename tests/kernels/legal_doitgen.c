/* Legality suite: doitgen (PolyBench). The temporary `sum[p]` is shared by every (r, q)
 * iteration: the r and q loops are parallel only once `sum` is private to each of them. */
#include <stdio.h>

#define NR 8
#define NQ 8
#define NP 12

double A[NR][NQ][NP];
double C4[NP][NP];
double sum[NP];

int main(void)
{
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
    for (int r = 0; r < NR; r++) {
        for (int q = 0; q < NQ; q++) {
            for (int p = 0; p < NP; p++) {
                sum[p] = 0.0;
                for (int s = 0; s < NP; s++) {
                    sum[p] += A[r][q][s] * C4[s][p];
                }
            }
            for (int p = 0; p < NP; p++) {
                A[r][q][p] = sum[p];
            }
        }
    }
    for (int r = 0; r < NR; r++) {
        for (int q = 0; q < NQ; q++) {
            for (int p = 0; p < NP; p++) {
                printf("%a\n", A[r][q][p]);
            }
        }
    }
    return 0;
}
