/* Library-call benchmark: argv[1] calls of argv[2] ("strlen", performed by the emulate engine,
   or "atoi", run natively) on short strings; 0 calls measures the rest of the program. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 100000;
    int native = argc > 2 && strcmp(argv[2], "atoi") == 0;
    static char s[16][8];
    for (int i = 0; i < 16; i++)
        snprintf(s[i], sizeof s[i], "%d", i * 37);
    long total = 0;
    for (long i = 0; i < n; i++)
        total += native ? atoi(s[i & 15]) : (long)strlen(s[i & 15]);
    printf("%ld\n", total);
    return 0;
}
