/* Initialisation by modulo, a CRC table built bit by bit, then lookups in it. */
#include <stdint.h>
#include <stdio.h>
int a[3000];
uint32_t table[256];
int main(void) {
  for (int i = 0; i < 3000; i++) a[i] = i % 7; /* MODULO */
  for (uint32_t i = 0; i < 256; i++) { /* CRC_TABLE */
    uint32_t c = i;
    for (int k = 0; k < 8; k++) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
    table[i] = c;
  }
  long s = 0;
  for (int i = 0; i < 3000; i++) s += a[i];
  uint32_t crc = 0xffffffff;
  const char *text = "hello world, polyprof";
  for (int r = 0; r < 20; r++)
    for (const char *p = text; *p; p++) crc = table[(crc ^ (uint8_t)*p) & 0xff] ^ (crc >> 8);
  printf("%ld %08x\n", s, crc ^ 0xffffffff);
  return 0;
}
