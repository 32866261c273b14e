/* Two temporaries with disjoint lifetimes: t1 lives from its loop to the next, then t2 from
 * its loop to the next; neither is read after the repetition that wrote it.  They can share
 * one buffer (SMO's inter-array storage sharing).  Built with -DSHARED, t2 is t1. */
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 16, reps = argc > 2 ? atoi(argv[2]) : 3;
    double *in = malloc((size_t)n * sizeof(double));
    double *out = calloc((size_t)n, sizeof(double));
    double *t1 = malloc((size_t)n * sizeof(double));
#ifdef SHARED
    double *t2 = t1;
#else
    double *t2 = malloc((size_t)n * sizeof(double));
#endif
    for (int i = 0; i < n; i++)
        in[i] = (i % 7) * 0.5 + 1.0;
    for (int r = 0; r < reps; r++) {                 /* SH_R */
        for (int i = 0; i < n; i++)
            t1[i] = in[i] * 2.0 + r;                 /* T1_W */
        for (int i = 0; i < n; i++)
            out[i] += t1[i] * t1[n - 1 - i];         /* T1_R */
        for (int i = 0; i < n; i++)
            t2[i] = in[i] - 0.25 * r;                /* T2_W */
        for (int i = 0; i < n; i++)
            out[i] += t2[i] / t2[(i + 1) % n];       /* T2_R */
    }
    for (int i = 0; i < n; i++)
        printf("%a\n", out[i]);
    return 0;
}
