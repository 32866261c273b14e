/* Legality suite: PolyBench deriche's column recurrences. Each column j runs a recurrence down
 * its rows (ym1, ym2, xm1 carry values across i), so only the j loop is parallel; at -O2 gcc
 * attributes the i loop's latch to its last statement, which names the loop. */
#include <stdio.h>

#define W 24
#define H 20

float in[W][H];
float out[W][H];

int main(void)
{
    int i, j;
    float ym1, ym2, xm1;
    for (i = 0; i < W; i++) {
        for (j = 0; j < H; j++) {
            in[i][j] = (float)((313 * i + 991 * j) % 65536) / 65535.0f;
        }
    }
    for (j = 0; j < H; j++) {
        ym1 = 0.0f;
        ym2 = 0.0f;
        xm1 = 0.0f;
        for (i = 0; i < W; i++) {
            out[i][j] = 0.25f * in[i][j] + 0.5f * xm1 + 0.125f * ym1 + 0.0625f * ym2;
            xm1 = in[i][j];
            ym2 = ym1;
            ym1 = out[i][j];
        }
    }
    for (i = 0; i < W; i++) {
        for (j = 0; j < H; j++) {
            printf("%a\n", out[i][j]);
        }
    }
    return 0;
}
