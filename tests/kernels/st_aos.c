/* An array of 7-double structures whose hot loop updates 2 fields. */
#include <stdio.h>
#include <stdlib.h>

struct particle {
    double x, y, z, vx, vy, vz, mass;
};

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 64, steps = argc > 2 ? atoi(argv[2]) : 4;
    struct particle *p = calloc(n, sizeof *p);
    for (int i = 0; i < n; i++)
        p[i].vx = i * 0.5;
    for (int s = 0; s < steps; s++)               /* AOS_S */
        for (int i = 0; i < n; i++)               /* AOS_I */
            p[i].x += p[i].vx * 0.1;              /* AOS_BODY */
    printf("%g\n", p[n - 1].x);
    return 0;
}
