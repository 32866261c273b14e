/* Four threads each sum a slice of 0..399; main joins them and prints the total. */
#include <pthread.h>
#include <stdio.h>

#define T 4
#define PER 100

static long partial[T];

static void *work(void *arg)
{
    long t = (long)arg, s = 0;
    for (long i = t * PER; i < (t + 1) * PER; i++)
        s += i;
    partial[t] = s;
    return NULL;
}

int main(void)
{
    pthread_t th[T];
    for (long t = 0; t < T; t++)
        if (pthread_create(&th[t], NULL, work, (void *)t) != 0)
            return 1;
    long total = 0;
    for (int t = 0; t < T; t++) {
        pthread_join(th[t], NULL);
        total += partial[t];
    }
    printf("total=%ld\n", total);
    return 0;
}
