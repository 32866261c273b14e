/* Prints an array as PolyBench's print_array does: a newline before every 20th value. At -O2
 * the condition `(i * m + j) % 20 == 0` is computed by instructions gcc places on another
 * line; nothing but the branch reads them. polyprof does not model control dependences, so
 * it must not advise a distribution that sets that computation apart from the printing. */
#include <stdio.h>

#define M 20
#define N 30

double B[M][N];

__attribute__((noinline)) static void print_array(int m, int n) {
    fprintf(stderr, "begin dump: B");
    for (int i = 0; i < m; i++) /* MARK print */
        for (int j = 0; j < n; j++) {
            if ((i * m + j) % 20 == 0)
                fprintf(stderr, "\n");
            fprintf(stderr, "%0.2lf ", B[i][j]);
        }
    fprintf(stderr, "\nend   dump: B\n");
}

int main(void) {
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++)
            B[i][j] = (double)((i * j) % 7) / 7;
    print_array(M, N);
    return 0;
}
