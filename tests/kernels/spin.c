/* Loops N times (argv[1], default 1000000): a long trace from a tiny program. */
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 1000000;
    volatile unsigned long h = 0;
    for (long i = 0; i < n; i++)
        h = h * 3 + (unsigned long)i;
    printf("h=%lu\n", h);
    return 0;
}
