/* Storage in source names: a heap array from posix_memalign through a wrapper (as PolyBench
 * allocates), one from malloc held by a global, and a local array. */
#include <stdio.h>
#include <stdlib.h>

#define N 24

/* PolyBench's way: posix_memalign in a wrapper, the pointer returned to the caller. */
__attribute__((noinline)) static void *xmalloc(size_t n) {
  void *p = NULL;
  if (posix_memalign(&p, 64, n) != 0 || !p) {
    exit(1);
  }
  return p;
}

double *gbuf; /* a global pointer receiving malloc's block */

__attribute__((noinline)) void kernel(double *restrict mat, double *restrict g, int n) {
  for (int i = 1; i < n; i++)        /* MARK heap */
    for (int j = 0; j < n; j++)
      mat[i * n + j] = mat[(i - 1) * n + j] + g[j];
  for (int i = 1; i < n; i++)        /* MARK global */
    g[i] = g[i - 1] * 0.5 + 1.0;
}

int main(void) {
  double *mat = xmalloc(N * N * sizeof(double));
  gbuf = malloc(N * sizeof(double));
  double local[N];
  for (int i = 0; i < N * N; i++)
    mat[i] = i;
  for (int i = 0; i < N; i++)
    gbuf[i] = 1.0 / (i + 1);
  kernel(mat, gbuf, N);
  local[0] = 1.0;
  for (int i = 1; i < N; i++)        /* MARK local */
    local[i] = local[i - 1] * 0.75 + mat[i];
  double s = 0;
  for (int i = 0; i < N; i++)
    s += local[i] + gbuf[i];
  printf("%a %a\n", s, mat[N * N - 1]);
  free(mat);
  free(gbuf);
  return 0;
}
