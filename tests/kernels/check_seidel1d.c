/* polyprof check: a 1-D Gauss-Seidel time loop, in place, as profiled. -DINTERCHANGE builds
 * the time/space interchange (illegal), -DSKEW the space loop skewed by the time loop then
 * interchanged, -DSKEW_TILE=S the skewed band tiled by S: the tests compare their output with
 * the original's. Iterations are numbered from 0, as polyprof counts them: it = i - 1. */
#include <stdio.h>

#define N 200
#define T 10

double a[N];

int main(void)
{
    for (int i = 0; i < N; i++) {
        a[i] = (i % 13) + 1.0 / (i + 1);
    }
#if defined(INTERCHANGE)
    for (int i = 1; i < N - 1; i++)
        for (int t = 0; t < T; t++)
            a[i] = (a[i - 1] + a[i] + a[i + 1]) / 3.0;
#elif defined(SKEW)
    /* w = it + t, then w outermost. */
    for (int w = 0; w <= (N - 3) + (T - 1); w++)
        for (int t = 0; t < T; t++) {
            int it = w - t;
            if (it >= 0 && it <= N - 3) {
                int i = it + 1;
                a[i] = (a[i - 1] + a[i] + a[i + 1]) / 3.0;
            }
        }
#elif defined(SKEW_TILE)
    /* Tiles of (t, w = it + t), then the points of each tile in order. */
    for (int tt = 0; tt < T; tt += SKEW_TILE)
        for (int tw = 0; tw <= (N - 3) + (T - 1); tw += SKEW_TILE)
            for (int t = tt; t < tt + SKEW_TILE && t < T; t++)
                for (int w = tw; w < tw + SKEW_TILE; w++) {
                    int it = w - t;
                    if (it >= 0 && it <= N - 3) {
                        int i = it + 1;
                        a[i] = (a[i - 1] + a[i] + a[i + 1]) / 3.0;
                    }
                }
#else
    for (int t = 0; t < T; t++) {             /* loop t */
        for (int i = 1; i < N - 1; i++) {     /* loop i */
            a[i] = (a[i - 1] + a[i] + a[i + 1]) / 3.0;
        }
    }
#endif
    for (int i = 0; i < N; i++) {
        printf("%a\n", a[i]);
    }
    return 0;
}
