/* polyprof check: two sibling loops in a time loop, the second reading what the first wrote
 * one element further on. -DFUSED fuses them as they are (illegal: iteration i of the second
 * reads b[i + 1] before the first writes it), -DFUSED_SHIFT fuses them with the second shifted
 * by one iteration (legal): the tests compare their output with the original's. */
#include <stdio.h>

#define N 300
#define T 4

double a[N + 1], b[N + 1], c[N];

int main(void)
{
    for (int i = 0; i <= N; i++) {
        a[i] = 1.0 / (i + 2);
        b[i] = 0.5;
    }
    for (int t = 0; t < T; t++) {             /* loop t */
#if defined(FUSED)
        for (int i = 0; i <= N; i++) {
            b[i] = a[i] * 3.0 + t;
            if (i < N)
                c[i] = b[i + 1] - a[i];
        }
#elif defined(FUSED_SHIFT)
        /* The second body runs one iteration later: iteration i of the fused loop does
         * the first body's i and the second body's i - 1. */
        for (int i = 0; i <= N; i++) {
            b[i] = a[i] * 3.0 + t;
            if (i >= 1)
                c[i - 1] = b[i] - a[i - 1];
        }
#else
        for (int i = 0; i <= N; i++) {        /* loop first */
            b[i] = a[i] * 3.0 + t;
        }
        for (int i = 0; i < N; i++) {         /* loop second */
            c[i] = b[i + 1] - a[i];
        }
#endif
        for (int i = 0; i < N; i++) {
            a[i] = a[i] + c[i] / 7.0;
        }
    }
    for (int i = 0; i < N; i++) {
        printf("%a\n", a[i]);
    }
    return 0;
}
