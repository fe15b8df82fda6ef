/* Unit tests of the PCI bus (mechanism #1, BARs, MSI-X) and the virtio-pci
 * transport with virtio-blk behind it, on a fake VM: the vm.h services are
 * implemented here and record what KVM would have been asked to do. */
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
#include <unistd.h>

#include <cmocka.h>

#include "block/backend.h"
#include "hw/pci.h"
#include "vdriver.h"
#include "virtio/blk.h"
#include "virtio/pci.h"
#include "vm/vm.h"
#include "fakevm.h"

/* --- guest-side accessors -------------------------------------------- */

#define RAM (16u << 20)

static struct pci_bus *pbus;
static struct vdriver drv;	/* guest RAM and ring helpers */
static char disk_path[64];

static uint32_t cfg_rd(unsigned int slot, unsigned int off, unsigned int len)
{
	uint32_t a = 0x80000000u | slot << 11 | (off & 0xfc), v = 0;

	assert_true(bus_dispatch(&fvm->pio, 0, 0xcf8, &a, 4, true));
	assert_true(bus_dispatch(&fvm->pio, 0, 0xcfc + (off & 3), &v, len, false));
	return v;
}

static void cfg_wr(unsigned int slot, unsigned int off, uint32_t v,
		   unsigned int len)
{
	uint32_t a = 0x80000000u | slot << 11 | (off & 0xfc);

	assert_true(bus_dispatch(&fvm->pio, 0, 0xcf8, &a, 4, true));
	assert_true(bus_dispatch(&fvm->pio, 0, 0xcfc + (off & 3), &v, len, true));
}

static uint64_t bar0;

static uint64_t mrd(uint64_t off, unsigned int len)
{
	uint64_t v = 0;

	assert_true(bus_dispatch(&fvm->mmio, 0, bar0 + off, &v, len, false));
	return v;
}

static void mwr(uint64_t off, uint64_t v, unsigned int len)
{
	assert_true(bus_dispatch(&fvm->mmio, 0, bar0 + off, &v, len, true));
}

static uint64_t msix_bar(void)
{
	return cfg_rd(1, 0x10 + 4 * VPCI_MSIX_BAR, 4) & ~15u;
}

static int setup(void **state)
{
	struct disk_cfg cfg = { .cache = CACHE_WRITEBACK };
	struct virtio_dev *dev;
	char err[256];
	int fd;

	fvm = calloc(1, sizeof(*fvm));
	assert_int_equal(vdriver_init(&drv, RAM), 0);
	fakevm_init(fvm, &drv.mem);
	strcpy(disk_path, "/tmp/iovm-vpci-XXXXXX");
	fd = mkstemp(disk_path);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, 1 << 20), 0);
	close(fd);
	cfg.path = disk_path;
	pbus = pci_bus_create((struct vm *)fvm);
	assert_non_null(pbus);
	dev = virtio_blk_create(&cfg, 2, err, sizeof(err));
	assert_non_null(dev);
	assert_int_equal(virtio_pci_create(pbus, dev), 0);
	bar0 = cfg_rd(1, 0x10, 4) & ~15u;
	drv.dev = dev;	/* vdriver reads the negotiated features */
	*state = dev;
	return 0;
}

static int teardown(void **state)
{
	fakevm_shutdown(fvm);	/* the VM's shutdown: drain, flush, free */
	pci_bus_destroy(pbus);
	free(drv.ram[0]);
	free(drv.ram[1]);
	free(fvm);
	unlink(disk_path);
	return 0;
}

/* --- PCI --------------------------------------------------------------- */

static void test_enumeration(void **state)
{
	/* host bridge in slot 0, class 06 00 */
	assert_int_equal(cfg_rd(0, 0, 2), 0x1b36);
	assert_int_equal(cfg_rd(0, 0xa, 2), 0x0600);
	/* the virtio-blk function in slot 1 */
	assert_int_equal(cfg_rd(1, 0, 4), 0x1042u << 16 | 0x1af4);
	assert_int_equal(cfg_rd(1, 8, 1), 1);		/* revision */
	assert_int_equal(cfg_rd(1, 0x2e, 2), 0x1042);
	assert_int_equal(cfg_rd(1, 0x3d, 1), 1);	/* INTA# */
	assert_int_equal(cfg_rd(1, 0x3c, 1), pci_intx_gsi(1));
	assert_true(cfg_rd(1, 6, 2) & 0x10);		/* capability list */
	/* empty slots, other functions and buses read all-ones */
	assert_int_equal(cfg_rd(5, 0, 4), 0xffffffffu);
	uint32_t a = 0x80000100u, v = 0;

	assert_true(bus_dispatch(&fvm->pio, 0, 0xcf8, &a, 4, true));
	assert_true(bus_dispatch(&fvm->pio, 0, 0xcfc, &v, 4, false));
	assert_int_equal(v, 0xffffffffu);
	/* read-only fields ignore writes */
	cfg_wr(1, 0, 0x12345678, 4);
	assert_int_equal(cfg_rd(1, 0, 2), 0x1af4);
}

