/* Rodinia nn's distance loop: records of text in a buffer, each parsed by atof, a distance
 * per record. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#define REC 49
#define MAX 256
static char db[MAX * REC];
int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 64;
    if (n > MAX) n = MAX;
    float *z = malloc(sizeof(float) * n);
    for (int i = 0; i < n; i++)
        snprintf(db + i * REC, REC, "rec %04d %20s %5.1f %5.1f", i, "name",
                 (i * 7 % 90) * 1.0, (i * 13 % 180) * 1.0);
    float lat = 30.0f, lng = 90.0f;
    for (int i = 0; i < n; i++) { /* NN_I */
        char *rec = db + i * REC + 30;
        float a = atof(rec);
        float b = atof(rec + 6);
        z[i] = sqrtf((a - lat) * (a - lat) + (b - lng) * (b - lng));
    }
    for (int i = 0; i < n; i++)
        printf("%a\n", z[i]);
    return 0;
}
