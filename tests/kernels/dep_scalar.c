/* A scalar temporary (a stack slot at -O0) reused every iteration: anti and output
   dependences across iterations, its flow dependence stays inside one iteration. */
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 16;
    int *a = malloc(sizeof(int) * n), *b = malloc(sizeof(int) * n);
    for (int i = 0; i < n; i++)
        a[i] = i;
    int t;
    for (int i = 0; i < n; i++) {
        t = a[i] * 2; /* TEMP_WRITE */
        b[i] = t + 1; /* TEMP_READ */
    }
    printf("%d\n", b[n - 1]);
    return 0;
}
