/* Unit tests of the virtio-pcidev transport (vhost/pcidev.c) on fake guest
 * RAM, driven as UML's virt-pci drives it: cmd-queue messages for config
 * and BAR accesses, irq-queue buffers for interrupts. Behind it a test PCI
 * function (a register BAR, MSI-X, one interrupt eventfd, a settable INTx
 * level) or the real virtio-blk over virtio-pci on a temporary file. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "config.h"
#include "hw/pci.h"
#include "scsi/lsi_pci.h"
#include "scsi/lsi_regs.h"
#include "vdriver.h"
#include "vhost/pcidev.h"
#include "virtio/blk.h"
#include "virtio/pci.h"

#define RAM (8u << 20)
#define NIRQBUF 4
#define FAKE_BAR_ADDR 0xf0000000u
#define MSIX_BAR_ADDR 0xf0010000u

/* --- the test function ------------------------------------------------- */

struct fake_fn {
	struct pci_dev *pd;
	uint8_t regs[4096];
	unsigned int accesses;		/* BAR handler calls */
	unsigned int max_len;		/* widest access seen */
	int irq_fd;
	int level;			/* INTx level intx_pending reports */
	int resamples;			/* intx_pending calls */
};

static struct fake_fn fake;

static void fake_bar(void *opaque, uint64_t off, void *data, unsigned int len,
		     bool is_write)
{
	struct fake_fn *f = opaque;

	__atomic_fetch_add(&f->accesses, 1, __ATOMIC_SEQ_CST);
	if (len > f->max_len)
		f->max_len = len;
	if (is_write)
		memcpy(f->regs + off, data, len);
	else
		memcpy(data, f->regs + off, len);
}

static bool fake_intx_pending(struct pci_dev *pd)
{
	__atomic_fetch_add(&fake.resamples, 1, __ATOMIC_SEQ_CST);
	return __atomic_load_n(&fake.level, __ATOMIC_SEQ_CST);
}

static const struct pci_dev_ops fake_ops = { .intx_pending = fake_intx_pending };

static void fake_shutdown(void *opaque)
{
	struct fake_fn *f = opaque;

	pci_irq_unbind(f->pd, f->irq_fd);
	close(f->irq_fd);
}

static int make_fake(struct pci_bus *bus, void *opaque)
{
	const struct pci_dev_info info = { .vendor = 0x1234, .device = 0x5678,
					   .class_code = 0xff0000 };
	struct fake_fn *f = opaque;

	f->irq_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	f->pd = pci_dev_add(bus, &info, &fake_ops, f);
	if (f->irq_fd < 0 || !f->pd || pci_bar_add(f->pd, 0, 4096, false, fake_bar, f) ||
	    pci_msix_init(f->pd, 4, 2) || pci_irq_bind(f->pd, f->irq_fd, 0))
		return -EINVAL;
	return pci_bus_add_shutdown_hook(bus, fake_shutdown, f);
}

/* --- the test driver: UML's side ---------------------------------------- */

static struct vdriver drv;
static struct virtio_dev *dev;
static uint64_t msg_gpa, reply_gpa;
static uint64_t irqbuf[VDRIVER_MAX_SIZE];	/* gpa by head */

static void irq_post(uint64_t gpa)
{
	struct vbuf b = { gpa, 20, true };
	int head = vdriver_add(&drv, VPCIDEV_IRQ_Q, &b, 1, false);

	assert_true(head >= 0);
	irqbuf[head] = gpa;
	vdriver_kick(&drv, VPCIDEV_IRQ_Q);
}

static int start(vpcidev_make_fn make, void *opaque)
{
	assert_int_equal(vdriver_init(&drv, RAM), 0);
	dev = vpcidev_create(make, opaque);
	assert_non_null(dev);
	assert_int_equal(vdriver_attach(&drv, dev, 0), 0);
	assert_int_equal(vdriver_queue_start(&drv, VPCIDEV_CMD_Q, 64), 0);
	assert_int_equal(vdriver_queue_start(&drv, VPCIDEV_IRQ_Q, 16), 0);
	msg_gpa = vdriver_alloc(&drv, 16 + VPCIDEV_MAX_XFER);
	reply_gpa = vdriver_alloc(&drv, VPCIDEV_MAX_XFER);
	for (unsigned int i = 0; i < NIRQBUF; i++)
		irq_post(vdriver_alloc(&drv, 20));
	return 0;
}

