/* A value passed through an argument and a return. */
#include <stdio.h>
#include <stdlib.h>

__attribute__((noinline)) int triple(int x)
{
    return x * 3; /* CALLEE */
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 8;
    int s = 0;
    for (int i = 0; i < n; i++)
        s += triple(i + n); /* CALLER */
    printf("%d\n", s);
    return 0;
}
