/* Two sums accumulated in one loop (Rodinia particlefilter's expected position): gcc -O2
 * keeps each in a register, and -O2 -ffast-math vectorizes both into registers debug
 * information names no variable for. Then a sum of calls that each return the same value
 * (a search that finds nothing), which the trace folds into an evolution of the counter.
 * The values are small integers: every order of the additions gives the same sums, so a
 * parallel run must print the same. */
#include <stdio.h>
#include <stdlib.h>

#define N 4000

static void __attribute__((noinline)) estimate(const double *ax, const double *ay, const double *w, int n)
{
    double xe, ye;
    xe = 0;
    ye = 0;
    for (int x = 0; x < n; x++) { /* MARK pair */
        xe += ax[x] * w[x];
        ye += ay[x] * w[x];
    }
    printf("%.1f %.1f\n", xe, ye);
}

static int __attribute__((noinline)) position(const double *w, int n, double key)
{
    int i;
    for (i = 0; i < n; i++)
        if (w[i] == key)
            break;
    return i;
}

int main(void)
{
    double *ax = malloc(N * sizeof *ax), *ay = malloc(N * sizeof *ay), *w = malloc(N * sizeof *w);
    if (!ax || !ay || !w)
        return 1;
    for (int i = 0; i < N; i++) {
        ax[i] = i % 7;
        ay[i] = i % 5;
        w[i] = i % 3;
    }
    estimate(ax, ay, w, N);
    long total = 0;
    for (int q = 0; q < 20; q++) /* MARK total */
        total += position(w, 100, -1.0 - q);
    printf("%ld\n", total);
    free(ax);
    free(ay);
    free(w);
    return 0;
}