static int setup_fake(void **state)
{
	memset(&fake, 0, sizeof(fake));
	return start(make_fake, &fake);
}

static int teardown(void **state)
{
	vdriver_queue_stop(&drv, VPCIDEV_IRQ_Q);
	vdriver_queue_stop(&drv, VPCIDEV_CMD_Q);
	dev->ops->destroy(dev);
	free(drv.ram[0]);
	free(drv.ram[1]);
	return 0;
}

/* Sends one message (header, data of dlen bytes) with a reply buffer of
 * rlen bytes (0: none); returns the bytes the device wrote back. */
static uint32_t send_msg(uint8_t op, uint8_t bar, uint32_t size, uint64_t addr,
			 const void *data, uint32_t dlen, uint32_t rlen)
{
	struct vpcidev_msg m = { .op = op, .bar = bar, .size = size, .addr = addr };
	struct vbuf b[2] = { { msg_gpa, sizeof(m) + dlen, false }, { reply_gpa, rlen, true } };
	uint32_t id, len;

	memcpy(vdriver_ptr(&drv, msg_gpa, sizeof(m)), &m, sizeof(m));
	if (dlen)
		memcpy(vdriver_ptr(&drv, msg_gpa + sizeof(m), dlen), data, dlen);
	memset(vdriver_ptr(&drv, reply_gpa, VPCIDEV_MAX_XFER), 0x5a, VPCIDEV_MAX_XFER);
	assert_true(vdriver_add(&drv, VPCIDEV_CMD_Q, b, rlen ? 2 : 1, false) >= 0);
	vdriver_kick(&drv, VPCIDEV_CMD_Q);
	assert_int_equal(vdriver_wait_used(&drv, VPCIDEV_CMD_Q, &id, &len, 10000), 1);
	return len;
}

static uint8_t *reply(void)
{
	return vdriver_ptr(&drv, reply_gpa, VPCIDEV_MAX_XFER);
}

static uint64_t cfg_rd(uint64_t off, uint32_t size)
{
	uint64_t v = 0;

	assert_int_equal(send_msg(VPCIDEV_OP_CFG_READ, 0, size, off, NULL, 0, 8), size);
	memcpy(&v, reply(), size);
	return v;
}

static void cfg_wr(uint64_t off, uint64_t v, uint32_t size)
{
	assert_int_equal(send_msg(VPCIDEV_OP_CFG_WRITE, 0, size, off, &v, size, 0), 0);
}

static uint64_t mmio_rd(uint8_t bar, uint64_t off, uint32_t size)
{
	uint64_t v = 0;

	assert_int_equal(send_msg(VPCIDEV_OP_MMIO_READ, bar, size, off, NULL, 0, size), size);
	memcpy(&v, reply(), size);
	return v;
}

static void mmio_wr(uint8_t bar, uint64_t off, uint64_t v, uint32_t size)
{
	assert_int_equal(send_msg(VPCIDEV_OP_MMIO_WRITE, bar, size, off, &v, size, 0), 0);
}

static unsigned int find_cap(uint8_t id)
{
	unsigned int off = cfg_rd(0x34, 1), guard = 0;

	while (off && guard++ < 48) {
		if (cfg_rd(off, 1) == id)
			return off;
		off = cfg_rd(off + 1, 1);
	}
	return 0;
}

/* Places the function's BARs as Linux would, and turns decoding on. */
static void enable_bars(uint32_t bar0, unsigned int msix_bar, uint32_t msix_addr)
{
	cfg_wr(0x10, bar0, 4);
	if (msix_bar)
		cfg_wr(0x10 + 4 * msix_bar, msix_addr, 4);
	cfg_wr(0x04, 0x0006, 2);	/* memory decoding, bus master */
}

static uint32_t last_irq_id;

/* Waits for the next irq message; returns its op and fills the rest. The
 * driver is "handling" it until irq_done. */
