/* Force-included (gcc -include) in the -fopenmp builds of phase 2 of the Rodinia audit
 * (scripts/rodinia-audit/audit.py): the compiler's own omp.h, then omp_set_num_threads()
 * made a no-op, so that every parallel region runs with OMP_NUM_THREADS threads. The
 * programs set their thread count themselves, from an argument (1 in this audit) or from a
 * constant (backprop's NUM_THREAD, 8); the audit runs each variant with 2 threads. */
#include <omp.h>
#define omp_set_num_threads(n) ((void)(n))
