/* `iovm 9p-serve` over a real UNIX socket: framing, many requests in flight
 * on one connection (replies matched by tag), a large read, two sessions
 * at once, a client that breaks the framing, the command line, the
 * per-connection descriptor share, the cap on buffer memory and the
 * timeout that takes it back from stalled clients.
 * Usage: test-p9-serve IOVM_BINARY */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/sockios.h>
#include <poll.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "p9/proto.h"

static const char *iovm;
static char dir[64], sock[128];
static pid_t server;

static struct p9_str S(const char *s)
{
	return (struct p9_str){ strlen(s), s };
}

static int run_quiet(char *const argv[])
{
	pid_t pid = fork();
	int st;

	if (!pid) {
		int null = open("/dev/null", O_WRONLY);

		dup2(null, 1);
		dup2(null, 2);
		execv(argv[0], argv);
		_exit(127);
	}
	waitpid(pid, &st, 0);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Runs iovm 9p-serve on dir/share (msize 1M) with the extra arguments and
 * RLIMIT_NOFILE at nofile (0: as inherited) on the socket path sk. Returns
 * its pid once it listens (it says so on stdout after listen()), or
 * -exit status when it ended at setup. */
static pid_t spawn(const char *sk, rlim_t nofile, const char *const extra[])
{
	char share[96], listen[160], line[256];
	const char *argv[16] = { iovm, "9p-serve", "--share", share,
				 "--listen", listen, "--quiet" };
	int n = 7, st, pfd[2];
	size_t got = 0;
	pid_t pid;

	snprintf(share, sizeof(share), "path=%s/share,msize=1M", dir);
	snprintf(listen, sizeof(listen), "unix:%s", sk);
	for (int i = 0; extra[i]; i++)
		argv[n++] = extra[i];
	assert_int_equal(pipe(pfd), 0);
	pid = fork();
	if (!pid) {
		struct rlimit rl = { nofile, nofile };
		int null = open("/dev/null", O_WRONLY);

		if (nofile)
			setrlimit(RLIMIT_NOFILE, &rl);
		dup2(pfd[1], 1);
		close(pfd[0]);
		close(pfd[1]);
		if (!getenv("P9DEBUG"))
			dup2(null, 2);
		execv(iovm, (char *const *)argv);
		_exit(127);
	}
	close(pfd[1]);
	while (got < sizeof(line) - 1 && read(pfd[0], line + got, 1) == 1 &&
	       line[got] != '\n')
		got++;
	line[got] = 0;
	close(pfd[0]);
	if (strncmp(line, "listening on", 12)) {
		waitpid(pid, &st, 0);
		return WIFEXITED(st) ? -WEXITSTATUS(st) : -128;
	}
	return pid;
}

static int setup(void **state)
{
	char p[128];
	int fd;

	strcpy(dir, "/tmp/p9serve.XXXXXX");
	if (!mkdtemp(dir))
		return -1;
	snprintf(p, sizeof(p), "%s/share", dir);
	mkdir(p, 0755);
	snprintf(p, sizeof(p), "%s/share/big", dir);
	fd = open(p, O_CREAT | O_WRONLY, 0644);
	for (int i = 0; i < 4096; i++) {
		char blk[1024];

		memset(blk, i & 0xff, sizeof(blk));
		if (write(fd, blk, sizeof(blk)) != sizeof(blk))
			return -1;
	}
	close(fd);
	snprintf(sock, sizeof(sock), "%s/9p.sock", dir);
	server = spawn(sock, 0, (const char *const[]){ NULL });
	return server > 0 ? 0 : -1;
}

static int teardown(void **state)
{
	struct stat st;
	char cmd[128];
	int status;

	kill(server, SIGTERM);
	waitpid(server, &status, 0);
	/* SIGTERM ends it cleanly and frees the socket path */
	if (!WIFEXITED(status) || WEXITSTATUS(status) || !stat(sock, &st))
		return -1;
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	return system(cmd) ? -1 : 0;
}

static int connect_to(const char *path)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);

	strcpy(sun.sun_path, path);
	assert_int_equal(connect(fd, (struct sockaddr *)&sun, sizeof(sun)), 0);
	return fd;
}

