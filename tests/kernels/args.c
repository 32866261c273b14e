/* Prints argc and each argument between brackets. */
#include <stdio.h>

int main(int argc, char **argv)
{
    printf("argc=%d\n", argc);
    for (int i = 1; i < argc; i++)
        printf("[%s]\n", argv[i]);
    return 0;
}
