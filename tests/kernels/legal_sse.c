/* Legality suite: a time loop around an in-place SSE average of a[i] and a[i + 1] loaded
 * with one 16-byte load. Iteration (t, i) reads a[i + 1] as written at (t - 1, i + 1): the
 * dependence distance (1, -1) forbids the interchange and reversing i; a skew makes it legal. */
#include <emmintrin.h>
#include <stdio.h>

#define N 160
#define T 12

double a[N];

int main(void)
{
    for (int i = 0; i < N; i++) {
        a[i] = (i % 11) * 0.5 + 1.0 / (i + 1);
    }
    for (int t = 0; t < T; t++) {
        for (int i = 0; i < N - 1; i++) {
            __m128d v = _mm_loadu_pd(&a[i]);
            a[i] = (v[0] + v[1]) * 0.5;
        }
    }
    for (int i = 0; i < N; i++) {
        printf("%a\n", a[i]);
    }
    return 0;
}
