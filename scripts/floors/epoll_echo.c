/* The floor of CPU per request on this VM: an HTTP "echo" server that does nothing but
 * epoll_wait (edge-triggered), recv and send of a fixed 119-byte answer per request head.
 * Build: gcc -O2 -o epoll_echo epoll_echo.c; run: taskset -c 0 ./epoll_echo PORT;
 * measured beside nginx and weft in bench/results/2026-11-23-bare-epoll-floor.txt. */
#include "common.h"
#include <sys/epoll.h>
int main(int argc, char **argv) {
  int lfd = listener(atoi(argv[1])), ep = epoll_create1(0);
  struct epoll_event ev = {.events = EPOLLIN, .data.fd = lfd}, evs[512];
  epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev);
  char buf[4096];
  for (;;) {
    int n = epoll_wait(ep, evs, 512, -1);
    for (int i = 0; i < n; i++) {
      int fd = evs[i].data.fd;
      if (fd == lfd) {
        int c;
        while ((c = accept4(lfd, NULL, NULL, SOCK_NONBLOCK)) >= 0) {
          struct epoll_event e = {.events = EPOLLIN | EPOLLRDHUP | EPOLLET, .data.fd = c};
          epoll_ctl(ep, EPOLL_CTL_ADD, c, &e);
        }
        continue;
      }
      for (;;) {
        ssize_t r = recv(fd, buf, sizeof buf, 0);
        if (r <= 0) { if (r == 0 || errno != EAGAIN) close(fd); break; }
        int k = count_reqs(buf, r);
        for (int j = 0; j < k; j++) send(fd, RESP, sizeof RESP - 1, MSG_NOSIGNAL);
        if (r < (ssize_t)sizeof buf) break;
      }
    }
  }
}