static uint8_t irq_wait_held(struct vpcidev_msg *m, uint32_t *data)
{
	uint32_t len;
	uint8_t *p;

	assert_int_equal(vdriver_wait_used(&drv, VPCIDEV_IRQ_Q, &last_irq_id, &len, 10000), 1);
	assert_true(len >= sizeof(*m));
	p = vdriver_ptr(&drv, irqbuf[last_irq_id], 20);
	memcpy(m, p, sizeof(*m));
	if (data)
		memcpy(data, p + sizeof(*m), 4);
	return m->op;
}

/* The handler is done: the buffer goes back, as UML recycles it. */
static void irq_done(void)
{
	irq_post(irqbuf[last_irq_id]);
}

static uint8_t irq_wait(struct vpcidev_msg *m, uint32_t *data)
{
	uint8_t op = irq_wait_held(m, data);

	irq_done();
	return op;
}

static uint64_t stat_of(unsigned int which)
{
	struct vpcidev_stats st;

	vpcidev_get_stats(dev, &st);
	return which == 0 ? st.refused : which == 1 ? st.msi : st.intx;
}

/* --- tests -------------------------------------------------------------- */

static void test_config_space(void **state)
{
	assert_int_equal(cfg_rd(0, 2), 0x1234);
	assert_int_equal(cfg_rd(2, 2), 0x5678);
	assert_int_equal(cfg_rd(0, 4), 0x56781234);
	/* 8 bytes: two dwords */
	assert_int_equal(cfg_rd(0, 8), cfg_rd(0, 4) | cfg_rd(4, 4) << 32);
	assert_int_equal(cfg_rd(0x3d, 1), 1);			/* INTA# */
	/* no extended config space: all-ones past 256 */
	assert_int_equal(cfg_rd(0x100, 4), 0xffffffffu);
	/* read-only fields stay */
	cfg_wr(0, 0xdeadbeef, 4);
	assert_int_equal(cfg_rd(0, 4), 0x56781234);
	/* a BAR is sized and placed by the driver */
	cfg_wr(0x10, 0xffffffff, 4);
	assert_int_equal(cfg_rd(0x10, 4), 0xfffff000u);
	cfg_wr(0x10, FAKE_BAR_ADDR, 4);
	assert_int_equal(cfg_rd(0x10, 4), FAKE_BAR_ADDR);
	assert_int_equal(stat_of(0), 0);
}

static void test_bar_mmio(void **state)
{
	uint8_t big[256];

	/* not decoding yet: reads all-ones, writes dropped */
	assert_int_equal(mmio_rd(0, 0, 4), 0xffffffffu);
	mmio_wr(0, 0, 0x11223344, 4);
	assert_int_equal(fake.accesses, 0);
	enable_bars(FAKE_BAR_ADDR, 0, 0);
	mmio_wr(0, 8, 0x1122334455667788ull, 8);
	assert_int_equal(mmio_rd(0, 8, 8), 0x1122334455667788ull);
	assert_int_equal(mmio_rd(0, 14, 2), 0x1122);
	assert_int_equal(mmio_rd(0, 9, 1), 0x77);
	/* a copy (memcpy_toio) is split into aligned accesses of <= 8 */
	for (unsigned int i = 0; i < sizeof(big); i++)
		big[i] = i;
	assert_int_equal(send_msg(VPCIDEV_OP_MMIO_WRITE, 0, 255, 0x101, big, 255, 0), 0);
	assert_memory_equal(fake.regs + 0x101, big, 255);
	assert_int_equal(fake.max_len, 8);
	assert_int_equal(send_msg(VPCIDEV_OP_MMIO_READ, 0, 255, 0x101, NULL, 0, 255), 255);
	assert_memory_equal(reply(), big, 255);
	/* memset_io: one data byte */
	assert_int_equal(send_msg(VPCIDEV_OP_MMIO_MEMSET, 0, 100, 0x300, "\xab", 1, 0), 0);
	for (unsigned int i = 0; i < 100; i++)
		assert_int_equal(fake.regs[0x300 + i], 0xab);
	assert_int_equal(fake.regs[0x300 + 100], 0);
	assert_int_equal(stat_of(0), 0);
}

