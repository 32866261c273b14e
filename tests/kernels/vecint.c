/* Integer loops that gcc vectorizes with SSE2 at -O3: add, multiply, compare-select, sums,
   shifts, narrowing and widening. */
#include <stdio.h>

#define N 64
int a[N], b[N], c[N];
short s[N];
unsigned char bytes[N];
long long wide[N];

int main(void)
{
    for (int i = 0; i < N; i++) {
        a[i] = i * 37 - 1000;
        b[i] = (i * 13) % 29 - 14;
        bytes[i] = (unsigned char)(i * 7);
    }
    for (int i = 0; i < N; i++)
        c[i] = a[i] + 3 * b[i];
    for (int i = 0; i < N; i++)
        c[i] = c[i] > b[i] ? c[i] : b[i];
    for (int i = 0; i < N; i++)
        s[i] = (short)(c[i] >> 2);
    for (int i = 0; i < N; i++)
        wide[i] = (long long)a[i] * b[i];
    for (int i = 0; i < N; i++)
        c[i] = (a[i] ^ b[i]) & 0x0ff0;
    unsigned sum = 0, bsum = 0;
    long long wsum = 0;
    int eq = 0;
    for (int i = 0; i < N; i++) {
        sum += (unsigned)c[i] << 1;
        bsum += bytes[i];
        wsum += wide[i];
        eq += a[i] == b[i] * 37;
    }
    int mx = s[0];
    for (int i = 0; i < N; i++)
        mx = s[i] > mx ? s[i] : mx;
    printf("sum=%u bsum=%u wsum=%lld eq=%d mx=%d\n", sum, bsum, wsum, eq, mx);
    return 0;
}
