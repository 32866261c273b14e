/* lu's shape (PolyBench): two triangular nests inside one loop. */
#include <stdio.h>
#ifndef N
#define N 24
#endif
double A[N][N];
int main(void) {
  for (int i = 0; i < N; i++) {
    for (int j = 0; j <= i; j++) A[i][j] = (double)(-j % N) / N + 1;
    for (int j = i + 1; j < N; j++) A[i][j] = 0;
    A[i][i] = 1;
  }
  for (int i = 0; i < N; i++) { /* LU_I */
    for (int j = 0; j < i; j++) {
      for (int k = 0; k < j; k++) A[i][j] -= A[i][k] * A[k][j];
      A[i][j] /= A[j][j];
    }
    for (int j = i; j < N; j++)
      for (int k = 0; k < i; k++) A[i][j] -= A[i][k] * A[k][j];
  }
  double s = 0;
  for (int i = 0; i < N; i++)
    for (int j = 0; j < N; j++) s += A[i][j];
  printf("%a\n", s);
  return 0;
}