static int connect_sock(void)
{
	return connect_to(sock);
}

static void send_msg(int fd, struct p9_msg *m)
{
	uint8_t buf[512];
	int len = p9_encode(m, buf, sizeof(buf));

	assert_true(len > 0);
	assert_int_equal(write(fd, buf, len), len);
}

static int read_full(int fd, void *buf, size_t len)
{
	uint8_t *p = buf;

	while (len) {
		ssize_t n = read(fd, p, len);

		if (n <= 0)
			return -1;
		p += n;
		len -= n;
	}
	return 0;
}

/* Reads one reply into buf (at most cap bytes); returns its length. */
static size_t recv_msg(int fd, uint8_t *buf, size_t cap)
{
	uint32_t size;

	assert_int_equal(read_full(fd, buf, 4), 0);
	size = p9_get32(buf);
	assert_true(size >= P9_HDRSZ && size <= cap);
	assert_int_equal(read_full(fd, buf + 4, size - 4), 0);
	return size;
}

static void rpc(int fd, struct p9_msg *t, struct p9_msg *r, uint8_t *buf,
		size_t cap)
{
	size_t len;

	send_msg(fd, t);
	len = recv_msg(fd, buf, cap);
	assert_int_equal(p9_decode(buf, len, false, r), 0);
	assert_int_equal(r->tag, t->tag);
}

static void mount_conn(int fd, uint8_t *buf, size_t cap)
{
	struct p9_msg t = { .type = P9_TVERSION, .tag = P9_NOTAG }, r;

	t.u.version.msize = 8u << 20;
	t.u.version.version = S(P9_VERSION_L);
	rpc(fd, &t, &r, buf, cap);
	assert_int_equal(r.type, P9_RVERSION);
	assert_int_equal(r.u.version.msize, 1u << 20);	/* the share's cap */
	t = (struct p9_msg){ .type = P9_TATTACH, .tag = 1 };
	t.u.tattach.fid = 0;
	t.u.tattach.afid = P9_NOFID;
	t.u.tattach.uname = S("u");
	t.u.tattach.aname = S("");
	rpc(fd, &t, &r, buf, cap);
	assert_int_equal(r.type, P9_RATTACH);
}

/* Opens "big" for reading on fid 1. */
static void open_big(int fd, uint8_t *buf, size_t cap)
{
	struct p9_msg t, r;

	t = (struct p9_msg){ .type = P9_TWALK, .tag = 2 };
	t.u.twalk.fid = 0;
	t.u.twalk.newfid = 1;
	t.u.twalk.nwname = 1;
	t.u.twalk.wname[0] = S("big");
	rpc(fd, &t, &r, buf, cap);
	assert_int_equal(r.type, P9_RWALK);
	t = (struct p9_msg){ .type = P9_TLOPEN, .tag = 3 };
	t.u.tlopen.fid = 1;
	rpc(fd, &t, &r, buf, cap);
	assert_int_equal(r.type, P9_RLOPEN);
}

