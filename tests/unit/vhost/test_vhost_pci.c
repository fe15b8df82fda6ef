/* virtio-pcidev behind the real vhost-user server, driven over a socketpair
 * the way UML's virtio_uml and virt-pci drive it: features, a memfd memory
 * table, the cmd and irq vrings with pipe call fds (UML's kind), then
 * config-space and BAR messages to a virtio-blk function; a second session
 * after a disconnect gets a function made afresh. */
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
#include <unistd.h>

#include <cmocka.h>

#include "config.h"
#include "hw/pci.h"
#include "vclient.h"
#include "vhost/pcidev.h"
#include "vhost/proto.h"
#include "vhost/server.h"
#include "virtio/blk.h"
#include "virtio/pci.h"
#include "virtio/ring.h"

#define RAM_SIZE (1u << 20)
#define QSIZE 16
#define RING(q) (0x1000u + (q) * 0x1000u)	/* desc; avail +0x100, used +0x200 */
#define MSG 0x8000
#define REPLY 0x9000
#define IRQBUF 0xa000

struct env {
	char path[64];
	struct virtio_dev *dev;
	struct vhu_server *srv;
	pthread_t thread;
	int cfd, sfd, result;
	int ram_fd;
	uint8_t *ram;
	int kick[2];
	int call_rd[2];		/* the read ends of the call pipes */
	uint16_t avail_idx[2], used_seen[2];
};

static struct env env;

static void *serve_thread(void *arg)
{
	struct env *e = arg;

	e->result = vhu_server_serve(e->srv, e->sfd, -1);
	return NULL;
}

static int make_blk(struct pci_bus *bus, void *opaque)
{
	struct disk_cfg cfg = { .path = env.path, .cache = CACHE_WRITEBACK };
	char err[256];
	struct virtio_dev *blk = virtio_blk_create(&cfg, 1, err, sizeof(err));

	return blk ? virtio_pci_create(bus, blk) : -EINVAL;
}

static uint64_t uva(struct env *e, uint64_t gpa)
{
	return (uintptr_t)e->ram + gpa;
}

/* A session as virtio_uml opens one for virt-pci. */
static void start_session(struct env *e)
{
	uint64_t f, pf = (1ull << VHU_PF_REPLY_ACK);
	struct vhu_mem_table t = { .nregions = 1 };
	int sv[2];

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	e->cfd = sv[0];
	e->sfd = sv[1];
	assert_int_equal(pthread_create(&e->thread, NULL, serve_thread, e), 0);
	f = get_u64(e->cfd, VHU_GET_FEATURES);
	assert_true(f & (1ull << VIRTIO_F_VERSION_1));
	assert_true(f & (1ull << VHU_F_PROTOCOL_FEATURES));
	send_req(e->cfd, VHU_SET_PROTOCOL_FEATURES, &pf, 8);
	assert_int_equal(send_ack(e->cfd, VHU_SET_FEATURES, &f, 8, NULL, 0), 0);
	t.r[0] = (struct vhu_region){ 0, RAM_SIZE, uva(e, 0), 0 };
	assert_int_equal(send_ack(e->cfd, VHU_SET_MEM_TABLE, &t,
				  VHU_MEM_TABLE_HDR_SIZE + sizeof(t.r[0]), &e->ram_fd, 1), 0);
	memset(e->ram, 0, RAM_SIZE);
	for (uint32_t q = 0; q < 2; q++) {
		struct vhu_vring_state st = { q, QSIZE };
		struct vhu_vring_addr a = { q, 0, uva(e, RING(q)), uva(e, RING(q) + 0x200),
					    uva(e, RING(q) + 0x100), 0 };
		uint64_t idx = q;
		int call[2];

		/* UML's call fds are pipes: SIGIO works on them */
		assert_int_equal(pipe2(call, O_NONBLOCK | O_CLOEXEC), 0);
		e->kick[q] = eventfd(0, EFD_CLOEXEC);
		e->avail_idx[q] = e->used_seen[q] = 0;
		assert_int_equal(send_ack(e->cfd, VHU_SET_VRING_NUM, &st, 8, NULL, 0), 0);
		assert_int_equal(send_ack(e->cfd, VHU_SET_VRING_ADDR, &a, sizeof(a), NULL, 0), 0);
		st.num = 0;
		assert_int_equal(send_ack(e->cfd, VHU_SET_VRING_BASE, &st, 8, NULL, 0), 0);
		assert_int_equal(send_ack(e->cfd, VHU_SET_VRING_CALL, &idx, 8, &call[1], 1), 0);
		assert_int_equal(send_ack(e->cfd, VHU_SET_VRING_KICK, &idx, 8, &e->kick[q], 1), 0);
		st.num = 1;
		assert_int_equal(send_ack(e->cfd, VHU_SET_VRING_ENABLE, &st, 8, NULL, 0), 0);
		e->call_rd[q] = call[0];
		close(call[1]);
	}
}

static int end_session(struct env *e)
{
	close(e->cfd);
	assert_int_equal(pthread_join(e->thread, NULL), 0);
	for (unsigned int q = 0; q < 2; q++) {
		close(e->kick[q]);
		close(e->call_rd[q]);
	}
	return e->result;
}

