/* virtio-blk on an NBD disk (nbdkit's memory plugin, our child, behind its
 * log and pause filters): how a sequential stream that the guest refills
 * one request at a time reaches the server. With four reads or writes out
 * the stream's requests are held and go as one command (hold_group in
 * virtio/blk.c), with three they go at once; IOVM_NBD_HOLD=0 sends each
 * as it comes; a stopping queue sends what it held at once. Built by
 * construction: the server is paused (its pause filter answers nothing
 * until resumed), each stream request is published only after the device
 * popped the one before, the test waits for the server to see each one
 * that goes at once, and nbdkit's log filter, in front of the pause,
 * shows every command as it arrives. The data are read back. SKIPPED (77)
 * without nbdkit, its log and pause filters, or an NBD-enabled build. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "block/backend.h"
#include "config.h"
#include "vdriver.h"
#include "virtio/blk.h"

#define RAM (16u << 20)
#define QSZ 64
#define SZ 4096
#define WAIT_MS 30000	/* a hang, not a pace: never reached when it works */

static char dir[] = "/tmp/iovm-blk-nbd.XXXXXX";
static char sock[100], pidf[160], ctl[100], logf[128], uri[200];
static pid_t server;

/* Each test's own file names, so that a device a failed test left
 * behind cannot reach the next test's server or log. */
static void name_files(unsigned int n)
{
	snprintf(sock, sizeof(sock), "%s/nbd%u.sock", dir, n);
	snprintf(pidf, sizeof(pidf), "%s/nbdkit%u.pid", dir, n);
	snprintf(ctl, sizeof(ctl), "%s/pause%u.sock", dir, n);
	snprintf(logf, sizeof(logf), "%s/nbdkit%u.log", dir, n);
	snprintf(uri, sizeof(uri), "nbd+unix:///?socket=%s", sock);
}

static void remove_files(void)
{
	unlink(sock);
	unlink(pidf);
	unlink(ctl);
	unlink(logf);
}

/* Each test's setup: nbdkit in the foreground, our child. */
static int server_start(void **state)
{
	char logarg[160], ctlarg[160];
	char *const argv[] = { "nbdkit", "-f", "-U", sock, "-P", pidf,
			       "--filter=log", "--filter=pause", "memory", "8M",
			       logarg, ctlarg, NULL };

	static unsigned int tests;
	pid_t parent = getpid();

	name_files(++tests);
	snprintf(logarg, sizeof(logarg), "logfile=%s", logf);
	snprintf(ctlarg, sizeof(ctlarg), "pause-control=%s", ctl);
	remove_files();
	server = fork();
	assert_true(server >= 0);
	if (!server) {
		/* it dies with the test, even one killed by its alarm (a
		 * paused nbdkit ignores SIGTERM) */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)	/* it died before the prctl */
			_exit(127);
		execvp("nbdkit", argv);
		_exit(127);
	}
	for (;;) {	/* the pid file comes once the sockets are bound */
		struct stat st;
		int status;

		if (!stat(pidf, &st) && st.st_size > 0)
			return 0;
		assert_int_equal(waitpid(server, &status, WNOHANG), 0);
		usleep(10000);	/* polls a condition: no result depends on it */
	}
}

/* Each test's teardown, whether it passed or not. */
static int server_stop(void **state)
{
	int status;
	pid_t got;

	kill(server, SIGKILL);
	got = waitpid(server, &status, 0);
	remove_files();
	return got == server ? 0 : -1;
}

/* 'p' or 'r' to the pause filter; returns once it answered ('P' comes
 * after the requests already being served are done, 'R' at once). */
static void server_ctl(char c)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	char ack = 0;

	assert_true(fd >= 0);
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", ctl);
	assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(write(fd, &c, 1), 1);
	assert_int_equal(read(fd, &ack, 1), 1);
	assert_int_equal(ack, c - 'a' + 'A');
	close(fd);
}

struct cmd {
	uint64_t offset, count;
};

static int by_offset(const void *a, const void *b)
{
	const struct cmd *x = a, *y = b;

	return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/* The write commands nbdkit's log shows so far, by offset (its threads
 * log them in whatever order they run). */
static unsigned int logged_writes(struct cmd *c, unsigned int max)
{
	FILE *f = fopen(logf, "r");
	char line[512];
	unsigned int n = 0;

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		const char *w = strstr(line, " Write id=");
		unsigned long long off, cnt;
		const char *o;

		/* (a reply's line reads "...Write id=N return=...") */
		if (!w || !strchr(line, '\n') || !(o = strstr(w, " offset=")) ||
		    sscanf(o, " offset=%llx count=%llx", &off, &cnt) != 2)
			continue;
		if (n < max)
			c[n] = (struct cmd){ off, cnt };
		n++;
	}
	fclose(f);
	qsort(c, n < max ? n : max, sizeof(*c), by_offset);
	return n;
}

/* Waits until the server has seen n write commands. */
static void wait_writes(unsigned int n)
{
	struct cmd c[64];

	for (int i = 0; logged_writes(c, 64) < n; i++) {
		assert_true(i < WAIT_MS / 10);
		usleep(10000);	/* polls a condition */
	}
}