static void test_pipelined(void **state)
{
	static uint8_t buf[(1u << 20) + 64];
	int fd = connect_sock(), fd2 = connect_sock();
	bool seen[64] = { false };
	struct p9_msg t, r;

	mount_conn(fd, buf, sizeof(buf));
	mount_conn(fd2, buf, sizeof(buf));
	open_big(fd, buf, sizeof(buf));
	/* 48 requests in flight: full-size reads and getattrs, interleaved */
	for (int i = 0; i < 48; i++) {
		t = (struct p9_msg){ .tag = 100 + i };
		if (i % 3 == 0) {
			t.type = P9_TREAD;
			t.u.tread.fid = 1;
			t.u.tread.offset = (uint64_t)i << 16;
			t.u.tread.count = (1u << 20) - P9_IOHDRSZ;
		} else {
			t.type = P9_TGETATTR;
			t.u.tgetattr.fid = i % 2 ? 0 : 1;
			t.u.tgetattr.mask = P9_GETATTR_BASIC;
		}
		send_msg(fd, &t);
	}
	for (int i = 0; i < 48; i++) {
		size_t len = recv_msg(fd, buf, sizeof(buf));
		int k;

		assert_int_equal(p9_decode(buf, len, false, &r), 0);
		k = r.tag - 100;
		assert_true(k >= 0 && k < 48 && !seen[k]);
		seen[k] = true;
		if (k % 3 == 0) {
			uint64_t off = (uint64_t)k << 16;
			uint32_t want = (4u << 20) - off < (1u << 20) - P9_IOHDRSZ ?
					(4u << 20) - off : (1u << 20) - P9_IOHDRSZ;
			const uint8_t *d = r.u.rdata.data;

			assert_int_equal(r.type, P9_RREAD);
			assert_int_equal(r.u.rdata.count, want);
			assert_int_equal(d[0], (uint8_t)(off >> 10));
			assert_int_equal(d[want - 1], (uint8_t)((off + want - 1) >> 10));
		} else {
			assert_int_equal(r.type, P9_RGETATTR);
		}
	}
	/* the other session is separate: fid 1 does not exist there */
	t = (struct p9_msg){ .type = P9_TGETATTR, .tag = 5 };
	t.u.tgetattr.fid = 1;
	rpc(fd2, &t, &r, buf, sizeof(buf));
	assert_int_equal(r.type, P9_RLERROR);
	assert_int_equal(r.u.rlerror.ecode, EBADF);
	close(fd);
	close(fd2);
}

static void test_broken_framing(void **state)
{
	static uint8_t buf[4096];
	uint8_t bad[7] = { 0xff, 0xff, 0xff, 0x7f, P9_TCLUNK, 0, 0 };
	int fd = connect_sock();
	struct p9_msg t, r;

	mount_conn(fd, buf, sizeof(buf));
	/* a size over msize: the server closes this connection */
	assert_int_equal(write(fd, bad, sizeof(bad)), sizeof(bad));
	{
		/* EOF, or a reset since the rest of the message was unread */
		ssize_t n = read(fd, buf, sizeof(buf));

		assert_true(n == 0 || (n < 0 && errno == ECONNRESET));
	}
	close(fd);
	/* and serves the next one */
	fd = connect_sock();
	t = (struct p9_msg){ .type = P9_TVERSION, .tag = P9_NOTAG };
	t.u.version.msize = 8192;
	t.u.version.version = S(P9_VERSION_L);
	rpc(fd, &t, &r, buf, sizeof(buf));
	assert_int_equal(r.type, P9_RVERSION);
	/* a bad message inside good framing gets Rlerror and the session
	 * goes on */
	t = (struct p9_msg){ .type = P9_TCLUNK, .tag = 9 };
	t.u.tfid.fid = 77;
	rpc(fd, &t, &r, buf, sizeof(buf));
	assert_int_equal(r.type, P9_RLERROR);
	assert_int_equal(r.u.rlerror.ecode, EBADF);
	close(fd);
}

static void test_command_line(void **state)
{
	char *help[] = { (char *)iovm, "9p-serve", "--help", NULL };
	char *none[] = { (char *)iovm, "9p-serve", NULL };
	char *badl[] = { (char *)iovm, "9p-serve", "--share", "path=/tmp",
			 "--listen", "udp:1", NULL };
	char *bads[] = { (char *)iovm, "9p-serve", "--share", "path=/tmp,what",
			 "--listen", "tcp:0", NULL };
	char *nodir[] = { (char *)iovm, "9p-serve", "--share",
			  "path=/nonexistent/x", "--listen", "tcp:0", NULL };

	assert_int_equal(run_quiet(help), 0);
	assert_int_equal(run_quiet(none), 2);
	assert_int_equal(run_quiet(badl), 1);
	assert_int_equal(run_quiet(bads), 2);
	assert_int_equal(run_quiet(nodir), 1);
}

static void stop_server(pid_t pid, const char *sk)
{
	kill(pid, SIGTERM);
	waitpid(pid, NULL, 0);
	unlink(sk);
}

