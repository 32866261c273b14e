/* Bytes read from a file are produced by the read() call; bytes copied with memcpy by the memcpy
   call, which consumes the source's producers. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    int n = argc > 2 ? atoi(argv[2]) : 32;
    char *buf = malloc(n), *src = malloc(n), *dst = malloc(n);
    for (int i = 0; i < n; i++)
        buf[i] = (char)i; /* FILL_BUF */
    for (int i = 0; i < n; i++)
        src[i] = (char)(3 * i); /* FILL_SRC */
    int fd = open(argv[1], O_RDONLY);
    if (fd < 0 || read(fd, buf, n) != n) /* CALL_READ */
        return 1;
    close(fd);
    memcpy(dst, src, n); /* CALL_MEMCPY */
    int s = 0;
    for (int i = 0; i < n; i++)
        s += buf[i]; /* READ_BUF */
    for (int i = 0; i < n; i++)
        s += dst[i]; /* READ_DST */
    printf("%d\n", s);
    return 0;
}