static void test_capabilities(void **state)
{
	unsigned int off = cfg_rd(1, 0x34, 1), seen = 0, guard = 0;
	bool msix = false;

	while (off && guard++ < 48) {
		unsigned int id = cfg_rd(1, off, 1);

		if (id == PCI_CAP_ID_VNDR) {
			unsigned int type = cfg_rd(1, off + 3, 1);

			seen |= 1u << type;
			assert_int_equal(cfg_rd(1, off + 4, 1), type == 5 ? 0 : 0);
			if (type == 2)
				assert_int_equal(cfg_rd(1, off + 16, 4), VPCI_NOTIFY_MULT);
			if (type == 3)
				assert_int_equal(cfg_rd(1, off + 8, 4), VPCI_ISR_OFF);
		}
		if (id == PCI_CAP_ID_MSIX) {
			msix = true;
			assert_int_equal(cfg_rd(1, off + 2, 2) & 0x7ff, 2);	/* 3 vectors */
			assert_int_equal(cfg_rd(1, off + 4, 4), VPCI_MSIX_BAR);
		}
		off = cfg_rd(1, off + 1, 1);
	}
	assert_int_equal(seen, 0x3e);	/* types 1-5 */
	assert_true(msix);
}

static void test_bar_sizing_and_move(void **state)
{
	uint64_t old = bar0, new_addr = VM_PCI_HOLE_START + 0x100000;
	unsigned int nioev = fvm->nioev;

	assert_true(old >= VM_PCI_HOLE_START);
	assert_int_equal(nioev, 2);	/* one ioeventfd per queue */
	/* Linux: decode off, size, restore */
	cfg_wr(1, 4, cfg_rd(1, 4, 2) & ~2u, 2);
	assert_false(bus_dispatch(&fvm->mmio, 0, old, &(uint32_t){ 0 }, 4, false));
	assert_int_equal(fvm->nioev, 0);
	cfg_wr(1, 0x10, 0xffffffffu, 4);
	assert_int_equal(cfg_rd(1, 0x10, 4), (uint32_t)~(VPCI_BAR0_SIZE - 1));
	/* unimplemented BARs size to 0 */
	cfg_wr(1, 0x14, 0xffffffffu, 4);
	assert_int_equal(cfg_rd(1, 0x14, 4), 0);
	/* move it, decode on */
	cfg_wr(1, 0x10, new_addr, 4);
	cfg_wr(1, 4, cfg_rd(1, 4, 2) | 2u, 2);
	bar0 = new_addr;
	assert_int_equal(mrd(VPCI_COMMON_OFF + VPCI_NUM_QUEUES, 2), 2);
	assert_false(bus_dispatch(&fvm->mmio, 0, old, &(uint32_t){ 0 }, 4, false));
	assert_int_equal(fvm->nioev, 2);
	for (unsigned int i = 0; i < fvm->nioev; i++)
		assert_true(fvm->ioev_addr[i] == new_addr + VPCI_NOTIFY_OFF ||
			    fvm->ioev_addr[i] == new_addr + VPCI_NOTIFY_OFF + 4);
	/* a BAR outside the PCI hole never decodes (it could shadow RAM) */
	cfg_wr(1, 0x10, 0x100000, 4);
	assert_false(bus_dispatch(&fvm->mmio, 0, 0x100000, &(uint32_t){ 0 }, 4, false));
	cfg_wr(1, 0x10, new_addr, 4);
	assert_int_equal(mrd(VPCI_COMMON_OFF + VPCI_NUM_QUEUES, 2), 2);
}

