/*
 * rusage_run TIMEOUT_S PROG [ARGS...]
 *
 * Runs PROG (stdout on /dev/null, stderr inherited), waits for it with wait4 and prints
 *   RUSAGE <exit code, or -signal> <user µs> <sys µs> <peak RSS KiB> <wall µs>
 * on stdout: the whole process's CPU (every thread) and its ru_maxrss. PROG is killed
 * after TIMEOUT_S seconds. Exits 0 when it could measure (whatever PROG's status), 1 if
 * not.
 *
 * Why a process of its own: Linux carries the RSS high-water mark of the memory a
 * process had before exec() into its ru_maxrss, so a program started straight from a
 * large parent (the benchmark's orchestrator) would report at least the parent's peak.
 * Forked from this small process, the floor is this process's own RSS (well under
 * 1 MiB above libc's).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static volatile pid_t child;

static void on_alarm(int sig) {
    (void)sig;
    if (child > 0)
        kill(child, SIGKILL);
}

static long long us(struct timeval t) { return (long long)t.tv_sec * 1000000 + t.tv_usec; }

int main(int argc, char **argv) {
    if (argc < 3 || atoi(argv[1]) <= 0) {
        fprintf(stderr, "usage: rusage_run TIMEOUT_S PROG [ARGS...]\n");
        return 1;
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    pid_t pid = fork();
    if (pid < 0) {
        perror("rusage_run: fork");
        return 1;
    }
    if (pid == 0) {
        int fd = open("/dev/null", O_WRONLY);
        if (fd >= 0) {
            dup2(fd, 1);
            close(fd);
        }
        execvp(argv[2], argv + 2);
        perror("rusage_run: exec");
        _exit(127);
    }
    child = pid;
    signal(SIGALRM, on_alarm);
    alarm((unsigned)atoi(argv[1]));
    int status;
    struct rusage ru;
    while (wait4(pid, &status, 0, &ru) < 0) {
        if (errno != EINTR) {
            perror("rusage_run: wait4");
            return 1;
        }
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
    long long wall = (t1.tv_sec - t0.tv_sec) * 1000000LL + (t1.tv_nsec - t0.tv_nsec) / 1000;
    printf("RUSAGE %d %lld %lld %ld %lld\n", code, us(ru.ru_utime), us(ru.ru_stime), ru.ru_maxrss,
           wall);
    return 0;
}
