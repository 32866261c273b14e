/* polyprof check: an in-place shift, a[i] = 0.5 * a[i + 1] + 1, as profiled; -DREVERSE runs
 * the loop backwards (illegal: iteration i reads what iteration i + 1 overwrites). */
#include <stdio.h>

#define N 400

double a[N + 1];

int main(void)
{
    for (int i = 0; i <= N; i++) {
        a[i] = i * 0.25 + 1.0 / (i + 1);
    }
#if defined(REVERSE)
    for (int i = N - 1; i >= 0; i--)
        a[i] = 0.5 * a[i + 1] + 1;
#else
    for (int i = 0; i < N; i++) {             /* loop shift */
        a[i] = 0.5 * a[i + 1] + 1;
    }
#endif
    for (int i = 0; i <= N; i++) {
        printf("%a\n", a[i]);
    }
    return 0;
}
