/* A time loop around a step whose parallel loop gcc outlines, the step inlined into the time
 * loop's function (Rodinia's hotspot: compute_tran_temp and single_iteration). */
#include <omp.h>
#include <stdio.h>

#define G 64
#define BS 16
static float grid[G * G], next[G * G];
static int threads = 1;

static void step(float *res, const float *tmp, int row, int col, float k)
{
    int chunk;
    int count = row * col / (BS * BS);
    int per_row = col / BS;
    int per_col = row / BS;
    omp_set_num_threads(threads);
#pragma omp parallel for shared(res, tmp) private(chunk) firstprivate(row, col, count, per_row) schedule(static)
    for (chunk = 0; chunk < count; chunk++) {
        int r0 = BS * (chunk / per_col), c0 = BS * (chunk % per_row);
        for (int r = r0; r < r0 + BS; r++)
            for (int c = c0; c < c0 + BS; c++)
                res[r * col + c] = tmp[r * col + c] * k + 1.0f;
    }
}

__attribute__((noinline)) void steps(float *result, int n, float *temp, int row, int col)
{
    float *r = result, *t = temp;
    for (int i = 0; i < n; i++) { /* time steps */
        step(r, t, row, col, 0.5f);
        float *x = t;
        t = r;
        r = x;
    }
}

int main(int argc, char **argv)
{
    (void)argv;
    for (int i = 0; i < G * G; i++)
        grid[i] = (i * 7 % 13) * 0.5f;
    steps(next, 5 + argc, grid, G + argc - 1, G + argc - 1);
    printf("%a %a\n", grid[G + 1], next[G + 1]);
    return 0;
}
