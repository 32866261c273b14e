/* Differential test: libm's functions save, set and restore the rounding mode (stmxcsr,
 * ldmxcsr) around their work; the emulate engine runs them inside itself. Results printed
 * exactly, under the default rounding mode and rounding down. */
#include <fenv.h>
#include <math.h>
#include <stdio.h>

static double sweep(int n)
{
    double s = 0;
    for (int i = 0; i < n; i++) {
        double x = i * 0.37 - 3.0;
        s += sin(x) + cos(x) + atan2(x, 1.5) + exp(x * 0.1) + log(1.0 + i) + pow(1.001, i) +
             tan(x * 0.1) + sqrt(i) + floor(x) + fmod(x, 0.7);
    }
    return s;
}

int main(void)
{
    printf("%a\n", sweep(40));
    fesetround(FE_DOWNWARD);
    double down = sweep(40);
    fesetround(FE_TONEAREST);
    printf("%a\n%a\n", down, sweep(7));
    return 0;
}