/* Adds a chain of n (gpa, len, writable) descriptors to queue q, kicks. */
static void add_chain(struct env *e, unsigned int q, const uint64_t (*b)[3], unsigned int n)
{
	struct virtq_desc *d = (struct virtq_desc *)(e->ram + RING(q));
	volatile uint16_t *avail = (volatile uint16_t *)(e->ram + RING(q) + 0x100);
	unsigned int head = (e->avail_idx[q] * 2) % QSIZE;
	uint64_t one = 1;

	for (unsigned int i = 0; i < n; i++)
		d[head + i] = (struct virtq_desc){ b[i][0], b[i][1],
			(b[i][2] ? VIRTQ_DESC_F_WRITE : 0) | (i + 1 < n ? VIRTQ_DESC_F_NEXT : 0),
			head + i + 1 };
	avail[2 + e->avail_idx[q] % QSIZE] = head;
	__atomic_store_n(&avail[1], ++e->avail_idx[q], __ATOMIC_RELEASE);
	assert_int_equal(write(e->kick[q], &one, 8), 8);
}

/* Waits (bounded: only a hang fires it) for the next used element of q. */
static uint32_t wait_used(struct env *e, unsigned int q)
{
	volatile uint16_t *used = (volatile uint16_t *)(e->ram + RING(q) + 0x200);
	volatile struct virtq_used_elem *ue = (void *)(e->ram + RING(q) + 0x204);

	for (int i = 0; i < 10000 && used[1] == e->used_seen[q]; i++)
		usleep(1000);
	assert_int_not_equal(used[1], e->used_seen[q]);
	return ue[e->used_seen[q]++ % QSIZE].len;
}

static uint64_t msg(struct env *e, uint8_t op, uint8_t bar, uint32_t size, uint64_t addr,
		    uint64_t val)
{
	struct vpcidev_msg m = { .op = op, .bar = bar, .size = size, .addr = addr };
	bool rd = op == VPCIDEV_OP_CFG_READ || op == VPCIDEV_OP_MMIO_READ;
	uint64_t b[2][3] = { { MSG, sizeof(m) + (rd ? 0 : size), 0 }, { REPLY, 8, 1 } };
	uint64_t v = 0;

	memcpy(e->ram + MSG, &m, sizeof(m));
	memcpy(e->ram + MSG + sizeof(m), &val, 8);
	add_chain(e, VPCIDEV_CMD_Q, b, rd ? 2 : 1);
	assert_int_equal(wait_used(e, VPCIDEV_CMD_Q), rd ? size : 0);
	memcpy(&v, e->ram + REPLY, size);
	return v;
}

static int setup(void **state)
{
	int fd;

	strcpy(env.path, "/tmp/iovm-vhost-pci-XXXXXX");
	fd = mkstemp(env.path);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, 1 << 20), 0);
	close(fd);
	env.dev = vpcidev_create(make_blk, NULL);
	assert_non_null(env.dev);
	env.srv = vhu_server_new(env.dev);
	assert_non_null(env.srv);
	env.ram_fd = memfd_create("ram", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	assert_true(env.ram_fd >= 0);
	assert_int_equal(ftruncate(env.ram_fd, RAM_SIZE), 0);
	assert_int_equal(fcntl(env.ram_fd, F_ADD_SEALS, F_SEAL_SHRINK), 0);
	env.ram = mmap(NULL, RAM_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, env.ram_fd, 0);
	assert_true(env.ram != MAP_FAILED);
	return 0;
}

static int teardown(void **state)
{
	vhu_server_free(env.srv);
	env.dev->ops->destroy(env.dev);
	munmap(env.ram, RAM_SIZE);
	close(env.ram_fd);
	unlink(env.path);
	return 0;
}

static void test_sessions(void **state)
{
	uint64_t irqb[1][3] = { { IRQBUF, 20, 1 } };
	struct vpcidev_stats st;

	for (int round = 0; round < 2; round++) {
		start_session(&env);
		add_chain(&env, VPCIDEV_IRQ_Q, irqb, 1);
		assert_int_equal(msg(&env, VPCIDEV_OP_CFG_READ, 0, 4, 0, 0),
				 (uint32_t)(VIRTIO_PCI_DEVICE_BASE + VIRTIO_ID_BLOCK) << 16 |
					 VIRTIO_PCI_VENDOR);
		/* a fresh function each session: BAR 0 unplaced, decoding off */
		assert_int_equal(msg(&env, VPCIDEV_OP_CFG_READ, 0, 4, 0x10, 0), 0);
		assert_int_equal(msg(&env, VPCIDEV_OP_MMIO_READ, 0, 2, VPCI_NUM_QUEUES, 0), 0xffff);
		msg(&env, VPCIDEV_OP_CFG_WRITE, 0, 4, 0x10, 0xf0000000);
		msg(&env, VPCIDEV_OP_CFG_WRITE, 0, 2, 0x04, 0x0006);
		assert_int_equal(msg(&env, VPCIDEV_OP_MMIO_READ, 0, 2, VPCI_NUM_QUEUES, 0), 1);
		/* the common configuration answers through the BAR */
		msg(&env, VPCIDEV_OP_MMIO_WRITE, 0, 1, VPCI_STATUS, VIRTIO_STATUS_ACKNOWLEDGE);
		assert_int_equal(msg(&env, VPCIDEV_OP_MMIO_READ, 0, 1, VPCI_STATUS, 0),
				 VIRTIO_STATUS_ACKNOWLEDGE);
		vpcidev_get_stats(env.dev, &st);
		assert_int_equal(st.refused, 0);
		assert_int_equal(end_session(&env), 0);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_sessions, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
