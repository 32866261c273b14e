/* A small matrix product for the flame-graph tests: no library call, so its loops are all
 * the flame graph holds; the exit status is a checksum. */
#define N 16
double A[N][N], B[N][N], C[N][N];

int main(void)
{
    for (int i = 0; i < N; i++)
        for (int j = 0; j < N; j++) {
            A[i][j] = (i + j) % 5;
            B[i][j] = (i * j) % 3;
            C[i][j] = 0;
        }
    for (int i = 0; i < N; i++)              /* loop i */
        for (int j = 0; j < N; j++)          /* loop j */
            for (int k = 0; k < N; k++)      /* loop k */
                C[i][j] += A[i][k] * B[k][j];
    double trace = 0;
    for (int i = 0; i < N; i++)
        trace += C[i][i];
    return (int)trace & 0x7f;
}
