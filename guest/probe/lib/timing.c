/* TSC calibration and latency statistics. */
#include "lib/timing.h"

#include "lib/arch.h"
#include "lib/console.h"

uint64_t tsc_khz;
const char *tsc_source = "none";

/* PIT channel 2 counts down at 1.193182 MHz. A sample latches its count
 * between two TSC reads; port exits can be slow or preempted on a busy host,
 * so each sample is the best (narrowest bracket) of several tries, and the
 * frequency comes from two samples ~30 ms apart. */
struct pit_sample {
	uint64_t tsc, width;
	uint16_t count;
};

static void pit_sample(struct pit_sample *best)
{
	best->width = UINT64_MAX;
	for (int i = 0; i < 7; i++) {
		uint64_t a = rdtsc(), b;
		uint16_t c;

		outb(0x43, 0x80);		/* latch channel 2 */
		b = rdtsc();
		c = inb(0x42);
		c |= (uint16_t)inb(0x42) << 8;
		if (b - a < best->width) {
			best->width = b - a;
			best->tsc = a + (b - a) / 2;
			best->count = c;
		}
	}
}

static int pit_calibrate(uint64_t *khz)
{
	uint8_t v = inb(0x61);
	struct pit_sample s1, s2;
	unsigned long spins = 0;
	uint64_t pit_ticks;

	outb(0x61, (v & ~0x02) | 0x01);	/* gate on, speaker off */
	outb(0x43, 0xB0);		/* ch 2, lo/hi, mode 0, binary */
	outb(0x42, 0xff);
	outb(0x42, 0xff);
	pit_sample(&s1);
	for (;;) {
		/* A count that reached the terminal count (where it wraps, or
		 * holds) says nothing of the time that went by; so does a
		 * start too late to count 30 ms before it. Give up at once
		 * and let the caller try again. */
		if (s1.count < 40000) {
			outb(0x61, v);
			return -1;
		}
		pit_sample(&s2);
		if (s2.count == 0 || s2.count > s1.count) {
			outb(0x61, v);
			return -1;
		}
		if (s1.count - s2.count >= 36000)
			break;	/* ~30 ms */
		if (++spins > 100000) {
			outb(0x61, v);
			return -1;
		}
	}
	outb(0x61, v);
	pit_ticks = s1.count - s2.count;
	*khz = (s2.tsc - s1.tsc) * 1193182ull / pit_ticks / 1000;
	return *khz ? 0 : -1;
}

int tsc_calibrate(void)
{
	uint32_t a, b, c, d, max;

	/* The hypervisor timing leaf, when the VMM provides it, is exact. */
	cpuid(0x40000000, 0, &max, &b, &c, &d);
	if (max >= 0x40000010 && max < 0x40010000) {
		cpuid(0x40000010, 0, &a, &b, &c, &d);
		if (a) {
			tsc_khz = a;
			tsc_source = "cpuid40000010";
			return 0;
		}
	}
	cpuid(0, 0, &max, &b, &c, &d);
	if (max >= 0x15) {
		cpuid(0x15, 0, &a, &b, &c, &d);
		if (a && b && c) {
			tsc_khz = (uint64_t)c * b / a / 1000;
			tsc_source = "cpuid15";
			return 0;
		}
	}
	/* Channel 2 runs out 55 ms after it is loaded: a vCPU descheduled
	 * that long between the two samples of a calibration sees fewer PIT
	 * ticks than went by, and the result is too high (5-47x was seen on
	 * a loaded host), never too low. pit_calibrate refuses such runs;
	 * on top, calibrate until two results agree within 1% (at most 8
	 * tries, each failing fast) and keep the lowest. */
	{
		uint64_t best = 0, prev = 0, khz;
		bool agree = false;

		for (int i = 0; i < 8 && !agree; i++) {
			if (pit_calibrate(&khz))
				continue;
			agree = prev && (khz > prev ? khz - prev : prev - khz) <
						prev / 100;
			prev = khz;
			if (!best || khz < best)
				best = khz;
		}
		if (best) {
			tsc_khz = best;
			tsc_source = "pit";
			return 0;
		}
	}
	tsc_khz = 1000000;	/* assume 1 GHz so delays stay bounded */
	tsc_source = "assumed";
	return -1;
}

uint64_t ticks_to_ns(uint64_t ticks)
{
	/* ticks * 1e6 / khz without overflow for runs of hours */
	return ticks / tsc_khz * 1000000 + ticks % tsc_khz * 1000000 / tsc_khz;
}

uint64_t ms_to_ticks(uint64_t ms)
{
	return ms * tsc_khz;
}

uint64_t us_to_ticks(uint64_t us)
{
	return us * tsc_khz / 1000;
}

void delay_us(uint64_t us)
{
	uint64_t end = rdtsc() + us_to_ticks(us);

	while (rdtsc() < end)
		cpu_relax();
}

void lat_init(struct lat_stats *s, uint32_t *buf, uint64_t cap)
{
	s->samples = buf;
	s->cap = buf ? cap : 0;
	s->n = 0;
	s->count = 0;
	s->sum = 0;
}

uint64_t lat_mean_ns(const struct lat_stats *s)
{
	return s->count ? ticks_to_ns(s->sum / s->count) : 0;
}

/* Quickselect for the k-th smallest sample. */
static uint32_t select_kth(uint32_t *a, uint64_t n, uint64_t k)
{
	uint64_t lo = 0, hi = n - 1;

	while (lo < hi) {
		uint32_t pivot = a[lo + (hi - lo) / 2];
		uint64_t i = lo, j = hi;

		while (i <= j) {
			while (a[i] < pivot)
				i++;
			while (a[j] > pivot)
				j--;
			if (i <= j) {
				uint32_t t = a[i];

				a[i] = a[j];
				a[j] = t;
				i++;
				if (j == 0)
					break;
				j--;
			}
		}
		if (k <= j)
			hi = j;
		else if (k >= i)
			lo = i;
		else
			break;
	}
	return a[k];
}

uint64_t lat_pct_ns(struct lat_stats *s, unsigned int pct)
{
	uint64_t k;

	if (!s->n)
		return 0;
	k = (s->n * pct + 99) / 100;
	if (k)
		k--;
	if (k >= s->n)
		k = s->n - 1;
	return ticks_to_ns(select_kth(s->samples, s->n, k));
}

void job_report(const char *name, uint64_t ticks, uint64_t ios,
		uint64_t bytes, struct lat_stats *lat)
{
	uint64_t ns = ticks_to_ns(ticks);
	uint64_t iops = ns ? ios * 1000000000ull / ns : 0;
	/* MB/s = bytes / ns * 1e3; keep one decimal */
	uint64_t bw10 = ns ? bytes * 10000ull / ns : 0;
	uint64_t mean = lat_mean_ns(lat), p99 = lat_pct_ns(lat, 99);

	pr("job=%s iops=%lu bw_mbs=%lu.%lu lat_mean_us=%lu.%lu "
	   "lat_p99_us=%lu.%lu ios=%lu\n", name, iops, bw10 / 10, bw10 % 10,
	   mean / 1000, mean % 1000 / 100, p99 / 1000, p99 % 1000 / 100, ios);
}
