/* The real virtio-blk device (the one `iovm run` uses) behind the vhost-user
 * back-end, on a temporary disk file, driven by a test client that owns a
 * memfd "guest RAM" and writes descriptors itself: config space, writes and
 * reads end to end, and a client that hangs up with writes in flight. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
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

/* The queue size the inflight buffer is made for: QEMU makes it for the
 * size it configured, and a driver may pick a smaller ring. */
static uint16_t inflight_qsize = QSIZE;

/* Connects and negotiates: features, protocol features (with
 * INFLIGHT_SHMFD and the buffer when inflight_fd >= 0), the memory table;
 * no vring yet. */
static void begin_session(struct env *e, int inflight_fd)
{
	uint64_t f, pf = (1ull << VHU_PF_REPLY_ACK) | (1ull << VHU_PF_CONFIG) |
			 (1ull << VHU_PF_MQ) |
			 (inflight_fd >= 0 ? 1ull << VHU_PF_INFLIGHT_SHMFD : 0);
	struct vhu_mem_table t = { .nregions = 1 };

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
	if (inflight_fd >= 0) {
		/* As QEMU's vhost-user-blk does at every start. */
		struct vhu_inflight in = { virtq_inflight_region_size(inflight_qsize), 0, 1,
					   inflight_qsize };

		assert_int_equal(send_ack(e->cfd, VHU_SET_INFLIGHT_FD, &in, sizeof(in),
					  &inflight_fd, 1), 0);
	}
}

/* Vring 0's size, addresses and base (it starts with its kick fd and
 * enable). */
static void set_vring(struct env *e, uint16_t base)
{
	struct vhu_vring_state st = { 0, QSIZE };
	struct vhu_vring_addr a = { 0, 0, uva(e, DESC), uva(e, USED), uva(e, AVAIL), 0 };

	assert_int_equal(send_ack(e->cfd, VHU_SET_VRING_NUM, &st, 8, NULL, 0), 0);
	assert_int_equal(send_ack(e->cfd, VHU_SET_VRING_ADDR, &a, sizeof(a), NULL, 0), 0);
	st.num = base;
	assert_int_equal(send_ack(e->cfd, VHU_SET_VRING_BASE, &st, 8, NULL, 0), 0);
}

/* SET_VRING_KICK or _CALL of vring 0, acked. */
static void set_vring_fd(struct env *e, uint32_t req, int fd)
{
	uint64_t idx = 0;

	assert_int_equal(send_ack(e->cfd, req, &idx, 8, &fd, 1), 0);
}

static void enable_vring(struct env *e)
{
	struct vhu_vring_state st = { 0, 1 };

	assert_int_equal(send_ack(e->cfd, VHU_SET_VRING_ENABLE, &st, 8, NULL, 0), 0);
}

/* A session as QEMU opens one: features, memory, vring 0 from base, kicks
 * on the test's eventfd kick (SCM_RIGHTS passes the same eventfd object). */
static void start_session_inflight(struct env *e, uint16_t base, int kick,
				   int inflight_fd)
{
	int call = eventfd(0, EFD_CLOEXEC);

	begin_session(e, inflight_fd);
	set_vring(e, base);
	set_vring_fd(e, VHU_SET_VRING_CALL, call);
	set_vring_fd(e, VHU_SET_VRING_KICK, kick);
	enable_vring(e);
	close(call);
}

