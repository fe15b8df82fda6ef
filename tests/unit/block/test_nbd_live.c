/* The NBD driver against a real server (nbdkit's memory plugin, our child):
 * a server that went away while the connection was idle is found out by
 * the next request's own write, and that request waits, is sent again on
 * the reconnected server and completes. Built by construction: the server
 * is SIGKILLed and reaped (all its sockets closed) before the request is
 * made. And a read watch that fires when nothing is left to read (another
 * queue's thread, or libnbd itself, read it first) does not stop the next
 * request. A server that keeps its connection and answers nothing (held
 * replies, SIGSTOP) is cut after the timeout, its requests fail, and the
 * disk works again once the server does. An nbd:// disk reconnects over
 * TCP through its lookup thread. Scattered requests that need
 * more gather memory than a connection's ring holds wait for it, in
 * order, and all complete with their data. SKIPPED (77) without nbdkit or
 * an NBD-enabled build. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "block/backend.h"
#include "block/driver.h"
#include "block/queue_int.h"
#include "config.h"

static char dir[] = "/tmp/iovm-nbd-live.XXXXXX";
static char sock[128], pidf[160];
static pid_t server;

/* nbdkit in the foreground, our child (it dies with us); returns once its
 * pid file exists, which nbdkit writes after it has bound the socket.
 * With a filter (delay) it runs one thread per connection (-t 1): nbdkit
 * 1.32 with several worker threads can abort (connections.c
 * raw_send_socket: `sock >= 0') when a client drops a connection while
 * delayed replies are still being sent, and a dead server would turn the
 * reconnect the test waits for into a wait for ever. One thread reads,
 * sleeps and replies in turn, so no reply races the close. */
static int listen_fd = -1;	/* >= 0: the server gets it (socket activation) */

static void server_exec(char *const argv[])
{
	unlink(pidf);
	unlink(sock);
	server = fork();
	assert_true(server >= 0);
	if (!server) {
		if (listen_fd >= 0) {
			char pid[32];

			/* systemd's socket activation: nbdkit serves fd 3 */
			if (dup2(listen_fd, 3) < 0)
				_exit(127);
			snprintf(pid, sizeof(pid), "%d", (int)getpid());
			setenv("LISTEN_PID", pid, 1);
			setenv("LISTEN_FDS", "1", 1);
		}
		execvp("nbdkit", argv);
		_exit(127);
	}
	for (;;) {
		struct stat st;
		int status;

		if (!stat(pidf, &st) && st.st_size > 0)
			return;
		assert_int_equal(waitpid(server, &status, WNOHANG), 0);
		usleep(10000);	/* polls a condition: no result depends on it */
	}
}

static void server_start_with(const char *filter)
{
	char *const args[] = { "nbdkit", "-f", "-t", "1", "-U", sock, "-P", pidf,
			       (char *)filter, "memory", "32M", "delay-write=30", NULL };

	server_exec(args);
}

static void server_start(void)
{
	char *const args[] = { "nbdkit", "-f", "-U", sock, "-P", pidf, "memory", "32M", NULL };

	server_exec(args);
}

static void server_kill(void)
{
	int status;

	kill(server, SIGKILL);
	assert_int_equal(waitpid(server, &status, 0), server);
}

static int result;
static bool done;

static void on_done(void *tag, int res)
{
	result = res;
	done = true;
}

/* Runs one request to its end on q. */
static int io(struct blk_queue *q, struct blk_backend *be, enum blk_op op,
	      char *buf, uint64_t off)
{
	struct iovec v = { buf, 4096 };
	int ret;

	done = false;
	ret = blkq_rw(q, be, op, &v, 1, off, on_done, NULL);
	if (ret)	/* refused at once (a server gone past the timeout) */
		return ret;
	assert_true(blkq_submit(q) >= 0);
	while (!done)
		assert_true(blkq_reap(q, true) >= 0);
	return result;
}

/* Opens the running server's export as be, with a queue of depth and
 * timeout= secs (0: the default). */
static struct blk_queue *disk_open_t(struct blk_backend *be, unsigned int depth,
				     unsigned int secs)
{
	static char uri[256];
	struct disk_cfg cfg = { .cache = CACHE_NONE, .path = uri,
				.timeout_s = secs, .timeout_set = secs > 0 };
	struct blk_queue *q;
	char err[256];

	snprintf(uri, sizeof(uri), "nbd+unix:///?socket=%s", sock);
	assert_int_equal(blk_open(be, &cfg, err, sizeof(err)), 0);
	q = blkq_create(depth);
	assert_non_null(q);
	return q;
}

