/* Legality suite: a scalar `last` written by every iteration and read after the loop: the
 * loop is parallel only with `last` lastprivate (the value of the final iteration). */
#include <stdio.h>

#define N 600

double a[N];
double b[N];

int main(void)
{
    for (int i = 0; i < N; i++) {
        a[i] = 1.0 / (i + 3);
    }
    double last = 0.0;
    for (int i = 0; i < N; i++) {
        b[i] = a[i] * 2.0 + 1.0;
        last = b[i] - a[i];
    }
    printf("%a\n", last);
    for (int i = 0; i < N; i++) {
        printf("%a\n", b[i]);
    }
    return 0;
}
