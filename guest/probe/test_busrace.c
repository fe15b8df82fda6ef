/* `bus-race`: one vCPU moves a virtio device's BAR and toggles its memory
 * decoding in a loop while another vCPU reads one of its registers at the
 * old and the new address. Every read must come from that register or find
 * nothing mapped (all-ones), never from another range's callback, and the
 * device must work at its own address afterwards. */
#include "lib/probe.h"
#include "lib/virtio_pci.h"

#define PCI_COMMAND 0x04
#define PCI_CMD_MEM 0x2

static volatile uint64_t reg_a, reg_b;	/* the register at either address */
static volatile uint16_t expect;
static volatile uint64_t ap_reads, ap_wrong;
static volatile uint16_t ap_last_wrong;
static volatile uint32_t ap_stop;

static void check(uint16_t v)
{
	if (v != expect && v != 0xffff) {
		ap_wrong = ap_wrong + 1;
		ap_last_wrong = v;
	}
}

/* The AP, at CPL 0: as few instructions as will do. */
static void hammer(uint32_t index)
{
	while (!ap_stop) {
		check(mmio_read16(phys_ptr(reg_a)));
		check(mmio_read16(phys_ptr(reg_b)));
		__atomic_add_fetch(&ap_reads, 1, __ATOMIC_RELEASE);
	}
}

/* Waits until the AP has read both addresses since the last update, so
 * that reads and updates interleave by construction. */
static void wait_ap(uint64_t *seen)
{
	uint64_t deadline = rdtsc() + ms_to_ticks(opt_u64("io_timeout_ms", 10000));

	while (__atomic_load_n(&ap_reads, __ATOMIC_ACQUIRE) < *seen + 2) {
		if (rdtsc() > deadline)
			probe_fail("bus-race: the AP stopped reading (%lu reads)",
				   ap_reads);
		cpu_relax();
	}
	*seen = ap_reads;
}

/* Index of the memory BAR that holds addr; size and base through *size and
 * *base. */
static unsigned int bar_of(struct pci_dev *d, uint64_t addr, uint64_t *base,
			   uint64_t *size)
{
	for (unsigned int i = 0; i < 6; i++) {
		uint64_t b = pci_bar(d, i, size);

		if (b && addr >= b && addr - b < *size) {
			*base = b;
			return i;
		}
	}
	probe_fail("bus-race: no BAR holds %lx", addr);
	return 0;
}

static void test_busrace(void)
{
	uint64_t rounds = opt_u64("rounds", 2000), to = opt_u64("move_to", 0xd0000000);
	struct pci_dev *d = pci_find(0x1af4, 0x1042, 0x1001, 0);
	uint64_t base, size, seen = 0;
	struct virtio_pci vp;
	unsigned int bar;
	uint16_t cmd;

	if (!d)
		probe_fail("bus-race: no virtio-blk device");
	if (virtio_pci_init(&vp, d))
		probe_fail("bus-race: virtio-pci init");
	cpus_enumerate();
	if (ncpus < 2)
		probe_fail("bus-race: needs 2 vCPUs, found %u", ncpus);
	expect = mmio_read16(&vp.common->num_queues);
	reg_a = (uint64_t)(uintptr_t)&vp.common->num_queues;
	bar = bar_of(d, reg_a, &base, &size);
	if (to & (size - 1) || (to < base + size && base < to + size))
		probe_fail("bus-race: move_to=%lx overlaps or misaligned", to);
	reg_b = reg_a - base + to;
	cmd = pci_read16(d, PCI_COMMAND);
	pr("probe: bus-race dev=%02x:%02x.%x bar=%u base=0x%lx size=0x%lx to=0x%lx "
	   "num_queues=%u rounds=%lu\n", d->bus, d->dev, d->fn, bar, base, size,
	   to, expect, rounds);

	ap_task = hammer;
	if (cpus_start_aps(5000) != ncpus - 1)
		probe_fail("bus-race: the APs did not come up");
	wait_ap(&seen);
	for (uint64_t i = 0; i < rounds; i++) {
		pci_write16(d, PCI_COMMAND, cmd & ~PCI_CMD_MEM);
		wait_ap(&seen);
		pci_write16(d, PCI_COMMAND, cmd);
		wait_ap(&seen);
		pci_write32(d, 0x10 + 4 * bar, (uint32_t)to);
		wait_ap(&seen);
		pci_write32(d, 0x10 + 4 * bar, (uint32_t)base);
		wait_ap(&seen);
	}
	ap_stop = 1;
	pr("probe: bus-race updates=%lu ap_reads=%lu wrong=%lu\n", rounds * 4,
	   ap_reads, ap_wrong);
	if (ap_wrong)
		probe_fail("bus-race: %lu reads got another range's answer (last %x)",
			   ap_wrong, ap_last_wrong);
	if (mmio_read16(&vp.common->num_queues) != expect)
		probe_fail("bus-race: the register reads %x at its own address",
			   mmio_read16(&vp.common->num_queues));
	if (virtio_pci_status(&vp) != 3)
		probe_fail("bus-race: device status %x, expected ACK|DRIVER",
			   virtio_pci_status(&vp));
}
PROBE_TEST(busrace, "bus-race", test_busrace,
	   "BAR moves and decode toggles on one vCPU, register reads on another");