static struct blk_queue *disk_open(struct blk_backend *be, unsigned int depth)
{
	return disk_open_t(be, depth, 0);
}

static void disk_close(struct blk_queue *q, struct blk_backend *be)
{
	blkq_destroy(q);
	blk_close(be);
	server_kill();
}

static void test_server_gone_while_idle(void **state)
{
	struct blk_backend be = { 0 };
	struct blk_queue *q;
	char a[4096], b[4096];

	server_start();
	q = disk_open(&be, 8);
	memset(a, 0xa5, sizeof(a));
	assert_int_equal(io(q, &be, BLK_OP_WRITE, a, 8192), 4096);

	/* Gone, and reaped: the connection's peer is closed before the
	 * next request is made. */
	server_kill();
	server_start();
	/* The write finds the old connection dead as it sends; it waits for
	 * the new server, goes again and completes. */
	memset(a, 0x3c, sizeof(a));
	assert_int_equal(io(q, &be, BLK_OP_WRITE, a, 4096), 4096);
	memset(b, 0, sizeof(b));
	assert_int_equal(io(q, &be, BLK_OP_READ, b, 4096), 4096);
	assert_memory_equal(a, b, sizeof(a));
	disk_close(q, &be);
}

/* A read watch's completion that comes when the socket has nothing to
 * read: on a shared connection every queue's watch fires for the same
 * reply and the first thread reads it; alone, a watch armed during a
 * handshake fires for data libnbd already read by itself. Made here by
 * handing the driver that event with the connection idle. libnbd 1.14,
 * told of data that is not there, starts a reply from READY and waits in
 * it; the next request's command would then stay queued in libnbd, never
 * sent, and never complete. */
static void test_read_event_with_nothing_to_read(void **state)
{
	struct blk_backend be = { 0 };
	struct blk_queue *q;
	char a[4096], b[4096];

	server_start();
	q = disk_open(&be, 8);
	memset(a, 0x5a, sizeof(a));
	assert_int_equal(io(q, &be, BLK_OP_WRITE, a, 0), 4096);
	/* idle: every reply read; watch index 0 is the driver's read watch */
	assert_int_equal(q->natts, 1);
	be.drv->event(q->atts[0], 0, POLLIN);
	memset(b, 0, sizeof(b));
	assert_int_equal(io(q, &be, BLK_OP_READ, b, 0), 4096);
	assert_memory_equal(a, b, sizeof(a));
	disk_close(q, &be);
}

static unsigned int ndone;

static void count_done(void *tag, int res)
{
	assert_int_equal(res, 4096);
	ndone++;
}

/* Writes out on the connection, their replies held back by the server
 * (nbdkit's delay filter), when it is SIGKILLed: every one of them is sent
 * again on the new server and completes, contiguous ones and ones whose
 * scattered pieces were gathered into a pool buffer. */
static void test_server_gone_with_writes_out(void **state)
{
	struct blk_backend be = { 0 };
	static char data[8][8192], back[4096];
	struct iovec v[8][4];
	struct blk_queue *q;

	server_start_with("--filter=delay");
	q = disk_open(&be, 16);
	ndone = 0;
	for (int i = 0; i < 8; i++) {
		memset(data[i], 'a' + i, sizeof(data[i]));
		if (i % 2) {	/* four 1 KiB pieces, apart: gathered */
			for (int k = 0; k < 4; k++)
				v[i][k] = (struct iovec){ data[i] + k * 2048, 1024 };
			assert_int_equal(blkq_rw(q, &be, BLK_OP_WRITE, v[i], 4,
						 (uint64_t)i * 4096, count_done, NULL), 0);
		} else {
			v[i][0] = (struct iovec){ data[i], 4096 };
			assert_int_equal(blkq_rw(q, &be, BLK_OP_WRITE, v[i], 1,
						 (uint64_t)i * 4096, count_done, NULL), 0);
		}
	}
	/* Submitted: libnbd writes the commands to the socket as they come
	 * (the server, one thread, holds the first reply for 30 s and the
	 * others wait behind it). */
	assert_true(blkq_submit(q) >= 0);
	assert_int_equal(ndone, 0);
	server_kill();
	server_start();
	while (ndone < 8)
		assert_true(blkq_reap(q, true) >= 0);
	for (int i = 0; i < 8; i++) {
		struct iovec r = { back, 4096 };

		done = false;
		assert_int_equal(blkq_rw(q, &be, BLK_OP_READ, &r, 1, (uint64_t)i * 4096,
					 on_done, NULL), 0);
		assert_true(blkq_submit(q) >= 0);
		while (!done)
			assert_true(blkq_reap(q, true) >= 0);
		assert_int_equal(result, 4096);
		for (int k = 0; k < 4096; k++)
			assert_int_equal(back[k], 'a' + i);
	}
	disk_close(q, &be);
}

