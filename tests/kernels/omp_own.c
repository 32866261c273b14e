/* The program's own OpenMP loops, each with a known verdict: a parallel stencil, a planted
 * race, a reduction with its clause, one without it, a shared temporary without `private`, a
 * `private` variable whose value passes from iteration to iteration (Rodinia's hotspot);
 * partial sums in a row per thread (Rodinia's kmeans), a stencil by chunks whose shared
 * pointer gcc -O2 spills and restores around the interior loop (Rodinia's hotspot), a loop
 * over columns that gcc -O2 names by a line of its inner loop's body (Rodinia's srad); and a
 * qsort comparator called back by the library. The program asks for four threads itself,
 * as Rodinia's backprop does: polyprof's thread limit keeps it to one. */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

#define N 400
static double a[N], b[N], c[N], e[N];

#define G 64
#define BS 16
static float grid[G * G], next[G * G], power[G * G];

static void chunks(float *res, const float *tmp, const float *pw, int n, float cap, float rx,
                   float ry, float rz)
{
    int count = n * n / (BS * BS), per_row = n / BS;
#pragma omp parallel for
    for (int chunk = 0; chunk < count; chunk++) {
        int r0 = BS * (chunk / per_row), c0 = BS * (chunk % per_row);
        if (r0 == 0 || c0 == 0 || r0 + BS == n || c0 + BS == n) {
            for (int r = r0; r < r0 + BS; r++)
                for (int c = c0; c < c0 + BS; c++) {
                    int k = r * n + c;
                    float up = r > 0 ? tmp[k - n] : tmp[k], down = r < n - 1 ? tmp[k + n] : tmp[k];
                    float left = c > 0 ? tmp[k - 1] : tmp[k], right = c < n - 1 ? tmp[k + 1] : tmp[k];
                    res[k] = tmp[k] + cap * (pw[k] + (up + down - 2.f * tmp[k]) * ry +
                                             (left + right - 2.f * tmp[k]) * rx + (80.f - tmp[k]) * rz);
                }
            continue;
        }
        for (int r = r0; r < r0 + BS; r++)
            for (int c = c0; c < c0 + BS; c++) {
                int k = r * n + c;
                res[k] = tmp[k] + cap * (pw[k] + (tmp[k + n] + tmp[k - n] - 2.f * tmp[k]) * ry +
                                         (tmp[k + 1] + tmp[k - 1] - 2.f * tmp[k]) * rx +
                                         (80.f - tmp[k]) * rz);
            }
    }
}

#define NR 32
#define NC 32
static float img[NR * NC], dn[NR * NC], ds[NR * NC], dw[NR * NC], de[NR * NC], cc[NR * NC];
static int in_[NR], is_[NR], jw[NC], je[NC];

static void derivatives(void)
{
    int i, j, k;
    float jc, g2;
#pragma omp parallel for shared(img, dn, ds, dw, de, cc) private(i, j, k, jc, g2)
    for (j = 0; j < NC; j++) {

        for (i = 0; i < NR; i++) {

            k = i + NR * j;
            jc = img[k];

            dn[k] = img[in_[i] + NR * j] - jc;
            ds[k] = img[is_[i] + NR * j] - jc;
            dw[k] = img[i + NR * jw[j]] - jc;
            de[k] = img[i + NR * je[j]] - jc;

            g2 = (dn[k] * dn[k] + ds[k] * ds[k] + dw[k] * dw[k] + de[k] * de[k]) / (jc * jc);
            cc[k] = 1.0f / (1.0f + g2);
        }
    }
}

static int by_value(const void *x, const void *y)
{
    double p = *(const double *)x, q = *(const double *)y;
    return (p > q) - (p < q);
}

int main(void)
{
    omp_set_num_threads(4);
    for (int i = 0; i < N; i++)
        a[i] = (i * 37 % 101) * 0.5;
#pragma omp parallel for
    for (int i = 1; i < N - 1; i++) /* stencil */
        b[i] = 0.5 * a[i] + 0.25 * (a[i - 1] + a[i + 1]);
#pragma omp parallel for
    for (int i = 1; i < N; i++) /* race */
        c[i] = c[i - 1] + b[i];
    double s = 0;
#pragma omp parallel for reduction(+ : s)
    for (int i = 0; i < N; i++) /* reduction */
        s += b[i];
    double u = 0;
#pragma omp parallel for
    for (int i = 0; i < N; i++) /* unreduced */
        u += a[i] * b[i];
    double t;
#pragma omp parallel for
    for (int i = 0; i < N; i++) { /* shared temporary */
        t = a[i] + 1.0;
        b[i] = t * t;
    }
    double d = 0;
#pragma omp parallel for private(d)
    for (int i = 0; i < N; i++) { /* stale private */
        if (i % 16 == 0)
            d = a[i] * 2.0;
        e[i] = b[i] + d;
    }
    int nt = omp_get_max_threads();
    double **part = malloc(nt * sizeof *part);
    for (int k = 0; k < nt; k++)
        part[k] = calloc(8, sizeof **part);
#pragma omp parallel
    {
        int tid = omp_get_thread_num();
#pragma omp for
        for (int i = 0; i < N; i++) /* per-thread rows */
            part[tid][i % 8] += a[i];
    }
    for (int i = 0; i < G * G; i++) {
        grid[i] = (i * 7 % 13) * 0.5f;
        power[i] = (i % 5) * 0.1f;
    }
    float *r = next, *g = grid;
    for (int k = 0; k < 4; k++) {
        chunks(r, g, power, G, 0.01f, 0.2f, 0.3f, 0.05f);
        float *x = g;
        g = r;
        r = x;
    }
    for (int i = 0; i < NR; i++) {
        in_[i] = i > 0 ? i - 1 : 0;
        is_[i] = i < NR - 1 ? i + 1 : NR - 1;
    }
    for (int j = 0; j < NC; j++) {
        jw[j] = j > 0 ? j - 1 : 0;
        je[j] = j < NC - 1 ? j + 1 : NC - 1;
    }
    for (int k = 0; k < NR * NC; k++)
        img[k] = 1.0f + (k * 7 % 11);
    derivatives();
    qsort(a, N, sizeof(double), by_value);
    printf("%a %a %a %a %a %a %a\n", s, u, c[N - 1], b[7], a[N - 1], part[0][3], g[G + 1]);
    printf("%a %a\n", cc[NR + 3], e[N - 1]);
    return 0;
}
