/* A few thousand instructions of arithmetic, then one line of output. */
#include <stdio.h>

int main(int argc, char **argv)
{
    (void)argv;
    unsigned long h = 5381 + (unsigned long)argc;
    for (int i = 0; i < 1000; i++)
        h = h * 33 + (unsigned long)i;
    printf("h=%lu\n", h);
    return 0;
}