static unsigned int nfailed;

static void count_eio(void *tag, int res)
{
	assert_int_equal(res, -EIO);
	nfailed++;
}

/* Reads block off until a read succeeds: after the server counted as
 * gone, requests fail at once while the reconnect's handshake is under
 * way (each request drives it a few steps). Polls a condition; the
 * test's outcome does not depend on how many tries it takes. */
static void read_when_back(struct blk_queue *q, struct blk_backend *be, char *buf,
			   uint64_t off)
{
	int res, status;

	while ((res = io(q, be, BLK_OP_READ, buf, off)) == -EIO) {
		/* the server we wait for must still be there */
		assert_int_equal(waitpid(server, &status, WNOHANG), 0);
		usleep(10000);
	}
	assert_int_equal(res, 4096);
}

/* A server that holds the connection open and answers nothing: writes out
 * on it whose replies nbdkit's delay filter holds for 30 s, with
 * timeout=1. The connection is cut once it has owed replies and heard
 * none for the timeout, and the writes fail with EIO (had it not been
 * cut they would have succeeded, 30 s later). The disk then works again
 * on a new connection. */
static void test_server_silent_with_writes_out(void **state)
{
	struct blk_backend be = { 0 };
	static char data[4][4096], back[4096];
	struct iovec v[4];
	struct blk_queue *q;

	server_start_with("--filter=delay");
	q = disk_open_t(&be, 8, 1);
	nfailed = 0;
	for (int i = 0; i < 4; i++) {
		memset(data[i], 'k' + i, sizeof(data[i]));
		v[i] = (struct iovec){ data[i], 4096 };
		assert_int_equal(blkq_rw(q, &be, BLK_OP_WRITE, &v[i], 1, (uint64_t)i * 4096,
					 count_eio, NULL), 0);
	}
	assert_true(blkq_submit(q) >= 0);
	while (nfailed < 4)
		assert_true(blkq_reap(q, true) >= 0);
	/* reads are not delayed: the disk serves them on a new connection */
	read_when_back(q, &be, back, 65536);
	disk_close(q, &be);
}

/* A stopped server (SIGSTOP: its socket stays open, it reads nothing):
 * a FLUSH (blk_flush, as at exit) gives up after the timeout instead of
 * holding iovm for ever; a write sent meanwhile fails with EIO once the
 * server has been away for the timeout; after SIGCONT the disk works
 * again and holds what was written before the stop. */
static void test_server_stopped(void **state)
{
	struct blk_backend be = { 0 };
	struct blk_queue *q;
	char a[4096], b[4096];

	server_start();
	q = disk_open_t(&be, 8, 1);
	memset(a, 0x77, sizeof(a));
	assert_int_equal(io(q, &be, BLK_OP_WRITE, a, 12288), 4096);
	assert_int_equal(kill(server, SIGSTOP), 0);
	/* returns once every thread of it has stopped: nothing it reads
	 * after this is answered */
	{
		int st;

		assert_int_equal(waitpid(server, &st, WUNTRACED), server);
		assert_true(WIFSTOPPED(st));
	}
	assert_int_equal(blk_flush(&be), -EIO);
	memset(b, 0x11, sizeof(b));
	assert_int_equal(io(q, &be, BLK_OP_WRITE, b, 16384), -EIO);
	assert_int_equal(kill(server, SIGCONT), 0);
	memset(b, 0, sizeof(b));
	read_when_back(q, &be, b, 12288);
	assert_memory_equal(a, b, sizeof(a));
	disk_close(q, &be);
}

/* A disk opened with multi-conn, two queues on two connections; the
 * server comes back without multi-conn (nbdkit's multi-conn filter): a
 * FLUSH on one connection no longer covers writes answered on the other,
 * so every write on both now goes with FUA (nbdkit's log shows the flag
 * of each write it received). */
