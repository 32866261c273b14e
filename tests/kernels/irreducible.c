/* An irreducible loop: the first time it is entered at its top, the second time a goto jumps
   into the middle of its body. */
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 20;
    int s = 0, i = 0;
    for (int rep = 0; rep < 2; rep++) { /* REPEAT */
        i = rep;
        if (rep == 1)
            goto inside;
    top:
        s += i; /* FIRST_HALF */
    inside:
        i++; /* SECOND_HALF */
        if (i < n)
            goto top;
    }
    printf("%d %d\n", i, s);
    return 0;
}
