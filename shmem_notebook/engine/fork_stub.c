/* What oshrun starts in a forked PE's place: fork_stub.py in C (shmem_notebook.launcher.stub_program
 * compiles it once per user). A Python stub costs each PE slot about 4 MiB of unique memory and 10-20 ms
 * of CPU to start; this one 0.1 MiB and none to speak of.
 *
 *     fork_stub ADDRESS <engine args>
 *
 * Connects to the job's fork server at ADDRESS ("@name": an abstract socket) and hands it its standard
 * streams and how many words of its command line are its own ("2"); the server reads the rest (the PE's
 * arguments), the environment, the working directory and the cores from /proc, and answers with the PE's
 * pid. The stub then stands for the PE before oshrun: it forwards the signals oshrun sends, and ends as
 * the PE ended (its exit status, or the same signal). Killed, it takes the PE with it (the server kills a
 * PE whose stub's connection closed). */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

static volatile pid_t pe;
static const int forwarded[] = {SIGTERM, SIGINT, SIGHUP, SIGUSR1, SIGUSR2, SIGCONT, SIGQUIT, SIGTSTP};

static void forward(int sig) {
    int saved = errno;
    if (pe > 0) kill(pe, sig); /* it ended: the loop sees it */
    errno = saved;
}

/* /proc/PID/stat read into text, from its third field (the state) on; NULL when the PE is gone. */
static char *stat_of(pid_t pid, char *text, size_t size) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f) return NULL;
    size_t n = fread(text, 1, size - 1, f);
    fclose(f);
    text[n] = 0;
    char *after = strrchr(text, ')'); /* the command's name may hold spaces and parentheses */
    return after && after[1] ? after + 2 : NULL;
}

/* The wait status of the PE, a zombie the server has not reaped yet (field 52). */
static int status_of(pid_t pid) {
    char text[4096], *fields = stat_of(pid, text, sizeof text);
    if (!fields) return 9; /* gone already: as if killed */
    char *field = strtok(fields, " \n"); /* field 3 */
    for (int k = 3; field && k < 52; k++) field = strtok(NULL, " \n");
    return field ? atoi(field) : 9;
}

/* Whether the PE ended (a zombie) or is gone: for kernels without pidfd_open (before Linux 5.3). */
static int ended_yet(pid_t pid) {
    char text[4096], *fields = stat_of(pid, text, sizeof text);
    return !fields || *fields == 'Z' || *fields == 'X';
}

static int fail(const char *what) {
    fprintf(stderr,
            "shmem_notebook: %s (%s); set SHMEM_NOTEBOOK_FORKSERVER=off to start PEs without the job's fork server\n",
            what, strerror(errno));
    return 1;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fputs("usage: fork_stub ADDRESS [engine arguments]\n", stderr);
        return 2;
    }
    const char *address = argv[1];
    size_t n = strlen(address);
    struct sockaddr_un at = {.sun_family = AF_UNIX};
    if (n == 0 || n >= sizeof at.sun_path) {
        errno = ENAMETOOLONG;
        return fail("the fork server's address is empty or too long");
    }
    memcpy(at.sun_path, address, n);
    socklen_t length = offsetof(struct sockaddr_un, sun_path) + n + 1;
    if (address[0] == '@') { /* abstract: no trailing NUL in its length */
        at.sun_path[0] = 0;
        length -= 1;
    }
    int server = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (server < 0 || connect(server, (struct sockaddr *)&at, length) < 0)
        return fail("cannot reach the job's fork server");

    char own[] = "2"; /* this program and ADDRESS: the words of the command line that are not the PE's */
    struct iovec message = {own, 1};
    union {
        char space[CMSG_SPACE(3 * sizeof(int))];
        struct cmsghdr align;
    } control;
    memset(&control, 0, sizeof control);
    struct msghdr m = {.msg_iov = &message, .msg_iovlen = 1, .msg_control = control.space,
                       .msg_controllen = sizeof control.space};
    struct cmsghdr *rights = CMSG_FIRSTHDR(&m);
    rights->cmsg_level = SOL_SOCKET;
    rights->cmsg_type = SCM_RIGHTS;
    rights->cmsg_len = CMSG_LEN(3 * sizeof(int));
    int streams[3] = {0, 1, 2};
    memcpy(CMSG_DATA(rights), streams, sizeof streams);
    if (sendmsg(server, &m, MSG_NOSIGNAL) < 0) return fail("cannot hand the fork server this PE's streams");

    char answer[32] = {0};
    ssize_t got;
    while ((got = recv(server, answer, sizeof answer - 1, 0)) < 0 && errno == EINTR) {
    }
    pe = got > 0 ? (pid_t)atoi(answer) : 0;
    if (pe <= 0) {
        fputs("shmem_notebook: the job's fork server ended before it could start this PE (its error is in the "
              "kernel's log); set SHMEM_NOTEBOOK_FORKSERVER=off to start PEs without it\n",
              stderr);
        return 1;
    }
    struct sigaction passing = {.sa_handler = forward}; /* no SA_RESTART: poll wakes up */
    sigemptyset(&passing.sa_mask);
    for (size_t k = 0; k < sizeof forwarded / sizeof *forwarded; k++) sigaction(forwarded[k], &passing, NULL);

#ifdef FORK_STUB_POLL /* as on a kernel without pidfd_open (the tests build this too) */
    int ended = -1;
#else
    int ended = (int)syscall(SYS_pidfd_open, pe, 0);
#endif
    /* without a pidfd (an old kernel, or the PE gone already) /proc tells, looked at every 50 ms */
    struct pollfd watched[2] = {{.fd = server, .events = POLLIN}, {.fd = ended, .events = POLLIN}};
    for (;;) {
        int ready = poll(watched, ended >= 0 ? 2 : 1, ended >= 0 ? -1 : 50);
        if (ready < 0) {
            if (errno == EINTR) continue;
            break;
        }
        if (ended >= 0 ? watched[1].revents != 0 : ended_yet(pe)) break;
        if (watched[0].revents) {
            char byte;
            ssize_t r = recv(server, &byte, 1, 0);
            if (r < 0 && errno == EINTR) continue;
            if (r <= 0) break; /* the server is gone, and the PE with it */
        }
    }
    int status = status_of(pe);
    send(server, "ended", 5, MSG_NOSIGNAL);
    close(server);
    int sig = status & 0x7F;
    if (sig) { /* killed by a signal: end the same way, without a core file */
        struct rlimit none = {0, 0};
        setrlimit(RLIMIT_CORE, &none);
        signal(sig, SIG_DFL);
        sigset_t only;
        sigemptyset(&only);
        sigaddset(&only, sig);
        sigprocmask(SIG_UNBLOCK, &only, NULL);
        kill(getpid(), sig);
    }
    _exit((status >> 8) & 0xFF);
}
