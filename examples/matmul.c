/* polyprof's demo program: a small matrix product, C = A * B, in the i-j-k order. */
#include <stdio.h>

#define N 64
double A[N][N], B[N][N], C[N][N];

static void init(void) {
    for (int i = 0; i < N; i++)
        for (int j = 0; j < N; j++) {
            A[i][j] = (i + j) % 5;
            B[i][j] = (i * j) % 3;
            C[i][j] = 0;
        }
}

static void matmul(void) {
    for (int i = 0; i < N; i++)
        for (int j = 0; j < N; j++)
            for (int k = 0; k < N; k++)
                C[i][j] += A[i][k] * B[k][j];
}

int main(void) {
    init();
    matmul();
    double trace = 0;
    for (int i = 0; i < N; i++)
        trace += C[i][i];
    printf("trace(C) = %g\n", trace);
    return 0;
}
