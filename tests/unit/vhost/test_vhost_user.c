/* Unit tests of the vhost-user back-end: a client on one end of a
 * socketpair (memfds for guest RAM, eventfds for kicks and calls, sent with
 * SCM_RIGHTS) drives the server, which serves a fake device that records
 * what the transport asked of it. Good sessions and hostile messages. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <linux/magic.h>

#include <cmocka.h>

#include "vclient.h"
#include "vhost/mem.h"
#include "vhost/proto.h"
#include "vhost/server.h"
#include "virtio/ring.h"
#include "virtio/virtio.h"

#define RAM_SIZE (1u << 20)
#define UADDR 0x7f0000000000ull	/* where the "client" has its RAM */
#define NQ 2

/* ---- the fake device ---- */

struct fake_dev {
	struct virtio_dev dev;
	uint8_t config[24];
	int starts, stops, flushes;
	struct virtq started_vq;	/* copy of the last queue started */
	bool running[NQ];
};

static void fake_config_read(struct virtio_dev *d, uint32_t off, void *data,
			     uint32_t len)
{
	struct fake_dev *f = (struct fake_dev *)d;

	memcpy(data, f->config + off, len);
}

static void fake_config_write(struct virtio_dev *d, uint32_t off,
			      const void *data, uint32_t len)
{
	struct fake_dev *f = (struct fake_dev *)d;

	memcpy(f->config + off, data, len);
}

static int fake_features_ok(struct virtio_dev *d)
{
	/* A device may refuse a feature set: this one needs VERSION_1. */
	return virtio_has_feature(d, VIRTIO_F_VERSION_1) ? 0 : -EINVAL;
}

static int fake_queue_start(struct virtio_dev *d, unsigned int i, struct virtq *vq)
{
	struct fake_dev *f = (struct fake_dev *)d;

	assert_true(i < NQ);
	assert_false(f->running[i]);
	f->running[i] = true;
	f->starts++;
	f->started_vq = *vq;
	/* Client fds reach the device non-blocking, so that no write to
	 * them (a wakeup, a notification) can block a thread. */
	assert_true(fcntl(vq->kick_fd, F_GETFL) & O_NONBLOCK);
	if (vq->call_fd >= 0)
		assert_true(fcntl(vq->call_fd, F_GETFL) & O_NONBLOCK);
	return 0;
}

static void fake_queue_stop(struct virtio_dev *d, unsigned int i)
{
	struct fake_dev *f = (struct fake_dev *)d;

	assert_true(f->running[i]);
	f->running[i] = false;
	f->stops++;
}

static void fake_flush(struct virtio_dev *d)
{
	((struct fake_dev *)d)->flushes++;
}

static const struct virtio_dev_ops fake_ops = {
	.config_read = fake_config_read,
	.config_write = fake_config_write,
	.features_ok = fake_features_ok,
	.queue_start = fake_queue_start,
	.queue_stop = fake_queue_stop,
	.flush = fake_flush,
};

#define FAKE_FEATURES                                                   \
	((1ull << VIRTIO_F_VERSION_1) | (1ull << VIRTIO_F_RING_EVENT_IDX) | \
	 (1ull << 33) /* ACCESS_PLATFORM: must not be offered */)

static void fake_init(struct fake_dev *f)
{
	memset(f, 0, sizeof(*f));
	f->dev.name = "fake";
	f->dev.num_queues = NQ;
	f->dev.max_queue_size = 256;
	f->dev.config_len = sizeof(f->config);
	f->dev.host_features = FAKE_FEATURES;
	f->dev.ops = &fake_ops;
	for (unsigned int i = 0; i < sizeof(f->config); i++)
		f->config[i] = 0xa0 + i;
}

/* ---- a server thread per connection ---- */

struct conn {
	struct fake_dev fake;
	struct vhu_server *srv;
	pthread_t thread;
	int cfd;		/* the client's end */
	int sfd;		/* the server's end */
	int result;
	int ram_fd;
	uint8_t *ram;
};

static void *serve_thread(void *arg)
{
	struct conn *c = arg;

	c->result = vhu_server_serve(c->srv, c->sfd, -1);
	return NULL;
}

static void conn_start(struct conn *c)
{
	int sv[2];

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	c->cfd = sv[0];
	c->sfd = sv[1];
	assert_int_equal(pthread_create(&c->thread, NULL, serve_thread, c), 0);
}

static struct conn *conn_new(void)
{
	struct conn *c = calloc(1, sizeof(*c));

	assert_non_null(c);
	fake_init(&c->fake);
	c->srv = vhu_server_new(&c->fake.dev);
	assert_non_null(c->srv);
	c->ram_fd = memfd_create("ram", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	assert_true(c->ram_fd >= 0);
	assert_int_equal(ftruncate(c->ram_fd, RAM_SIZE), 0);
	/* as QEMU's memory-backend-memfd does */
	assert_int_equal(fcntl(c->ram_fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW), 0);
	c->ram = mmap(NULL, RAM_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, c->ram_fd, 0);
	assert_true(c->ram != MAP_FAILED);
	conn_start(c);
	return c;
}

/* Closes the client's end and returns what the server returned. */
static int conn_end(struct conn *c)
{
	close(c->cfd);
	assert_int_equal(pthread_join(c->thread, NULL), 0);
	return c->result;
}

static void conn_free(struct conn *c)
{
	vhu_server_free(c->srv);
	munmap(c->ram, RAM_SIZE);
	close(c->ram_fd);
	free(c);
}

/* ---- the client side of the protocol: vclient.c ---- */

static unsigned int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	unsigned int n = 0;

