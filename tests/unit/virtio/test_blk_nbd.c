/* virtio-blk on an NBD disk (nbdkit's memory plugin, our child, behind its
 * log and pause filters): how a sequential stream that the guest refills
 * one request at a time reaches the server. With other requests in flight
 * the stream's requests are held and go as one command (hold_group in
 * virtio/blk.c); IOVM_NBD_HOLD=0 sends each as it comes; a stopping queue
 * sends what it held at once. Built by construction: the server is paused
 * (its pause filter answers nothing until resumed), each stream request is
 * published only after the device popped the one before, and nbdkit's log
 * filter, in front of the pause, shows every command as it arrives. The
 * data are read back. SKIPPED (77) without nbdkit or an NBD-enabled build. */
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

/* Each test's setup: nbdkit in the foreground, our child. */
static int server_start(void **state)
{
	char logarg[160], ctlarg[160];
	char *const argv[] = { "nbdkit", "-f", "-U", sock, "-P", pidf,
			       "--filter=log", "--filter=pause", "memory", "8M",
			       logarg, ctlarg, NULL };

	snprintf(logarg, sizeof(logarg), "logfile=%s", logf);
	snprintf(ctlarg, sizeof(ctlarg), "pause-control=%s", ctl);
	unlink(pidf);
	unlink(sock);
	unlink(logf);
	unlink(ctl);
	server = fork();
	assert_true(server >= 0);
	if (!server) {
		/* it dies with the test, even one killed by its alarm (a
		 * paused nbdkit ignores SIGTERM) */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
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

	kill(server, SIGKILL);
	return waitpid(server, &status, 0) == server ? 0 : -1;
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

/* Five writes apart from each other, then a stream of four. */
#define NREQ 9
static const uint64_t sectors[NREQ] = { 1000, 2000, 3000, 4000, 5000,
					100, 108, 116, 124 };

/* Pauses the server and makes the nine writes, each popped on its own:
 * the five apart and the stream's first go at once (the server has them
 * when this returns); the rest of the stream, with six others in flight,
 * as the hold decides. */
static void write_paused(struct fixture *f, struct breq *r)
{
	server_ctl('p');
	for (int i = 0; i < NREQ; i++) {
		r[i].data = vdriver_alloc(&f->d, SZ);
		fill(vdriver_ptr(&f->d, r[i].data, SZ), (unsigned int)i + 1);
		add_popped(f, &r[i], VIRTIO_BLK_T_OUT, sectors[i]);
	}
	wait_writes(6);
}

/* Reads every write back and checks its bytes. */
static void check_data(struct fixture *f)
{
	uint8_t ref[SZ];
	uint32_t id, len;

	for (int i = 0; i < NREQ; i++) {
		struct breq r = { 0 };

		add_req(f, &r, VIRTIO_BLK_T_IN, sectors[i], false);
		vdriver_kick(&f->d, 0);
		assert_int_equal(vdriver_wait_used(&f->d, 0, &id, &len, WAIT_MS), 1);
		assert_int_equal(id, r.head);
		assert_int_equal(status_of(f, &r), VIRTIO_BLK_S_OK);
		fill(ref, (unsigned int)i + 1);
		assert_memory_equal(vdriver_ptr(&f->d, r.data, SZ), ref, SZ);
	}
}

/* write_paused, then the server resumes: returns the number of commands
 * it saw once all completed (c: them, by offset), the data checked. */
static unsigned int stream_commands(struct fixture *f, struct cmd *c)
{
	struct breq r[NREQ];
	uint32_t id, len;
	unsigned int n;

	write_paused(f, r);
	server_ctl('r');
	for (int i = 0; i < NREQ; i++)
		assert_int_equal(vdriver_wait_used(&f->d, 0, &id, &len, WAIT_MS), 1);
	for (int i = 0; i < NREQ; i++)
		assert_int_equal(status_of(f, &r[i]), VIRTIO_BLK_S_OK);
	n = logged_writes(c, 64);
	check_data(f);
	return n;
}

/* Held while the others are in flight, the stream's last three go as one
 * command of 12 KiB once completions come. */
static void test_stream_held(void **state)
{
	struct cmd c[64];
	struct fixture *f;

	f = make();
	assert_int_equal(stream_commands(f, c), 7);
	assert_int_equal(c[0].offset, 100 * 512);
	assert_int_equal(c[0].count, SZ);
	assert_int_equal(c[1].offset, 108 * 512);
	assert_int_equal(c[1].count, 3 * SZ);
	destroy(f);
}

/* IOVM_NBD_HOLD=0: each of the stream's requests is its own command. */
static void test_no_hold(void **state)
{
	struct cmd c[64];
	struct fixture *f;

	setenv("IOVM_NBD_HOLD", "0", 1);
	f = make();
	unsetenv("IOVM_NBD_HOLD");
	assert_int_equal(stream_commands(f, c), 9);
	for (int i = 5; i < NREQ; i++) {	/* the stream's, first by offset */
		assert_int_equal(c[i - 5].offset, sectors[i] * 512);
		assert_int_equal(c[i - 5].count, SZ);
	}
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
	struct breq r[NREQ];
	struct cmd c[64];
	struct fixture *f;
	pthread_t t;
	uint32_t id, len;

	f = make();
	write_paused(f, r);
	assert_int_equal(pthread_create(&t, NULL, stop_queue, f), 0);
	wait_writes(7);
	assert_int_equal(logged_writes(c, 64), 7);
	assert_int_equal(c[1].offset, 108 * 512);
	assert_int_equal(c[1].count, 3 * SZ);
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
	signal(SIGPIPE, SIG_IGN);
	if (!mkdtemp(dir)) {
		perror(dir);
		return 1;
	}
	snprintf(sock, sizeof(sock), "%s/nbd.sock", dir);
	snprintf(pidf, sizeof(pidf), "%s/nbdkit.pid", dir);
	snprintf(ctl, sizeof(ctl), "%s/pause.sock", dir);
	snprintf(logf, sizeof(logf), "%s/nbdkit.log", dir);
	snprintf(uri, sizeof(uri), "nbd+unix:///?socket=%s", sock);
	alarm(120);	/* a hang is a failure, not a wait for ever */
	ret = cmocka_run_group_tests(tests, NULL, NULL);
	unlink(sock);
	unlink(pidf);
	unlink(ctl);
	unlink(logf);
	rmdir(dir);
	return ret;
}