struct fixture {
	struct vdriver d;
	struct virtio_dev *dev;
};

static struct fixture *make(void)
{
	struct fixture *f = calloc(1, sizeof(*f));
	struct disk_cfg cfg = { .path = uri, .cache = CACHE_NONE, .queues = 1 };
	char err[256];

	assert_non_null(f);
	f->dev = virtio_blk_create(&cfg, 2, err, sizeof(err));
	if (!f->dev)
		fail_msg("%s", err);
	assert_int_equal(vdriver_init(&f->d, RAM), 0);
	assert_int_equal(vdriver_attach(&f->d, f->dev, 0), 0);
	assert_int_equal(vdriver_queue_start(&f->d, 0, QSZ), 0);
	return f;
}

static void destroy(struct fixture *f)
{
	vdriver_destroy(&f->d);
	free(f);
}

struct breq {
	uint64_t hdr, data, status;
	int head;
};

static void add_req(struct fixture *f, struct breq *r, uint32_t type,
		    uint64_t sector, bool wr)
{
	struct vbuf b[3];
	uint32_t *h;

	r->hdr = vdriver_alloc(&f->d, 16);
	r->status = vdriver_alloc(&f->d, 1);
	if (!r->data)
		r->data = vdriver_alloc(&f->d, SZ);
	h = vdriver_ptr(&f->d, r->hdr, 16);
	h[0] = type;
	h[1] = 0;
	memcpy(h + 2, &sector, 8);
	*(uint8_t *)vdriver_ptr(&f->d, r->status, 1) = 0xee;
	b[0] = (struct vbuf){ r->hdr, 16, false };
	b[1] = (struct vbuf){ r->data, SZ, !wr };
	b[2] = (struct vbuf){ r->status, 1, true };
	r->head = vdriver_add(&f->d, 0, b, 3, false);
	assert_true(r->head >= 0);
}

static uint8_t status_of(struct fixture *f, struct breq *r)
{
	return *(uint8_t *)vdriver_ptr(&f->d, r->status, 1);
}

/* Publishes r and waits until the device popped it. */
static void add_popped(struct fixture *f, struct breq *r, uint32_t type,
		       uint64_t sector)
{
	uint16_t want = (uint16_t)(f->d.q[0].avail_idx + 1);

	add_req(f, r, type, sector, type == VIRTIO_BLK_T_OUT);
	vdriver_kick(&f->d, 0);
	for (int i = 0; __atomic_load_n(&f->d.q[0].vq.last_avail, __ATOMIC_ACQUIRE) != want; i++) {
		assert_true(i < WAIT_MS / 10);
		usleep(10000);	/* polls a condition */
	}
}

static void fill(uint8_t *p, unsigned int seed)
{
	for (unsigned int i = 0; i < SZ; i++)
		p[i] = (uint8_t)(seed * 29 + i * 13 + (i >> 8));
}

/* Up to five writes apart from each other, then a stream of four. */
#define NAPART 5
#define NSTREAM 4
#define NREQ (NAPART + NSTREAM)
static const uint64_t apart[NAPART] = { 1000, 2000, 3000, 4000, 5000 };
static const uint64_t stream[NSTREAM] = { 100, 108, 116, 124 };

/* The sector of write i of a run with napart writes apart. */
static uint64_t sector_of(unsigned int napart, unsigned int i)
{
	return i < napart ? apart[i] : stream[i - napart];
}

/* Pauses the server and makes napart writes apart, then the stream, each
 * popped on its own; after stream write k it waits until the server has
 * seen[k] write commands (those sent at once). Held writes are never
 * waited for: the final count tells whether they were. */
static void write_paused(struct fixture *f, struct breq *r, unsigned int napart,
			 const unsigned int seen[NSTREAM])
{
	server_ctl('p');
	for (unsigned int i = 0; i < napart + NSTREAM; i++) {
		r[i].data = vdriver_alloc(&f->d, SZ);
		fill(vdriver_ptr(&f->d, r[i].data, SZ), i + 1);
		add_popped(f, &r[i], VIRTIO_BLK_T_OUT, sector_of(napart, i));
		if (i >= napart)
			wait_writes(seen[i - napart]);
	}
}

/* Reads every write back and checks its bytes. */
static void check_data(struct fixture *f, unsigned int napart)
{
	uint8_t ref[SZ];
	uint32_t id, len;

	for (unsigned int i = 0; i < napart + NSTREAM; i++) {
		struct breq r = { 0 };

		add_req(f, &r, VIRTIO_BLK_T_IN, sector_of(napart, i), false);
		vdriver_kick(&f->d, 0);
		assert_int_equal(vdriver_wait_used(&f->d, 0, &id, &len, WAIT_MS), 1);
		assert_int_equal(id, r.head);
		assert_int_equal(status_of(f, &r), VIRTIO_BLK_S_OK);
		fill(ref, i + 1);
		assert_memory_equal(vdriver_ptr(&f->d, r.data, SZ), ref, SZ);
	}
}

/* write_paused, then the server resumes: returns the number of commands
 * it saw once all completed (c: them, by offset), the data checked. */
