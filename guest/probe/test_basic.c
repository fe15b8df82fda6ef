/* `basic`: CPUs (MP table / MADT, APs started), memory, port-I/O round trip.
 * `pio`: the port-I/O and MMIO exit round trips only. */
#include "lib/probe.h"

void basic_report(void)
{
	unsigned int alive, want;

	cpus_enumerate();
	pr("probe: cpus=%u cpus_source=%s bsp_apic_id=%u\n", ncpus, cpus_source,
	   lapic_id());
	pr("probe: mem_mb=%lu mem_regions=%u\n", mem_total >> 20, n_mem_regions);
	for (unsigned int i = 0; i < n_mem_regions; i++)
		pr("probe: mem base=0x%lx len=0x%lx type=%u\n",
		   mem_regions[i].base, mem_regions[i].len, mem_regions[i].type);
	want = ncpus - 1;
	alive = want ? cpus_start_aps(opt_u64("ap_timeout_ms", 5000)) : 0;
	pr("probe: aps_alive=%u aps_expected=%u\n", alive, want);
	if (alive != want)
		probe_fail("only %u of %u APs came up", alive, want);
	if (opt_has("cpus") && opt_u64("cpus", 0) != ncpus)
		probe_fail("expected %lu cpus, found %u", opt_u64("cpus", 0),
			   ncpus);
}

static uint64_t pio_loop_cpl3(uint16_t port, uint64_t rounds)
{
	uint64_t t0 = rdtsc();

	for (uint64_t i = 0; i < rounds; i++)
		__asm__ volatile(".rept 16\n\toutb %%al, %%dx\n\t.endr"
				 : : "a"(0), "d"(port) : "memory");
	return rdtsc() - t0;
}

void pio_measure(void)
{
	/* Default 0x2f0: claimed by nothing on iovm or on QEMU's pc machine
	 * (COM2 at 0x2f8 is absent without a second serial port). */
	uint16_t port = (uint16_t)opt_u64("pio_port", 0x2f0);
	uint64_t n = opt_u64("pio_n", 2048);
	uint64_t rounds = (n + 15) / 16, cpl0, cpl3;

	if (!rounds)
		probe_fail("pio_n must be > 0");
	n = rounds * 16;
	/* Warm both paths once so first-exit costs stay out of the numbers. */
	sys_pio_loop(port, 1);
	pio_loop_cpl3(port, 1);
	cpl0 = sys_pio_loop(port, rounds);
	cpl3 = pio_loop_cpl3(port, rounds);
	pr("probe: pio port=0x%x n=%lu pio_cpl0_ns=%lu pio_cpl3_ns=%lu\n", port,
	   n, ticks_to_ns(cpl0) / n, ticks_to_ns(cpl3) / n);
}

/* MMIO exit round trip from CPL 3: the cost under every virtio notify.
 * Default address: the top page of the PCI hole below the IOAPIC, which no
 * BAR uses on iovm or QEMU's pc machine. */
void mmio_measure(void)
{
	uint64_t addr = opt_u64("mmio_addr", 0xFEBFF000);
	uint64_t n = opt_u64("pio_n", 2048), t;
	volatile uint32_t *p = phys_ptr(addr);

	if (!n || addr >= 0x100000000ull)
		probe_fail("mmio_addr must be below 4 GiB and pio_n > 0");
	uint64_t t0;

	mmio_write32(p, 0);
	sys_mmio_write16(p, 0);
	t = rdtsc();
	for (uint64_t i = 0; i < n; i++)
		mmio_write32(p, (uint32_t)i);
	t = rdtsc() - t;
	t0 = rdtsc();
	for (uint64_t i = 0; i < n; i++)
		sys_mmio_write16(p, (uint16_t)i);
	t0 = rdtsc() - t0;
	pr("probe: mmio addr=0x%lx n=%lu mmio_cpl3_ns=%lu mmio_syscall_ns=%lu\n",
	   addr, n, ticks_to_ns(t) / n, ticks_to_ns(t0) / n);
}

static void test_basic(void)
{
	basic_report();
	pio_measure();
	mmio_measure();
}

static void test_pio(void)
{
	pio_measure();
	mmio_measure();
}

PROBE_TEST(basic, "basic", test_basic,
	   "CPUs (APs started), memory map, port-I/O round trip");
PROBE_TEST(pio, "pio", test_pio,
	   "port-I/O round trip (CPL 0, CPL 3) and MMIO exit (CPL 3) "
	   "(pio_port=, pio_n=, mmio_addr=)");
