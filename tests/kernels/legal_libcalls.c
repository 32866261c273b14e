/* Legality suite: loops whose order is fixed by library calls: rand() (a hidden state), a
 * printf of each element (the output order) and memmove on overlapping parts of one buffer. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N 200
#define M 120

double a[N];
int buf[M + 16];

int main(int argc, char **argv)
{
    /* Unknown to the compiler, so memmove stays a library call. */
    int len = argc > 5 ? 1 : 8;
    srand(12345);
    for (int i = 0; i < N; i++) {
        a[i] = rand() % 1000 / 7.0;
    }
    for (int i = 0; i < N; i++) {
        printf("%a\n", a[i]);
    }
    for (int i = 0; i < M + 16; i++) {
        buf[i] = i * 3 + 1;
    }
    for (int i = 0; i < M; i++) {
        memmove(&buf[i + 1], &buf[i], len * sizeof(int));
        buf[i] += i;
    }
    for (int i = 0; i < M + 16; i++) {
        printf("%d\n", buf[i]);
    }
    return 0;
}