static uint32_t walk_to(int fd, uint32_t newfid, const char *name,
			uint8_t *buf, size_t cap)
{
	struct p9_msg t = { .type = P9_TWALK, .tag = 2 }, r;

	t.u.twalk.fid = 0;
	t.u.twalk.newfid = newfid;
	t.u.twalk.nwname = 1;
	t.u.twalk.wname[0] = S(name);
	rpc(fd, &t, &r, buf, cap);
	return r.type == P9_RLERROR ? r.u.rlerror.ecode : 0;
}

/* Each connection gets its own share of the descriptors the process keeps
 * for 9P: one client that walks until it is refused leaves the other one
 * working, and a limit too low for --max-connections is a setup error. */
static void test_fd_budget(void **state)
{
	static uint8_t buf[8192];
	const char *two[] = { "--max-connections", "2", NULL };
	const char *many[] = { "--max-connections", "100", NULL };
	char sk[160];
	struct p9_msg t, r;
	uint32_t n, err = 0;
	pid_t pid;
	int a, b;

	snprintf(sk, sizeof(sk), "%s/fd.sock", dir);
	/* 2048 descriptors: 1024 kept for the process, a socket per
	 * connection and 16 more; (2048 - 1024 - 18) / 2 per connection */
	pid = spawn(sk, 2048, two);
	assert_true(pid > 0);
	a = connect_to(sk);
	b = connect_to(sk);
	mount_conn(a, buf, sizeof(buf));
	mount_conn(b, buf, sizeof(buf));
	for (n = 1; n < 2048 && !(err = walk_to(a, n, "big", buf, sizeof(buf))); n++)
		;
	assert_int_equal(err, EMFILE);
	assert_int_equal(n - 1, 503);
	/* the other connection walks, opens and reads */
	assert_int_equal(walk_to(b, 1, "big", buf, sizeof(buf)), 0);
	t = (struct p9_msg){ .type = P9_TLOPEN, .tag = 3 };
	t.u.tlopen.fid = 1;
	rpc(b, &t, &r, buf, sizeof(buf));
	assert_int_equal(r.type, P9_RLOPEN);
	t = (struct p9_msg){ .type = P9_TREAD, .tag = 4 };
	t.u.tread.fid = 1;
	t.u.tread.count = 4096;
	rpc(b, &t, &r, buf, sizeof(buf));
	assert_int_equal(r.type, P9_RREAD);
	assert_int_equal(r.u.rdata.count, 4096);
	/* and the first one still serves what needs no descriptor */
	t = (struct p9_msg){ .type = P9_TGETATTR, .tag = 5 };
	t.u.tgetattr.fid = 0;
	t.u.tgetattr.mask = P9_GETATTR_BASIC;
	rpc(a, &t, &r, buf, sizeof(buf));
	assert_int_equal(r.type, P9_RGETATTR);
	close(a);
	close(b);
	stop_server(pid, sk);
	/* 100 connections cannot have 64 descriptors each under 2048 */
	assert_int_equal(spawn(sk, 2048, many), -1);
}

/* Sends all but the last bytes of a Twrite of exactly size bytes on fid
 * 1, and waits until the server has read them: it has then reserved the
 * message's buffer (see read_message), and sits waiting for the rest. */
static void write_head(int fd, uint8_t *msg, uint32_t size, size_t sent)
{
	int q;

	assert_int_equal(write(fd, msg, sent), (ssize_t)sent);
	while (!ioctl(fd, SIOCOUTQ, &q) && q > 0)
		sched_yield();
}

static void make_twrite(uint8_t *msg, uint32_t size)
{
	/* size[4] Twrite tag[2] fid[4] offset[8] count[4] data */
	memset(msg, 0, P9_TWRITE_HDRSZ);
	memset(msg + P9_TWRITE_HDRSZ, 0x5a, size - P9_TWRITE_HDRSZ);
	p9_put32(msg, size);
	msg[4] = P9_TWRITE;
	msg[5] = 7;
	p9_put32(msg + 7, 1);
	p9_put32(msg + 19, size - P9_TWRITE_HDRSZ);
}

