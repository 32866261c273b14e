/* Rodinia myocyte's main loop: a loop around a call that is not inlined, in a source file
 * that is not UTF-8 (myocyte's main.c is Windows-1252: "the heart’s state"). Entered at
 * its test (gcc -O2 -fno-tree-ch, as gcc -O2 compiles myocyte's), the loop's latch is the
 * call's block, with the call's line: the `for` line names the loop only when the file can
 * be read. `status` is dead, as in myocyte, so the call ends the body. */
#include <stdio.h>

#define N 40

static double y[N], x[N];

__attribute__((noinline)) static int solver(double *yi, double xi, int n)
{
    double s = 0;
    for (int k = 0; k < n; k++)
        s += xi * k;
    *yi = s;
    return s > 0;
}

__attribute__((noinline)) static void size_of_work(int *workload, int argc)
{
    *workload = N - argc;
}

int main(int argc, char **argv)
{
    int status = 0, i, workload;
    (void)argv;
    (void)status;
    size_of_work(&workload, argc);
    for (i = 0; i < N; i++)
        x[i] = i * 0.5;
    for (i = 0; i < workload; i++) { /* FOR */
        status = solver(&y[i], /* CALL */
                        x[i],
                        N);
    }
    double sum = 0;
    for (i = 0; i < N; i++)
        sum += y[i];
    printf("%f\n", sum);
    return 0;
}
