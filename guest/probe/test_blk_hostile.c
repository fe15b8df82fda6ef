/* `blk-hostile`: malformed requests a buggy or malicious guest could send —
 * a data buffer outside guest RAM, a length running past the end of RAM, a
 * descriptor loop, a status byte in a device-readable descriptor. Each must
 * end in an error completion (never OK) or the device's NEEDS_RESET state;
 * after a reset the device must work again, and the VMM must stay up (the
 * probe reaching PASS shows it). Options: mode=, blk_dev=, as for blk. */
#include "lib/pattern.h"
#include "lib/probe.h"
#include "virtio_blk.h"

struct hdr {
	uint32_t type, reserved;
	uint64_t sector;
};

static struct vblk blk;
static struct hdr *hdr;
static uint8_t *status, *buf;

static void open_dev(void)
{
	bool msix = strcmp(opt_str("mode", "poll"), "msix") == 0;

	if (vblk_open(&blk, (unsigned int)opt_u64("blk_dev", 0), msix, 1) < 0)
		probe_fail("virtio-blk device not usable");
	if (blk.ro)
		probe_fail("disk is read-only");
}

/* Waits for the head to come back or for NEEDS_RESET; fails on OK. */
static void expect_refused(const char *what, int head)
{
	uint64_t deadline = rdtsc() + ms_to_ticks(opt_u64("io_timeout_ms",
							   10000));
	struct virtq *vq = &blk.vq[0];
	uint32_t len;

	for (;;) {
		if (virtq_has_used(vq)) {
			int got = virtq_get_used(vq, &len);

			if (got != head)
				probe_fail("%s: device returned head %d, sent %d",
					   what, got, head);
			if (*status == VIRTIO_BLK_S_OK)
				probe_fail("%s: device completed it with OK",
					   what);
			pr("probe: hostile %s: completed, status 0x%x\n", what,
			   *status);
			return;
		}
		if (virtio_pci_status(&blk.vp) & VIRTIO_STATUS_NEEDS_RESET) {
			pr("probe: hostile %s: device NEEDS_RESET\n", what);
			return;
		}
		if (rdtsc() > deadline)
			probe_fail("%s: neither a completion nor NEEDS_RESET",
				   what);
		delay_us(200);
	}
}

/* Resets and reinitialises the device, then checks a write + read. */
static void check_recovered(const char *what)
{
	virtio_pci_reset(&blk.vp);
	open_dev();
	pattern_fill(buf, 0, 4096, 77);
	if (vblk_rw(&blk, VIRTIO_BLK_T_OUT, 0, buf, 4096) != VIRTIO_BLK_S_OK)
		probe_fail("%s: write after reset failed", what);
	memset(buf, 0, 4096);
	if (vblk_rw(&blk, VIRTIO_BLK_T_IN, 0, buf, 4096) != VIRTIO_BLK_S_OK ||
	    pattern_check(buf, 0, 4096, 77) != 4096)
		probe_fail("%s: read after reset failed", what);
	pr("probe: hostile %s: device works after reset\n", what);
}

static int send(uint32_t type, uint64_t data_addr, uint32_t data_len,
		bool status_writable)
{
	struct virtq_buf b[3] = {
		{ hdr, sizeof(*hdr), false },
		{ phys_ptr(data_addr), data_len, type == VIRTIO_BLK_T_IN },
		{ status, 1, status_writable },
	};

	hdr->type = type;
	hdr->reserved = 0;
	hdr->sector = 8;
	*status = 0xee;
	return virtq_add(&blk.vq[0], b, 3);
}

static uint64_t ram_top(void)
{
	uint64_t top = 0;

	for (unsigned int i = 0; i < n_mem_regions; i++)
		if (mem_regions[i].type == 1)
			top = MAX(top, mem_regions[i].base + mem_regions[i].len);
	return top;
}

static void test_blk_hostile(void)
{
	struct virtq *vq;
	int head;

	hdr = dma_alloc(sizeof(*hdr), 16);
	status = dma_alloc(1, 1);
	buf = dma_alloc(4096, 4096);
	if (!hdr || !status || !buf)
		probe_fail("out of memory");
	open_dev();
	vq = &blk.vq[0];

	/* Far beyond any RAM the VM has (and outside the PCI hole). */
	head = send(VIRTIO_BLK_T_IN, 0x7f00000000ull, 4096, true);
	virtq_kick(vq);
	expect_refused("read into a buffer outside RAM", head);
	check_recovered("read into a buffer outside RAM");

	/* Starts in RAM, runs 4 GiB past its end. */
	head = send(VIRTIO_BLK_T_OUT, ram_top() - 4096, 0xfffff000u, true);
	virtq_kick(vq);
	expect_refused("write of a length past the end of RAM", head);
	check_recovered("write of a length past the end of RAM");

	/* The last descriptor points back at the first. */
	head = send(VIRTIO_BLK_T_OUT, virt_to_phys(buf), 4096, true);
	{
		uint16_t d = (uint16_t)head;

		for (int k = 0; k < 2; k++)
			d = vq->desc[d].next;
		vq->desc[d].next = (uint16_t)head;
		vq->desc[d].flags |= VIRTQ_DESC_F_NEXT;
	}
	virtq_kick(vq);
	expect_refused("descriptor loop", head);
	check_recovered("descriptor loop");

	/* The status byte offered read-only: the device may not write it. */
	head = send(VIRTIO_BLK_T_IN, virt_to_phys(buf), 4096, false);
	virtq_kick(vq);
	expect_refused("status in a read-only descriptor", head);
	if (*status != 0xee)
		probe_fail("device wrote a status into a read-only buffer");
	check_recovered("status in a read-only descriptor");
}

PROBE_TEST(blk_hostile, "blk-hostile", test_blk_hostile,
	   "virtio-blk: malformed chains get errors or NEEDS_RESET, reset heals");
