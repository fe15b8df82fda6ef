/* The real virtio-blk device (the one `iovm run` uses) behind the vhost-user
 * back-end, on a temporary disk file, driven by a test client that owns a
 * memfd "guest RAM" and writes descriptors itself: config space, writes and
 * reads end to end, and a client that hangs up with writes in flight. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "config.h"
#include "vclient.h"
#include "vhost/proto.h"
#include "vhost/server.h"
#include "virtio/blk.h"
#include "virtio/ring.h"

#define RAM_SIZE (1u << 20)
#define QSIZE 64
#define NREQ 16
#define DISK_SIZE (1u << 20)
#define DESC 0x0
#define AVAIL 0x1000
#define USED 0x2000
#define HDRS 0x3000
#define STATUS 0x4000
#define DATA 0x10000

struct blk_hdr {
	uint32_t type;
	uint32_t ioprio;
	uint64_t sector;
};

struct env {
	char path[64];
	struct virtio_dev *dev;
	struct vhu_server *srv;
	pthread_t thread;
	int cfd, sfd, result;
	int ram_fd;
	uint8_t *ram;
	uint16_t avail_idx;
};

static void *serve_thread(void *arg)
{
	struct env *e = arg;

	e->result = vhu_server_serve(e->srv, e->sfd, -1);
	return NULL;
}

static void connect_client(struct env *e)
{
	int sv[2];

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	e->cfd = sv[0];
	e->sfd = sv[1];
	assert_int_equal(pthread_create(&e->thread, NULL, serve_thread, e), 0);
}

static int hang_up(struct env *e)
{
	close(e->cfd);
	assert_int_equal(pthread_join(e->thread, NULL), 0);
	return e->result;
}

static int setup(void **state)
{
	struct env *e = calloc(1, sizeof(*e));
	struct disk_cfg cfg = { .cache = CACHE_NONE };
	char err[256];
	int fd;

	assert_non_null(e);
	strcpy(e->path, "/tmp/iovm-vhost-blk-XXXXXX");
	fd = mkstemp(e->path);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, DISK_SIZE), 0);
	close(fd);
	cfg.path = e->path;
	e->dev = virtio_blk_create(&cfg, 1, err, sizeof(err));
	if (!e->dev && strstr(err, "O_DIRECT")) {
		cfg.cache = CACHE_WRITEBACK;	/* tmpfs */
		e->dev = virtio_blk_create(&cfg, 1, err, sizeof(err));
	}
	if (!e->dev)
		fail_msg("virtio_blk_create: %s", err);
	e->srv = vhu_server_new(e->dev);
	assert_non_null(e->srv);
	e->ram_fd = memfd_create("ram", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	assert_true(e->ram_fd >= 0);
	assert_int_equal(ftruncate(e->ram_fd, RAM_SIZE), 0);
	/* the server refuses memfds that could shrink */
	assert_int_equal(fcntl(e->ram_fd, F_ADD_SEALS, F_SEAL_SHRINK), 0);
	e->ram = mmap(NULL, RAM_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, e->ram_fd, 0);
	assert_true(e->ram != MAP_FAILED);
	*state = e;
	return 0;
}

static int teardown(void **state)
{
	struct env *e = *state;

	vhu_server_free(e->srv);
	e->dev->ops->destroy(e->dev);
	munmap(e->ram, RAM_SIZE);
	close(e->ram_fd);
	unlink(e->path);
	free(e);
	return 0;
}

static uint64_t uva(struct env *e, uint64_t gpa)
{
	return (uintptr_t)e->ram + gpa;
}

/* A session as QEMU opens one: features, memory, vring 0 from base, kicks
 * on the test's eventfd kick (SCM_RIGHTS passes the same eventfd object). */
