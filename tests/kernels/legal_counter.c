/* Legality suite: Rodinia backprop's bpnn_save (backprop.c:377). The source variable `memcnt`
 * steps by a constant in every iteration and indexes the output: an induction variable the
 * source keeps. `private(memcnt)` leaves each thread's copy uninitialised; the loops are
 * parallel with OpenMP's `linear(memcnt: step)`, the step per iteration of each loop. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N1 40
#define N2 24

float w[N1 + 1][N2 + 1];

int main(void)
{
    for (int i = 0; i <= N1; i++) {
        for (int j = 0; j <= N2; j++) {
            w[i][j] = (float)((i * 5 + j * 3) % 7) / 8.0f;
        }
    }
    char *mem = malloc((N1 + 1) * (N2 + 1) * sizeof(float));
    int memcnt = 0;
    float dvalue;
    int i, j;
    for (i = 0; i <= N1; i++) {
        for (j = 0; j <= N2; j++) {
            dvalue = w[i][j];
            memcpy(&mem[memcnt], &dvalue, sizeof(float));
            memcnt += sizeof(float);
        }
    }
    float *back = (float *)mem;
    for (int k = 0; k < (N1 + 1) * (N2 + 1); k++) {
        printf("%a\n", back[k]);
    }
    free(mem);
    return 0;
}
