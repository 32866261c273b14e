/* REP string instructions: rep stosq (5 quadwords), rep movsb (7 bytes), rep stosq (count 0). */
#include <stdio.h>

unsigned long qwords[8];
char src[16] = "abcdefghijklmno";
char dst[16];

int main(void)
{
    unsigned long n = 5;
    void *d = qwords;
    __asm__ volatile("rep stosq" : "+D"(d), "+c"(n) : "a"(0x1122334455667788UL) : "memory");
    const void *s = src;
    n = 7;
    d = dst;
    __asm__ volatile("rep movsb" : "+D"(d), "+S"(s), "+c"(n) : : "memory");
    n = 0;
    d = qwords;
    __asm__ volatile("rep stosq" : "+D"(d), "+c"(n) : "a"(0UL) : "memory");
    printf("%lx %lx %s\n", qwords[4], qwords[5], dst);
    return 0;
}