	assert_non_null(d);
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

static const uint64_t all_pf = (1ull << VHU_PF_MQ) | (1ull << VHU_PF_REPLY_ACK) |
			       (1ull << VHU_PF_CONFIG) |
			       (1ull << VHU_PF_CONFIGURE_MEM_SLOTS);

static void negotiate(struct conn *c, uint64_t pf)
{
	uint64_t f = get_u64(c->cfd, VHU_GET_FEATURES);

	assert_true(f & (1ull << VHU_F_PROTOCOL_FEATURES));
	send_req(c->cfd, VHU_SET_OWNER, NULL, 0);
	send_req(c->cfd, VHU_SET_PROTOCOL_FEATURES, &pf, 8);
	f = (1ull << VIRTIO_F_VERSION_1) | (1ull << VIRTIO_F_RING_EVENT_IDX) |
	    (1ull << VHU_F_PROTOCOL_FEATURES);
	send_req(c->cfd, VHU_SET_FEATURES, &f, 8);
}

static void set_table(struct conn *c)
{
	struct vhu_mem_table t = { .nregions = 1 };

	t.r[0] = (struct vhu_region){ 0, RAM_SIZE, UADDR, 0 };
	assert_int_equal(send_ack(c->cfd, VHU_SET_MEM_TABLE, &t,
				  VHU_MEM_TABLE_HDR_SIZE + sizeof(t.r[0]), &c->ram_fd, 1), 0);
}

/* Rings of queue i at guest-physical 0x10000 * (i + 1). */
static void setup_vring(struct conn *c, uint32_t i, uint32_t num)
{
	struct vhu_vring_state st = { i, num };
	uint64_t base = UADDR + 0x10000ull * (i + 1);
	struct vhu_vring_addr a = { i, 0, base, base + 0x2000, base + 0x1000, 0 };
	int call = eventfd(0, EFD_CLOEXEC);
	uint64_t idx = i;

	send_req(c->cfd, VHU_SET_VRING_NUM, &st, sizeof(st));
	send_req(c->cfd, VHU_SET_VRING_ADDR, &a, sizeof(a));
	st.num = 7;
	send_req(c->cfd, VHU_SET_VRING_BASE, &st, sizeof(st));
	send_msg(c->cfd, VHU_SET_VRING_CALL, VHU_VERSION, &idx, 8, &call, 1);
	close(call);
}

static void kick(struct conn *c, uint32_t i)
{
	int k = eventfd(0, EFD_CLOEXEC);
	uint64_t idx = i;

	assert_int_equal(send_ack(c->cfd, VHU_SET_VRING_KICK, &idx, 8, &k, 1), 0);
	close(k);
}

static void enable(struct conn *c, uint32_t i, uint32_t on)
{
	struct vhu_vring_state st = { i, on };

	assert_int_equal(send_ack(c->cfd, VHU_SET_VRING_ENABLE, &st, sizeof(st), NULL, 0), 0);
}

/* ---- good sessions ---- */

static void test_full_session(void **state)
{
	unsigned int fds_before = count_fds();
	struct conn *c = conn_new();
	struct vhu_vring_state st = { 0, 0 };
	struct vhu_config cfg = { .offset = 4, .size = 8 };
	uint64_t f, pf;
	int n;

	f = get_u64(c->cfd, VHU_GET_FEATURES);
	assert_int_equal(f, (1ull << VIRTIO_F_VERSION_1) | (1ull << VIRTIO_F_RING_EVENT_IDX) |
			       (1ull << VHU_F_PROTOCOL_FEATURES));
	pf = get_u64(c->cfd, VHU_GET_PROTOCOL_FEATURES);
	assert_true(pf & (1ull << VHU_PF_MQ));
	assert_true(pf & (1ull << VHU_PF_REPLY_ACK));
	assert_true(pf & (1ull << VHU_PF_CONFIG));
	assert_true(pf & (1ull << VHU_PF_CONFIGURE_MEM_SLOTS));
	assert_true(pf & (1ull << VHU_PF_BACKEND_REQ));
	negotiate(c, all_pf);
	assert_int_equal(get_u64(c->cfd, VHU_GET_QUEUE_NUM), NQ);
	assert_int_equal(get_u64(c->cfd, VHU_GET_MAX_MEM_SLOTS), VHU_MEM_MAX_REGIONS);
	assert_true(c->fake.dev.guest_features & (1ull << VIRTIO_F_RING_EVENT_IDX));
	assert_false(c->fake.dev.guest_features & (1ull << VHU_F_PROTOCOL_FEATURES));
	/* Bits the back-end never offered are dropped, not passed on. */
	f = (1ull << VIRTIO_F_VERSION_1) | (1ull << VHU_F_PROTOCOL_FEATURES) | (1ull << 33) | 4;
	assert_int_equal(send_ack(c->cfd, VHU_SET_FEATURES, &f, 8, NULL, 0), 0);
	assert_int_equal(c->fake.dev.guest_features, 1ull << VIRTIO_F_VERSION_1);
	f = (1ull << VIRTIO_F_VERSION_1) | (1ull << VIRTIO_F_RING_EVENT_IDX) |
	    (1ull << VHU_F_PROTOCOL_FEATURES);
	assert_int_equal(send_ack(c->cfd, VHU_SET_FEATURES, &f, 8, NULL, 0), 0);

	/* Config space: a window of it, and past its end reads zero. */
	send_req(c->cfd, VHU_GET_CONFIG, &cfg, VHU_CONFIG_HDR_SIZE + cfg.size);
	n = recv_reply(c->cfd, VHU_GET_CONFIG, &cfg, sizeof(cfg));
	assert_int_equal(n, VHU_CONFIG_HDR_SIZE + 8);
	assert_int_equal(cfg.data[0], 0xa4);
	assert_int_equal(cfg.data[7], 0xab);
	cfg = (struct vhu_config){ .offset = 20, .size = 8 };
	send_req(c->cfd, VHU_GET_CONFIG, &cfg, VHU_CONFIG_HDR_SIZE + cfg.size);
	recv_reply(c->cfd, VHU_GET_CONFIG, &cfg, sizeof(cfg));
	assert_int_equal(cfg.data[3], 0xa0 + 23);
	assert_int_equal(cfg.data[4], 0);
	cfg = (struct vhu_config){ .offset = 2, .size = 1, .data = { 0x55 } };
	assert_int_equal(send_ack(c->cfd, VHU_SET_CONFIG, &cfg, VHU_CONFIG_HDR_SIZE + 1,
				  NULL, 0), 0);
	assert_int_equal(c->fake.config[2], 0x55);
	/* Outside config space: refused, but the connection stays. */
	cfg = (struct vhu_config){ .offset = 20, .size = 8 };
	assert_int_not_equal(send_ack(c->cfd, VHU_SET_CONFIG, &cfg, VHU_CONFIG_HDR_SIZE + 8,
				      NULL, 0), 0);

	set_table(c);
	setup_vring(c, 0, 128);
	kick(c, 0);
	/* Protocol features negotiated: started but not enabled yet. */
	assert_int_equal(c->fake.starts, 0);
	enable(c, 0, 1);
	assert_int_equal(c->fake.starts, 1);
	assert_int_equal(c->fake.started_vq.size, 128);
	assert_int_equal(c->fake.started_vq.desc_gpa, 0x10000);
	assert_int_equal(c->fake.started_vq.avail_gpa, 0x11000);
	assert_int_equal(c->fake.started_vq.used_gpa, 0x12000);
	assert_int_equal(c->fake.started_vq.last_avail, 7);
	assert_true(c->fake.started_vq.event_idx);
	assert_true(c->fake.started_vq.kick_fd >= 0);
	assert_true(c->fake.started_vq.call_fd >= 0);
	assert_ptr_equal(c->fake.started_vq.mem, c->fake.dev.mem);
	assert_int_equal(c->fake.dev.mem->n, 1);

	/* A new call fd while running: stop, swap, restart. */
	setup_vring(c, 0, 128);
	assert_int_equal(send_ack(c->cfd, VHU_SET_OWNER, NULL, 0, NULL, 0), 0);
	assert_true(c->fake.running[0]);

	/* GET_VRING_BASE stops the ring (drained) and reports the index. */
	send_req(c->cfd, VHU_GET_VRING_BASE, &st, sizeof(st));
	assert_int_equal(recv_reply(c->cfd, VHU_GET_VRING_BASE, &st, sizeof(st)), 8);
	assert_int_equal(st.index, 0);
	assert_int_equal(st.num, 7);
	assert_false(c->fake.running[0]);

	/* Restart from there, as QEMU does after a stop. */
	kick(c, 0);
	assert_true(c->fake.running[0]);

	assert_int_equal(conn_end(c), 0);
	/* Disconnect: queues stopped, device flushed, memory unmapped. */
	assert_false(c->fake.running[0]);
	assert_true(c->fake.flushes >= 1);
	assert_int_equal(c->fake.dev.mem->n, 0);
	assert_int_equal(c->fake.dev.guest_features, 0);

	/* The same server takes the next client, from scratch. */
	conn_start(c);
	negotiate(c, all_pf);
	set_table(c);
	setup_vring(c, 1, 64);
	kick(c, 1);
	enable(c, 1, 1);
	assert_true(c->fake.running[1]);
	assert_int_equal(c->fake.started_vq.desc_gpa, 0x20000);
	assert_int_equal(conn_end(c), 0);
	assert_false(c->fake.running[1]);
	conn_free(c);
	assert_int_equal(count_fds(), fds_before);
}

/* Without VHOST_USER_F_PROTOCOL_FEATURES rings are enabled from the start. */
static void test_no_protocol_features(void **state)
{
	struct conn *c = conn_new();
	uint64_t f = 1ull << VIRTIO_F_VERSION_1;

	send_req(c->cfd, VHU_SET_FEATURES, &f, 8);
	int k = eventfd(0, EFD_CLOEXEC);
	struct vhu_mem_table t = { .nregions = 1 };

	t.r[0] = (struct vhu_region){ 0, RAM_SIZE, UADDR, 0 };
	send_msg(c->cfd, VHU_SET_MEM_TABLE, VHU_VERSION, &t,
		 VHU_MEM_TABLE_HDR_SIZE + sizeof(t.r[0]), &c->ram_fd, 1);
	setup_vring(c, 0, 256);
	f = 0;
	send_msg(c->cfd, VHU_SET_VRING_KICK, VHU_VERSION, &f, 8, &k, 1);
	close(k);
	/* Without REPLY_ACK, a request with a reply orders us after it. */
	assert_int_equal(get_u64(c->cfd, VHU_GET_QUEUE_NUM), NQ);
	assert_true(c->fake.running[0]);
	assert_int_equal(c->fake.started_vq.size, 256);
	assert_false(c->fake.started_vq.event_idx);
	/* NEED_REPLY without REPLY_ACK negotiated gets no reply. */
	send_msg(c->cfd, VHU_SET_OWNER, VHU_VERSION | VHU_FLAG_NEED_REPLY, NULL, 0, NULL, 0);
	assert_int_equal(get_u64(c->cfd, VHU_GET_QUEUE_NUM), NQ);
	assert_int_equal(conn_end(c), 0);
	assert_false(c->fake.running[0]);
	conn_free(c);
}

static void test_mem_regions_add_remove(void **state)
{
	struct conn *c = conn_new();
	struct vhu_mem_single one = { 0, { 0, RAM_SIZE / 2, UADDR, 0 } };
	struct vhu_mem_single two = { 0, { RAM_SIZE / 2, RAM_SIZE / 2,
					   UADDR + RAM_SIZE / 2, RAM_SIZE / 2 } };
	struct vhu_vring_state st = { 0, 64 };
	uint64_t base = UADDR + RAM_SIZE / 2 + 0x1000, idx = 0;
	struct vhu_vring_addr a = { 0, 0, base, base + 0x1000, base + 0x800, 0 };
	int k = eventfd(0, EFD_CLOEXEC);

	negotiate(c, all_pf);
	assert_int_equal(send_ack(c->cfd, VHU_ADD_MEM_REG, &one, sizeof(one), &c->ram_fd, 1), 0);
	assert_int_equal(send_ack(c->cfd, VHU_ADD_MEM_REG, &two, sizeof(two), &c->ram_fd, 1), 0);
	assert_int_equal(c->fake.dev.mem->n, 2);
	send_req(c->cfd, VHU_SET_VRING_NUM, &st, sizeof(st));
	send_req(c->cfd, VHU_SET_VRING_ADDR, &a, sizeof(a));
	send_msg(c->cfd, VHU_SET_VRING_KICK, VHU_VERSION, &idx, 8, &k, 1);
	close(k);
	enable(c, 0, 1);
	assert_true(c->fake.running[0]);
	assert_int_equal(c->fake.started_vq.desc_gpa, RAM_SIZE / 2 + 0x1000);

	/* The rings' region goes away: the ring waits, stopped... */
	assert_int_equal(send_ack(c->cfd, VHU_REM_MEM_REG, &two, sizeof(two), NULL, 0), 0);
	assert_false(c->fake.running[0]);
	assert_int_equal(c->fake.dev.mem->n, 1);
	/* ...and runs again when it comes back. */
	assert_int_equal(send_ack(c->cfd, VHU_ADD_MEM_REG, &two, sizeof(two), &c->ram_fd, 1), 0);
	assert_true(c->fake.running[0]);
	/* Another region's removal leaves the ring running (restarted). */
	assert_int_equal(send_ack(c->cfd, VHU_REM_MEM_REG, &one, sizeof(one), &c->ram_fd, 1), 0);
	assert_true(c->fake.running[0]);
	/* Removing what is not there is a protocol error. */
	send_msg(c->cfd, VHU_REM_MEM_REG, VHU_VERSION, &one, sizeof(one), NULL, 0);
	assert_true(hung_up(c->cfd));
	assert_int_equal(conn_end(c), -ENOENT);
	conn_free(c);
}

/* A running ring survives a new memory table (stopped, remapped,
 * restarted); the device's needs_reset reaches the error eventfd; RESET_DEVICE
 * stops everything and forgets the rings. */
static void test_table_swap_err_reset(void **state)
{
	struct conn *c = conn_new();
	int err = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	uint64_t idx = 0, v = 0;
	struct vhu_mem_table t = { .nregions = 1 };

	negotiate(c, all_pf | (1ull << VHU_PF_RESET_DEVICE));
	set_table(c);
	setup_vring(c, 0, 128);
	assert_int_equal(send_ack(c->cfd, VHU_SET_VRING_ERR, &idx, 8, &err, 1), 0);
	kick(c, 0);
	enable(c, 0, 1);
	assert_int_equal(c->fake.starts, 1);

	/* The same RAM, now seen at another guest-physical address. */
	t.r[0] = (struct vhu_region){ 0x100000, RAM_SIZE, UADDR, 0 };
	assert_int_equal(send_ack(c->cfd, VHU_SET_MEM_TABLE, &t,
				  VHU_MEM_TABLE_HDR_SIZE + sizeof(t.r[0]), &c->ram_fd, 1), 0);
	assert_true(c->fake.running[0]);
	assert_int_equal(c->fake.starts, 2);
	assert_int_equal(c->fake.started_vq.desc_gpa, 0x110000);

	c->fake.dev.transport.needs_reset(&c->fake.dev);
	assert_int_equal(read(err, &v, sizeof(v)), sizeof(v));
	assert_int_equal(v, 1);

	assert_int_equal(send_ack(c->cfd, VHU_RESET_DEVICE, NULL, 0, NULL, 0), 0);
	assert_false(c->fake.running[0]);
	/* The rings are forgotten: a kick alone does not start it again. */
	kick(c, 0);
	assert_false(c->fake.running[0]);
	assert_int_equal(conn_end(c), 0);
	close(err);
	conn_free(c);
}

/* ---- what UML's virtio_uml (a second real front-end) sends ---- */

/* Its table struct has room for two regions and goes out whole with one:
 * 72 bytes. Any payload from what the regions need up to the largest
 * table (8 regions) is accepted; the bytes past nregions are not read. */
static void test_table_slack(void **state)
{
	struct conn *c = conn_new();
	union vhu_payload p;

	negotiate(c, all_pf);
	memset(&p, 0xee, sizeof(p));	/* the slack is garbage */
	p.mem.nregions = 1;
	p.mem.padding = 0;
	p.mem.r[0] = (struct vhu_region){ 0, RAM_SIZE, UADDR, 0 };
	assert_int_equal(send_ack(c->cfd, VHU_SET_MEM_TABLE, &p,
				  VHU_MEM_TABLE_HDR_SIZE + 2 * sizeof(struct vhu_region),
				  &c->ram_fd, 1), 0);
	assert_int_equal(VHU_MEM_TABLE_HDR_SIZE + 2 * sizeof(struct vhu_region), 72);
	assert_int_equal(c->fake.dev.mem->n, 1);
	assert_int_equal(send_ack(c->cfd, VHU_SET_MEM_TABLE, &p, sizeof(struct vhu_mem_table),
				  &c->ram_fd, 1), 0);
	assert_int_equal(c->fake.dev.mem->n, 1);
	assert_int_equal(c->fake.dev.mem->r[0].size, RAM_SIZE);
	assert_int_equal(conn_end(c), 0);
	conn_free(c);
}

/* Runs vring 0 with this call fd (the client's copy is closed here). */
static void run_with_call_fd(struct conn *c, int call)
{
	struct vhu_vring_state st = { 0, 64 };
	uint64_t base = UADDR + 0x10000, idx = 0;
	struct vhu_vring_addr a = { 0, 0, base, base + 0x2000, base + 0x1000, 0 };

	send_req(c->cfd, VHU_SET_VRING_NUM, &st, sizeof(st));
	send_req(c->cfd, VHU_SET_VRING_ADDR, &a, sizeof(a));
	assert_int_equal(send_ack(c->cfd, VHU_SET_VRING_CALL, &idx, 8, &call, 1), 0);
	close(call);
	kick(c, 0);
	enable(c, 0, 1);
	assert_true(c->fake.running[0]);
	assert_true(c->fake.started_vq.call_fd >= 0);
}

/* UML's call fd is one end of a socketpair (its interrupts are SIGIO,
 * which eventfds do not raise): accepted, made non-blocking, and each
 * notification is one whole 8-byte record, as UML reads them. With the
 * socket full a notification neither blocks nor tears a record, and the
 * reader, already readable, loses nothing. A pipe does as well. */
static void test_call_socket(void **state)
{
	struct conn *c = conn_new();
	struct virtq vq;
	uint64_t v = 0, recs = 0;
	int sv[2], p[2], fd;
	ssize_t n;

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	negotiate(c, all_pf);
	set_table(c);
	run_with_call_fd(c, sv[1]);
	fd = c->fake.started_vq.call_fd;
	assert_true(fcntl(fd, F_GETFL) & O_NONBLOCK);
	memset(c->ram, 0, RAM_SIZE);
	vq = c->fake.started_vq;
	assert_true(virtq_notify(&vq));
	assert_int_equal(read(sv[0], &v, sizeof(v)), sizeof(v));
	assert_int_equal(v, 1);

	/* Fill the socket as a reader that never reads would. */
	while ((n = write(fd, &v, sizeof(v))) == (ssize_t)sizeof(v))
		recs++;
	assert_int_equal(n, -1);
	assert_int_equal(errno, EAGAIN);
	vq = c->fake.started_vq;
	assert_false(virtq_notify(&vq));	/* dropped, not blocked */
	assert_true(fcntl(sv[0], F_SETFL, O_NONBLOCK) == 0);
	while (read(sv[0], &v, sizeof(v)) == (ssize_t)sizeof(v)) {
		assert_int_equal(v, 1);
		recs--;
	}
	assert_int_equal(recs, 0);	/* whole records only */
	close(sv[0]);

	/* A pipe's write end. */
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	run_with_call_fd(c, p[1]);
	vq = c->fake.started_vq;
	assert_true(virtq_notify(&vq));
	assert_int_equal(read(p[0], &v, sizeof(v)), sizeof(v));
	close(p[0]);
	assert_int_equal(conn_end(c), 0);
	conn_free(c);
}

/* UML (6.1) shares the back-end request channel's IRQ with its queue
 * interrupts and cannot run without it: the channel is taken and kept,
 * and a config change is announced on it. Without REPLY_ACK nothing is
 * awaited. */
static void test_backend_req(void **state)
{
	struct conn *c = conn_new();
	uint64_t pf = (all_pf & ~(1ull << VHU_PF_REPLY_ACK)) | (1ull << VHU_PF_BACKEND_REQ);
	struct vhu_hdr h;
	int sv[2];

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	negotiate(c, pf);
	send_msg(c->cfd, VHU_SET_BACKEND_REQ_FD, VHU_VERSION, NULL, 0, &sv[1], 1);
	close(sv[1]);
	/* a round trip: the channel is set once this is answered */
	get_u64(c->cfd, VHU_GET_QUEUE_NUM);
	assert_int_equal(c->fake.dev.transport.config_changed(&c->fake.dev), 0);
	assert_int_equal(read(sv[0], &h, sizeof(h)), sizeof(h));
	assert_int_equal(h.request, VHU_BACKEND_CONFIG_CHANGE_MSG);
	assert_int_equal(h.flags, VHU_VERSION);
	assert_int_equal(h.size, 0);
	/* The channel goes with the client: closed at its disconnect. */
	assert_int_equal(conn_end(c), 0);
	assert_int_equal(read(sv[0], &h, sizeof(h)), 0);
	assert_int_equal(c->fake.dev.transport.config_changed(&c->fake.dev), -ENOTCONN);
	close(sv[0]);
	conn_free(c);
}

struct notice {
	struct conn *c;
	pthread_t thread;
	int ret;
};

static void *notice_thread(void *arg)
{
	struct notice *n = arg;

	n->ret = n->c->fake.dev.transport.config_changed(&n->c->fake.dev);
	return NULL;
}

/* The front-end's side of one config change: takes the notice (with
 * NEED_REPLY), re-reads config space on the main socket as QEMU does
 * before it answers (the socket thread is not held up by the waiting
 * control thread), then answers with hdr_req/status. Returns what the
 * control thread's config_changed returned. */
static int one_notice(struct conn *c, int chan, uint32_t hdr_req, uint64_t status)
{
	struct notice n = { .c = c };
	struct vhu_config cfg = { .offset = 0, .size = 4 };
	struct {
		struct vhu_hdr h;
		uint64_t status;
	} __attribute__((packed)) r = { { hdr_req, VHU_VERSION | VHU_FLAG_REPLY, 8 }, status };
	struct vhu_hdr h;

	assert_int_equal(pthread_create(&n.thread, NULL, notice_thread, &n), 0);
	assert_int_equal(read(chan, &h, sizeof(h)), sizeof(h));
	assert_int_equal(h.request, VHU_BACKEND_CONFIG_CHANGE_MSG);
	assert_int_equal(h.flags, VHU_VERSION | VHU_FLAG_NEED_REPLY);
	assert_int_equal(h.size, 0);
	send_req(c->cfd, VHU_GET_CONFIG, &cfg, VHU_CONFIG_HDR_SIZE + cfg.size);
	assert_int_equal(recv_reply(c->cfd, VHU_GET_CONFIG, &cfg, sizeof(cfg)),
			 VHU_CONFIG_HDR_SIZE + 4);
	assert_int_equal(cfg.data[0], 0xa0);
	assert_int_equal(write(chan, &r, sizeof(r)), sizeof(r));
	assert_int_equal(pthread_join(n.thread, NULL), 0);
	return n.ret;
}

/* With REPLY_ACK the notice asks for an answer and the control thread
 * waits for it: success, a refusal, a wrong answer, a front-end gone. */
static void test_backend_req_ack(void **state)
{
	struct conn *c = conn_new();
	struct notice n = { .c = c };
	struct vhu_hdr h;
	int sv[2];

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	negotiate(c, all_pf | (1ull << VHU_PF_BACKEND_REQ));
	assert_int_equal(send_ack(c->cfd, VHU_SET_BACKEND_REQ_FD, NULL, 0, &sv[1], 1), 0);
	close(sv[1]);
	assert_int_equal(one_notice(c, sv[0], VHU_BACKEND_CONFIG_CHANGE_MSG, 0), 0);
	assert_int_equal(one_notice(c, sv[0], VHU_BACKEND_CONFIG_CHANGE_MSG, 1), -EIO);
	assert_int_equal(one_notice(c, sv[0], VHU_GET_FEATURES, 0), -EPROTO);
	/* A front-end that goes away instead of answering ends the wait. */
	assert_int_equal(pthread_create(&n.thread, NULL, notice_thread, &n), 0);
	assert_int_equal(read(sv[0], &h, sizeof(h)), sizeof(h));
	close(sv[0]);
	assert_int_equal(pthread_join(n.thread, NULL), 0);
	assert_int_equal(n.ret, -ECONNRESET);
	assert_int_equal(conn_end(c), 0);
	conn_free(c);
}

/* The translation helpers, directly. */
static void test_mem_translate(void **state)
{
	struct vhu_mem m;
	struct vhu_region r = { 0x100000, 0x10000, UADDR, 0x1000 };
	int fd = memfd_create("t", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	char err[256];
	uint64_t gpa;
	uint8_t *p;

	assert_int_equal(ftruncate(fd, 0x20000), 0);
	assert_int_equal(vhu_mem_init(&m), 0);
	/* A memfd that may still shrink is refused: truncating it later
	 * would SIGBUS the backend. */
	assert_int_equal(vhu_mem_add(&m, &r, fd, err, sizeof(err)), -EPERM);
	assert_non_null(strstr(err, "F_SEAL_SHRINK"));
	assert_int_equal(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK), 0);
	assert_int_equal(vhu_mem_add(&m, &r, fd, err, sizeof(err)), 0);
	/* A memfd that cannot be sealed (QEMU's seal=off) is refused too:
	 * its client could have sealed it. */
	{
		int nfd = memfd_create("noseal", MFD_CLOEXEC);
		struct vhu_region r2 = { 0x200000, 0x1000, UADDR + 0x200000, 0 };

		assert_true(nfd >= 0);
		assert_int_equal(ftruncate(nfd, 0x1000), 0);
		assert_int_equal(fcntl(nfd, F_GET_SEALS), F_SEAL_SEAL);
		assert_int_equal(vhu_mem_add(&m, &r2, nfd, err, sizeof(err)), -EPERM);
		close(nfd);
	}
	p = vhu_mem_uva_to_hva(&m, UADDR + 0x10, 4);
	assert_non_null(p);
	assert_ptr_equal(gmem_ptr(&m.gmem, 0x100010, 4), p);
	assert_int_equal(vhu_mem_uva_to_gpa(&m, UADDR + 0xfff0, 0x10, &gpa), 0);
	assert_int_equal(gpa, 0x10fff0);
	/* One byte past the region, and a range that wraps. */
	assert_int_equal(vhu_mem_uva_to_gpa(&m, UADDR + 0xfff0, 0x11, &gpa), -EFAULT);
	assert_null(vhu_mem_uva_to_hva(&m, UADDR - 1, 2));
	assert_null(vhu_mem_uva_to_hva(&m, UADDR + 8, UINT64_MAX));
	/* The mapping honours mmap_offset: write through the file. */
	assert_int_equal(pwrite(fd, "xyz", 3, 0x1000 + 0x20), 3);
	assert_memory_equal((uint8_t *)gmem_ptr(&m.gmem, 0x100020, 3), "xyz", 3);
	/* Unaligned mmap offset (allowed: mapped from the page below). */
	r = (struct vhu_region){ 0x0, 0x100, UADDR + 0x100000, 0x1010 };
	assert_int_equal(vhu_mem_add(&m, &r, fd, err, sizeof(err)), 0);
	assert_memory_equal((uint8_t *)gmem_ptr(&m.gmem, 0x10, 3), "xyz", 3);
	vhu_mem_clear(&m);
	assert_int_equal(m.gmem.n, 0);
	vhu_mem_fini(&m);
	close(fd);
}

/* A file that cannot be sealed as guest RAM, truncated while it is
 * mapped: our accesses past the new end neither crash nor change the pages
 * still inside the file, and the fault is reported once, naming the region
 * and the offset. In dir: a disk file, or a tmpfs one (UML's memory file,
 * QEMU's memory-backend-file on /dev/shm), for which F_GET_SEALS reports
 * F_SEAL_SEAL as for an unsealable memfd, and which must still be taken. */
static void truncated_file_in(const char *dir)
{
	char path[64], err[256];
	struct vhu_region r = { 0x100000, 0x10000, UADDR, 0 };
	long pg = sysconf(_SC_PAGESIZE);
	volatile uint8_t *p;
	struct vhu_mem m;
	uint64_t gpa, size, off;
	int fd, seals;

	snprintf(path, sizeof(path), "%s/iovm-vhost-ram-XXXXXX", dir);
	fd = mkstemp(path);
	assert_true(fd >= 0);
	unlink(path);
	seals = fcntl(fd, F_GET_SEALS);
	if (seals >= 0)
		assert_int_equal(seals, F_SEAL_SEAL);	/* tmpfs: cannot be sealed */
	assert_int_equal(ftruncate(fd, 0x10000), 0);
	assert_int_equal(pwrite(fd, "keep", 4, 0x10), 4);
	assert_int_equal(vhu_mem_init(&m), 0);
	assert_int_equal(vhu_mem_add(&m, &r, fd, err, sizeof(err)), 0);
	p = gmem_ptr(&m.gmem, 0x100000, 0x10000);
	assert_non_null(p);
	assert_false(vhu_mem_take_fault(&m, &gpa, &size, &off));

	/* The client keeps one page and drops the rest. */
	assert_int_equal(ftruncate(fd, pg), 0);
	p[0x8000] = 0x5a;		/* a store past the end: faults */
	assert_int_equal(p[0x8000], 0x5a);	/* the zero page took it */
	assert_int_equal(p[0x9000], 0);	/* a load in another lost page */
	assert_memory_equal((const void *)(p + 0x10), "keep", 4);
	assert_true(vhu_mem_take_fault(&m, &gpa, &size, &off));
	assert_int_equal(gpa, 0x100000);
	assert_int_equal(size, 0x10000);
	assert_int_equal(off, 0x8000);
	assert_false(vhu_mem_take_fault(&m, &gpa, &size, &off));
	/* The replacement page is private: the file did not grow back. */
	{
		struct stat st;

		assert_int_equal(fstat(fd, &st), 0);
		assert_int_equal(st.st_size, pg);
	}
	vhu_mem_fini(&m);
	close(fd);
}

static void test_mem_truncated_file(void **state)
{
	truncated_file_in("/tmp");
}

static void test_mem_truncated_tmpfs(void **state)
{
	struct statfs sf;

	if (statfs("/dev/shm", &sf) || sf.f_type != TMPFS_MAGIC) {
		print_message("SKIPPED: /dev/shm is not a tmpfs\n");
		skip();
	}
	truncated_file_in("/dev/shm");
}

/* Outside guest regions a SIGBUS keeps its default action: a truncated
 * mapping of our own still kills, with SIGBUS. */
static void test_sigbus_elsewhere_kills(void **state)
{
	struct vhu_mem m;
	pid_t pid;
	int status;

	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		FILE *f = tmpfile();
		volatile uint8_t *p;

		/* Not cmocka's handler (which would go on with the tests in
		 * this child) but the default one, then ours on top. */
		signal(SIGBUS, SIG_DFL);
		setrlimit(RLIMIT_CORE, &(struct rlimit){ 0, 0 });
		if (vhu_mem_init(&m))
			_exit(2);
		if (!f || ftruncate(fileno(f), 4096))
			_exit(2);
		p = mmap(NULL, 4096, PROT_READ, MAP_SHARED, fileno(f), 0);
		if (p == MAP_FAILED || ftruncate(fileno(f), 0))
			_exit(2);
		_exit(p[0] == 0 ? 3 : 4);	/* must not get here */
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFSIGNALED(status));
	assert_int_equal(WTERMSIG(status), SIGBUS);
}

