/* Integer flags: a loop that only sets an integer variable to one constant (`found = 1;`,
 * `mark = 7;`) under a condition, read after the loop. A private copy would lose the value
 * set; `lastprivate(conditional: found)` keeps the value of the last iteration that set it,
 * the constant, or the original's when none did, as in the program's order. A flag the loop
 * also reads (`if (!seen && ...)`) is no such flag. */
#include <stdio.h>

#define N 700

static int a[N], out[N];

int main(void)
{
    for (int i = 0; i < N; i++)
        a[i] = (i * 37) % 101;
    int found = 0;
    for (int i = 0; i < N; i++) { /* MARK found */
        out[i] = a[i] * 3 + 1;
        if (a[i] == 77)
            found = 1;
    }
    int mark = -5;
    for (int i = 0; i < N; i++) { /* MARK mark */
        out[i] += a[i] - 2;
        if (out[i] > 300)
            mark = 7;
    }
    int none = 42;
    for (int i = 0; i < N; i++) { /* MARK none */
        out[i] -= 1;
        if (a[i] > 1000)
            none = 3;
    }
    int seen = 0;
    for (int i = 0; i < N; i++) { /* MARK read */
        out[i] += 2;
        if (!seen && a[i] == 64)
            seen = 1;
    }
    long sum = 0;
    for (int i = 0; i < N; i++)
        sum += out[i];
    printf("found %d, mark %d, none %d, seen %d, sum %ld\n", found, mark, none, seen, sum);
    return 0;
}
