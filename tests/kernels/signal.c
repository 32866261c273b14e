/* A SIGUSR1 handler with a small loop, raised twice. */
#include <signal.h>
#include <stdio.h>
#include <unistd.h>

volatile int counter;

void on_usr1(int sig)
{
    for (int i = 0; i < 10; i++)
        counter += (sig == SIGUSR1) ? 1 : 100;
}

int main(void)
{
    struct sigaction sa = {0};
    sa.sa_handler = on_usr1;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGUSR1, &sa, NULL) != 0)
        return 1;
    raise(SIGUSR1);
    kill(getpid(), SIGUSR1);
    printf("counter=%d\n", counter);
    return 0;
}
