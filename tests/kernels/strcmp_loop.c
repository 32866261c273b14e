/* 3000 calls of strcmp on short strings: glibc's own code, which the emulate engine runs
   inside itself (its AVX2 version; on an AVX-512 CPU polyprof masks glibc's EVEX ones). */
#include <stdio.h>
#include <string.h>

int main(void) {
    static char s[16][8];
    for (int i = 0; i < 16; i++)
        snprintf(s[i], sizeof s[i], "%d", i * 37);
    long total = 0;
    for (long i = 0; i < 3000; i++)
        total += strcmp(s[i & 15], "296") < 0;
    printf("%ld\n", total);
    return 0;
}
