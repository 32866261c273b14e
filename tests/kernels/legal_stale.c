/* Legality suite: hotspot's `delta` (Rodinia hotspot_openmp.cpp:81). Some rows assign `delta`
 * in every cell; the others read the value the last cell of an earlier row left. The c loop
 * carries nothing, but its runs read `delta` from before them and leave it for later runs:
 * `private(delta)` hands each thread an uninitialised copy; it takes `firstprivate` and
 * `lastprivate`. */
#include <stdio.h>

#define R 24
#define C 32

double t[R][C];
double out[R][C];

int main(void)
{
    for (int r = 0; r < R; r++) {
        for (int c = 0; c < C; c++) {
            t[r][c] = (double)((r * 7 + c * 3) % 11) / 4.0;
        }
    }
    double delta = 0.0;
    for (int r = 0; r < R; r++) {
        for (int c = 0; c < C; c++) {
            if (r < 4) {
                delta = t[r][c] * 0.5 + c;
            }
            out[r][c] = t[r][c] + delta;
        }
    }
    for (int r = 0; r < R; r++) {
        for (int c = 0; c < C; c++) {
            printf("%a\n", out[r][c]);
        }
    }
    return 0;
}
