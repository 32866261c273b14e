/* Rodinia bfs's level loop: the inner loop only raises a flag (`stop = true;`) that the
 * `do ... while (stop)` around reads after it. A private copy of `stop` would lose it (the
 * original keeps `false`, and the search stops after one level); `reduction(||: stop)`
 * keeps it. A second flag is only lowered (`all = false;`): `reduction(&&: all)`. */
#include <stdbool.h>
#include <stdio.h>

#define N 600
#define STEP 7

static char mask[N], visited[N], next[N], wall[N], out[N];

int main(void)
{
    for (int i = 0; i < N; i++) {
        mask[i] = 0;
        visited[i] = 0;
        next[i] = i % STEP == 0;
        wall[i] = i % 50 == 49;
    }
    int rounds = 0;
    bool stop;
    do {
        stop = false;
        for (int tid = 0; tid < N; tid++) { /* MARK raise */
            char n = next[tid];
            visited[tid] = visited[tid] | n;
            mask[tid] = n;
            if (n)
                stop = true;
        }
        next[0] = 0;
        for (int i = 0; i < N - 1; i++)
            next[i + 1] = mask[i] & !visited[i + 1] & !wall[i + 1];
        rounds++;
    } while (stop);
    bool all = true;
    for (int i = 0; i < N; i++) { /* MARK lower */
        out[i] = visited[i] + 1;
        if (!visited[i])
            all = false;
    }
    int seen = 0;
    for (int i = 0; i < N; i++)
        seen += out[i];
    printf("%d rounds, %d seen, all %d\n", rounds, seen, all);
    return 0;
}