/* --- virtio-pci -------------------------------------------------------- */

static void negotiate(uint64_t want)
{
	uint64_t offered;

	mwr(VPCI_STATUS, 0, 1);
	assert_int_equal(mrd(VPCI_STATUS, 1), 0);
	mwr(VPCI_STATUS, VIRTIO_STATUS_ACKNOWLEDGE, 1);
	mwr(VPCI_STATUS, VIRTIO_STATUS_ACKNOWLEDGE | VIRTIO_STATUS_DRIVER, 1);
	mwr(VPCI_DFSELECT, 0, 4);
	offered = mrd(VPCI_DF, 4);
	mwr(VPCI_DFSELECT, 1, 4);
	offered |= mrd(VPCI_DF, 4) << 32;
	assert_true(offered & (1ull << VIRTIO_F_VERSION_1));
	want &= offered;
	mwr(VPCI_GFSELECT, 0, 4);
	mwr(VPCI_GF, (uint32_t)want, 4);
	mwr(VPCI_GFSELECT, 1, 4);
	mwr(VPCI_GF, want >> 32, 4);
	mwr(VPCI_STATUS, 11, 1);
}

static void setup_queue(unsigned int qi, uint16_t size, uint16_t vector)
{
	struct vdq *q;

	assert_int_equal(vdriver_queue_setup(&drv, qi, size), 0);
	q = &drv.q[qi];
	mwr(VPCI_Q_SELECT, qi, 2);
	assert_int_equal(mrd(VPCI_Q_SIZE, 2), VIRTIO_BLK_QUEUE_SIZE);
	mwr(VPCI_Q_SIZE, size, 2);
	mwr(VPCI_Q_DESC, q->desc_gpa, 8);
	mwr(VPCI_Q_AVAIL, (uint32_t)q->avail_gpa, 4);
	mwr(VPCI_Q_AVAIL + 4, q->avail_gpa >> 32, 4);
	mwr(VPCI_Q_USED, q->used_gpa, 8);
	mwr(VPCI_Q_MSIX, vector, 2);
	assert_int_equal(mrd(VPCI_Q_NOFF, 2), qi);
	mwr(VPCI_Q_ENABLE, 1, 2);
}

static void kick(unsigned int qi)
{
	mwr(VPCI_NOTIFY_OFF + VPCI_NOTIFY_MULT * qi, qi, 2);
}

static uint8_t blk_rw(unsigned int qi, uint32_t type, uint64_t sector,
		      uint64_t buf, uint32_t len)
{
	uint64_t h = vdriver_alloc(&drv, 16), st = vdriver_alloc(&drv, 1);
	uint32_t *hp = vdriver_ptr(&drv, h, 16), id, ulen;
	struct vbuf b[] = { { h, 16, false }, { buf, len, type == VIRTIO_BLK_T_IN },
			    { st, 1, true } };

	hp[0] = type;
	hp[1] = 0;
	memcpy(hp + 2, &sector, 8);
	assert_true(vdriver_add(&drv, qi, b, 3, false) >= 0);
	kick(qi);
	assert_int_equal(vdriver_wait_used(&drv, qi, &id, &ulen, 5000), 1);
	return *(uint8_t *)vdriver_ptr(&drv, st, 1);
}

static void msix_program(unsigned int vec, uint64_t addr, uint32_t data,
			 bool masked)
{
	uint64_t t = msix_bar() + 16 * vec;

	assert_true(bus_dispatch(&fvm->mmio, 0, t, &(uint32_t){ addr }, 4, true));
	assert_true(bus_dispatch(&fvm->mmio, 0, t + 4, &(uint32_t){ addr >> 32 }, 4, true));
	assert_true(bus_dispatch(&fvm->mmio, 0, t + 8, &data, 4, true));
	assert_true(bus_dispatch(&fvm->mmio, 0, t + 12, &(uint32_t){ masked }, 4, true));
}

static uint32_t pba(void)
{
	uint32_t v = 0;
	unsigned int off = cfg_rd(1, 0x34, 1);

	while (cfg_rd(1, off, 1) != PCI_CAP_ID_MSIX)
		off = cfg_rd(1, off + 1, 1);
	assert_true(bus_dispatch(&fvm->mmio, 0, msix_bar() + (cfg_rd(1, off + 8, 4) & ~7u),
				 &v, 4, false));
	return v;
}