static unsigned int stream_commands(struct fixture *f, struct cmd *c,
				    unsigned int napart,
				    const unsigned int seen[NSTREAM])
{
	struct breq r[NREQ];
	uint32_t id, len;
	unsigned int n;

	write_paused(f, r, napart, seen);
	server_ctl('r');
	for (unsigned int i = 0; i < napart + NSTREAM; i++)
		assert_int_equal(vdriver_wait_used(&f->d, 0, &id, &len, WAIT_MS), 1);
	for (unsigned int i = 0; i < napart + NSTREAM; i++)
		assert_int_equal(status_of(f, &r[i]), VIRTIO_BLK_S_OK);
	n = logged_writes(c, 64);
	check_data(f, napart);
	return n;
}

/* The stream's commands the server saw (the first by offset: those
 * apart come after): their sectors and sizes in 4 KiB. */
struct want {
	uint64_t sector;
	uint64_t blocks;
};

static void expect_stream(const struct cmd *c, const struct want *w,
			  unsigned int n)
{
	for (unsigned int i = 0; i < n; i++) {
		assert_int_equal(c[i].offset, w[i].sector * 512);
		assert_int_equal(c[i].count, w[i].blocks * SZ);
	}
}

/* Six writes out (five apart, the stream's first): the stream's last
 * three are held, and go as one command of 12 KiB once completions
 * come. */
static void test_stream_held(void **state)
{
	static const unsigned int seen[NSTREAM] = { 6, 6, 6, 6 };
	static const struct want w[] = { { 100, 1 }, { 108, 3 } };
	struct cmd c[64];
	struct fixture *f;

	f = make();
	assert_int_equal(stream_commands(f, c, 5, seen), 7);
	expect_stream(c, w, 2);
	destroy(f);
}

/* The threshold: with two apart and the stream's first out, three in
 * all, the second goes at once; with it, four are out, and the last two
 * are held and go as one command. */
static void test_hold_threshold(void **state)
{
	static const unsigned int seen[NSTREAM] = { 3, 4, 4, 4 };
	static const struct want w[] = { { 100, 1 }, { 108, 1 }, { 116, 2 } };
	struct cmd c[64];
	struct fixture *f;

	f = make();
	assert_int_equal(stream_commands(f, c, 2, seen), 5);
	expect_stream(c, w, 3);
	destroy(f);
}

/* IOVM_NBD_HOLD=0: each of the stream's requests is its own command. */
static void test_no_hold(void **state)
{
	static const unsigned int seen[NSTREAM] = { 6, 7, 8, 9 };
	static const struct want w[] = { { 100, 1 }, { 108, 1 }, { 116, 1 }, { 124, 1 } };
	struct cmd c[64];
	struct fixture *f;

	setenv("IOVM_NBD_HOLD", "0", 1);
	f = make();
	unsetenv("IOVM_NBD_HOLD");
	assert_int_equal(stream_commands(f, c, 5, seen), 9);
	expect_stream(c, w, 4);
	destroy(f);
}

static void *stop_queue(void *arg)
{
	struct fixture *f = arg;

	vdriver_queue_stop(&f->d, 0);
	return NULL;
}

/* A queue stopped while it holds a stream sends it at once: the server,
 * still paused and so answering nothing, receives it; then everything
 * completes. */
static void test_stop_sends_held(void **state)
{
	static const unsigned int seen[NSTREAM] = { 6, 6, 6, 6 };
	static const struct want w[] = { { 100, 1 }, { 108, 3 } };
	struct breq r[NREQ];
	struct cmd c[64];
	struct fixture *f;
	pthread_t t;
	uint32_t id, len;

	f = make();
	write_paused(f, r, 5, seen);
	assert_int_equal(pthread_create(&t, NULL, stop_queue, f), 0);
	wait_writes(7);
	assert_int_equal(logged_writes(c, 64), 7);
	expect_stream(c, w, 2);
	server_ctl('r');
	assert_int_equal(pthread_join(t, NULL), 0);
	for (int i = 0; i < NREQ; i++) {
		assert_int_equal(vdriver_wait_used(&f->d, 0, &id, &len, 0), 1);
		assert_int_equal(status_of(f, &r[i]), VIRTIO_BLK_S_OK);
	}
	destroy(f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_stream_held, server_start, server_stop),
		cmocka_unit_test_setup_teardown(test_hold_threshold, server_start, server_stop),
		cmocka_unit_test_setup_teardown(test_no_hold, server_start, server_stop),
		cmocka_unit_test_setup_teardown(test_stop_sends_held, server_start, server_stop),
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
	if (system("nbdkit --filter=log --filter=pause null --dump-plugin >/dev/null 2>&1")) {
		printf("SKIPPED: this nbdkit has no log or pause filter\n");
		return 77;
	}
	signal(SIGPIPE, SIG_IGN);
	if (!mkdtemp(dir)) {
		perror(dir);
		return 1;
	}
	alarm(120);	/* a hang is a failure, not a wait for ever */
	ret = cmocka_run_group_tests(tests, NULL, NULL);
	rmdir(dir);
	return ret;
}