/* ---- hostile messages: each one drops the client, the server lives ---- */

enum hostile_kind {
	H_VERSION, H_REPLY_FLAG, H_TOO_BIG, H_UNKNOWN, H_UNSUPPORTED, H_SHORT_U64,
	H_TABLE_FD_COUNT, H_TABLE_OUTSIDE_FILE, H_TABLE_OVERLAP_GPA,
	H_TABLE_OVERLAP_UADDR, H_TABLE_EMPTY_REGION, H_TABLE_WRAP, H_TABLE_TOO_MANY,
	H_TABLE_SIZE, H_TABLE_NOT_FILE, H_VRING_INDEX, H_VRING_NUM, H_KICK_NOFD_WITH_FD,
	H_KICK_NO_FD, H_KICK_POLLING, H_FD_ON_OWNER, H_TRUNCATED, H_RING_OUTSIDE,
	H_FEATURES_REFUSED, H_ADD_REG_NO_PF, H_CONFIG_SIZE,
	H_CONFIG_TOO_BIG, H_ADD_REG_NO_FD, H_PF_UNOFFERED, H_BASE_RANGE, H_ENABLE_VALUE,
	H_VRING_LOG, H_KICK_BITS, H_KICK_PIPE, H_KICK_SOCKET, H_CALL_FILE,
	H_CALL_MEMFD, H_CALL_INET, H_ERR_CHARDEV, H_TABLE_UNSEALED, H_TABLE_NO_SEALING,
	H_ADD_REG_UNSEALED, H_TABLE_OVERSIZE, H_BACKEND_NO_PF, H_BACKEND_NOT_SOCKET,
	H_COUNT
};