static void msix_enable(bool on)
{
	unsigned int off = cfg_rd(1, 0x34, 1);

	while (cfg_rd(1, off, 1) != PCI_CAP_ID_MSIX)
		off = cfg_rd(1, off + 1, 1);
	cfg_wr(1, off + 2, on ? 0x8000 : 0, 2);
}

static void test_virtio_blk_msix(void **state)
{
	struct vdq *q = &drv.q[0];
	uint64_t buf = vdriver_alloc(&drv, 4096);
	uint8_t *p = vdriver_ptr(&drv, buf, 4096);
	int call_fd;
	struct irqfd_rec *r;

	msix_enable(true);
	msix_program(0, 0xfee00000, 0x41, false);
	msix_program(1, 0xfee00000, 0x42, false);
	assert_int_equal(fvm->route_addr[1], 0xfee00000);
	assert_int_equal(fvm->route_data[1], 0x42);
	negotiate(~0ull);
	assert_int_equal(mrd(VPCI_STATUS, 1), 11);
	mwr(VPCI_MSIX_CONFIG, 0, 2);
	assert_int_equal(mrd(VPCI_MSIX_CONFIG, 2), 0);
	setup_queue(0, 64, 1);
	mwr(VPCI_STATUS, 15, 1);
	assert_int_equal(mrd(VPCI_STATUS, 1), 15);

	/* the queue's call eventfd is an irqfd on vector 1's route */
	r = NULL;
	for (unsigned int i = 0; i < fvm->nirqfd; i++)
		if (fvm->irqfd[i].assigned && fvm->irqfd[i].gsi == 25)
			r = &fvm->irqfd[i];
	assert_non_null(r);
	assert_int_equal(r->resample_fd, -1);
	call_fd = r->fd;

	memset(p, 0x3c, 4096);
	assert_int_equal(blk_rw(0, VIRTIO_BLK_T_OUT, 16, buf, 4096), VIRTIO_BLK_S_OK);
	memset(p, 0, 4096);
	assert_int_equal(blk_rw(0, VIRTIO_BLK_T_IN, 16, buf, 4096), VIRTIO_BLK_S_OK);
	assert_int_equal(p[0], 0x3c);
	assert_int_equal(p[4095], 0x3c);

	/* masked: the irqfd goes away, the interrupt is latched in the PBA */
	msix_program(1, 0xfee00000, 0x42, true);
	assert_null(fakevm_irqfd_of(call_fd));
	uint64_t cnt;

	while (read(call_fd, &cnt, 8) == 8)
		;
	assert_int_equal(blk_rw(0, VIRTIO_BLK_T_IN, 16, buf, 4096), VIRTIO_BLK_S_OK);
	assert_int_equal(pba() & 2, 2);
	/* unmask: irqfd back, the latched interrupt fires, PBA clear */
	msix_program(1, 0xfee00000, 0x42, false);
	assert_non_null(fakevm_irqfd_of(call_fd));
	assert_int_equal(read(call_fd, &cnt, 8), 8);
	assert_int_equal(pba() & 2, 0);
	(void)q;
}

