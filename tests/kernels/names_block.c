/* Local arrays declared in a loop's body (Rodinia nw's `input_itemsets_l`): gcc -O2
 * computes their addresses once, before the loops, outside the block that declares them.
 * Privatizing them for the blocks' loop names them by their variables. */
#include <stdio.h>

#define N 64
#define B 8

static int grid[N * N];

__attribute__((noinline)) static void blocks(int *g, int penalty)
{
    for (int blk = 0; blk < N / B; blk++) {          /* MARK blk */
        int tile[(B + 1) * (B + 1)] __attribute__((aligned(64)));
        int ref[B * B] __attribute__((aligned(64)));
        for (int i = 0; i < B; i++)
            for (int j = 0; j < B; j++)
                ref[i * B + j] = g[(blk * B + i) * N + j] % 7;
        for (int i = 0; i < B + 1; i++)
            for (int j = 0; j < B + 1; j++)
                tile[i * (B + 1) + j] = i + j;
        for (int i = 1; i < B + 1; i++)
            for (int j = 1; j < B + 1; j++) {
                int a = tile[(i - 1) * (B + 1) + j - 1] + ref[(i - 1) * B + j - 1];
                int b = tile[i * (B + 1) + j - 1] - penalty;
                int c = tile[(i - 1) * (B + 1) + j] - penalty;
                tile[i * (B + 1) + j] = a > b ? (a > c ? a : c) : (b > c ? b : c);
            }
        for (int i = 0; i < B; i++)
            for (int j = 0; j < B; j++)
                g[(blk * B + i) * N + j] = tile[(i + 1) * (B + 1) + j + 1];
    }
}

int main(void)
{
    for (int i = 0; i < N * N; i++)
        grid[i] = (i * 37) % 101;
    blocks(grid, 2);
    long sum = 0;
    for (int i = 0; i < N * N; i++)
        sum += grid[i] * (i % 5);
    printf("%ld\n", sum);
    return 0;
}
