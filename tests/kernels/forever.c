/* Runs until it is killed: for interrupting polyprof. */
#include <stdio.h>

int main(void)
{
    volatile unsigned long n = 0;
    puts("started");
    fflush(stdout);
    for (;;)
        n = n * 3 + 1;
}
