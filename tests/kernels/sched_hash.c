/* A hash table with chains: addresses depend on data. */
#include <stdio.h>
struct node { int key; int val; struct node *next; };
struct node *buckets[64];
struct node pool[1500];
int main(void) {
  unsigned x = 12345;
  for (int i = 0; i < 1500; i++) {
    x = x * 1103515245u + 12345u;
    int k = (x >> 8) % 5000;
    struct node *n = &pool[i];
    n->key = k;
    n->val = i;
    unsigned h = (k * 2654435761u) >> 26;
    n->next = buckets[h];
    buckets[h] = n;
  }
  long s = 0;
  for (int q = 0; q < 2000; q++) {
    int k = (q * 7) % 5000;
    unsigned h = (k * 2654435761u) >> 26;
    for (struct node *n = buckets[h]; n; n = n->next) /* CHAIN */
      if (n->key == k) {
        s += n->val;
        break;
      }
  }
  printf("%ld\n", s);
  return 0;
}
