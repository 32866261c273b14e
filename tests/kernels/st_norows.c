/* Storage: two arrays a loop `t` walks without giving each iteration a row of its own, which
 * successive modulo along `t` must not contract. `y` is durbin's (PolyBench): every element
 * is rewritten in each iteration of k and read in the next one. `A` is gramschmidt's: the
 * inner loop starts at k + 1, so its accesses step by one element along k but each iteration
 * of k spans whole columns. */
#include <stdio.h>

#define N 24
#define M 16

double r[N], y[N], z[N];
double A[M][N], Q[M][N], R[N][N];

int main(void)
{
    for (int i = 0; i < N; i++) {
        r[i] = 1.0 / (i + 2);
    }
    for (int i = 0; i < M; i++) {
        for (int j = 0; j < N; j++) {
            A[i][j] = ((i * j) % 7 + 1) / 8.0 + (i == j);
        }
    }
    y[0] = -r[0];
    double beta = 1.0, alpha = -r[0];
    for (int k = 1; k < N; k++) { /* MARK durbin */
        beta = (1 - alpha * alpha) * beta;
        double sum = 0.0;
        for (int i = 0; i < k; i++) {
            sum += r[k - i - 1] * y[i];
        }
        alpha = -(r[k] + sum) / beta;
        for (int i = 0; i < k; i++) {
            z[i] = y[i] + alpha * y[k - i - 1];
        }
        for (int i = 0; i < k; i++) {
            y[i] = z[i];
        }
        y[k] = alpha;
    }
    for (int k = 0; k < N; k++) { /* MARK gramschmidt */
        double nrm = 0.0;
        for (int i = 0; i < M; i++) {
            nrm += A[i][k] * A[i][k];
        }
        R[k][k] = nrm + 1.0;
        for (int i = 0; i < M; i++) {
            Q[i][k] = A[i][k] / R[k][k];
        }
        for (int j = k + 1; j < N; j++) {
            R[k][j] = 0.0;
            for (int i = 0; i < M; i++) {
                R[k][j] += Q[i][k] * A[i][j];
            }
            for (int i = 0; i < M; i++) {
                A[i][j] = A[i][j] - Q[i][k] * R[k][j];
            }
        }
    }
    printf("%a %a %a\n", y[N - 1], Q[M - 1][N - 1], R[0][N - 1]);
    return 0;
}
