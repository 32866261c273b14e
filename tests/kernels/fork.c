/* Forks a child that prints a line; the parent waits for it and prints its status. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

int main(void)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0)
        return 1;
    if (pid == 0) {
        int s = 0;
        for (int i = 1; i <= 10; i++)
            s += i;
        printf("child: %d\n", s);
        fflush(stdout);
        _exit(3);
    }
    int status = 0;
    if (waitpid(pid, &status, 0) != pid)
        return 1;
    printf("parent: child exited with %d\n", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    return 0;
}