static void start_session(struct env *e, uint16_t base, int kick)
{
	inflight_qsize = QSIZE;
	start_session_inflight(e, base, kick, -1);
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

static void read_disk(struct env *e, unsigned int s, uint8_t *buf)
{
	FILE *f = fopen(e->path, "rb");

	assert_non_null(f);
	assert_int_equal(fseek(f, s * 4096, SEEK_SET), 0);
	assert_int_equal(fread(buf, 1, 4096, f), 4096);
	fclose(f);
}

/* Sector s (4 KiB) of the disk file holds fill(s, gen). */
static void expect_disk(struct env *e, unsigned int s, unsigned int gen)
{
	uint8_t buf[4096], want[4096];

	fill(want, s, gen);
	read_disk(e, s, buf);
	assert_memory_equal(buf, want, 4096);
}

static void test_config_and_io(void **state)
{
	struct env *e = *state;
	struct vhu_config c = { .offset = 0, .size = 8 };
	uint8_t want[4096];
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
	expect_disk(e, 3, 1);
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
	for (uint16_t u = 0; u < done; u++) {
		volatile uint32_t *el = (volatile uint32_t *)(e->ram + USED + 4) +
					2 * ((base + u) % QSIZE);
		unsigned int s = el[0] / 3;

		assert_true(s < NREQ);
		assert_int_equal(e->ram[STATUS + s], VIRTIO_BLK_S_OK);
		expect_disk(e, s, 2);
	}

	/* The next client resumes at the used index; the rest completes. */
	start_session(e, base + done, kick);
	publish(e, kick);
	wait_used(e, base + NREQ);
	assert_int_equal(hang_up(e), 0);
	for (unsigned int s = 0; s < NREQ; s++) {
		assert_int_equal(e->ram[STATUS + s], VIRTIO_BLK_S_OK);
		expect_disk(e, s, 2);
	}
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

/* A new client asks the back-end for an inflight buffer as *in says (its
 * reply lands there) and maps it; the client stays connected. */
static struct virtq_inflight_region *get_inflight(struct env *e, struct vhu_inflight *in,
						  int *ifd)
{
	uint64_t pf = (1ull << VHU_PF_REPLY_ACK) | (1ull << VHU_PF_INFLIGHT_SHMFD);
	void *r;

	connect_client(e);
	assert_true(get_u64(e->cfd, VHU_GET_PROTOCOL_FEATURES) &
		    (1ull << VHU_PF_INFLIGHT_SHMFD));
	send_req(e->cfd, VHU_SET_PROTOCOL_FEATURES, &pf, 8);
	send_req(e->cfd, VHU_GET_INFLIGHT_FD, in, sizeof(*in));
	assert_int_equal(recv_reply_fd(e->cfd, VHU_GET_INFLIGHT_FD, in, sizeof(*in), ifd),
			 sizeof(*in));
	assert_true(*ifd >= 0);
	r = mmap(NULL, in->mmap_size, PROT_READ | PROT_WRITE, MAP_SHARED, *ifd,
		 in->mmap_offset);
	assert_true(r != MAP_FAILED);
	return r;
}

static bool readable(int fd, int timeout_ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };

	return poll(&p, 1, timeout_ms) == 1 && (p.revents & POLLIN);
}

/* QEMU 7.2's vhost-user-blk and -scsi start order: each vring's call fd is
 * its "masked notifier" (an eventfd QEMU never reads) from the device's
 * creation on; at DRIVER_OK, NUM/BASE/ADDR/KICK and ENABLE start the
 * rings, and only then does SET_VRING_CALL hand over the guest's
 * interrupt eventfd. None of these wait for the back-end, so the guest,
 * running on, may have queued its first request by the time the ring
 * starts: the back-end completes it and notifies the masked notifier. The
 * notification must reach the guest's fd when that replaces it, or the
 * driver waits for ever (virtio-scsi never times a command out; CI hung in
 * virtio_scsi's probe so). Built here by construction: the request is
 * queued and kicked before ENABLE, and the call fd is swapped only once
 * the old one was signalled. */
static void test_call_fd_replaced_after_a_completion(void **state)
{
	struct env *e = *state;
	int kick = eventfd(0, EFD_CLOEXEC);
	int masked = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	int guest = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	uint16_t base = *used_idx(e);

	e->avail_idx = base;
	begin_session(e, -1);
	set_vring_fd(e, VHU_SET_VRING_CALL, masked);
	/* A ring that never ran has notified nobody: nothing to pass on. */
	assert_false(readable(masked, 0));
	set_vring(e, base);
	set_vring_fd(e, VHU_SET_VRING_KICK, kick);
	queue_req(e, 0, VIRTIO_BLK_T_IN);
	publish(e, kick);
	enable_vring(e);
	/* (an event, not a delay: the completion's notification) */
	assert_true(readable(masked, 30000));
	assert_int_equal(*used_idx(e), (uint16_t)(base + 1));
	assert_int_equal(e->ram[STATUS + 0], VIRTIO_BLK_S_OK);

	set_vring_fd(e, VHU_SET_VRING_CALL, guest);
	/* Signalled before the ack: the driver hears of its completion. */
	assert_true(readable(guest, 0));
	assert_int_equal(hang_up(e), 0);
	close(guest);
	close(masked);
	close(kick);
}

/* INFLIGHT_SHMFD: the back-end hands out the buffer (GET_INFLIGHT_FD) and
 * keeps it up to date; a new back-end given a buffer that a dead one left
 * (the state is written here by hand: four writes popped, the second and
 * fourth completed out of order, then the crash) runs the first and third
 * again, and not the fourth: QEMU restarts the ring at the used index (2),
 * where the avail ring still holds the third and fourth. */
static void test_inflight_resubmission(void **state)
{
	struct env *e = *state;
	struct vhu_inflight in = { 0, 0, 1, QSIZE };
	struct virtq_inflight_region *r;
	volatile uint32_t *used;
	int kick = eventfd(0, EFD_CLOEXEC), ifd, n;
	uint16_t base = *used_idx(e), head[4];
	uint8_t want[4096];

	/* GET_INFLIGHT_FD: a sealed memfd, zeroed (no queue used yet). */
	r = get_inflight(e, &in, &ifd);
	assert_true(in.mmap_size >= virtq_inflight_region_size(QSIZE));
	assert_int_equal(in.num_queues, 1);
	assert_int_equal(in.queue_size, QSIZE);
	assert_true(fcntl(ifd, F_GET_SEALS) & F_SEAL_SHRINK);
	assert_int_equal(r->version, 0);
	assert_int_equal(hang_up(e), 0);

	/* A session with tracking: the region is set up and kept. */
	e->avail_idx = base;
	start_session_inflight(e, base, kick, ifd);
	fill(e->ram + DATA, 0, 4);
	queue_req(e, 0, VIRTIO_BLK_T_OUT);
	publish(e, kick);
	wait_used(e, base + 1);
	assert_int_equal(r->version, VIRTQ_INFLIGHT_VERSION);
	assert_int_equal(r->desc_num, QSIZE);
	assert_int_equal(r->used_idx, (uint16_t)(base + 1));
	assert_int_equal(r->desc[0].inflight, 0);
	assert_int_equal(hang_up(e), 0);
	base++;

	/* What a back-end killed mid-I/O leaves: writes 0-3 available and
	 * popped; 1 and 3 done (on disk, in the used ring), 0 and 2 not. */
	for (unsigned int s = 0; s < 4; s++) {
		fill(e->ram + DATA + s * 4096, s, 5);
		queue_req(e, s, VIRTIO_BLK_T_OUT);
		head[s] = s * 3;
	}
	__atomic_store_n((volatile uint16_t *)(e->ram + AVAIL) + 1, e->avail_idx,
			 __ATOMIC_RELEASE);
	used = (volatile uint32_t *)(e->ram + USED + 4);
	n = 0;
	for (unsigned int s = 1; s < 4; s += 2) {
		int fd = open(e->path, O_WRONLY);

		fill(want, s, 6);	/* what the dead back-end wrote: not gen 5 */
		assert_int_equal(pwrite(fd, want, 4096, s * 4096), 4096);
		close(fd);
		e->ram[STATUS + s] = VIRTIO_BLK_S_OK;
		used[2 * ((base + n) % QSIZE)] = head[s];
		used[2 * ((base + n) % QSIZE) + 1] = 1;
		n++;
		r->desc[head[s]].inflight = 0;
	}
	r->desc[head[0]].inflight = 1;
	r->desc[head[0]].counter = 40;
	r->desc[head[2]].inflight = 1;
	r->desc[head[2]].counter = 41;
	r->last_batch_head = head[3];
	r->used_idx = base + 2;
	__atomic_store_n(used_idx(e), (uint16_t)(base + 2), __ATOMIC_RELEASE);

	/* The new back-end: QEMU sends the used index as the base. */
	start_session_inflight(e, base + 2, kick, ifd);
	wait_used(e, base + 4);
	assert_int_equal(used[2 * ((base + 2) % QSIZE)], head[0]);
	assert_int_equal(used[2 * ((base + 3) % QSIZE)], head[2]);
	/* Nothing more: the fourth was not run again. */
	usleep(20000);
	assert_int_equal(*used_idx(e), (uint16_t)(base + 4));
	for (unsigned int s = 0; s < 4; s++) {
		assert_int_equal(e->ram[STATUS + s], VIRTIO_BLK_S_OK);
		expect_disk(e, s, s % 2 ? 6 : 5);
	}
	for (unsigned int i = 0; i < QSIZE; i++)
		assert_int_equal(r->desc[i].inflight, 0);
	assert_int_equal(r->used_idx, (uint16_t)(base + 4));
	assert_int_equal(hang_up(e), 0);
	munmap(r, in.mmap_size);
	close(ifd);
	close(kick);
}

/* A ring smaller than the inflight buffer's queue size (a driver that
 * chose fewer entries than QEMU offered) is tracked in the first entries of
 * its region, not refused. */
static void test_inflight_smaller_ring(void **state)
{
	struct env *e = *state;
	struct vhu_inflight in = { 0, 0, 1, 2 * QSIZE };
	struct virtq_inflight_region *r;
	int kick = eventfd(0, EFD_CLOEXEC), ifd;
	uint16_t base = *used_idx(e);

	r = get_inflight(e, &in, &ifd);
	assert_int_equal(hang_up(e), 0);

	e->avail_idx = base;
	inflight_qsize = 2 * QSIZE;
	start_session_inflight(e, base, kick, ifd);
	fill(e->ram + DATA, 0, 7);
	queue_req(e, 0, VIRTIO_BLK_T_OUT);
	publish(e, kick);
	wait_used(e, base + 1);
	assert_int_equal(e->ram[STATUS], VIRTIO_BLK_S_OK);
	expect_disk(e, 0, 7);
	assert_int_equal(r->version, VIRTQ_INFLIGHT_VERSION);
	assert_int_equal(r->desc_num, QSIZE);
	assert_int_equal(r->used_idx, (uint16_t)(base + 1));
	assert_int_equal(hang_up(e), 0);
	inflight_qsize = QSIZE;
	munmap(r, in.mmap_size);
	close(ifd);
	close(kick);
}

/* Hostile inflight messages drop the client: a buffer that is not a
 * sealed memfd, one too small for the queues it claims, more queues than
 * the device has. */
static void test_inflight_hostile(void **state)
{
	struct env *e = *state;
	uint64_t pf = (1ull << VHU_PF_REPLY_ACK) | (1ull << VHU_PF_INFLIGHT_SHMFD);
	struct vhu_inflight in = { virtq_inflight_region_size(QSIZE), 0, 1, QSIZE };
	int fd = memfd_create("x", MFD_CLOEXEC | MFD_ALLOW_SEALING);

	assert_int_equal(ftruncate(fd, 4096), 0);
	/* unsealed */
	connect_client(e);
	send_req(e->cfd, VHU_SET_PROTOCOL_FEATURES, &pf, 8);
	send_msg(e->cfd, VHU_SET_INFLIGHT_FD, VHU_VERSION, &in, sizeof(in), &fd, 1);
	assert_true(hung_up(e->cfd));
	assert_true(hang_up(e) < 0);
	assert_int_equal(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK), 0);
	/* too small for its claim */
	in.mmap_size = 4096;
	in.queue_size = 256;
	connect_client(e);
	send_req(e->cfd, VHU_SET_PROTOCOL_FEATURES, &pf, 8);
	send_msg(e->cfd, VHU_SET_INFLIGHT_FD, VHU_VERSION, &in, sizeof(in), &fd, 1);
	assert_true(hung_up(e->cfd));
	assert_true(hang_up(e) < 0);
	/* more queues than the device; and GET without the feature */
	in.queue_size = QSIZE;
	in.num_queues = 9;
	connect_client(e);
	send_req(e->cfd, VHU_SET_PROTOCOL_FEATURES, &pf, 8);
	send_req(e->cfd, VHU_GET_INFLIGHT_FD, &in, sizeof(in));
	assert_true(hung_up(e->cfd));
	assert_true(hang_up(e) < 0);
	in.num_queues = 1;
	connect_client(e);
	send_req(e->cfd, VHU_GET_INFLIGHT_FD, &in, sizeof(in));
	assert_true(hung_up(e->cfd));
	assert_true(hang_up(e) < 0);
	close(fd);
}

