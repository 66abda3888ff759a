/* The io_uring variant of epoll_echo.c measured beside it (bench/results/2026-11-23-bare-epoll-floor.txt,
 * "urfix": multishot accept into fixed files, multishot recv with a provided-buffer ring, sends
 * without completions). Needs liburing 2.3+: gcc -O2 -o uring_echo uring_echo.c -luring;
 * run: taskset -c 0 ./uring_echo PORT 1. Not built by CI. */
#include "common.h"
#include <liburing.h>
#include <sys/mman.h>
#define NBUF 4096
#define BSZ 2048
#define BGID 1
enum { ACCEPT = 1, RECV = 2, SEND = 3 };
static struct io_uring ring;
static struct io_uring_buf_ring *br;
static char *bufs;
static int fixed;
static struct io_uring_sqe *sqe(void) {
  struct io_uring_sqe *s = io_uring_get_sqe(&ring);
  if (!s) { io_uring_submit(&ring); s = io_uring_get_sqe(&ring); }
  return s;
}
static void arm_recv(int fd) {
  struct io_uring_sqe *s = sqe();
  io_uring_prep_recv_multishot(s, fd, NULL, 0, 0);
  s->flags |= IOSQE_BUFFER_SELECT | (fixed ? IOSQE_FIXED_FILE : 0);
  s->buf_group = BGID;
  io_uring_sqe_set_data64(s, ((unsigned long long)fd << 8) | RECV);
}
static void arm_accept(int lfd) {
  struct io_uring_sqe *s = sqe();
  if (fixed) io_uring_prep_multishot_accept_direct(s, lfd, NULL, NULL, 0);
  else io_uring_prep_multishot_accept(s, lfd, NULL, NULL, 0);
  io_uring_sqe_set_data64(s, ACCEPT);
}
int main(int argc, char **argv) {
  int lfd = listener(atoi(argv[1]));
  fixed = argc > 2 && atoi(argv[2]);
  struct io_uring_params p = {0};
  p.flags = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN | IORING_SETUP_COOP_TASKRUN;
  if (io_uring_queue_init_params(4096, &ring, &p)) { perror("init"); return 1; }
  if (fixed && io_uring_register_files_sparse(&ring, 16384)) { perror("files"); return 1; }
  int ret;
  br = mmap(NULL, NBUF * sizeof(struct io_uring_buf), PROT_READ | PROT_WRITE, MAP_ANONYMOUS | MAP_PRIVATE, -1, 0);
  io_uring_buf_ring_init(br);
  struct io_uring_buf_reg reg = {.ring_addr = (unsigned long)br, .ring_entries = NBUF, .bgid = BGID};
  if ((ret = io_uring_register_buf_ring(&ring, &reg, 0))) { fprintf(stderr, "buf ring %d\n", ret); return 1; }
  bufs = malloc((size_t)NBUF * BSZ);
  for (int i = 0; i < NBUF; i++) io_uring_buf_ring_add(br, bufs + (size_t)i * BSZ, BSZ, i, io_uring_buf_ring_mask(NBUF), i);
  io_uring_buf_ring_advance(br, NBUF);
  arm_accept(lfd);
  for (;;) {
    io_uring_submit_and_wait(&ring, 1);
    struct io_uring_cqe *c; unsigned head, seen = 0;
    io_uring_for_each_cqe(&ring, head, c) {
      seen++;
      unsigned long long ud = c->user_data; int kind = ud & 0xff, fd = ud >> 8;
      if (kind == ACCEPT) {
        if (c->res >= 0) arm_recv(c->res);
        if (!(c->flags & IORING_CQE_F_MORE)) arm_accept(lfd);
      } else if (kind == RECV) {
        if (c->res <= 0) {
          if (c->res == -ENOBUFS) { arm_recv(fd); continue; }
          if (fixed) { struct io_uring_sqe *s = sqe(); io_uring_prep_close_direct(s, fd); s->flags |= IOSQE_CQE_SKIP_SUCCESS; io_uring_sqe_set_data64(s, 0); }
          else close(fd);
          continue;
        }
        int bid = c->flags >> IORING_CQE_BUFFER_SHIFT;
        char *b = bufs + (size_t)bid * BSZ;
        int k = count_reqs(b, c->res);
        for (int j = 0; j < k; j++) {
          struct io_uring_sqe *s = sqe();
          io_uring_prep_send(s, fd, RESP, sizeof RESP - 1, MSG_NOSIGNAL);
          s->flags |= IOSQE_CQE_SKIP_SUCCESS | (fixed ? IOSQE_FIXED_FILE : 0);
          io_uring_sqe_set_data64(s, ((unsigned long long)fd << 8) | SEND);
        }
        io_uring_buf_ring_add(br, b, BSZ, bid, io_uring_buf_ring_mask(NBUF), 0);
        io_uring_buf_ring_advance(br, 1);
        if (!(c->flags & IORING_CQE_F_MORE)) arm_recv(fd);
      } else if (kind == SEND) {
        if (c->res < 0 && c->res != -EPIPE && c->res != -ECONNRESET) fprintf(stderr, "send %d\n", c->res);
      }
    }
    io_uring_cq_advance(&ring, seen);
  }
}
