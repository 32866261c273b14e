/* Legality suite: Rodinia kmeans' find_nearest_point, inlined into the loop over points. Its
 * local `index` is assigned only when a centre is nearer (gcc -O2: a `cmov` that reads the
 * register's old value), and the caller's own `index` takes its result: gcc keeps both in one
 * register, whose old value the next point's first `cmov` reads. In the source each call has
 * its own `index`: the loop over points is parallel with the caller's `index` private. */
#include <float.h>
#include <stdio.h>

#define N 400
#define K 5
#define F 4

float pts[N][F], ctr[K][F];
int member[N];

static int find_nearest(const float *pt, float (*c)[F], int k)
{
    int index, i;
    float min_dist = FLT_MAX;
    for (i = 0; i < k; i++) {
        float dist = 0;
        for (int j = 0; j < F; j++) {
            dist += (pt[j] - c[i][j]) * (pt[j] - c[i][j]);
        }
        if (dist < min_dist) {
            min_dist = dist;
            index = i;
        }
    }
    return index;
}

int main(void)
{
    for (int i = 0; i < N; i++) {
        for (int j = 0; j < F; j++) {
            pts[i][j] = (float)((i * 7 + j * 13) % 31);
        }
    }
    for (int i = 0; i < K; i++) {
        for (int j = 0; j < F; j++) {
            ctr[i][j] = (float)((i * 11 + j * 5) % 29);
        }
    }
    int i, index;
    for (i = 0; i < N; i++) {
        index = find_nearest(pts[i], ctr, K);
        member[i] = index;
    }
    for (i = 0; i < N; i++) {
        printf("%d\n", member[i]);
    }
    return 0;
}