static void test_multi_conn_lost(void **state)
{
	char logf[160], line[512], a[4096];
	char *const args[] = { "nbdkit", "-f", "-U", sock, "-P", pidf, "--filter=log",
			       "--filter=multi-conn", "memory", "32M",
			       "multi-conn-mode=disable", logf, NULL };
	struct blk_backend be = { 0 };
	struct blk_queue *q1, *q2;
	unsigned int fua = 0, plain = 0, conn[2] = { 0, 0 }, nconn = 0;
	FILE *f;

	snprintf(logf, sizeof(logf), "logfile=%s/log", dir);
	server_start();
	q1 = disk_open(&be, 8);
	q2 = blkq_create(8);
	assert_non_null(q2);
	memset(a, 0x11, sizeof(a));
	assert_int_equal(io(q1, &be, BLK_OP_WRITE, a, 0), 4096);
	assert_int_equal(io(q2, &be, BLK_OP_WRITE, a, 4096), 4096);
	assert_int_equal(q1->natts, 1);
	assert_int_equal(q2->natts, 1);

	server_kill();
	server_exec(args);
	for (int i = 0; i < 4; i++) {
		memset(a, 0x20 + i, sizeof(a));
		assert_int_equal(io(i % 2 ? q2 : q1, &be, BLK_OP_WRITE, a, (uint64_t)i * 4096),
				 4096);
	}
	blkq_destroy(q2);
	disk_close(q1, &be);
	snprintf(line, sizeof(line), "%s/log", dir);
	f = fopen(line, "r");
	assert_non_null(f);
	while (fgets(line, sizeof(line), f)) {
		char *cp = strstr(line, " connection=");
		unsigned int id;

		if (!strstr(line, " Write id="))
			continue;
		/* which connections the writes came on: the two queues' own */
		assert_non_null(cp);
		id = (unsigned int)strtoul(cp + strlen(" connection="), NULL, 10);
		if (!nconn || (conn[0] != id && (nconn == 1 || conn[1] != id))) {
			assert_true(nconn < 2);
			conn[nconn++] = id;
		}
		if (strstr(line, "fua=1"))
			fua++;
		else
			plain++;
	}
	fclose(f);
	snprintf(line, sizeof(line), "%s/log", dir);
	unlink(line);
	assert_int_equal(plain, 0);
	assert_int_equal(fua, 4);
	assert_int_equal(nconn, 2);
}

/* nbd:// (TCP) URIs connect through a thread of their own (the host
 * name's lookup may block): at open and on a reconnect. The server gets
 * the test's listening socket (socket activation), so it comes back on
 * the same port, and while it is away connections wait in the socket's
 * backlog. */
static void test_tcp_reconnect(void **state)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	char *const args[] = { "nbdkit", "-f", "-P", pidf, "memory", "32M", NULL };
	struct disk_cfg cfg = { .cache = CACHE_NONE };
	socklen_t alen = sizeof(a);
	struct blk_backend be = { 0 };
	char uri[64], err[256], x[4096], y[4096];
	struct blk_queue *q;

	listen_fd = socket(AF_INET, SOCK_STREAM, 0);
	assert_true(listen_fd >= 0);
	assert_int_equal(bind(listen_fd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(listen_fd, 16), 0);
	assert_int_equal(getsockname(listen_fd, (struct sockaddr *)&a, &alen), 0);
	snprintf(uri, sizeof(uri), "nbd://127.0.0.1:%u/", ntohs(a.sin_port));
	cfg.path = uri;
	server_exec(args);
	assert_int_equal(blk_open(&be, &cfg, err, sizeof(err)), 0);
	q = blkq_create(8);
	assert_non_null(q);
	memset(x, 0x77, sizeof(x));
	assert_int_equal(io(q, &be, BLK_OP_WRITE, x, 0), 4096);
	server_kill();
	server_exec(args);
	memset(x, 0x78, sizeof(x));
	assert_int_equal(io(q, &be, BLK_OP_WRITE, x, 4096), 4096);
	assert_int_equal(io(q, &be, BLK_OP_READ, y, 4096), 4096);
	assert_memory_equal(x, y, sizeof(x));
	disk_close(q, &be);
	close(listen_fd);
	listen_fd = -1;
}

#define GREQS 24		/* 512 KiB each: 12 MiB, three rings' worth */
#define GRUNS 64		/* 8 KiB pieces, 8 KiB apart: all gathered */
#define BIG_RUNS 640		/* 5 MiB: more than the ring ever holds */

static void fill_runs(struct iovec *v, char *base, unsigned int runs, unsigned int seed)
{
	for (unsigned int k = 0; k < runs; k++) {
		v[k] = (struct iovec){ base + k * 16384, 8192 };
		for (unsigned int b = 0; b < 8192; b++)
			((unsigned char *)v[k].iov_base)[b] = (unsigned char)(seed * 131 + k * 7 + b);
	}
}

