/*
 * The floor under weft's CPU per request: a bare epoll loop in C that answers every request
 * head it receives with the bytes weft's /echo sends (the same length: a fixed Date), and does
 * nothing else: no parsing beyond finding each head's end, no timers, no limits, no logging.
 * One thread, edge-triggered, one recv until a short read, one send per request (a pipelined
 * batch: one send per head, as a server without batching would).
 *
 * It takes weft's command line so that scripts/perf/ab_builds.sh can run it as one more "build"
 * beside weft and nginx, in the same rounds:
 *
 *   cc -O2 -o /tmp/epoll_floor scripts/floors/epoll_floor.c
 *   scripts/perf/ab_builds.sh /tmp/floor.csv 7 50 /echo target/release/weft /tmp/epoll_floor
 *
 * Only `--listen 127.0.0.1:PORT[=model]` is read; every other argument is ignored. It is a
 * measuring instrument, not a server: it never closes an idle connection and trusts its client.
 *
 * FLOOR_SPIN_US=N (default 0: the loop above, unchanged): when a look finds nothing ready, keep
 * looking without blocking (epoll_wait with a zero timeout) for up to N microseconds before a
 * blocking wait: what polling a little before sleeping would save or cost a server that is
 * idle now and then (BENCHMARKS.md, "Two kernel-side levers ruled out").
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#include "floor.h"

static long long now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000LL + t.tv_nsec;
}

int main(int argc, char **argv) {
    int one = 1;
    int lfd = floor_listen("epoll_floor", argc, argv, SOCK_NONBLOCK);
    int ep = epoll_create1(0);
    struct epoll_event lev = {.events = EPOLLIN, .data.fd = lfd};
    epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &lev);
    struct epoll_event events[512];
    char buf[16384];
    const char *spin_env = getenv("FLOOR_SPIN_US");
    long long spin_ns = spin_env ? atoll(spin_env) * 1000 : 0;
    for (;;) {
        int n = epoll_wait(ep, events, 512, spin_ns > 0 ? 0 : -1);
        if (n == 0 && spin_ns > 0) {
            long long end = now_ns() + spin_ns;
            while (n == 0 && now_ns() < end) {
                n = epoll_wait(ep, events, 512, 0);
            }
            if (n == 0) {
                n = epoll_wait(ep, events, 512, -1);
            }
        }
        if (n < 0 && errno != EINTR) {
            perror("epoll_floor: epoll_wait");
            return 1;
        }
        for (int i = 0; i < n; i++) {
            int fd = events[i].data.fd;
            if (fd == lfd) {
                int c;
                while ((c = accept4(lfd, NULL, NULL, SOCK_NONBLOCK)) >= 0) {
                    setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
                    struct epoll_event cev = {.events = EPOLLIN | EPOLLRDHUP | EPOLLET, .data.fd = c};
                    epoll_ctl(ep, EPOLL_CTL_ADD, c, &cev);
                }
                continue;
            }
            for (;;) {
                ssize_t r = recv(fd, buf, sizeof buf, 0);
                if (r <= 0) {
                    if (r == 0 || (errno != EAGAIN && errno != EINTR)) {
                        close(fd);
                    }
                    break;
                }
                for (ssize_t k = 3; k < r; k++) {
                    if (head_ends_at(buf, k)) {
                        send(fd, RESPONSE, sizeof RESPONSE - 1, MSG_NOSIGNAL);
                    }
                }
                if ((size_t)r < sizeof buf) {
                    break;
                }
            }
        }
    }
}