static void create_file(int fd, const char *name, uint8_t *buf, size_t cap)
{
	struct p9_msg t, r;

	t = (struct p9_msg){ .type = P9_TWALK, .tag = 2 };
	t.u.twalk.newfid = 1;	/* a clone of the root */
	rpc(fd, &t, &r, buf, cap);
	assert_int_equal(r.type, P9_RWALK);
	t = (struct p9_msg){ .type = P9_TLCREATE, .tag = 3 };
	t.u.tlcreate.fid = 1;
	t.u.tlcreate.name = S(name);
	t.u.tlcreate.flags = O_RDWR;
	t.u.tlcreate.mode = 0644;
	rpc(fd, &t, &r, buf, cap);
	assert_int_equal(r.type, P9_RLCREATE);
}

/* Ten connections to sk, each in the middle of the Twrite msg (of size
 * bytes, on a file "held" the first one creates). */
static void stall_writes(const char *sk, int conns[10], uint8_t *msg, uint32_t size)
{
	static uint8_t buf[8192];

	for (int i = 0; i < 10; i++) {
		conns[i] = connect_to(sk);
		mount_conn(conns[i], buf, sizeof(buf));
		if (!i)
			create_file(conns[i], "held", buf, sizeof(buf));
		write_head(conns[i], msg, size, 5);
	}
}

/* --buffer-memory caps the message buffers of all connections together:
 * with ten connections each in the middle of a 1 MiB Twrite, an eleventh
 * gets ENOMEM for its own 1 MiB Twrite but keeps its session (small
 * requests served, the stream in step), and succeeds once one of the ten
 * is done. */
static void test_buffer_memory(void **state)
{
	static uint8_t buf[8192], msg[1u << 20];
	const uint32_t size = 1u << 20;
	/* 4 x (2 x (1M + 11) + 16 x 2 x 16K) is the least for msize 1M */
	const char *args[] = { "--buffer-memory", "11010048", NULL };
	int conns[10], x;
	char sk[160];
	struct p9_msg t, r;
	size_t len;
	pid_t pid;

	snprintf(sk, sizeof(sk), "%s/mem.sock", dir);
	pid = spawn(sk, 0, args);
	assert_true(pid > 0);
	make_twrite(msg, size);
	stall_writes(sk, conns, msg, size);
	x = connect_to(sk);
	mount_conn(x, buf, sizeof(buf));
	create_file(x, "refused", buf, sizeof(buf));
	assert_int_equal(write(x, msg, size), size);
	len = recv_msg(x, buf, sizeof(buf));
	assert_int_equal(p9_decode(buf, len, false, &r), 0);
	assert_int_equal(r.type, P9_RLERROR);
	assert_int_equal(r.u.rlerror.ecode, ENOMEM);
	assert_int_equal(r.tag, 7);
	t = (struct p9_msg){ .type = P9_TGETATTR, .tag = 5 };
	t.u.tgetattr.fid = 1;
	t.u.tgetattr.mask = P9_GETATTR_BASIC;
	rpc(x, &t, &r, buf, sizeof(buf));
	assert_int_equal(r.type, P9_RGETATTR);
	/* the first write completes; its buffer is free by its reply */
	assert_int_equal(write(conns[0], msg + 5, size - 5), size - 5);
	len = recv_msg(conns[0], buf, sizeof(buf));
	assert_int_equal(p9_decode(buf, len, false, &r), 0);
	assert_int_equal(r.type, P9_RWRITE);
	assert_int_equal(r.u.rwrite.count, size - P9_TWRITE_HDRSZ);
	assert_int_equal(write(x, msg, size), size);
	len = recv_msg(x, buf, sizeof(buf));
	assert_int_equal(p9_decode(buf, len, false, &r), 0);
	assert_int_equal(r.type, P9_RWRITE);
	assert_int_equal(r.u.rwrite.count, size - P9_TWRITE_HDRSZ);
	for (int i = 0; i < 10; i++)
		close(conns[i]);
	close(x);
	stop_server(pid, sk);
}

