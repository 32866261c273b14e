/* Library calls in loops: log and sqrt (which the emulate engine may run itself) and qsort,
 * which runs natively and calls back into the program. Their shares of the run's time must
 * add up to the total share of native calls. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static double v[2000];

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 3000;
    double s = 0;
    for (int i = 0; i < n; i++)
        s += log(1.0 + i) + sqrt((double)i + argc);
    for (int r = 0; r < 4; r++) {
        for (int i = 0; i < 2000; i++)
            v[i] = sin(i * 0.7 + r);
        qsort(v, 2000, sizeof v[0], by_value);
        s += v[1000];
    }
    printf("%g\n", s);
    return 0;
}
