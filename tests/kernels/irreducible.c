/* An irreducible loop: a goto jumps into the middle of the loop body. */
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 20;
    int i = 0, s = 0;
    if (argc > 2)
        goto inside;
top:
    s += i; /* FIRST_HALF */
inside:
    i++; /* SECOND_HALF */
    if (i < n)
        goto top;
    printf("%d %d\n", i, s);
    return 0;
}
