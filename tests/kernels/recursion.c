/* Recursion over a linked list of N elements (N from the command line). */
#include <stdio.h>
#include <stdlib.h>

struct node {
    long v;
    struct node *next;
};

__attribute__((noinline)) static long sum(const struct node *p)
{
    if (!p)
        return 0;
    return p->v + sum(p->next); /* RECURSE */
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 32;
    struct node *nodes = calloc(n, sizeof *nodes);
    for (int i = 0; i < n; i++) {
        nodes[i].v = i;
        nodes[i].next = i + 1 < n ? &nodes[i + 1] : NULL;
    }
    printf("%ld\n", sum(nodes));
    free(nodes);
    return 0;
}