static void test_hostile_messages(void **state)
{
	uint64_t refused = 0;
	uint8_t junk[8] = { 0 };
	uint32_t id, len;

	enable_bars(FAKE_BAR_ADDR, 0, 0);
#define REFUSED(expr, rlen)                                                    \
	do {                                                                   \
		assert_int_equal((expr), rlen);                                \
		assert_int_equal(stat_of(0), ++refused);                       \
	} while (0)
	/* unknown operations, including the device-to-driver ones */
	REFUSED(send_msg(0, 0, 4, 0, NULL, 0, 4), 4);
	assert_int_equal(*(uint32_t *)reply(), 0xffffffffu);
	REFUSED(send_msg(VPCIDEV_OP_MSI, 0, 4, 0, NULL, 0, 4), 4);
	REFUSED(send_msg(200, 0, 4, 0, NULL, 0, 4), 4);
	/* config: bad size, beyond 4 KiB, short data, short reply */
	REFUSED(send_msg(VPCIDEV_OP_CFG_READ, 0, 3, 0, NULL, 0, 8), 3);
	REFUSED(send_msg(VPCIDEV_OP_CFG_READ, 0, 4, 4096, NULL, 0, 8), 4);
	REFUSED(send_msg(VPCIDEV_OP_CFG_READ, 0, 4, 4094, NULL, 0, 8), 4);
	REFUSED(send_msg(VPCIDEV_OP_CFG_READ, 0, 4, 0, NULL, 0, 2), 2);
	assert_int_equal(*(uint16_t *)reply(), 0xffff);
	REFUSED(send_msg(VPCIDEV_OP_CFG_WRITE, 0, 4, 0x3c, junk, 2, 0), 0);
	/* BAR: no such BAR, past its end, wrapping, too large, size 0 */
	REFUSED(send_msg(VPCIDEV_OP_MMIO_READ, 1, 4, 0, NULL, 0, 4), 4);
	REFUSED(send_msg(VPCIDEV_OP_MMIO_READ, 6, 4, 0, NULL, 0, 4), 4);
	REFUSED(send_msg(VPCIDEV_OP_MMIO_READ, 255, 4, 0, NULL, 0, 4), 4);
	REFUSED(send_msg(VPCIDEV_OP_MMIO_READ, 0, 8, 4092, NULL, 0, 8), 8);
	REFUSED(send_msg(VPCIDEV_OP_MMIO_READ, 0, 8, UINT64_MAX - 3, NULL, 0, 8), 8);
	REFUSED(send_msg(VPCIDEV_OP_MMIO_READ, 0, UINT32_MAX, 0, NULL, 0, 8), 8);
	REFUSED(send_msg(VPCIDEV_OP_MMIO_WRITE, 0, 0, 0, NULL, 0, 0), 0);
	REFUSED(send_msg(VPCIDEV_OP_MMIO_WRITE, 0, 8, 0, junk, 4, 0), 0);
	REFUSED(send_msg(VPCIDEV_OP_MMIO_MEMSET, 0, 8, 0, NULL, 0, 0), 0);
	REFUSED(send_msg(VPCIDEV_OP_MMIO_READ, 0, 8, 0, NULL, 0, 4), 4);
	/* a message shorter than its header, and none at all */
	struct vbuf b[2] = { { msg_gpa, 8, false }, { reply_gpa, 8, true } };

	assert_true(vdriver_add(&drv, VPCIDEV_CMD_Q, b, 2, false) >= 0);
	vdriver_kick(&drv, VPCIDEV_CMD_Q);
	assert_int_equal(vdriver_wait_used(&drv, VPCIDEV_CMD_Q, &id, &len, 10000), 1);
	assert_int_equal(stat_of(0), ++refused);
	assert_true(vdriver_add(&drv, VPCIDEV_CMD_Q, &b[1], 1, false) >= 0);
	vdriver_kick(&drv, VPCIDEV_CMD_Q);
	assert_int_equal(vdriver_wait_used(&drv, VPCIDEV_CMD_Q, &id, &len, 10000), 1);
	assert_int_equal(stat_of(0), ++refused);
	/* none of it reached the function, and it still answers */
	assert_int_equal(fake.accesses, 0);
	assert_int_equal(cfg_rd(0, 2), 0x1234);
	assert_int_equal(drv.needs_reset, 0);
#undef REFUSED
}

static void program_vector(unsigned int v, uint32_t addr, uint32_t data, bool masked)
{
	mmio_wr(2, 16 * v, addr, 4);
	mmio_wr(2, 16 * v + 4, 0, 4);
	mmio_wr(2, 16 * v + 8, data, 4);
	mmio_wr(2, 16 * v + 12, masked, 4);
}

