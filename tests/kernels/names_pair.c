/* Two heap arrays allocated back to back through a wrapper kept out of line (as PolyBench's
 * polybench_alloc_data, in its own file), then initialised by an inlined function and updated
 * by a triangular kernel (PolyBench's trmm). At -O2 gcc describes `B` in the register that
 * holds it only some instructions after filling it: the names must still be `A` and `B`. */
#include <stdio.h>
#include <stdlib.h>

#define M 20
#define N 30

__attribute__((noinline)) static void *xmalloc(size_t n) {
    void *p = NULL;
    if (posix_memalign(&p, 4096, n) || !p) /* wrapper */
        exit(1);
    return p;
}

__attribute__((noinline)) static void *alloc_data(size_t n, size_t elt) {
    return xmalloc(n * elt);
}

static void init(double A[M][M], double B[M][N]) {
    for (int i = 0; i < M; i++) {
        for (int j = 0; j < i; j++)
            A[i][j] = (double)((i + j) % M) / M;
        A[i][i] = 1.0;
        for (int j = 0; j < N; j++)
            B[i][j] = (double)((N + (i - j)) % N) / N;
    }
}

int main(void) {
    double(*A)[M] = alloc_data(M * M, sizeof(double));
    double(*B)[N] = alloc_data(M * N, sizeof(double));
    init(A, B);
    for (int i = 0; i < M; i++) /* MARK kernel */
        for (int j = 0; j < N; j++) {
            for (int k = i + 1; k < M; k++)
                B[i][j] += A[k][i] * B[k][j];
            B[i][j] = 1.5 * B[i][j];
        }
    double s = 0;
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++)
            s += B[i][j];
    printf("%a\n", s);
    free(A);
    free(B);
    return 0;
}