static void start_session(struct env *e, uint16_t base, int kick)
{
	uint64_t f, pf = (1ull << VHU_PF_REPLY_ACK) | (1ull << VHU_PF_CONFIG) |
			 (1ull << VHU_PF_MQ);
	struct vhu_mem_table t = { .nregions = 1 };
	struct vhu_vring_state st = { 0, QSIZE };
	struct vhu_vring_addr a = { 0, 0, uva(e, DESC), uva(e, USED), uva(e, AVAIL), 0 };
	int call = eventfd(0, EFD_CLOEXEC);
	uint64_t idx = 0;

	connect_client(e);
	f = get_u64(e->cfd, VHU_GET_FEATURES);
	assert_true(f & (1ull << VIRTIO_F_VERSION_1));
	send_req(e->cfd, VHU_SET_PROTOCOL_FEATURES, &pf, 8);
	f &= (1ull << VIRTIO_F_VERSION_1) | (1ull << VIRTIO_BLK_F_FLUSH) |
	     (1ull << VHU_F_PROTOCOL_FEATURES);
	assert_int_equal(send_ack(e->cfd, VHU_SET_FEATURES, &f, 8, NULL, 0), 0);
	t.r[0] = (struct vhu_region){ 0, RAM_SIZE, uva(e, 0), 0 };
	assert_int_equal(send_ack(e->cfd, VHU_SET_MEM_TABLE, &t,
				  VHU_MEM_TABLE_HDR_SIZE + sizeof(t.r[0]), &e->ram_fd, 1), 0);
	assert_int_equal(send_ack(e->cfd, VHU_SET_VRING_NUM, &st, 8, NULL, 0), 0);
	assert_int_equal(send_ack(e->cfd, VHU_SET_VRING_ADDR, &a, sizeof(a), NULL, 0), 0);
	st.num = base;
	assert_int_equal(send_ack(e->cfd, VHU_SET_VRING_BASE, &st, 8, NULL, 0), 0);
	assert_int_equal(send_ack(e->cfd, VHU_SET_VRING_CALL, &idx, 8, &call, 1), 0);
	assert_int_equal(send_ack(e->cfd, VHU_SET_VRING_KICK, &idx, 8, &kick, 1), 0);
	st.num = 1;
	assert_int_equal(send_ack(e->cfd, VHU_SET_VRING_ENABLE, &st, 8, NULL, 0), 0);
	close(call);
}

static volatile uint16_t *used_idx(struct env *e)
{
	return (volatile uint16_t *)(e->ram + USED + 2);
}

/* Queues request s: type, 4 KiB at sector s * 8 from/to DATA + s * 4096. */
static void queue_req(struct env *e, unsigned int s, uint32_t type)
{
	struct virtq_desc *d = (struct virtq_desc *)(e->ram + DESC) + s * 3;
	struct blk_hdr *h = (struct blk_hdr *)(e->ram + HDRS) + s;
	volatile uint16_t *avail = (volatile uint16_t *)(e->ram + AVAIL);
	bool data = type == VIRTIO_BLK_T_IN || type == VIRTIO_BLK_T_OUT;

	h->type = type;
	h->ioprio = 0;
	h->sector = s * 8;
	e->ram[STATUS + s] = 0xff;
	d[0] = (struct virtq_desc){ HDRS + s * sizeof(*h), sizeof(*h), VIRTQ_DESC_F_NEXT,
				    s * 3 + (data ? 1 : 2) };
	d[1] = (struct virtq_desc){ DATA + s * 4096, 4096,
				    VIRTQ_DESC_F_NEXT | (type == VIRTIO_BLK_T_IN ? VIRTQ_DESC_F_WRITE : 0),
				    s * 3 + 2 };
	d[2] = (struct virtq_desc){ STATUS + s, 1, VIRTQ_DESC_F_WRITE, 0 };
	avail[2 + e->avail_idx % QSIZE] = s * 3;
	e->avail_idx++;
}

/* Publishes the avail index and kicks. */
static void publish(struct env *e, int kick)
{
	volatile uint16_t *avail = (volatile uint16_t *)(e->ram + AVAIL);
	uint64_t one = 1;

	__atomic_store_n(&avail[1], e->avail_idx, __ATOMIC_RELEASE);
	assert_int_equal(write(kick, &one, sizeof(one)), sizeof(one));
}

static void wait_used(struct env *e, uint16_t want)
{
	for (int i = 0; i < 5000 && *used_idx(e) != want; i++)
		usleep(1000);
	assert_int_equal(*used_idx(e), want);
}

static void fill(uint8_t *p, unsigned int s, unsigned int gen)
{
	for (unsigned int i = 0; i < 4096; i++)
		p[i] = (uint8_t)(s * 31 + gen * 7 + i / 64);
}

