/* Library-call benchmark: argv[1] calls of argv[2] on short strings: "strlen" (performed by the
   emulate engine as a listed function), "atoi" (libc's own code run inside the engine) or
   "memchr" (AVX code the engine does not implement: run natively); 0 calls measures the rest
   of the program. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 100000;
    int which = argc < 3 ? 0 : strcmp(argv[2], "atoi") == 0 ? 1 : strcmp(argv[2], "memchr") == 0 ? 2 : 0;
    static char s[16][8];
    for (int i = 0; i < 16; i++)
        snprintf(s[i], sizeof s[i], "%d", i * 37);
    long total = 0;
    for (long i = 0; i < n; i++)
        total += which == 1   ? atoi(s[i & 15])
                 : which == 2 ? memchr(s[i & 15], '7', sizeof s[i & 15]) != NULL
                              : (long)strlen(s[i & 15]);
    printf("%ld\n", total);
    return 0;
}