static unsigned int nbytes_done;

static void count_bytes(void *tag, int res)
{
	assert_true(res > 0);
	nbytes_done += (unsigned int)res;
	ndone++;
}

/* Reads len bytes at off into buf, one iovec. */
static void read_flat(struct blk_queue *q, struct blk_backend *be, char *buf,
		      uint64_t len, uint64_t off)
{
	struct iovec v = { buf, len };

	done = false;
	assert_int_equal(blkq_rw(q, be, BLK_OP_READ, &v, 1, off, on_done, NULL), 0);
	assert_true(blkq_submit(q) >= 0);
	while (!done)
		assert_true(blkq_reap(q, true) >= 0);
	assert_int_equal(result, (int)len);
}

/* Scattered writes, then scattered reads, each batch needing three times
 * the gather memory a connection's ring holds (4 MiB), submitted at once:
 * by construction the ring is full after the seventh (nothing reads a
 * reply while requests are submitted), so the rest wait and go as replies
 * free room. Plus one request larger than the ring, which gathers into
 * memory of its own. Every byte arrives where it belongs, both ways, and
 * the disk's closing line counts the requests that waited. */
static void test_gather_ring_full(void **state)
{
	static char wbuf[GREQS][GRUNS * 16384], rbuf[GREQS][GRUNS * 16384];
	static char big[BIG_RUNS * 16384], flat[BIG_RUNS * 8192];
	static struct iovec wv[GREQS][GRUNS], rv[GREQS][GRUNS], bv[BIG_RUNS];
	const uint64_t big_off = (uint64_t)GREQS * GRUNS * 8192;
	struct blk_backend be = { 0 };
	struct blk_queue *q;
	char log[256] = "", line[512];
	int saved, fd;
	FILE *f;

	server_start();
	q = disk_open(&be, 32);
	ndone = 0;
	for (unsigned int i = 0; i < GREQS; i++) {
		fill_runs(wv[i], wbuf[i], GRUNS, i);
		assert_int_equal(blkq_rw(q, &be, BLK_OP_WRITE, wv[i], GRUNS,
					 (uint64_t)i * GRUNS * 8192, count_bytes, NULL), 0);
	}
	fill_runs(bv, big, BIG_RUNS, 99);
	assert_int_equal(blkq_rw(q, &be, BLK_OP_WRITE, bv, BIG_RUNS, big_off,
				 count_bytes, NULL), 0);
	assert_true(blkq_submit(q) >= 0);
	while (ndone < GREQS + 1)
		assert_true(blkq_reap(q, true) >= 0);

	/* what the server holds: each piece in order, flat */
	for (unsigned int i = 0; i < GREQS; i++) {
		read_flat(q, &be, flat, GRUNS * 8192, (uint64_t)i * GRUNS * 8192);
		for (unsigned int k = 0; k < GRUNS; k++)
			assert_memory_equal(flat + k * 8192, wv[i][k].iov_base, 8192);
	}
	read_flat(q, &be, flat, sizeof(flat), big_off);
	for (unsigned int k = 0; k < BIG_RUNS; k++)
		assert_memory_equal(flat + k * 8192, bv[k].iov_base, 8192);

	/* and read back scattered, through the gather memory */
	ndone = 0;
	memset(rbuf, 0, sizeof(rbuf));
	for (unsigned int i = 0; i < GREQS; i++) {
		for (unsigned int k = 0; k < GRUNS; k++)
			rv[i][k] = (struct iovec){ rbuf[i] + k * 16384, 8192 };
		assert_int_equal(blkq_rw(q, &be, BLK_OP_READ, rv[i], GRUNS,
					 (uint64_t)i * GRUNS * 8192, count_bytes, NULL), 0);
	}
	memset(big, 0, sizeof(big));
	assert_int_equal(blkq_rw(q, &be, BLK_OP_READ, bv, BIG_RUNS, big_off,
				 count_bytes, NULL), 0);
	assert_true(blkq_submit(q) >= 0);
	while (ndone < GREQS + 1)
		assert_true(blkq_reap(q, true) >= 0);
	for (unsigned int i = 0; i < GREQS; i++)
		for (unsigned int k = 0; k < GRUNS; k++)
			assert_memory_equal(rv[i][k].iov_base, wv[i][k].iov_base, 8192);
	/* flat still holds the big one as the server has it, checked */
	for (unsigned int k = 0; k < BIG_RUNS; k++)
		assert_memory_equal(bv[k].iov_base, flat + k * 8192, 8192);

	/* the closing line: requests waited (17 of each batch at least) */
	fflush(stderr);
	saved = dup(2);
	f = tmpfile();
	assert_non_null(f);
	fd = fileno(f);
	dup2(fd, 2);
	blkq_destroy(q);
	blk_close(&be);
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	rewind(f);
	while (fgets(line, sizeof(line), f))
		if (strstr(line, "waited for gather memory="))
			snprintf(log, sizeof(log), "%s", strstr(line, "waited"));
	fclose(f);
	server_kill();
	printf("closing line: %s", log);
	assert_true(strtoul(log + strlen("waited for gather memory="), NULL, 10) >= 34);
}

