/* Calls every string and memory function the emulate engine performs itself, on strings that
   cross a page boundary, plus an overlapping memcpy (left to the native one) and a copy too
   big to emulate (compile with -fno-builtin so they stay calls). */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char page[3 * 4096] __attribute__((aligned(4096)));

int main(void)
{
    char *edge = page + 4096 - 5; /* a string across the first page boundary */
    strcpy(edge, "0123456789");
    long sum = (long)strlen(edge) + (long)strnlen(edge, 4) + (long)strnlen(edge, 100);
    char *c = strchr(edge, '7');
    sum += c ? c - edge : -1;
    sum += strchr(edge, 'x') == NULL;
    sum += strchr(edge, 0) - edge;
    char *m = memchr(edge, '8', 10);
    sum += m ? m - edge : -1;
    sum += memchr(edge, 'x', 10) == NULL;
    sum += (char *)rawmemchr(edge, '9') - edge;
    char *r = memrchr(edge, '3', 10);
    sum += r ? r - edge : -1;
    sum += memrchr(edge, 'x', 10) == NULL;
    char *rr = strrchr(edge, '5');
    sum += rr ? rr - edge : -1;
    sum += strrchr(edge, 'x') == NULL;
    sum += strrchr(edge, 0) - edge;
    sum += strspn(edge, "0123") + 10 * strcspn(edge, "56") + 100 * strspn(edge, "");
    char *b = strpbrk(edge, "9x8");
    sum += b ? b - edge : -1;
    sum += strpbrk(edge, "xyz") == NULL;
    char *t = strstr(edge, "4567");
    sum += t ? t - edge : -1;
    sum += strstr(edge, "46") == NULL;
    sum += strstr(edge, "") - edge;
    char dst[32];
    memset(dst, 'z', sizeof dst);
    char *end = stpcpy(dst, edge);
    sum += end - dst;
    memcpy(dst + 12, dst, 5);
    memmove(dst + 2, dst, 10);
    char *p = mempcpy(dst, "abc", 3);
    sum += p - dst;
    memcpy(page + 4100, page + 4096 - 5, 8); /* overlapping: run natively */
    char *big = malloc(200000);
    memset(big, 1, 200000); /* too big: run natively */
    memcpy(big + 100000, big, 90000);
    for (int i = 0; i < 200000; i += 997)
        sum += big[i];
    free(big);
    printf("%ld %.12s %.8s\n", sum, dst, page + 4100);
    return 0;
}
