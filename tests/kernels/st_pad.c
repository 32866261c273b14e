/* A matrix of 1024 double columns (8 KiB rows): its row-major initialisation walks it
 * contiguously, its column walk strides by 8 KiB, so successive rows fall into the same
 * cache sets.  Built with -DPAD=8, each row has 8 more doubles (one cache line). */
#include <stdio.h>
#include <stdlib.h>

#ifndef PAD
#define PAD 0
#endif
#define COLS 1024

int main(int argc, char **argv)
{
    int rows = argc > 1 ? atoi(argv[1]) : 16, cols = argc > 2 ? atoi(argv[2]) : 8;
    double (*m)[COLS + PAD] = malloc(sizeof(double[COLS + PAD]) * (size_t)rows);
    for (int i = 0; i < rows; i++)                  /* PAD_INIT */
        for (int j = 0; j < cols; j++)
            m[i][j] = (i * 3 + j) % 11;
    for (int j = 0; j < cols; j++)                  /* PAD_COL_J */
        for (int i = 1; i < rows; i++)              /* PAD_COL_I */
            m[i][j] = m[i][j] * 0.5 + m[i - 1][j];
    for (int j = 0; j < cols; j++)
        printf("%a\n", m[rows - 1][j]);
    return 0;
}