static void signal_irq(void)
{
	uint64_t one = 1;

	assert_int_equal(write(fake.irq_fd, &one, 8), 8);
}

static void test_msix(void **state)
{
	unsigned int cap = find_cap(PCI_CAP_ID_MSIX);
	struct vpcidev_msg m;
	uint32_t data = 0;

	assert_true(cap);
	enable_bars(FAKE_BAR_ADDR, 2, MSIX_BAR_ADDR);
	program_vector(0, 0xa0000, 42, false);
	cfg_wr(cap + 2, 0x8000, 2);		/* MSI-X enable */
	signal_irq();
	assert_int_equal(irq_wait(&m, &data), VPCIDEV_OP_MSI);
	assert_int_equal(m.size, 4);
	assert_int_equal(m.addr, 0xa0000);
	assert_int_equal(data, 42);		/* the table entry's data */
	/* the driver reprograms the vector: the next message follows */
	program_vector(0, 0xa0000, 43, false);
	signal_irq();
	assert_int_equal(irq_wait(&m, &data), VPCIDEV_OP_MSI);
	assert_int_equal(data, 43);
	/* masked: held (its PBA bit set), delivered on unmask */
	mmio_wr(2, 12, 1, 4);
	signal_irq();
	assert_int_equal(mmio_rd(2, 0x40, 8) & 1, 1);	/* PBA at 16 * 4 */
	assert_int_equal(stat_of(1), 2);
	mmio_wr(2, 12, 0, 4);
	assert_int_equal(irq_wait(&m, &data), VPCIDEV_OP_MSI);
	assert_int_equal(data, 43);
	assert_int_equal(mmio_rd(2, 0x40, 8) & 1, 0);
	/* the function mask holds every vector the same way */
	cfg_wr(cap + 2, 0xc000, 2);
	signal_irq();
	assert_int_equal(mmio_rd(2, 0x40, 8) & 1, 1);
	assert_int_equal(stat_of(1), 3);
	cfg_wr(cap + 2, 0x8000, 2);
	assert_int_equal(irq_wait(&m, &data), VPCIDEV_OP_MSI);
	assert_int_equal(data, 43);
	assert_int_equal(stat_of(1), 4);
	assert_int_equal(stat_of(2), 0);
}

static void wait_resamples(int n)
{
	struct timespec ts = { 0, 1000000 };

	for (int i = 0; i < 10000 && __atomic_load_n(&fake.resamples, __ATOMIC_SEQ_CST) < n; i++)
		nanosleep(&ts, NULL);
	assert_true(__atomic_load_n(&fake.resamples, __ATOMIC_SEQ_CST) >= n);
}

static void test_intx(void **state)
{
	struct vpcidev_msg m;

	enable_bars(FAKE_BAR_ADDR, 0, 0);
	fake.level = 1;
	signal_irq();
	assert_int_equal(irq_wait_held(&m, NULL), VPCIDEV_OP_INT);
	assert_int_equal(m.addr, 1);		/* INTA# */
	/* A new signal while the line is up changes nothing... */
	signal_irq();
	assert_int_equal(cfg_rd(0, 2), 0x1234);
	assert_int_equal(fake.resamples, 0);
	/* ...the buffer coming back (the handler ran) with the line still
	 * up asks the device, and INT comes again, as a level line does. */
	irq_done();
	wait_resamples(1);
	assert_int_equal(irq_wait_held(&m, NULL), VPCIDEV_OP_INT);
	/* Served this time: asked once more, and no INT follows. */
	__atomic_store_n(&fake.level, 0, __ATOMIC_SEQ_CST);
	irq_done();
	wait_resamples(2);
	assert_int_equal(stat_of(2), 2);
	/* INTx disable in the command register holds the line */
	cfg_wr(0x04, 0x0406, 2);
	fake.level = 1;
	signal_irq();
	assert_int_equal(cfg_rd(0, 2), 0x1234);	/* a round trip after it */
	assert_int_equal(stat_of(2), 2);
	cfg_wr(0x04, 0x0006, 2);
	assert_int_equal(irq_wait(&m, NULL), VPCIDEV_OP_INT);
	assert_int_equal(stat_of(1), 0);
}

