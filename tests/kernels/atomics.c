/* Differential test: atomic read-modify-writes in a program with one thread (lock xadd, lock
 * add, lock cmpxchg, xchg with memory, lock or), which the emulate engine does as plain ones,
 * and library code that uses them (rand's lock) or double shifts (strtod). */
#include <stdio.h>
#include <stdlib.h>

static long counter;
static int flag;
static long arr[16];

int main(void)
{
    long t = 0;
    for (int i = 0; i < 200; i++) {
        t += __atomic_fetch_add(&counter, i, __ATOMIC_SEQ_CST);
        __atomic_add_fetch(&arr[i & 15], 3, __ATOMIC_RELAXED);
        int expected = i & 1;
        t += __atomic_compare_exchange_n(&flag, &expected, !expected, 0, __ATOMIC_SEQ_CST,
                                         __ATOMIC_SEQ_CST);
        t += __atomic_exchange_n(&arr[(i * 7) & 15], i, __ATOMIC_SEQ_CST);
        __atomic_fetch_or(&arr[3], 1L << (i & 31), __ATOMIC_SEQ_CST);
        t += rand() & 7;
        t += (long)(strtod("12.5e3", NULL) / 100);
    }
    printf("%ld %ld %d %ld\n", t, counter, flag, arr[3]);
    return 0;
}
