/* Single and double precision arithmetic, conversions both ways, compares including NaN and
   signed zeros, sqrt, fabs, min/max, rounding of halves. */
#include <math.h>
#include <stdio.h>
#include <string.h>

volatile double dv[] = {0.0, -0.0, 1.0, -1.5, 1e308, -1e-310, 3.141592653589793, 1e19,
                        4294967296.5};
volatile float fv[] = {0.0f, -0.0f, -1.5f, 3.4e38f, 1e-40f, 0.1f, 1e10f};

static unsigned long long bits(double d)
{
    unsigned long long u;
    memcpy(&u, &d, sizeof u);
    return u;
}

int main(void)
{
    unsigned long long h = 0;
    int nd = sizeof dv / sizeof dv[0], nf = sizeof fv / sizeof fv[0];
    double nan = dv[0] / dv[0];
    for (int i = 0; i < nd; i++) {
        double x = dv[i];
        h = h * 31 + bits(x * 3.0 - 1.0);
        h = h * 31 + bits(sqrt(fabs(x)));
        h = h * 31 + (unsigned long long)(long long)(x / 7.0);
        h = h * 31 + (unsigned)(int)(x * 1e-10);
        h = h * 31 + bits((double)(float)x);
        h = h * 31 + (x < 1.0) + 2 * (x == 0.0) + 4 * (x > nan) + 8 * (x != x);
        for (int j = 0; j < nd; j++) {
            double y = dv[j];
            h = h * 31 + bits(x + y) + bits(x - y) + bits(x * y) + bits(x / y);
            h = h * 31 + (x < y) + 2 * (x <= y) + 4 * (x == y);
            h = h * 31 + bits(x < y ? x : y);
        }
    }
    for (int i = 0; i < nf; i++) {
        float x = fv[i];
        h = h * 31 + bits(x * 0.5f + 2.0f);
        h = h * 31 + (unsigned long long)(long long)x;
        h = h * 31 + bits(sqrtf(x));
        for (int j = 0; j < nf; j++) {
            float y = fv[j];
            h = h * 31 + bits(x / y) + (x < y) + bits(fminf(x, y));
        }
        h = h * 31 + bits((float)(i * 1000003) / 3.0f);
        h = h * 31 + bits((double)(long long)(i - 4) * 0.1);
    }
    printf("h=%llx\n", h);
    return 0;
}