/* Interrupts with no irq buffer free wait for one. */
static void test_irq_backpressure(void **state)
{
	unsigned int cap = find_cap(PCI_CAP_ID_MSIX);
	struct vpcidev_msg m;
	uint32_t data, id, len;

	enable_bars(FAKE_BAR_ADDR, 2, MSIX_BAR_ADDR);
	program_vector(0, 0xa0000, 7, false);
	cfg_wr(cap + 2, 0x8000, 2);
	/* use up the buffers, without recycling them */
	for (unsigned int i = 0; i < NIRQBUF; i++) {
		signal_irq();
		assert_int_equal(vdriver_wait_used(&drv, VPCIDEV_IRQ_Q, &id, &len, 10000), 1);
	}
	signal_irq();
	assert_int_equal(cfg_rd(0, 2), 0x1234);
	assert_int_equal(stat_of(1), NIRQBUF);
	irq_post(vdriver_alloc(&drv, 20));
	assert_int_equal(irq_wait(&m, &data), VPCIDEV_OP_MSI);
	assert_int_equal(data, 7);
}

/* --- the real virtio-blk over virtio-pci -------------------------------- */

static char disk_path[64];

static int make_blk(struct pci_bus *bus, void *opaque)
{
	struct disk_cfg cfg = { .path = disk_path, .cache = CACHE_WRITEBACK };
	char err[256];
	struct virtio_dev *blk = virtio_blk_create(&cfg, 2, err, sizeof(err));

	if (!blk)
		return -EINVAL;
	return virtio_pci_create(bus, blk);
}

static int setup_blk(void **state)
{
	int fd;

	strcpy(disk_path, "/tmp/iovm-vpcidev-XXXXXX");
	fd = mkstemp(disk_path);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, 1 << 20), 0);
	close(fd);
	return start(make_blk, NULL);
}

static int teardown_blk(void **state)
{
	teardown(state);
	unlink(disk_path);
	return 0;
}

static void test_virtio_blk_function(void **state)
{
	unsigned int cap = find_cap(PCI_CAP_ID_MSIX);

	assert_int_equal(cfg_rd(0, 4), (uint32_t)(VIRTIO_PCI_DEVICE_BASE + VIRTIO_ID_BLOCK) << 16 |
					       VIRTIO_PCI_VENDOR);
	assert_true(cap);
	assert_true(find_cap(PCI_CAP_ID_VNDR));
	enable_bars(FAKE_BAR_ADDR, VPCI_MSIX_BAR, MSIX_BAR_ADDR);
	/* common config: queues, features, device status */
	assert_int_equal(mmio_rd(0, VPCI_NUM_QUEUES, 2), 2);
	mmio_wr(0, VPCI_DFSELECT, 1, 4);
	assert_int_equal(mmio_rd(0, VPCI_DF, 4) & 1, 1);	/* VERSION_1 */
	mmio_wr(0, VPCI_STATUS, VIRTIO_STATUS_ACKNOWLEDGE, 1);
	assert_int_equal(mmio_rd(0, VPCI_STATUS, 1), VIRTIO_STATUS_ACKNOWLEDGE);
	/* device config: capacity in sectors */
	assert_int_equal(mmio_rd(0, VPCI_DEVICE_OFF, 8), (1 << 20) / 512);
	/* a notify write lands on the queue's kick (no ioeventfd here) */
	mmio_wr(0, VPCI_NOTIFY_OFF, 0, 2);
	/* reset */
	mmio_wr(0, VPCI_STATUS, 0, 1);
	assert_int_equal(mmio_rd(0, VPCI_STATUS, 1), 0);
	assert_int_equal(stat_of(0), 0);
}

/* A virtio_pci driver's whole path through messages: feature negotiation,
 * a queue set up by MMIO, a write request whose completion comes back as
 * the MSI of the queue's vector, and the data in the host file. */