/* Sends fd (one it must refuse) as the kick, call or error fd of vring 0. */
static void send_vring_fd(struct conn *c, uint32_t req, int fd)
{
	uint64_t u = 0;

	send_msg(c->cfd, req, VHU_VERSION, &u, 8, &fd, 1);
}

static void send_hostile(struct conn *c, enum hostile_kind k)
{
	struct vhu_mem_table t = { .nregions = 1 };
	uint32_t tsize = VHU_MEM_TABLE_HDR_SIZE + sizeof(struct vhu_region);
	struct vhu_vring_state st = { 0, 128 };
	uint64_t u = 0;
	int fds[2] = { c->ram_fd, c->ram_fd };
	int ev = eventfd(0, EFD_CLOEXEC);

	t.r[0] = (struct vhu_region){ 0, RAM_SIZE, UADDR, 0 };
	switch (k) {
	case H_VERSION:
		send_msg(c->cfd, VHU_GET_FEATURES, 2, NULL, 0, NULL, 0);
		break;
	case H_REPLY_FLAG:
		send_msg(c->cfd, VHU_GET_FEATURES, VHU_VERSION | VHU_FLAG_REPLY, NULL, 0, NULL, 0);
		break;
	case H_TOO_BIG: {
		struct vhu_hdr h = { VHU_SET_FEATURES, VHU_VERSION, 1u << 30 };

		assert_int_equal(write(c->cfd, &h, sizeof(h)), sizeof(h));
		break;
	}
	case H_UNKNOWN:
		send_req(c->cfd, 99, &u, 8);
		break;
	case H_UNSUPPORTED:
		send_req(c->cfd, VHU_SET_LOG_BASE, &u, 8);
		break;
	case H_SHORT_U64:
		send_req(c->cfd, VHU_SET_FEATURES, &u, 4);
		break;
	case H_TABLE_FD_COUNT:
		send_msg(c->cfd, VHU_SET_MEM_TABLE, VHU_VERSION, &t, tsize, fds, 2);
		break;
	case H_TABLE_OUTSIDE_FILE:
		t.r[0].mmap_offset = 0x1000;
		send_msg(c->cfd, VHU_SET_MEM_TABLE, VHU_VERSION, &t, tsize, fds, 1);
		break;
	case H_TABLE_OVERLAP_GPA:
		t.nregions = 2;
		t.r[0].size = RAM_SIZE / 2;
		t.r[1] = (struct vhu_region){ RAM_SIZE / 2 - 4096, RAM_SIZE / 2, UADDR + RAM_SIZE, 0 };
		send_msg(c->cfd, VHU_SET_MEM_TABLE, VHU_VERSION, &t, tsize + sizeof(t.r[0]), fds, 2);
		break;
	case H_TABLE_OVERLAP_UADDR:
		t.nregions = 2;
		t.r[0].size = RAM_SIZE / 2;
		t.r[1] = (struct vhu_region){ RAM_SIZE, RAM_SIZE / 2, UADDR + 4096, 0 };
		send_msg(c->cfd, VHU_SET_MEM_TABLE, VHU_VERSION, &t, tsize + sizeof(t.r[0]), fds, 2);
		break;
	case H_TABLE_EMPTY_REGION:
		t.r[0].size = 0;
		send_msg(c->cfd, VHU_SET_MEM_TABLE, VHU_VERSION, &t, tsize, fds, 1);
		break;
	case H_TABLE_WRAP:
		t.r[0].gpa = UINT64_MAX - 4095;
		send_msg(c->cfd, VHU_SET_MEM_TABLE, VHU_VERSION, &t, tsize, fds, 1);
		break;
	case H_TABLE_TOO_MANY: {
		union vhu_payload p = { .mem = t };

		p.mem.nregions = 9;
		send_msg(c->cfd, VHU_SET_MEM_TABLE, VHU_VERSION, &p, sizeof(p), fds, 1);
		break;
	}
	case H_TABLE_SIZE:
		/* Shorter than its one region. */
		send_msg(c->cfd, VHU_SET_MEM_TABLE, VHU_VERSION, &t, tsize - 8, fds, 1);
		break;
	case H_TABLE_OVERSIZE: {
		/* Larger than the largest table (8 regions), still within
		 * the largest message. */
		union vhu_payload p = { .mem = t };

		assert_true(sizeof(p) > sizeof(struct vhu_mem_table));
		send_msg(c->cfd, VHU_SET_MEM_TABLE, VHU_VERSION, &p, sizeof(p), fds, 1);
		break;
	}
	case H_TABLE_NOT_FILE:
		send_msg(c->cfd, VHU_SET_MEM_TABLE, VHU_VERSION, &t, tsize, &ev, 1);
		break;
	case H_VRING_INDEX:
		st.index = NQ;
		send_req(c->cfd, VHU_SET_VRING_NUM, &st, sizeof(st));
		break;
	case H_VRING_NUM:
		st.num = 100;
		send_req(c->cfd, VHU_SET_VRING_NUM, &st, sizeof(st));
		break;
	case H_KICK_NOFD_WITH_FD:
		u = VHU_VRING_NOFD;
		send_msg(c->cfd, VHU_SET_VRING_CALL, VHU_VERSION, &u, 8, &ev, 1);
		break;
	case H_KICK_NO_FD:
		send_msg(c->cfd, VHU_SET_VRING_KICK, VHU_VERSION, &u, 8, NULL, 0);
		break;
	case H_KICK_POLLING:
		u = VHU_VRING_NOFD;
		send_msg(c->cfd, VHU_SET_VRING_KICK, VHU_VERSION, &u, 8, NULL, 0);
		break;
	case H_FD_ON_OWNER:
		send_msg(c->cfd, VHU_SET_OWNER, VHU_VERSION, NULL, 0, &ev, 1);
		break;
	case H_TRUNCATED: {
		struct vhu_hdr h = { VHU_SET_FEATURES, VHU_VERSION, 8 };

		assert_int_equal(write(c->cfd, &h, sizeof(h)), sizeof(h));
		assert_int_equal(write(c->cfd, &u, 4), 4);
		shutdown(c->cfd, SHUT_WR);
		break;
	}
	case H_RING_OUTSIDE: {
		struct vhu_vring_addr a = { 0, 0, UADDR + RAM_SIZE - 0x100, UADDR, UADDR + 0x1000, 0 };

		send_msg(c->cfd, VHU_SET_MEM_TABLE, VHU_VERSION, &t, tsize, fds, 1);
		send_req(c->cfd, VHU_SET_VRING_NUM, &st, sizeof(st));
		send_req(c->cfd, VHU_SET_VRING_ADDR, &a, sizeof(a));
		send_req(c->cfd, VHU_SET_VRING_ENABLE, &(struct vhu_vring_state){ 0, 1 }, 8);
		send_msg(c->cfd, VHU_SET_VRING_KICK, VHU_VERSION, &u, 8, &ev, 1);
		break;
	}
	case H_FEATURES_REFUSED:
		u = 1ull << VIRTIO_F_RING_EVENT_IDX;	/* no VERSION_1 */
		send_req(c->cfd, VHU_SET_FEATURES, &u, 8);
		break;
	case H_ADD_REG_NO_PF: {
		struct vhu_mem_single one = { 0, t.r[0] };

		send_msg(c->cfd, VHU_ADD_MEM_REG, VHU_VERSION, &one, sizeof(one), fds, 1);
		break;
	}
	case H_CONFIG_SIZE: {
		struct vhu_config cfg = { .offset = 0, .size = 16 };

		u = 1ull << VHU_PF_CONFIG;
		send_req(c->cfd, VHU_SET_PROTOCOL_FEATURES, &u, 8);
		send_req(c->cfd, VHU_GET_CONFIG, &cfg, VHU_CONFIG_HDR_SIZE + 8);
		break;
	}
	case H_CONFIG_TOO_BIG: {
		struct vhu_config cfg = { .offset = 0, .size = 4096 };

		u = 1ull << VHU_PF_CONFIG;
		send_req(c->cfd, VHU_SET_PROTOCOL_FEATURES, &u, 8);
		send_req(c->cfd, VHU_GET_CONFIG, &cfg, VHU_CONFIG_HDR_SIZE + 256);
		break;
	}
	case H_ADD_REG_NO_FD: {
		struct vhu_mem_single one = { 0, t.r[0] };

		u = 1ull << VHU_PF_CONFIGURE_MEM_SLOTS;
		send_req(c->cfd, VHU_SET_PROTOCOL_FEATURES, &u, 8);
		send_msg(c->cfd, VHU_ADD_MEM_REG, VHU_VERSION, &one, sizeof(one), NULL, 0);
		break;
	}
	case H_PF_UNOFFERED:
		u = 1ull << 1;	/* LOG_SHMFD */
		send_req(c->cfd, VHU_SET_PROTOCOL_FEATURES, &u, 8);
		break;
	case H_BASE_RANGE:
		st.num = 0x10000;
		send_req(c->cfd, VHU_SET_VRING_BASE, &st, sizeof(st));
		break;
	case H_ENABLE_VALUE:
		st.num = 2;
		send_req(c->cfd, VHU_SET_VRING_ENABLE, &st, sizeof(st));
		break;
	case H_VRING_LOG: {
		struct vhu_vring_addr a = { 0, VHU_VRING_F_LOG, UADDR, UADDR, UADDR, 0 };

		send_req(c->cfd, VHU_SET_VRING_ADDR, &a, sizeof(a));
		break;
	}
	case H_KICK_BITS:
		u = 1ull << 20;
		send_msg(c->cfd, VHU_SET_VRING_KICK, VHU_VERSION, &u, 8, &ev, 1);
		break;
	case H_KICK_PIPE: {
		/* Kicks must be eventfds (queue_stop wakes the thread by
		 * writing to them); only call and error fds may be pipes. */
		int p[2];

		assert_int_equal(pipe2(p, O_CLOEXEC), 0);
		send_vring_fd(c, VHU_SET_VRING_KICK, p[0]);
		close(p[0]);
		close(p[1]);
		break;
	}
	case H_KICK_SOCKET: {
		int sv[2];

		assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
		send_vring_fd(c, VHU_SET_VRING_KICK, sv[0]);
		close(sv[0]);
		close(sv[1]);
		break;
	}
	case H_CALL_FILE: {
		FILE *f = tmpfile();

		assert_non_null(f);
		send_vring_fd(c, VHU_SET_VRING_CALL, fileno(f));
		fclose(f);
		break;
	}
	case H_CALL_MEMFD:
		send_vring_fd(c, VHU_SET_VRING_CALL, c->ram_fd);
		break;
	case H_CALL_INET: {
		int so = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

		assert_true(so >= 0);
		send_vring_fd(c, VHU_SET_VRING_CALL, so);
		close(so);
		break;
	}
	case H_ERR_CHARDEV: {
		int nul = open("/dev/null", O_WRONLY | O_CLOEXEC);

		assert_true(nul >= 0);
		send_vring_fd(c, VHU_SET_VRING_ERR, nul);
		close(nul);
		break;
	}
	case H_BACKEND_NO_PF:
	case H_BACKEND_NOT_SOCKET: {
		int sv[2];

		if (k == H_BACKEND_NOT_SOCKET) {
			u = 1ull << VHU_PF_BACKEND_REQ;
			send_req(c->cfd, VHU_SET_PROTOCOL_FEATURES, &u, 8);
			send_msg(c->cfd, VHU_SET_BACKEND_REQ_FD, VHU_VERSION, NULL, 0, &ev, 1);
			break;
		}
		assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
		send_msg(c->cfd, VHU_SET_BACKEND_REQ_FD, VHU_VERSION, NULL, 0, &sv[0], 1);
		close(sv[0]);
		close(sv[1]);
		break;
	}
	case H_TABLE_UNSEALED:
	case H_TABLE_NO_SEALING:
	case H_ADD_REG_UNSEALED: {
		/* Sealable but not sealed, or not sealable at all (its only
		 * seal is F_SEAL_SEAL): either may shrink under the server. */
		int mfd = memfd_create("unsealed", MFD_CLOEXEC |
				       (k == H_TABLE_NO_SEALING ? 0 : MFD_ALLOW_SEALING));

		assert_true(mfd >= 0);
		assert_int_equal(ftruncate(mfd, RAM_SIZE), 0);
		if (k == H_ADD_REG_UNSEALED) {
			struct vhu_mem_single ms = { 0, t.r[0] };
			uint64_t pf = all_pf;

			send_req(c->cfd, VHU_SET_PROTOCOL_FEATURES, &pf, 8);
			send_msg(c->cfd, VHU_ADD_MEM_REG, VHU_VERSION, &ms, sizeof(ms), &mfd, 1);
		} else {
			send_msg(c->cfd, VHU_SET_MEM_TABLE, VHU_VERSION, &t, tsize, &mfd, 1);
		}
		close(mfd);
		break;
	}
	case H_COUNT:
		break;
	}
	close(ev);
}

