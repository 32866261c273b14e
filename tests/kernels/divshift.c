/* Division, remainder and shifts of every width, signed and unsigned, with counts from data
   (including 0 and counts past the width, which the C code masks). */
#include <stdio.h>

volatile long long seeds[] = {1, -1, -7, 123456789, 0x7fffffffffffffffLL,
                              -0x7fffffffffffffffLL - 1, 255, 65535};

int main(void)
{
    unsigned long long h = 0;
    int n = sizeof seeds / sizeof seeds[0];
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < n; j++) {
            long long x = seeds[i], y = seeds[j];
            if (y != 0 && !(y == -1 && x == (-0x7fffffffffffffffLL - 1))) {
                h = h * 31 + (unsigned long long)(x / y);
                h = h * 31 + (unsigned long long)(x % y);
            }
            unsigned long long ux = (unsigned long long)x, uy = (unsigned long long)y;
            if (uy)
                h = h * 31 + ux / uy + ux % uy;
            int ix = (int)x, iy = (int)y;
            if (iy != 0 && !(iy == -1 && ix == (-0x7fffffff - 1)))
                h = h * 31 + (unsigned)(ix / iy) + (unsigned)(ix % iy);
            unsigned ux32 = (unsigned)x, uy32 = (unsigned)y;
            if (uy32)
                h = h * 31 + ux32 / uy32 + ux32 % uy32;
            short sx = (short)x, sy = (short)y;
            if (sy)
                h = h * 31 + (unsigned short)(sx / sy);
            unsigned char cx = (unsigned char)x, cy = (unsigned char)y;
            if (cy)
                h = h * 31 + cx / cy + cx % cy;
            int c = (int)(uy & 63);
            h = h * 31 + (ux << c) + (ux >> c) + (unsigned long long)(x >> c);
            h = h * 31 + (unsigned)(ux32 << (c & 31)) + (ux32 >> (c & 31)) + (unsigned)(ix >> (c & 31));
            h = h * 31 + ((ux << c) | (ux >> ((64 - c) & 63)));
            h = h * 31 + (unsigned short)(sx >> (c & 15)) + (unsigned char)(cx << (c & 7));
            h ^= h >> 17;
        }
    }
    printf("h=%llx\n", h);
    return 0;
}