/* This process's end of the connection to the server at sock. */
static int client_socket(void)
{
	for (int fd = 3; fd < 1024; fd++) {
		struct sockaddr_un a;
		socklen_t len = sizeof(a);

		if (!getpeername(fd, (struct sockaddr *)&a, &len) &&
		    a.sun_family == AF_UNIX && !strcmp(a.sun_path, sock))
			return fd;
	}
	fail_msg("no socket connected to %s", sock);
	return -1;
}

/* Replies already on the socket when the thread wakes are all read in
 * that wakeup (libnbd reads one per call; the driver reads on while more
 * are there, the connection having had enough out): eight reads' replies,
 * made to wait on the socket before the queue is reaped, complete in the
 * turn that reads the first, each with its own data. */
static void test_replies_read_together(void **state)
{
	struct blk_backend be = { 0 };
	static char data[8][4096], back[8][4096];
	struct iovec v[8];
	struct blk_queue *q;
	int fd, queued = 0;

	server_start();
	q = disk_open(&be, 16);
	for (int i = 0; i < 8; i++) {
		memset(data[i], 'A' + i, sizeof(data[i]));
		assert_int_equal(io(q, &be, BLK_OP_WRITE, data[i], (uint64_t)i * 8192), 4096);
	}
	fd = client_socket();
	ndone = 0;
	for (int i = 0; i < 8; i++) {
		v[i] = (struct iovec){ back[i], 4096 };
		assert_int_equal(blkq_rw(q, &be, BLK_OP_READ, &v[i], 1, (uint64_t)i * 8192,
					 count_done, NULL), 0);
	}
	assert_true(blkq_submit(q) >= 0);
	/* every reply (simple: a 16-byte header and the data) on the socket */
	while (queued < 8 * (16 + 4096)) {
		assert_int_equal(ioctl(fd, FIONREAD, &queued), 0);
		usleep(1000);	/* polls a condition: no result depends on it */
	}
	/* (a turn may first see the stall timer's event, which reads
	 * nothing) */
	while (!ndone)
		assert_true(blkq_reap(q, true) >= 0);
	assert_int_equal(ndone, 8);
	for (int i = 0; i < 8; i++)
		assert_memory_equal(back[i], data[i], 4096);
	disk_close(q, &be);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_server_gone_while_idle),
		cmocka_unit_test(test_server_gone_with_writes_out),
		cmocka_unit_test(test_read_event_with_nothing_to_read),
		cmocka_unit_test(test_replies_read_together),
		cmocka_unit_test(test_server_silent_with_writes_out),
		cmocka_unit_test(test_server_stopped),
		cmocka_unit_test(test_gather_ring_full),
		cmocka_unit_test(test_multi_conn_lost),
		cmocka_unit_test(test_tcp_reconnect),
	};
	int ret;

#ifndef IOVM_HAVE_NBD
	printf("SKIPPED: iovm built without libnbd\n");
	return 77;
#endif
	if (system("command -v nbdkit >/dev/null 2>&1")) {
		printf("SKIPPED: nbdkit is not installed (tools/install-deps.sh)\n");
		return 77;
	}
	signal(SIGPIPE, SIG_IGN);
	if (!mkdtemp(dir)) {
		perror(dir);
		return 1;
	}
	snprintf(sock, sizeof(sock), "%s/nbd.sock", dir);
	snprintf(pidf, sizeof(pidf), "%s/nbdkit.pid", dir);
	/* a hang is a failure, not a wait for ever */
	alarm(120);
	ret = cmocka_run_group_tests(tests, NULL, NULL);
	unlink(sock);
	unlink(pidf);
	rmdir(dir);
	return ret;
}
