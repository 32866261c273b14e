/* Sums the numbers read on stdin, prints the sum on stdout, a line on stderr, exits with 7. */
#include <stdio.h>

int main(void)
{
    long sum = 0, x;
    int count = 0;
    while (scanf("%ld", &x) == 1) {
        sum += x;
        count++;
    }
    printf("sum=%ld\n", sum);
    fprintf(stderr, "kernel: read %d numbers\n", count);
    return 7;
}