static void test_hostile(void **state)
{
	struct conn *c = conn_new();
	unsigned int fds_before;

	conn_end(c);
	fds_before = count_fds();
	for (int k = 0; k < H_COUNT; k++) {
		conn_start(c);
		send_hostile(c, k);
		if (!hung_up(c->cfd))
			fail_msg("hostile message %d did not drop the client", k);
		if (conn_end(c) >= 0)
			fail_msg("hostile message %d: server returned success", k);
		assert_int_equal(c->fake.dev.mem->n, 0);
		assert_false(c->fake.running[0]);
		assert_int_equal(count_fds(), fds_before);
	}
	/* After all that, a good client is still served. */
	conn_start(c);
	negotiate(c, all_pf);
	set_table(c);
	assert_int_equal(conn_end(c), 0);
	conn_free(c);
}

/* More fds than the protocol allows in one message: refused and closed. */
static void test_too_many_fds(void **state)
{
	struct conn *c = conn_new();
	int fds[12];
	uint64_t u = 0;

	conn_end(c);
	unsigned int before = count_fds();

	for (int i = 0; i < 12; i++)
		fds[i] = eventfd(0, EFD_CLOEXEC);
	conn_start(c);
	send_msg(c->cfd, VHU_SET_VRING_CALL, VHU_VERSION, &u, 8, fds, 12);
	assert_true(hung_up(c->cfd));
	assert_true(conn_end(c) < 0);
	for (int i = 0; i < 12; i++)
		close(fds[i]);
	assert_int_equal(count_fds(), before);
	conn_free(c);
}