static void test_needs_reset_and_reset(void **state)
{
	struct vdq *q = &drv.q[0];
	uint64_t h = vdriver_alloc(&drv, 16);
	uint8_t isr;

	msix_enable(false);
	negotiate(~0ull);
	setup_queue(0, 32, PCI_NO_VECTOR);
	mwr(VPCI_STATUS, 15, 1);
	/* INTx: the call eventfd is a level irqfd with resample */
	struct irqfd_rec *r = NULL;

	for (unsigned int i = 0; i < fvm->nirqfd; i++)
		if (fvm->irqfd[i].assigned && fvm->irqfd[i].gsi == pci_intx_gsi(1))
			r = &fvm->irqfd[i];
	assert_non_null(r);
	assert_true(r->resample_fd >= 0);
	/* a chain pointing outside RAM */
	struct vbuf b[] = { { h, 16, false }, { RAM * 4, 512, true } };

	assert_true(vdriver_add(&drv, 0, b, 2, false) >= 0);
	kick(0);
	for (int i = 0; i < 500 && !(mrd(VPCI_STATUS, 1) & VIRTIO_STATUS_NEEDS_RESET); i++)
		usleep(10000);
	assert_true(mrd(VPCI_STATUS, 1) & VIRTIO_STATUS_NEEDS_RESET);
	isr = mrd(VPCI_ISR_OFF, 1);
	assert_int_equal(isr & 2, 2);		/* config change */
	assert_int_equal(mrd(VPCI_ISR_OFF, 1), 0);	/* read clears */
	/* reset, then the device works again */
	mwr(VPCI_STATUS, 0, 1);
	assert_int_equal(mrd(VPCI_STATUS, 1), 0);
	negotiate(~0ull);
	setup_queue(0, 32, PCI_NO_VECTOR);
	mwr(VPCI_STATUS, 15, 1);
	assert_int_equal(mrd(VPCI_STATUS, 1), 15);
	uint64_t buf = vdriver_alloc(&drv, 512);

	assert_int_equal(blk_rw(0, VIRTIO_BLK_T_IN, 0, buf, 512), VIRTIO_BLK_S_OK);

	/* INTx resample: after the guest's EOI (KVM signals the resample
	 * fd), the line is raised again (through any eventfd bound to it)
	 * while the ISR still has a bit set, and not once the guest has read
	 * (cleared) it. */
	struct pollfd pf[8];
	unsigned int npf = 0;
	int resample = -1;
	uint64_t one = 1, cnt;

	for (unsigned int i = 0; i < fvm->nirqfd && npf < 8; i++) {
		if (fvm->irqfd[i].assigned && fvm->irqfd[i].gsi == pci_intx_gsi(1)) {
			pf[npf++] = (struct pollfd){ .fd = fvm->irqfd[i].fd, .events = POLLIN };
			resample = fvm->irqfd[i].resample_fd;
		}
	}
	assert_int_equal(npf, 3);	/* two queues and the config interrupt */
	for (unsigned int i = 0; i < npf; i++)
		while (read(pf[i].fd, &cnt, 8) == 8)
			;
	assert_int_equal(write(resample, &one, 8), 8);
	assert_int_equal(poll(pf, npf, 2000), 1);	/* re-asserted */
	for (unsigned int i = 0; i < npf; i++)
		while (read(pf[i].fd, &cnt, 8) == 8)
			;
	assert_int_equal(mrd(VPCI_ISR_OFF, 1) & 1, 1);	/* queue interrupt */
	assert_int_equal(write(resample, &one, 8), 8);
	assert_int_equal(poll(pf, npf, 200), 0);	/* ISR clear: stays low */
	(void)q;
}

/* Online resize over virtio-pci: before DRIVER_OK nothing is signalled
 * (the driver reads config space as it sets up); after, the capacity in
 * the device config BAR changes, the config generation moves, ISR bit 1 is
 * set and the config vector's irqfd fires. */
static void test_resize_config_interrupt(void **state)
{
	struct virtio_dev *dev = *state;
	struct blk_backend *be = virtio_blk_backend(dev);
	struct irqfd_rec *r = NULL;
	uint8_t gen;
	uint64_t cnt;
	char err[256];

	msix_enable(true);
	msix_program(0, 0xfee00000, 0x40, false);
	negotiate(~0ull);
	mwr(VPCI_MSIX_CONFIG, 0, 2);
	setup_queue(0, 64, PCI_NO_VECTOR);
	assert_int_equal(mrd(VPCI_DEVICE_OFF, 4), (1 << 20) / 512);
	assert_int_equal(blk_resize(be, 2 << 20, err, sizeof(err)), 0);
	assert_int_equal(virtio_blk_resized(dev, be), -ENOTCONN);
	assert_int_equal(mrd(VPCI_ISR_OFF, 1), 0);
	assert_int_equal(mrd(VPCI_DEVICE_OFF, 4), (2 << 20) / 512);
	mwr(VPCI_STATUS, 15, 1);

	/* the config vector's route carries data 0x40 */
	for (unsigned int i = 0; i < fvm->nirqfd; i++)
		if (fvm->irqfd[i].assigned && fvm->irqfd[i].gsi >= 24 &&
		    fvm->route_data[fvm->irqfd[i].gsi - 24] == 0x40)
			r = &fvm->irqfd[i];
	assert_non_null(r);
	while (read(r->fd, &cnt, 8) == 8)
		;
	gen = mrd(VPCI_CFG_GENERATION, 1);
	assert_int_equal(blk_resize(be, 4 << 20, err, sizeof(err)), 0);
	assert_int_equal(virtio_blk_resized(dev, be), 0);
	assert_int_equal(read(r->fd, &cnt, 8), 8);
	assert_int_equal(mrd(VPCI_ISR_OFF, 1) & 2, 2);
	assert_int_equal(mrd(VPCI_CFG_GENERATION, 1), (uint8_t)(gen + 2));
	/* as Linux reads a 64-bit field: two halves */
	assert_int_equal(mrd(VPCI_DEVICE_OFF, 4), (4 << 20) / 512);
	assert_int_equal(mrd(VPCI_DEVICE_OFF + 4, 4), 0);
	/* the new sectors take I/O */
	uint64_t buf = vdriver_alloc(&drv, 4096);

	assert_int_equal(blk_rw(0, VIRTIO_BLK_T_OUT, (4 << 20) / 512 - 8, buf, 4096),
			 VIRTIO_BLK_S_OK);
}

