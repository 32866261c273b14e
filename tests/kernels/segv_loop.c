/* Sums a table row by row through a pointer that goes bad at row 5: SIGSEGV inside two
   loops, at the line marked FAULT. */
#include <stdio.h>

int table[16][8];
int *volatile bad = (int *)16; /* an address nothing maps */

int main(void)
{
    long sum = 0;
    puts("summing");
    fflush(stdout);
    for (int i = 0; i < 16; i++) { /* OUTER */
        int *row = i == 5 ? bad : table[i];
        for (int j = 0; j < 8; j++) /* INNER */
            sum += row[j]; /* FAULT */
    }
    printf("%ld\n", sum);
    return 0;
}
