/* Sorts the rows of a table with qsort and copies them with memcpy (library code run
 * natively), around two small loops of its own. argv[1]: rows (default 8), argv[2]: row
 * length (default 4000). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAXROWS 64
#define MAXN 100000
static int keys[MAXROWS][MAXN];
static int copy[MAXROWS][MAXN];
static double smooth[MAXN];

static int by_value(const void *x, const void *y)
{
    int p = *(const int *)x, q = *(const int *)y;
    return (p > q) - (p < q);
}

int main(int argc, char **argv)
{
    int rows = argc > 1 ? atoi(argv[1]) : 8;
    int n = argc > 2 ? atoi(argv[2]) : 4000;
    if (rows < 1 || rows > MAXROWS || n < 3 || n > MAXN)
        return 2;
    unsigned s = 12345;
    for (int r = 0; r < rows; r++)
        for (int i = 0; i < n; i++) {
            s = s * 1103515245u + 12345u;
            keys[r][i] = (int)(s >> 8);
        }
    for (int r = 0; r < rows; r++) {
        qsort(keys[r], n, sizeof(int), by_value);
        memcpy(copy[r], keys[r], n * sizeof(int));
    }
    for (int i = 1; i < n - 1; i++)
        smooth[i] = (copy[i % rows][i - 1] + copy[i % rows][i + 1]) / 2.0;
    printf("%d %g\n", copy[rows / 2][n / 2], smooth[n / 2]);
    return 0;
}