/* Whether the server closes fd within 30 s (by far longer than the
 * --io-timeout of the test below). Looks without reading: unread replies
 * stay where they are. */
static bool closed_by_server(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLRDHUP };

	return poll(&p, 1, 30000) == 1 && (p.revents & (POLLRDHUP | POLLHUP));
}

/* --io-timeout: a connection that stops in the middle of a message, that
 * trickles one, or that takes no replies, is closed and its buffers go
 * back (the ten of test_buffer_memory filled --buffer-memory); one quiet
 * between messages for as long is kept. */
static void test_io_timeout(void **state)
{
	static uint8_t buf[8192], msg[1u << 20];
	const uint32_t size = 1u << 20;
	const char *args[] = { "--buffer-memory", "11010048", "--io-timeout", "1",
			       NULL };
	int conns[10], x, idle, slow;
	char sk[160];
	struct p9_msg t, r;
	size_t len;
	pid_t pid;

	snprintf(sk, sizeof(sk), "%s/timeout.sock", dir);
	pid = spawn(sk, 0, args);
	assert_true(pid > 0);
	idle = connect_to(sk);
	mount_conn(idle, buf, sizeof(buf));
	make_twrite(msg, size);
	stall_writes(sk, conns, msg, size);
	for (int i = 0; i < 10; i++) {
		assert_true(closed_by_server(conns[i]));
		close(conns[i]);
	}
	/* their buffers are free: a whole 1 MiB Twrite fits again */
	x = connect_to(sk);
	mount_conn(x, buf, sizeof(buf));
	create_file(x, "fits", buf, sizeof(buf));
	assert_int_equal(write(x, msg, size), size);
	len = recv_msg(x, buf, sizeof(buf));
	assert_int_equal(p9_decode(buf, len, false, &r), 0);
	assert_int_equal(r.type, P9_RWRITE);
	assert_int_equal(r.u.rwrite.count, size - P9_TWRITE_HDRSZ);
	close(x);
	/* one that trickles a message a byte every 200 ms: each read has a
	 * byte, but the message as a whole is overdue after 1 s (the loop
	 * would go on for 60 s) */
	x = connect_to(sk);
	mount_conn(x, buf, sizeof(buf));
	{
		struct pollfd p = { .fd = x, .events = POLLRDHUP };
		unsigned int sent = 0;

		while (sent < 300 && write(x, msg + sent, 1) == 1) {
			sent++;
			if (poll(&p, 1, 200) == 1 && (p.revents & (POLLRDHUP | POLLHUP)))
				break;
		}
		assert_true(sent < 300);
		assert_true(closed_by_server(x));
	}
	close(x);
	/* a client that asks for 4 MiB and reads none of it */
	slow = connect_to(sk);
	mount_conn(slow, buf, sizeof(buf));
	open_big(slow, buf, sizeof(buf));
	for (int i = 0; i < 4; i++) {
		t = (struct p9_msg){ .type = P9_TREAD, .tag = 10 + i };
		t.u.tread.fid = 1;
		t.u.tread.offset = (uint64_t)i << 20;
		t.u.tread.count = size - P9_IOHDRSZ;
		send_msg(slow, &t);
	}
	assert_true(closed_by_server(slow));
	close(slow);
	/* quiet all along, for longer than the timeout: still served */
	t = (struct p9_msg){ .type = P9_TGETATTR, .tag = 5 };
	t.u.tgetattr.fid = 0;
	t.u.tgetattr.mask = P9_GETATTR_BASIC;
	rpc(idle, &t, &r, buf, sizeof(buf));
	assert_int_equal(r.type, P9_RGETATTR);
	close(idle);
	stop_server(pid, sk);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pipelined),
		cmocka_unit_test(test_broken_framing),
		cmocka_unit_test(test_command_line),
		cmocka_unit_test(test_fd_budget),
		cmocka_unit_test(test_buffer_memory),
		cmocka_unit_test(test_io_timeout),
	};

	if (argc != 2) {
		fprintf(stderr, "usage: test-p9-serve IOVM\n");
		return 2;
	}
	iovm = argv[1];
	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, setup, teardown);
}
