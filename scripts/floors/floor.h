/*
 * What the floors share (scripts/floors/epoll_floor.c, scripts/floors/uring_floor.c): the bytes they answer
 * every request head with (weft's /echo response, with a fixed Date), weft's command line read
 * for the port, the listening socket, and where a head ends. Measuring instruments: they trust
 * their client.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

static const char RESPONSE[] = "HTTP/1.1 200 OK\r\nServer: weft\r\n"
                               "Date: Fri, 27 Nov 2026 13:07:15 GMT\r\n"
                               "Content-Type: text/plain\r\nContent-Length: 4\r\n\r\necho";

/* The port of `--listen HOST:PORT[=model]`, or -1. */
static int listen_port(int argc, char **argv) {
    for (int i = 1; i + 1 < argc; i++) {
        if (strcmp(argv[i], "--listen") == 0) {
            const char *colon = strrchr(argv[i + 1], ':');
            return colon ? atoi(colon + 1) : -1;
        }
    }
    return -1;
}

/* A socket listening on 127.0.0.1 at the port of weft's command line (`flags` go to socket(2),
 * e.g. SOCK_NONBLOCK); on a missing port or a failure, says so as NAME and exits. */
static int floor_listen(const char *name, int argc, char **argv, int flags) {
    int port = listen_port(argc, argv);
    if (port <= 0) {
        fprintf(stderr, "usage: %s [serve ...] --listen 127.0.0.1:PORT[=model]\n", name);
        exit(2);
    }
    int one = 1;
    int lfd = socket(AF_INET, SOCK_STREAM | flags, 0);
    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons(port)};
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(lfd, (struct sockaddr *)&addr, sizeof addr) != 0 || listen(lfd, 4096) != 0) {
        fprintf(stderr, "%s: bind/listen: ", name);
        perror(NULL);
        exit(1);
    }
    fprintf(stderr, "%s: listening on 127.0.0.1:%d\n", name, port);
    return lfd;
}

/* True if a request head ends at buf[k] (CRLF CRLF; k >= 3). A client of a floor sends no
 * bodies and never splits a head across reads at these sizes. */
static inline int head_ends_at(const char *buf, long k) {
    return buf[k] == '\n' && buf[k - 1] == '\r' && buf[k - 2] == '\n' && buf[k - 3] == '\r';
}
