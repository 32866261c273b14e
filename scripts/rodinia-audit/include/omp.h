/* Stub omp.h for the serial builds of the Rodinia audit (scripts/rodinia-audit/audit.py):
 * the programs are compiled without -fopenmp, their pragmas are ignored, and the OpenMP
 * runtime calls they make answer as a team of one thread would. Not used by the -fopenmp
 * builds of phase 2, which get the compiler's own omp.h. */
#ifndef RODINIA_AUDIT_OMP_STUB_H
#define RODINIA_AUDIT_OMP_STUB_H
#include <time.h>

static inline int omp_get_num_threads(void) { return 1; }
static inline int omp_get_max_threads(void) { return 1; }
static inline int omp_get_thread_num(void) { return 0; }
static inline int omp_get_num_procs(void) { return 1; }
static inline int omp_in_parallel(void) { return 0; }
static inline void omp_set_num_threads(int n) { (void)n; }
static inline void omp_set_dynamic(int n) { (void)n; }
static inline int omp_get_dynamic(void) { return 0; }
static inline double omp_get_wtime(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}
static inline double omp_get_wtick(void) { return 1e-9; }

#endif
