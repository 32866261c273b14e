/* Calls puts, memset and strlen a few times (compile with -fno-builtin so they stay calls). */
#include <stdio.h>
#include <string.h>

char buf[64];

int main(void)
{
    size_t total = 0;
    for (int i = 0; i < 3; i++) {
        memset(buf, 'a' + i, 4 + i);
        buf[4 + i] = 0;
        total += strlen(buf);
        puts(buf);
    }
    printf("total=%zu\n", total);
    return 0;
}
