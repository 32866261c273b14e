/* Reductions and look-alikes. Each loop is marked by a comment naming what it is; the test
 * finds loops by those marks. Sizes are small: the trace is stepped. */
#include <stdio.h>

#ifndef N
#define N 64
#endif

double a[N], b[N], y[N], A[N][N], x[N];
long h[8];
int v[N];

int main(void)
{
    for (int i = 0; i < N; i++) {
        a[i] = 1.0 / (i + 1);
        v[i] = (i * 37) % 101 - 50;
        x[i] = i % 5;
        for (int j = 0; j < N; j++)
            A[i][j] = (i + 2 * j) % 7;
    }
    long isum = 0;
    for (int i = 0; i < N; i++) { /* MARK int_sum */
        isum -= v[i];
    }
    double prod = 1.0;
    for (int i = 0; i < N; i++) { /* MARK fp_product */
        prod *= 1.0 + a[i];
    }
    int mx = -1000;
    for (int i = 0; i < N; i++) { /* MARK int_max */
        mx = v[i] > mx ? v[i] : mx;
    }
    for (int i = 0; i < N; i++) { /* MARK array_reduction */
        for (int j = 0; j < N; j++)
            y[j] += A[i][j] * x[i];
    }
    double run = 0.0;
    for (int i = 0; i < N; i++) { /* MARK prefix_sum */
        run += a[i];
        b[i] = run;
    }
    for (int i = 0; i + 1 < N; i++) { /* MARK scan */
        y[i + 1] = y[i] + a[i];
    }
    double poly = 0.0;
    for (int i = 0; i < N; i++) { /* MARK horner */
        poly = poly * 0.5 + a[i];
    }
    double alt = 0.0;
    for (int i = 0; i < N; i++) { /* MARK alternating */
        alt = a[i] - alt;
    }
    double dsq = 1.0;
    for (int i = 0; i < N; i++) { /* MARK self_square */
        dsq = dsq + dsq * a[i];
    }
    printf("%ld %a %d %a %a %a %a %a\n", isum, prod, mx, y[N - 1], b[N - 1], poly, alt, dsq);
    return 0;
}
