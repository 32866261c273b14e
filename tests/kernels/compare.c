/* Signed and unsigned compares of every width feeding branches, setcc and cmov: min, max,
   abs, clamps, sign tests, counts. */
#include <stdio.h>

volatile long long vals[] = {0, -1, 2, -128, 255, 32767, -32768, 0x7fffffff, 0xffffffffLL,
                             -0x7fffffffffffffffLL - 1};

static long long clamp(long long x, long long lo, long long hi)
{
    return x < lo ? lo : x > hi ? hi : x;
}

int main(void)
{
    int n = sizeof vals / sizeof vals[0];
    long long acc = 0;
    unsigned counts[8] = {0};
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < n; j++) {
            long long x = vals[i], y = vals[j];
            unsigned long long ux = x, uy = y;
            int ix = (int)x, iy = (int)y;
            unsigned uix = ix, uiy = iy;
            signed char cx = (signed char)x, cy = (signed char)y;
            unsigned char ucx = cx, ucy = cy;
            short sx = (short)x, sy = (short)y;
            counts[0] += x < y;
            counts[1] += ux < uy;
            counts[2] += ix <= iy;
            counts[3] += uix >= uiy;
            counts[4] += cx > cy;
            counts[5] += ucx > ucy;
            counts[6] += sx == sy;
            counts[7] += (unsigned short)sx < (unsigned short)sy;
            acc += x < y ? x : y;
            acc ^= ux > uy ? (long long)ux : (long long)uy;
            acc += ix < 0 ? -ix : ix;
            acc += clamp(x, -1000, 1000);
            if ((x ^ y) < 0)
                acc += 3;
            else if (x == y)
                acc -= 5;
        }
    }
    for (int k = 0; k < 8; k++)
        printf("%u ", counts[k]);
    printf("acc=%lld\n", acc);
    return 0;
}
