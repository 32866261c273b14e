/* Legality suite: Rodinia nn's distance loop, each record's text parsed by atof (a number
 * parser reads its string and nothing hidden), with a parse loop whose strtol end pointer
 * carries the position from one iteration to the next. */
#include <stdio.h>
#include <stdlib.h>

#define N 120
#define REC 49

char db[N * REC];
char list[N * 8];
float z[N];
long v[N];

int main(void)
{
    for (int i = 0; i < N; i++) {
        snprintf(db + i * REC, REC, "rec %04d %20s %5.1f %5.1f", i, "name",
                 (i * 7 % 90) * 1.0, (i * 13 % 180) * 1.0);
    }
    for (int i = 0; i < N; i++) {
        snprintf(list + i * 8, 8, "%6d ", i * 37 % 1000);
    }
    for (int i = 0; i < N; i++) {
        float a = atof(db + i * REC + 30);
        float b = atof(db + i * REC + 36);
        z[i] = (a - 30.0f) * (a - 30.0f) + (b - 90.0f) * (b - 90.0f);
    }
    char *p = list;
    for (int i = 0; i < N; i++) {
        v[i] = strtol(p, &p, 10);
    }
    for (int i = 0; i < N; i++) {
        printf("%a %ld\n", z[i], v[i]);
    }
    return 0;
}