static void test_virtio_blk_io(void **state)
{
	unsigned int cap = find_cap(PCI_CAP_ID_MSIX);
	uint64_t desc = vdriver_alloc(&drv, 16 * 16), avail = vdriver_alloc(&drv, 6 + 2 * 16);
	uint64_t used = vdriver_alloc(&drv, 6 + 8 * 16), hdr = vdriver_alloc(&drv, 16);
	uint64_t data = vdriver_alloc(&drv, 4096), status = vdriver_alloc(&drv, 1);
	struct virtq_desc *d = vdriver_ptr(&drv, desc, 16 * 16);
	uint16_t *av = vdriver_ptr(&drv, avail, 6 + 2 * 16);
	uint16_t *u = vdriver_ptr(&drv, used, 6 + 8 * 16);
	uint8_t *st = vdriver_ptr(&drv, status, 1), back[4096];
	uint32_t h[4] = { 1 /* VIRTIO_BLK_T_OUT */, 0, 8, 0 };	/* sector 8 */
	struct vpcidev_msg m;
	uint32_t msi = 0;
	int fd;

	enable_bars(FAKE_BAR_ADDR, VPCI_MSIX_BAR, MSIX_BAR_ADDR);
	program_vector(0, 0xa0000, 0x50, false);	/* config */
	program_vector(1, 0xa0000, 0x51, false);	/* queue 0 */
	cfg_wr(cap + 2, 0x8000, 2);
	mmio_wr(0, VPCI_STATUS, VIRTIO_STATUS_ACKNOWLEDGE | VIRTIO_STATUS_DRIVER, 1);
	mmio_wr(0, VPCI_GFSELECT, 1, 4);
	mmio_wr(0, VPCI_GF, 1, 4);			/* VERSION_1 */
	mmio_wr(0, VPCI_GFSELECT, 0, 4);
	mmio_wr(0, VPCI_GF, 0, 4);
	mmio_wr(0, VPCI_STATUS, 0xb, 1);
	assert_int_equal(mmio_rd(0, VPCI_STATUS, 1), 0xb);	/* FEATURES_OK kept */
	mmio_wr(0, VPCI_MSIX_CONFIG, 0, 2);
	mmio_wr(0, VPCI_Q_SELECT, 0, 2);
	mmio_wr(0, VPCI_Q_SIZE, 16, 2);
	mmio_wr(0, VPCI_Q_MSIX, 1, 2);
	assert_int_equal(mmio_rd(0, VPCI_Q_MSIX, 2), 1);
	mmio_wr(0, VPCI_Q_DESC, desc, 8);
	mmio_wr(0, VPCI_Q_AVAIL, avail, 8);
	mmio_wr(0, VPCI_Q_USED, used, 8);
	mmio_wr(0, VPCI_Q_ENABLE, 1, 2);
	mmio_wr(0, VPCI_STATUS, 0xf, 1);		/* DRIVER_OK */
	/* header, data, status */
	memcpy(vdriver_ptr(&drv, hdr, 16), h, 16);
	memset(vdriver_ptr(&drv, data, 4096), 0xc3, 4096);
	*st = 0xff;
	d[0] = (struct virtq_desc){ hdr, 16, VIRTQ_DESC_F_NEXT, 1 };
	d[1] = (struct virtq_desc){ data, 4096, VIRTQ_DESC_F_NEXT, 2 };
	d[2] = (struct virtq_desc){ status, 1, VIRTQ_DESC_F_WRITE, 0 };
	av[2] = 0;
	__atomic_store_n(&av[1], 1, __ATOMIC_RELEASE);
	mmio_wr(0, VPCI_NOTIFY_OFF, 0, 2);		/* kick queue 0 */
	assert_int_equal(irq_wait(&m, &msi), VPCIDEV_OP_MSI);
	assert_int_equal(msi, 0x51);
	assert_int_equal(__atomic_load_n(&u[1], __ATOMIC_ACQUIRE), 1);
	assert_int_equal(*st, 0);			/* VIRTIO_BLK_S_OK */
	/* the ISR bit is set too (a driver may read it with MSI-X) */
	assert_int_equal(mmio_rd(0, VPCI_ISR_OFF, 1) & 1, 1);
	fd = open(disk_path, O_RDONLY);
	assert_true(fd >= 0);
	assert_int_equal(pread(fd, back, 4096, 8 * 512), 4096);
	close(fd);
	for (unsigned int i = 0; i < 4096; i++)
		assert_int_equal(back[i], 0xc3);
	assert_int_equal(stat_of(0), 0);
}

/* --- the real LSI 53C895A -------------------------------------------- */