static void test_config_and_io(void **state)
{
	struct env *e = *state;
	struct vhu_config c = { .offset = 0, .size = 8 };
	uint8_t buf[4096], want[4096];
	uint64_t cap;
	int kick = eventfd(0, EFD_CLOEXEC);

	start_session(e, 0, kick);
	send_req(e->cfd, VHU_GET_CONFIG, &c, VHU_CONFIG_HDR_SIZE + 8);
	assert_int_equal(recv_reply(e->cfd, VHU_GET_CONFIG, &c, sizeof(c)),
			 VHU_CONFIG_HDR_SIZE + 8);
	memcpy(&cap, c.data, 8);
	assert_int_equal(cap, DISK_SIZE / 512);

	for (unsigned int s = 0; s < 4; s++) {
		fill(e->ram + DATA + s * 4096, s, 1);
		queue_req(e, s, VIRTIO_BLK_T_OUT);
	}
	publish(e, kick);
	wait_used(e, 4);
	for (unsigned int s = 0; s < 4; s++) {
		assert_int_equal(e->ram[STATUS + s], VIRTIO_BLK_S_OK);
		memset(e->ram + DATA + s * 4096, 0, 4096);
		queue_req(e, s, VIRTIO_BLK_T_IN);
	}
	queue_req(e, 4, VIRTIO_BLK_T_FLUSH);
	publish(e, kick);
	wait_used(e, 9);
	for (unsigned int s = 0; s < 4; s++) {
		fill(want, s, 1);
		assert_int_equal(e->ram[STATUS + s], VIRTIO_BLK_S_OK);
		assert_memory_equal(e->ram + DATA + s * 4096, want, 4096);
	}
	assert_int_equal(e->ram[STATUS + 4], VIRTIO_BLK_S_OK);
	/* GET_VRING_BASE: drained, and the index counts all nine. */
	{
		struct vhu_vring_state st = { 0, 0 };

		send_req(e->cfd, VHU_GET_VRING_BASE, &st, sizeof(st));
		assert_int_equal(recv_reply(e->cfd, VHU_GET_VRING_BASE, &st, sizeof(st)), 8);
		assert_int_equal(st.num, 9);
	}
	assert_int_equal(hang_up(e), 0);
	/* The file itself. */
	{
		FILE *f = fopen(e->path, "rb");

		assert_non_null(f);
		assert_int_equal(fseek(f, 3 * 4096, SEEK_SET), 0);
		assert_int_equal(fread(buf, 1, 4096, f), 4096);
		fclose(f);
		fill(want, 3, 1);
		assert_memory_equal(buf, want, 4096);
	}
	close(kick);
}

/* The client hangs up right after queueing writes. The back-end drains
 * before it forgets the client: whatever the device completed is in the
 * file, and what it had not popped is still in the avail ring, so a new
 * session resuming from the used index (as QEMU does when it cannot ask
 * GET_VRING_BASE) finishes the rest. Nothing completed is lost. */
static void test_hangup_with_writes_in_flight(void **state)
{
	struct env *e = *state;
	int kick = eventfd(0, EFD_CLOEXEC);
	uint16_t done, base = *used_idx(e);
	uint8_t want[4096], buf[4096];
	FILE *f;

	e->avail_idx = base;
	start_session(e, base, kick);
	for (unsigned int s = 0; s < NREQ; s++) {
		fill(e->ram + DATA + s * 4096, s, 2);
		queue_req(e, s, VIRTIO_BLK_T_OUT);
	}
	publish(e, kick);
	assert_int_equal(hang_up(e), 0);

	/* Back-end drained: nothing half-done remains in flight. */
	done = *used_idx(e) - base;
	assert_true(done <= NREQ);
	print_message("%u of %u writes completed before the hang-up\n", done, NREQ);
	f = fopen(e->path, "rb");
	assert_non_null(f);
	for (uint16_t u = 0; u < done; u++) {
		volatile uint32_t *el = (volatile uint32_t *)(e->ram + USED + 4) +
					2 * ((base + u) % QSIZE);
		unsigned int s = el[0] / 3;

		assert_true(s < NREQ);
		assert_int_equal(e->ram[STATUS + s], VIRTIO_BLK_S_OK);
		fill(want, s, 2);
		assert_int_equal(fseek(f, s * 4096, SEEK_SET), 0);
		assert_int_equal(fread(buf, 1, 4096, f), 4096);
		assert_memory_equal(buf, want, 4096);
	}
	fclose(f);

	/* The next client resumes at the used index; the rest completes. */
	start_session(e, base + done, kick);
	publish(e, kick);
	wait_used(e, base + NREQ);
	assert_int_equal(hang_up(e), 0);
	f = fopen(e->path, "rb");
	assert_non_null(f);
	for (unsigned int s = 0; s < NREQ; s++) {
		assert_int_equal(e->ram[STATUS + s], VIRTIO_BLK_S_OK);
		fill(want, s, 2);
		assert_int_equal(fseek(f, s * 4096, SEEK_SET), 0);
		assert_int_equal(fread(buf, 1, 4096, f), 4096);
		assert_memory_equal(buf, want, 4096);
	}
	fclose(f);
	close(kick);
}

