/*
 * The floor under weft's CPU per request on io_uring: the bytes scripts/floors/epoll_floor.c answers,
 * with the same trust in its client, but every socket operation a submission to one ring
 * (Linux 6.1 or later, liburing 2.3 or later): a multishot accept, a multishot recv per
 * connection into a ring of provided buffers (armed once, not per request), and one send per
 * request head whose successful completion posts nothing. The loop makes one io_uring_enter
 * per turn, which submits the turn's sends and waits for the next completions: where the epoll
 * floor pays an epoll_wait, a recv and a send per request, this pays one system call per turn.
 * It measures what a reactor on io_uring could save; it is not a server.
 *
 *   apt-get install liburing-dev
 *   cc -O2 -o /tmp/uring_floor scripts/floors/uring_floor.c -luring
 *   scripts/perf/ab_builds.sh /tmp/floor.csv 7 50 /echo /tmp/epoll_floor /tmp/uring_floor
 *
 * Only `--listen 127.0.0.1:PORT[=model]` is read, as in the epoll floor.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <liburing.h>
#include <netinet/tcp.h>
#include <sys/mman.h>
#include <unistd.h>

#include "floor.h"

enum { ACCEPT = 1, RECV = 2 };
#define BUFS 4096
#define BUF_SIZE 2048
#define GROUP 0

static struct io_uring ring;
static struct io_uring_buf_ring *br;
static char *bufs;

static struct io_uring_sqe *sqe(void) {
    struct io_uring_sqe *s = io_uring_get_sqe(&ring);
    if (!s) {
        io_uring_submit(&ring);
        s = io_uring_get_sqe(&ring);
    }
    return s;
}

static void arm_recv(int fd) {
    struct io_uring_sqe *s = sqe();
    io_uring_prep_recv_multishot(s, fd, NULL, 0, 0);
    s->flags |= IOSQE_BUFFER_SELECT;
    s->buf_group = GROUP;
    io_uring_sqe_set_data64(s, ((unsigned long long)RECV << 32) | (unsigned)fd);
}

int main(int argc, char **argv) {
    int one = 1;
    int lfd = floor_listen("uring_floor", argc, argv, 0);
    struct io_uring_params p = {0};
    p.flags = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN | IORING_SETUP_COOP_TASKRUN;
    p.flags |= IORING_SETUP_CQSIZE;
    p.cq_entries = 16384;
    int rc = io_uring_queue_init_params(2048, &ring, &p);
    if (rc < 0) {
        fprintf(stderr, "uring_floor: io_uring_queue_init: %s\n", strerror(-rc));
        return 1;
    }
    size_t ring_bytes = BUFS * sizeof(struct io_uring_buf);
    br = mmap(NULL, ring_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    bufs = malloc((size_t)BUFS * BUF_SIZE);
    struct io_uring_buf_reg reg = {.ring_addr = (unsigned long)br, .ring_entries = BUFS, .bgid = GROUP};
    rc = io_uring_register_buf_ring(&ring, &reg, 0);
    if (rc < 0) {
        fprintf(stderr, "uring_floor: register_buf_ring: %s\n", strerror(-rc));
        return 1;
    }
    io_uring_buf_ring_init(br);
    for (int i = 0; i < BUFS; i++) {
        io_uring_buf_ring_add(br, bufs + (size_t)i * BUF_SIZE, BUF_SIZE, i, io_uring_buf_ring_mask(BUFS), i);
    }
    io_uring_buf_ring_advance(br, BUFS);

    struct io_uring_sqe *s = sqe();
    io_uring_prep_multishot_accept(s, lfd, NULL, NULL, 0);
    io_uring_sqe_set_data64(s, (unsigned long long)ACCEPT << 32);

    for (;;) {
        rc = io_uring_submit_and_wait(&ring, 1);
        if (rc < 0 && rc != -EINTR && rc != -EAGAIN && rc != -EBUSY) {
            fprintf(stderr, "uring_floor: submit_and_wait: %s\n", strerror(-rc));
            return 1;
        }
        struct io_uring_cqe *cqe;
        unsigned head, seen = 0, returned = 0;
        io_uring_for_each_cqe(&ring, head, cqe) {
            seen++;
            unsigned long long data = io_uring_cqe_get_data64(cqe);
            int kind = (int)(data >> 32), fd = (int)(data & 0xffffffffu);
            if (kind == ACCEPT) {
                if (cqe->res >= 0) {
                    setsockopt(cqe->res, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
                    arm_recv(cqe->res);
                }
                if (!(cqe->flags & IORING_CQE_F_MORE)) {
                    struct io_uring_sqe *a = sqe();
                    io_uring_prep_multishot_accept(a, lfd, NULL, NULL, 0);
                    io_uring_sqe_set_data64(a, (unsigned long long)ACCEPT << 32);
                }
                continue;
            }
            if (kind != RECV) {
                continue; /* a failed send: the recv side sees the connection end */
            }
            if (cqe->res <= 0) {
                if (cqe->res == -ENOBUFS) {
                    arm_recv(fd);
                } else if (!(cqe->flags & IORING_CQE_F_MORE)) {
                    close(fd);
                }
                continue;
            }
            int bid = (int)(cqe->flags >> IORING_CQE_BUFFER_SHIFT);
            const char *buf = bufs + (size_t)bid * BUF_SIZE;
            for (int k = 3; k < cqe->res; k++) {
                if (head_ends_at(buf, k)) {
                    struct io_uring_sqe *w = sqe();
                    io_uring_prep_send(w, fd, RESPONSE, sizeof RESPONSE - 1, MSG_NOSIGNAL);
                    w->flags |= IOSQE_CQE_SKIP_SUCCESS;
                    io_uring_sqe_set_data64(w, 3ULL << 32 | (unsigned)fd);
                }
            }
            io_uring_buf_ring_add(br, (void *)buf, BUF_SIZE, bid, io_uring_buf_ring_mask(BUFS), returned++);
            if (!(cqe->flags & IORING_CQE_F_MORE)) {
                arm_recv(fd);
            }
        }
        io_uring_buf_ring_advance(br, returned);
        io_uring_cq_advance(&ring, seen);
    }
}