/* A driver that re-enables a queue on ring memory holding an old used idx
 * (a reset, then the same buffers) must see the device count from 0, as
 * its own shadow does. */
static void test_reused_ring_used_idx(void **state)
{
	struct vdq *q = &drv.q[0];
	uint64_t buf = vdriver_alloc(&drv, 512);
	volatile uint16_t *used;
	volatile uint32_t *elem;

	negotiate(~0ull);
	setup_queue(0, 32, PCI_NO_VECTOR);
	used = vdriver_ptr(&drv, q->used_gpa, 4);
	elem = vdriver_ptr(&drv, q->used_gpa + 4, 8);
	used[1] = 7;	/* stale */
	mwr(VPCI_STATUS, 15, 1);
	assert_int_equal(mrd(VPCI_STATUS, 1), 15);
	assert_int_equal(used[1], 0);
	assert_int_equal(blk_rw(0, VIRTIO_BLK_T_IN, 0, buf, 512), VIRTIO_BLK_S_OK);
	assert_int_equal(used[1], 1);
	assert_int_equal(elem[1], 513);	/* data and status, in used slot 0 */
}

/* The VM's shutdown frees the virtio-pci state while the bus (and its INTx
 * resample thread) lives on: an EOI that arrives then must not reach the
 * freed device. ASan reports the use after free this guards against. */
static void test_intx_resample_after_shutdown(void **state)
{
	uint64_t buf = vdriver_alloc(&drv, 512), one = 1;
	int resample = -1;

	msix_enable(false);
	negotiate(~0ull);
	setup_queue(0, 32, PCI_NO_VECTOR);
	mwr(VPCI_STATUS, 15, 1);
	assert_int_equal(blk_rw(0, VIRTIO_BLK_T_IN, 0, buf, 512), VIRTIO_BLK_S_OK);
	for (unsigned int i = 0; i < fvm->nirqfd; i++)
		if (fvm->irqfd[i].assigned && fvm->irqfd[i].gsi == pci_intx_gsi(1))
			resample = fvm->irqfd[i].resample_fd;
	assert_true(resample >= 0);
	fakevm_shutdown(fvm);
	for (unsigned int i = 0; i < fvm->nirqfd; i++)
		assert_false(fvm->irqfd[i].assigned);
	/* a late EOI: the resample thread must leave the device alone */
	assert_int_equal(write(resample, &one, 8), 8);
	for (int i = 0; i < 100; i++) {
		struct pollfd pf = { .fd = resample, .events = POLLIN };

		if (poll(&pf, 1, 0) == 0)
			break;
		usleep(1000);
	}
	usleep(20000);	/* let it finish what it took */
}

/* A running device keeps its status bits and features until a reset: the
 * driver cannot drop FEATURES_OK and renegotiate under the queue threads. */
