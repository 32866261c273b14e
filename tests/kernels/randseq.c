/* Harness of the randomized instruction-level differential test (compile with -fno-builtin so
   the copies stay library calls). The sequences come from a generated assembly file linked in:
   `nseq` functions in `seq_table`, each taking a page-aligned scratch buffer that starts as a
   copy of `seq_pattern`; each sequence stores its final registers at offset 8192. After each
   sequence the harness writes the whole buffer to stdout. */
#include <stdio.h>
#include <string.h>

#define SCRATCH (3 * 4096)
extern const int nseq;
extern void (*const seq_table[])(unsigned char *);
extern const unsigned char seq_pattern[SCRATCH];
static unsigned char scratch[SCRATCH] __attribute__((aligned(4096)));

int main(void)
{
    for (int s = 0; s < nseq; s++) {
        memcpy(scratch, seq_pattern, SCRATCH);
        seq_table[s](scratch);
        fwrite(scratch, 1, SCRATCH, stdout);
    }
    return 0;
}
