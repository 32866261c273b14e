/* Does a little work, then writes through a NULL pointer. */
#include <stdio.h>

int *volatile target; /* NULL, and the compiler cannot know it */

int main(void)
{
    int sum = 0;
    for (int i = 0; i < 10; i++)
        sum += i;
    printf("before crash: %d\n", sum);
    fflush(stdout);
    *target = sum;
    printf("after crash\n");
    return 0;
}