static int make_lsi(struct pci_bus *bus, void *opaque)
{
	static struct disk_cfg cfg;
	const struct disk_cfg *disks[1] = { &cfg };

	cfg = (struct disk_cfg){ .path = disk_path, .iface = DISK_IF_LSI,
				 .cache = CACHE_WRITEBACK };
	return lsi_pci_create(bus, disks, 1, NULL);
}

static int setup_lsi(void **state)
{
	int fd;

	strcpy(disk_path, "/tmp/iovm-vpcidev-XXXXXX");
	fd = mkstemp(disk_path);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, 1 << 20), 0);
	close(fd);
	return start(make_lsi, NULL);
}

#define LSI_MMIO_ADDR 0xf0000000u
#define LSI_RAM_ADDR 0xf0002000u

/* sym53c8xx's way in: the registers through the memory BAR, SCRIPTS
 * copied into the on-chip RAM, run from there, and their INT instruction
 * coming back as an INTx message that reading the status clears. */
static void test_lsi_function(void **state)
{
	uint8_t scripts[4096];
	uint32_t prog[2] = { SCR_INT, 0x1234 };
	struct vpcidev_msg m;

	assert_int_equal(cfg_rd(0, 4), LSI_PCI_DEVICE << 16 | LSI_PCI_VENDOR);
	assert_int_equal(cfg_rd(0x3d, 1), 1);			/* INTA# */
	cfg_wr(0x14, LSI_MMIO_ADDR, 4);				/* BAR1: registers */
	cfg_wr(0x18, LSI_RAM_ADDR, 4);				/* BAR2: SCRIPTS RAM */
	cfg_wr(0x04, 0x0006, 2);
	/* a scratch register, and the RAM filled by one memcpy_toio */
	mmio_wr(1, 0x34, 0xcafef00d, 4);			/* SCRATCHA */
	assert_int_equal(mmio_rd(1, 0x34, 4), 0xcafef00d);
	for (unsigned int i = 0; i < sizeof(scripts); i++)
		scripts[i] = i * 7;
	assert_int_equal(send_msg(VPCIDEV_OP_MMIO_WRITE, 2, 4096, 4096, scripts, 4096, 0), 0);
	assert_int_equal(send_msg(VPCIDEV_OP_MMIO_READ, 2, 4096, 4096, NULL, 0, 4096), 4096);
	assert_memory_equal(reply(), scripts, 4096);
	/* INT 0x1234 at the start of the RAM, run from its bus address */
	assert_int_equal(send_msg(VPCIDEV_OP_MMIO_WRITE, 2, 8, 0, prog, 8, 0), 0);
	mmio_wr(1, LSI_DIEN, LSI_DSTAT_SIR, 1);
	mmio_wr(1, LSI_DSP, LSI_RAM_ADDR, 4);
	assert_int_equal(irq_wait_held(&m, NULL), VPCIDEV_OP_INT);
	assert_int_equal(mmio_rd(1, LSI_ISTAT, 1) & LSI_ISTAT_DIP, LSI_ISTAT_DIP);
	assert_int_equal(mmio_rd(1, LSI_DSTAT, 1) & LSI_DSTAT_SIR, LSI_DSTAT_SIR);
	assert_int_equal(mmio_rd(1, LSI_DSPS, 4), 0x1234);
	assert_int_equal(mmio_rd(1, LSI_ISTAT, 1) & LSI_ISTAT_DIP, 0);
	irq_done();
	assert_int_equal(stat_of(2), 1);
	assert_int_equal(stat_of(0), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_config_space, setup_fake, teardown),
		cmocka_unit_test_setup_teardown(test_bar_mmio, setup_fake, teardown),
		cmocka_unit_test_setup_teardown(test_hostile_messages, setup_fake, teardown),
		cmocka_unit_test_setup_teardown(test_msix, setup_fake, teardown),
		cmocka_unit_test_setup_teardown(test_intx, setup_fake, teardown),
		cmocka_unit_test_setup_teardown(test_irq_backpressure, setup_fake, teardown),
		cmocka_unit_test_setup_teardown(test_virtio_blk_function, setup_blk, teardown_blk),
		cmocka_unit_test_setup_teardown(test_virtio_blk_io, setup_blk, teardown_blk),
		cmocka_unit_test_setup_teardown(test_lsi_function, setup_lsi, teardown_blk),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