/* A client that sends requests but never reads the replies: the server's
 * sendmsg must give up after the send timeout and drop it, not block its
 * thread for good. */
static void test_reply_not_read(void **state)
{
	struct conn *c = conn_new();
	struct vhu_hdr h = { VHU_GET_FEATURES, VHU_VERSION, 0 };
	struct timespec deadline;
	unsigned int sent = 0;
	int ret;

	conn_end(c);
	vhu_server_set_send_timeout(c->srv, 200);
	conn_start(c);
	/* Until the socket is full both ways: the server, stuck on a reply,
	 * reads no more requests. */
	for (;;) {
		struct pollfd p = { .fd = c->cfd, .events = POLLOUT };
		ssize_t n;

		if (poll(&p, 1, 1000) <= 0)
			break;
		n = send(c->cfd, &h, sizeof(h), MSG_DONTWAIT | MSG_NOSIGNAL);
		if (n != (ssize_t)sizeof(h))
			break;
		sent++;
	}
	assert_true(sent > 1);
	clock_gettime(CLOCK_REALTIME, &deadline);
	deadline.tv_sec += 10;
	ret = pthread_timedjoin_np(c->thread, NULL, &deadline);
	if (ret) {
		/* Unblock the server so the test can end. */
		close(c->cfd);
		pthread_join(c->thread, NULL);
		fail_msg("the server is still blocked on a reply nobody reads");
	}
	assert_int_equal(c->result, -ETIMEDOUT);
	close(c->cfd);
	conn_free(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_full_session),
		cmocka_unit_test(test_no_protocol_features),
		cmocka_unit_test(test_mem_regions_add_remove),
		cmocka_unit_test(test_table_swap_err_reset),
		cmocka_unit_test(test_mem_translate),
		cmocka_unit_test(test_mem_truncated_file),
		cmocka_unit_test(test_mem_truncated_tmpfs),
		cmocka_unit_test(test_table_slack),
		cmocka_unit_test(test_call_socket),
		cmocka_unit_test(test_backend_req),
		cmocka_unit_test(test_backend_req_ack),
		cmocka_unit_test(test_sigbus_elsewhere_kills),
		cmocka_unit_test(test_hostile),
		cmocka_unit_test(test_too_many_fds),
		cmocka_unit_test(test_reply_not_read),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
