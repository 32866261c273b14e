/* nussinov's shape (PolyBench): a reversed triangular nest whose updates branch on data. */
#include <stdio.h>
#ifndef N
#define N 40
#endif
#define max_score(s1, s2) ((s1 >= s2) ? s1 : s2)
#define match(b1, b2) (((b1) + (b2)) == 3 ? 1 : 0)
int seq[N];
int table[N][N];
int main(void) {
  for (int i = 0; i < N; i++) seq[i] = (i + 1) % 4;
  for (int i = N - 1; i >= 0; i--) { /* NUSSINOV_I */
    for (int j = i + 1; j < N; j++) {
      if (j - 1 >= 0) table[i][j] = max_score(table[i][j], table[i][j - 1]);
      if (i + 1 < N) table[i][j] = max_score(table[i][j], table[i + 1][j]);
      if (j - 1 >= 0 && i + 1 < N) {
        if (i < j - 1)
          table[i][j] = max_score(table[i][j], table[i + 1][j - 1] + match(seq[i], seq[j]));
        else
          table[i][j] = max_score(table[i][j], table[i + 1][j - 1]);
      }
      for (int k = i + 1; k < j; k++)
        table[i][j] = max_score(table[i][j], table[i][k] + table[k + 1][j]);
    }
  }
  printf("%d\n", table[0][N - 1]);
  return 0;
}
