/* A time loop around a function with a 2-D nest that the compiler inlines: the time loop's
   first instruction is the callee's, its back edge is the caller's loop statement. */
#include <stdio.h>
#define N 24
float img[N][N], out[N][N];

static void blur(void)
{
    for (int j = 1; j < N - 1; j++)         /* COLS */
        for (int i = 1; i < N - 1; i++)     /* ROWS */
            out[i][j] = (img[i - 1][j] + img[i][j] + img[i + 1][j]) / 3.0f;
}

int main(void)
{
    for (int i = 0; i < N; i++)
        for (int j = 0; j < N; j++)
            img[i][j] = (float)((i * 7 + j) % 13);
    for (int t = 0; t < 3; t++)             /* TIME */
        blur();
    printf("%f\n", out[N / 2][N / 2]);
    return 0;
}
