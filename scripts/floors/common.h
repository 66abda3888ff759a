/* Shared by epoll_echo.c and uring_echo.c: the fixed answer, the listener, the request count. */
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