/* Guest RAM in a plain file (memory-backend-file: it cannot be sealed),
 * which the client truncates while a queue runs. The back-end's next ring
 * access faults: it must log the problem, drop that client and serve the
 * next one, not die of SIGBUS. */
static void test_client_truncates_ram(void **state)
{
	struct env *e = *state;
	char path[] = "/tmp/iovm-vhost-ram-XXXXXX", log[1024];
	uint8_t *memfd_ram = e->ram, want[4096];
	int memfd = e->ram_fd, kick = eventfd(0, EFD_CLOEXEC), logfd, saved_err;
	volatile uint16_t *avail;
	uint16_t base;
	ssize_t n;

	/* A server made in this test: its SIGBUS handler goes on top of the
	 * one cmocka installs around each test. */
	vhu_server_free(e->srv);
	e->srv = vhu_server_new(e->dev);
	assert_non_null(e->srv);

	e->ram_fd = mkstemp(path);
	assert_true(e->ram_fd >= 0);
	unlink(path);
	assert_int_equal(ftruncate(e->ram_fd, RAM_SIZE), 0);
	e->ram = mmap(NULL, RAM_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, e->ram_fd, 0);
	assert_true(e->ram != MAP_FAILED);
	e->avail_idx = 0;
	start_session(e, 0, kick);
	fill(e->ram + DATA, 0, 3);
	queue_req(e, 0, VIRTIO_BLK_T_OUT);
	publish(e, kick);
	wait_used(e, 1);
	assert_int_equal(e->ram[STATUS], VIRTIO_BLK_S_OK);

	/* One more request made visible, then the file shrinks to nothing
	 * under the running queue, and a kick sends the back-end to the
	 * ring. (From here on the client's own mapping is gone too.) */
	queue_req(e, 1, VIRTIO_BLK_T_OUT);
	avail = (volatile uint16_t *)(e->ram + AVAIL);
	__atomic_store_n(&avail[1], e->avail_idx, __ATOMIC_RELEASE);
	fflush(stderr);
	saved_err = dup(2);
	logfd = fileno(tmpfile());
	assert_true(saved_err >= 0 && logfd >= 0);
	dup2(logfd, 2);
	assert_int_equal(ftruncate(e->ram_fd, 0), 0);
	assert_int_equal(write(kick, &(uint64_t){ 1 }, 8), 8);
	assert_true(hung_up(e->cfd));
	assert_int_equal(hang_up(e), -EFAULT);
	fflush(stderr);
	dup2(saved_err, 2);
	close(saved_err);
	n = pread(logfd, log, sizeof(log) - 1, 0);
	assert_true(n > 0);
	log[n] = 0;
	fputs(log, stderr);
	assert_non_null(strstr(log, "client truncated the memory file of region gpa 0x0 "));
	close(logfd);
	munmap(e->ram, RAM_SIZE);
	close(e->ram_fd);

	/* The back-end is alive: the next client (sealed memfd) is served,
	 * and the write the first client saw completed is on disk. */
	e->ram = memfd_ram;
	e->ram_fd = memfd;
	base = *used_idx(e);
	e->avail_idx = base;
	start_session(e, base, kick);
	memset(e->ram + DATA, 0, 4096);
	queue_req(e, 0, VIRTIO_BLK_T_IN);
	publish(e, kick);
	wait_used(e, base + 1);
	assert_int_equal(e->ram[STATUS], VIRTIO_BLK_S_OK);
	fill(want, 0, 3);
	assert_memory_equal(e->ram + DATA, want, 4096);
	assert_int_equal(hang_up(e), 0);
	close(kick);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_config_and_io),
		cmocka_unit_test(test_hangup_with_writes_in_flight),
		cmocka_unit_test(test_client_truncates_ram),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
