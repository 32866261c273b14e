/* A tilable nest over matrices of 512 double columns (4 KiB rows): B = B / 2 + A^T. Tiled by
 * 32x32, each tile walks 32 rows of each matrix, each row on a page of its own. Built with
 * -DTILED, both matrices are stored tile by tile as polyprof's `tile_array` says (the index
 * below, rows rounded up to whole tiles). */
#include <stdio.h>
#include <stdlib.h>

#define COLS 512
#ifdef TILED
#define ROWS(n) (((n) + 31) / 32 * 32)
#define AT(m, i, j) (m)[((i) / 32 * 16 + (j) / 32) * 1024 + (i) % 32 * 32 + (j) % 32]
#else
#define ROWS(n) (n)
#define AT(m, i, j) (m)[(i) * COLS + (j)]
#endif

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 48;
    double *a = malloc(sizeof(double) * COLS * (size_t)ROWS(n));
    double *b = malloc(sizeof(double) * COLS * (size_t)ROWS(n));
    if (!a || !b)
        return 1;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            AT(a, i, j) = (i * 3 + j) % 11;
            AT(b, i, j) = (i + 5 * j) % 7;
        }
    for (int i = 0; i < n; i++)                    /* TILE_I */
        for (int j = 0; j < n; j++)
            AT(b, i, j) = AT(b, i, j) * 0.5 + AT(a, j, i);
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j += 5)
            printf("%a\n", AT(b, i, j));
    free(a);
    free(b);
    return 0;
}
