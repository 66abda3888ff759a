/* The floor of CPU per request on this VM: an HTTP "echo" server that does nothing but
 * epoll_wait (edge-triggered), recv and send of a fixed 119-byte answer per request head.
 * Build: gcc -O2 -o epoll_echo epoll_echo.c common.h; run: taskset -c 0 ./epoll_echo PORT;
 * measured beside nginx and weft in bench/results/2026-11-23-bare-epoll-floor.txt. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <sys/socket.h>
static const char RESP[] = "HTTP/1.1 200 OK\r\nServer: weft\r\nDate: Mon, 23 Nov 2026 10:00:00 GMT\r\nContent-Type: text/plain\r\nContent-Length: 4\r\n\r\necho";
static int listener(int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0), one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(fd, (void *)&a, sizeof a) || listen(fd, 4096)) { perror("listen"); exit(1); }
  return fd;
}
/* count complete requests (ends of head) in buf */
static int count_reqs(const char *b, int n) {
  int c = 0;
  for (int i = 3; i < n; i++) if (b[i] == '\n' && b[i-1] == '\r' && b[i-2] == '\n' && b[i-3] == '\r') c++;
  return c;
}
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
