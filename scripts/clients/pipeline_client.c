/*
 * A lean pipelined load client: CONNS keep-alive connections, each sending DEPTH identical
 * GET requests in one write and the next batch as soon as the last answer of the previous one
 * is in. One thread, epoll; it parses just enough of each answer to find where it ends (the
 * status line, the end of the head, Content-Length) and counts it.
 *
 * Why: on a 2-core machine `wrk -s scripts/clients/pipeline.lua` spends more CPU per pipelined answer
 * than weft or may_minihttp do per request, so with the server on one core and wrk on the other
 * the request rate is wrk's (scripts/peers/rust_peers.sh marks such tests client-bound). This client
 * spends about 0.7x of that (its user time per answer about half wrk's), so the server's core is
 * the limit and requests/s compares servers.
 * It sends the bytes wrk's default request has (`GET PATH HTTP/1.1` and `Host: HOST:PORT`).
 *
 *   cc -O2 -o /tmp/pipeline_client scripts/clients/pipeline_client.c
 *   /tmp/pipeline_client 127.0.0.1:18401 /plaintext 256 16 3
 *
 * Prints wrk's summary lines that scripts read (`N requests in S.SSs`, `Requests/sec: R`,
 * `Non-2xx or 3xx responses: N`). An answer it cannot frame (no status line, chunked, no
 * Content-Length, a head over its buffer) or a closed connection ends the run with an error
 * and exit status 1: it is a measuring instrument, not a general client.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define BUF (64 * 1024)

struct conn {
    int fd;
    int pending;     /* answers still due for the batch in flight */
    size_t sent;     /* bytes of the batch written so far */
    size_t have;     /* bytes in buf */
    char buf[BUF];
};

static char *batch;
static size_t batch_len;
static int depth;
static unsigned long done, non2xx;

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static void fail(const char *what) {
    fprintf(stderr, "pipeline_client: %s\n", what);
    exit(1);
}

/* Writes what is left of the batch; false on an error. */
static int send_batch(struct conn *c) {
    while (c->sent < batch_len) {
        ssize_t w = send(c->fd, batch + c->sent, batch_len - c->sent, MSG_NOSIGNAL);
        if (w < 0) {
            return errno == EAGAIN;
        }
        c->sent += (size_t)w;
    }
    return 1;
}

/* The value of Content-Length in head [h, end), or -1. */
static long content_length(const char *h, const char *end) {
    const char *line = memchr(h, '\n', (size_t)(end - h));
    while (line && line + 1 < end) {
        line++;
        if ((size_t)(end - line) > 15 && (line[0] | 0x20) == 'c' &&
            strncasecmp(line, "content-length:", 15) == 0) {
            const char *p = line + 15;
            while (*p == ' ' || *p == '\t') {
                p++;
            }
            if (*p < '0' || *p > '9') {
                return -1;
            }
            return strtol(p, NULL, 10);
        }
        if ((size_t)(end - line) > 18 && (line[0] | 0x20) == 't' &&
            strncasecmp(line, "transfer-encoding:", 18) == 0) {
            fail("a chunked answer (this client needs Content-Length)");
        }
        line = memchr(line, '\n', (size_t)(end - line));
    }
    return -1;
}

/* Counts the complete answers at the start of c->buf and keeps the rest. */
static void consume(struct conn *c) {
    size_t at = 0;
    while (c->have - at >= 12) {
        const char *r = c->buf + at;
        size_t left = c->have - at;
        if (memcmp(r, "HTTP/1.", 7) != 0) {
            fail("an answer without a status line");
        }
        const char *end = memmem(r, left, "\r\n\r\n", 4);
        if (!end) {
            if (left == BUF) {
                fail("an answer head over the buffer");
            }
            break;
        }
        end += 4;
        long len = content_length(r, end);
        if (len < 0) {
            fail("an answer without Content-Length");
        }
        size_t total = (size_t)(end - r) + (size_t)len;
        if (total > BUF) {
            fail("an answer over the buffer");
        }
        if (total > left) {
            break;
        }
        if (r[9] != '2') {
            non2xx++;
        }
        done++;
        c->pending--;
        at += total;
    }
    if (at) {
        memmove(c->buf, c->buf + at, c->have - at);
        c->have -= at;
    }
}

