/* Legality suite: `t`, declared before its loop, is written before it is read in every
 * iteration. At -O2 it lives in a register, each thread's own in the binary, but in the source
 * it is one variable for all iterations: the loop is parallel only with `t` private. (The store
 * through `perm` keeps gcc from vectorizing the loop, where `t` would have no name.) `u`,
 * declared inside its loop, is already one per iteration and needs nothing. `w`, declared before
 * a loop gcc vectorizes at -O2 (where debug information loses it), needs privatizing too. */
#include <stdio.h>

#define N 600

double a[N];
double b[N];
double c[N];
double d[N];
double e[N];
int perm[N];

int main(void)
{
    for (int i = 0; i < N; i++) {
        a[i] = 1.0 / (i + 3);
        perm[i] = (i * 7) % N;
    }
    double t;
    for (int i = 0; i < N; i++) {
        t = a[i] * 3.0 + 0.5;
        b[perm[i]] = t * t;
        c[i] = t - a[i];
    }
    for (int i = 0; i < N; i++) {
        double u = b[i] * 0.25 + c[i];
        d[i] = u * u - u;
    }
    double w;
    for (int i = 0; i < N; i++) {
        w = c[i] * 0.5;
        e[i] = w + w * a[i];
    }
    for (int i = 0; i < N; i++) {
        printf("%a %a %a %a\n", b[i], c[i], d[i], e[i]);
    }
    return 0;
}