/* A session as User-Mode Linux's virtio_uml (6.1) opens one, on the real
 * virtio-blk: guest RAM an unsealable tmpfs file, the back-end request
 * channel, the whole two-region table struct with one region in it, and a
 * socketpair end as the call fd, read 8 bytes at a time until EAGAIN as
 * UML's interrupt handler does. Writes then reads, each batch's
 * completion seen through the socket alone; the data in the file. */
static void test_uml_session(void **state)
{
	struct env *e = *state;
	uint8_t *memfd_ram = e->ram, want[4096];
	int memfd = e->ram_fd, kick = eventfd(0, EFD_CLOEXEC), call[2], req[2];
	uint64_t f, pf = (1ull << VHU_PF_REPLY_ACK) | (1ull << VHU_PF_BACKEND_REQ) |
			 (1ull << VHU_PF_CONFIG), idx = 0;
	union vhu_payload t;
	struct vhu_vring_state st = { 0, QSIZE };
	struct vhu_vring_addr a;

	e->ram_fd = open("/dev/shm", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (e->ram_fd < 0) {
		e->ram_fd = memfd;
		print_message("SKIPPED: no tmpfs file in /dev/shm: %s\n", strerror(errno));
		skip();
	}
	assert_int_equal(ftruncate(e->ram_fd, RAM_SIZE), 0);
	assert_int_equal(fcntl(e->ram_fd, F_GET_SEALS), F_SEAL_SEAL);
	e->ram = mmap(NULL, RAM_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, e->ram_fd, 0);
	assert_true(e->ram != MAP_FAILED);
	e->avail_idx = 0;
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, call), 0);
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, req), 0);
	assert_int_equal(fcntl(call[0], F_SETFL, O_NONBLOCK), 0);

	connect_client(e);
	send_req(e->cfd, VHU_SET_OWNER, NULL, 0);
	f = get_u64(e->cfd, VHU_GET_FEATURES);
	assert_int_equal(get_u64(e->cfd, VHU_GET_PROTOCOL_FEATURES) & pf, pf);
	send_req(e->cfd, VHU_SET_PROTOCOL_FEATURES, &pf, 8);
	assert_int_equal(send_ack(e->cfd, VHU_SET_BACKEND_REQ_FD, NULL, 0, &req[1], 1), 0);
	f &= (1ull << VIRTIO_F_VERSION_1) | (1ull << VHU_F_PROTOCOL_FEATURES);
	assert_int_equal(send_ack(e->cfd, VHU_SET_FEATURES, &f, 8, NULL, 0), 0);
	memset(&t, 0, sizeof(t));
	t.mem.nregions = 1;
	t.mem.r[0] = (struct vhu_region){ 0, RAM_SIZE, uva(e, 0), 0 };
	assert_int_equal(send_ack(e->cfd, VHU_SET_MEM_TABLE, &t, 72, &e->ram_fd, 1), 0);
	assert_int_equal(send_ack(e->cfd, VHU_SET_VRING_CALL, &idx, 8, &call[1], 1), 0);
	assert_int_equal(send_ack(e->cfd, VHU_SET_VRING_NUM, &st, 8, NULL, 0), 0);
	st.num = 0;
	assert_int_equal(send_ack(e->cfd, VHU_SET_VRING_BASE, &st, 8, NULL, 0), 0);
	a = (struct vhu_vring_addr){ 0, 0, uva(e, DESC), uva(e, USED), uva(e, AVAIL), ~0ull };
	assert_int_equal(send_ack(e->cfd, VHU_SET_VRING_ADDR, &a, sizeof(a), NULL, 0), 0);
	assert_int_equal(send_ack(e->cfd, VHU_SET_VRING_KICK, &idx, 8, &kick, 1), 0);
	st.num = 1;
	assert_int_equal(send_ack(e->cfd, VHU_SET_VRING_ENABLE, &st, 8, NULL, 0), 0);
	close(call[1]);
	close(req[1]);

	for (unsigned int gen = 1; gen <= 2; gen++) {
		uint32_t type = gen == 1 ? VIRTIO_BLK_T_OUT : VIRTIO_BLK_T_IN;

		for (unsigned int s = 0; s < 4; s++) {
			if (type == VIRTIO_BLK_T_OUT)
				fill(e->ram + DATA + s * 4096, s, 5);
			else
				memset(e->ram + DATA + s * 4096, 0, 4096);
			queue_req(e, s, type);
		}
		publish(e, kick);
		/* The socket wakes us; the used ring says how far. */
		while (*used_idx(e) != e->avail_idx) {
			struct pollfd p = { .fd = call[0], .events = POLLIN };
			uint64_t v;

			assert_int_equal(poll(&p, 1, 10000), 1);
			while (read(call[0], &v, sizeof(v)) == (ssize_t)sizeof(v))
				assert_int_equal(v, 1);
			assert_int_equal(errno, EAGAIN);
		}
		for (unsigned int s = 0; s < 4; s++) {
			assert_int_equal(e->ram[STATUS + s], VIRTIO_BLK_S_OK);
			fill(want, s, 5);
			if (type == VIRTIO_BLK_T_IN)
				assert_memory_equal(e->ram + DATA + s * 4096, want, 4096);
		}
	}
	assert_int_equal(hang_up(e), 0);
	for (unsigned int s = 0; s < 4; s++)
		expect_disk(e, s, 5);
	close(call[0]);
	close(req[0]);
	close(kick);
	munmap(e->ram, RAM_SIZE);
	close(e->ram_fd);
	e->ram = memfd_ram;
	e->ram_fd = memfd;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_config_and_io),
		cmocka_unit_test(test_hangup_with_writes_in_flight),
		cmocka_unit_test(test_call_fd_replaced_after_a_completion),
		cmocka_unit_test(test_client_truncates_ram),
		cmocka_unit_test(test_uml_session),
		cmocka_unit_test(test_inflight_resubmission),
		cmocka_unit_test(test_inflight_smaller_ring),
		cmocka_unit_test(test_inflight_hostile),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