int main(int argc, char **argv) {
    if (argc != 6) {
        fprintf(stderr, "usage: pipeline_client HOST:PORT PATH CONNS DEPTH SECONDS\n");
        return 2;
    }
    char host[256];
    snprintf(host, sizeof host, "%s", argv[1]);
    char *colon = strrchr(host, ':');
    if (!colon) {
        fail("HOST:PORT expected");
    }
    *colon = 0;
    int port = atoi(colon + 1), conns = atoi(argv[3]);
    depth = atoi(argv[4]);
    double seconds = atof(argv[5]);
    if (port <= 0 || conns <= 0 || depth <= 0 || seconds <= 0) {
        fail("PORT, CONNS, DEPTH and SECONDS must be positive");
    }
    char one[512];
    int n = snprintf(one, sizeof one, "GET %s HTTP/1.1\r\nHost: %s\r\n\r\n", argv[2], argv[1]);
    if (n <= 0 || (size_t)n >= sizeof one) {
        fail("PATH too long");
    }
    batch_len = (size_t)n * (size_t)depth;
    batch = malloc(batch_len);
    for (int i = 0; i < depth; i++) {
        memcpy(batch + (size_t)i * (size_t)n, one, (size_t)n);
    }
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons(port)};
    if (inet_pton(AF_INET, host, &addr.sin_addr) != 1) {
        fail("HOST must be an IPv4 address");
    }
    int ep = epoll_create1(0);
    struct conn *cs = calloc((size_t)conns, sizeof *cs);
    if (!cs) {
        fail("out of memory");
    }
    int one_flag = 1;
    double start = now();
    for (int i = 0; i < conns; i++) {
        struct conn *c = &cs[i];
        c->fd = socket(AF_INET, SOCK_STREAM, 0);
        if (c->fd < 0 || connect(c->fd, (struct sockaddr *)&addr, sizeof addr) != 0) {
            perror("pipeline_client: connect");
            return 1;
        }
        setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one_flag, sizeof one_flag);
        if (fcntl(c->fd, F_SETFL, fcntl(c->fd, F_GETFL) | O_NONBLOCK) != 0) {
            fail("fcntl");
        }
        struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT | EPOLLET, .data.ptr = c};
        epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &ev);
        c->pending = depth;
        if (!send_batch(c)) {
            fail("send");
        }
    }
    struct epoll_event events[512];
    double end = start + seconds, t = start;
    unsigned long polls = 0;
    while (t < end) {
        int k = epoll_wait(ep, events, 512, 100);
        if (k < 0 && errno != EINTR) {
            fail("epoll_wait");
        }
        for (int i = 0; i < k; i++) {
            struct conn *c = events[i].data.ptr;
            if (c->sent < batch_len && !send_batch(c)) {
                fail("send");
            }
            for (;;) {
                size_t room = BUF - c->have;
                ssize_t r = recv(c->fd, c->buf + c->have, room, 0);
                if (r == 0) {
                    fail("the server closed a connection");
                }
                if (r < 0) {
                    if (errno == EAGAIN) {
                        break;
                    }
                    fail("recv");
                }
                c->have += (size_t)r;
                consume(c);
                if (c->pending == 0) {
                    c->pending = depth;
                    c->sent = 0;
                    if (!send_batch(c)) {
                        fail("send");
                    }
                }
                if ((size_t)r < room) {
                    /* A short read: drained for now; the next bytes bring a new edge. */
                    break;
                }
            }
        }
        /* The clock once per 16 polls: a poll returns in microseconds under load. */
        if ((++polls & 15) == 0 || k == 0) {
            t = now();
        }
    }
    double secs = now() - start;
    printf("  %lu requests in %.2fs\n", done, secs);
    if (non2xx) {
        printf("  Non-2xx or 3xx responses: %lu\n", non2xx);
    }
    printf("Requests/sec: %.2f\n", done / secs);
    return 0;
}