static void test_status_bits_sticky(void **state)
{
	uint64_t buf = vdriver_alloc(&drv, 512), before;

	negotiate(~0ull & ~(1ull << VIRTIO_BLK_F_FLUSH));
	setup_queue(0, 32, PCI_NO_VECTOR);
	mwr(VPCI_STATUS, 15, 1);
	before = ((struct virtio_dev *)*state)->guest_features;
	assert_false(before & (1ull << VIRTIO_BLK_F_FLUSH));
	mwr(VPCI_STATUS, 3, 1);
	assert_int_equal(mrd(VPCI_STATUS, 1), 15);
	mwr(VPCI_GFSELECT, 0, 4);
	mwr(VPCI_GF, 0xffffffffu, 4);
	mwr(VPCI_STATUS, 11, 1);
	assert_int_equal(mrd(VPCI_STATUS, 1), 15);
	assert_true(((struct virtio_dev *)*state)->guest_features == before);
	assert_int_equal(blk_rw(0, VIRTIO_BLK_T_IN, 0, buf, 512), VIRTIO_BLK_S_OK);
	/* a reset still clears everything */
	mwr(VPCI_STATUS, 0, 1);
	assert_int_equal(mrd(VPCI_STATUS, 1), 0);
}

static void test_feature_refusal(void **state)
{
	mwr(VPCI_STATUS, 0, 1);
	mwr(VPCI_STATUS, 3, 1);
	/* a legacy driver (no VERSION_1) is refused */
	mwr(VPCI_GFSELECT, 0, 4);
	mwr(VPCI_GF, 1u << VIRTIO_BLK_F_FLUSH, 4);
	mwr(VPCI_STATUS, 11, 1);
	assert_false(mrd(VPCI_STATUS, 1) & VIRTIO_STATUS_FEATURES_OK);
	/* a feature we did not offer is refused */
	mwr(VPCI_STATUS, 0, 1);
	mwr(VPCI_STATUS, 3, 1);
	mwr(VPCI_GFSELECT, 1, 4);
	mwr(VPCI_GF, 1u | (1u << 30), 4);
	mwr(VPCI_STATUS, 11, 1);
	assert_false(mrd(VPCI_STATUS, 1) & VIRTIO_STATUS_FEATURES_OK);
	/* DRIVER_OK without FEATURES_OK does not start anything */
	mwr(VPCI_STATUS, 7, 1);
	assert_false(mrd(VPCI_STATUS, 1) & VIRTIO_STATUS_DRIVER_OK);
	/* bad widths read as zero */
	assert_int_equal(mrd(VPCI_NUM_QUEUES, 4), 0);
	assert_int_equal(mrd(VPCI_NUM_QUEUES, 2), 2);
	/* device config: capacity in sectors */
	assert_int_equal(mrd(VPCI_DEVICE_OFF, 8), (1 << 20) / 512);
	assert_int_equal(mrd(VPCI_DEVICE_OFF + VIRTIO_BLK_CFG_LEN - 2, 4), 0);
	/* the PCI_CFG window reads BAR 0 through config space */
	unsigned int off = cfg_rd(1, 0x34, 1);

	while (!(cfg_rd(1, off, 1) == PCI_CAP_ID_VNDR && cfg_rd(1, off + 3, 1) == 5))
		off = cfg_rd(1, off + 1, 1);
	cfg_wr(1, off + 4, 0, 1);
	cfg_wr(1, off + 8, VPCI_COMMON_OFF + VPCI_NUM_QUEUES, 4);
	cfg_wr(1, off + 12, 2, 4);
	assert_int_equal(cfg_rd(1, off + 16, 2), 2);
	/* a window past the BAR reads nothing */
	cfg_wr(1, off + 8, VPCI_BAR0_SIZE - 1, 4);
	assert_int_equal(cfg_rd(1, off + 16, 2), 2);	/* unchanged data */
	/* a queue index past the end */
	mwr(VPCI_Q_SELECT, 7, 2);
	assert_int_equal(mrd(VPCI_Q_SIZE, 2), 0);
	mwr(VPCI_Q_ENABLE, 1, 2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_enumeration, setup, teardown),
		cmocka_unit_test_setup_teardown(test_capabilities, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bar_sizing_and_move, setup, teardown),
		cmocka_unit_test_setup_teardown(test_virtio_blk_msix, setup, teardown),
		cmocka_unit_test_setup_teardown(test_needs_reset_and_reset, setup, teardown),
		cmocka_unit_test_setup_teardown(test_resize_config_interrupt, setup, teardown),
		cmocka_unit_test_setup_teardown(test_reused_ring_used_idx, setup, teardown),
		cmocka_unit_test_setup_teardown(test_intx_resample_after_shutdown, setup, teardown),
		cmocka_unit_test_setup_teardown(test_status_bits_sticky, setup, teardown),
		cmocka_unit_test_setup_teardown(test_feature_refusal, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
