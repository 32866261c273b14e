/* trmm's shape (PolyBench): a triangular reduction nest. */
#include <stdio.h>
#ifndef M
#define M 16
#endif
#ifndef N
#define N 20
#endif
double A[M][M], B[M][N];
int main(void) {
  double alpha = 1.5;
  for (int i = 0; i < M; i++)
    for (int j = 0; j < M; j++) A[i][j] = (double)((i + j) % M) / M;
  for (int i = 0; i < M; i++)
    for (int j = 0; j < N; j++) B[i][j] = (double)((N + (i - j)) % N) / N;
  for (int i = 0; i < M; i++) /* TRMM_I */
    for (int j = 0; j < N; j++) {
      for (int k = i + 1; k < M; k++) B[i][j] += A[k][i] * B[k][j];
      B[i][j] = alpha * B[i][j];
    }
  double s = 0;
  for (int i = 0; i < M; i++)
    for (int j = 0; j < N; j++) s += B[i][j];
  printf("%a\n", s);
  return 0;
}
