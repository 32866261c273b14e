/* Library-call benchmark: argv[1] calls of argv[2] on short strings: "strlen" or "memchr"
   (performed by the emulate engine as listed functions), "atoi" or "strcmp" (libc's own code,
   AVX2 for strcmp, run inside the engine), or "getppid" (a system call: run natively); 0 calls
   measures the rest of the program. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 100000;
    const char *f = argc < 3 ? "strlen" : argv[2];
    int which = !strcmp(f, "atoi")     ? 1
                : !strcmp(f, "memchr") ? 2
                : !strcmp(f, "strcmp") ? 3
                : !strcmp(f, "getppid") ? 4
                                        : 0;
    static char s[16][8];
    for (int i = 0; i < 16; i++)
        snprintf(s[i], sizeof s[i], "%d", i * 37);
    long total = 0;
    for (long i = 0; i < n; i++)
        total += which == 1   ? atoi(s[i & 15])
                 : which == 2 ? memchr(s[i & 15], '7', sizeof s[i & 15]) != NULL
                 : which == 3 ? strcmp(s[i & 15], "296") < 0
                 : which == 4 ? getppid() > 0
                              : (long)strlen(s[i & 15]);
    printf("%ld\n", total);
    return 0;
}
