/* MP specification 1.4 tables: processors, buses, IOAPIC, interrupts. */
#include <errno.h>
#include <string.h>

#include "arch/x86/layout.h"
#include "arch/x86/mptable.h"

struct mpf {
	char sig[4];
	uint32_t physptr;
	uint8_t length, specrev, checksum, feature1;
	uint8_t feature2, feature3, feature4, feature5;
} __attribute__((packed));

struct mpc_header {
	char sig[4];
	uint16_t length;
	uint8_t spec, checksum;
	char oem[8], product[12];
	uint32_t oemptr;
	uint16_t oemsize, count;
	uint32_t lapic;
	uint16_t reserved;
	uint8_t ext_checksum, reserved2;
} __attribute__((packed));

struct mpc_cpu {
	uint8_t type, apicid, apicver, cpuflag;
	uint32_t cpufeature, featureflag, reserved[2];
} __attribute__((packed));

struct mpc_bus {
	uint8_t type, busid;
	char bustype[6];
} __attribute__((packed));

struct mpc_ioapic {
	uint8_t type, apicid, apicver, flags;
	uint32_t apicaddr;
} __attribute__((packed));

struct mpc_intsrc {
	uint8_t type, irqtype;
	uint16_t irqflag;
	uint8_t srcbus, srcbusirq, dstapic, dstirq;
} __attribute__((packed));

enum { MP_PROCESSOR, MP_BUS, MP_IOAPIC, MP_INTSRC, MP_LINTSRC };
enum { MP_INT, MP_NMI, MP_SMI, MP_EXTINT };
#define CPU_ENABLED 1
#define CPU_BSP 2
#define BUS_PCI 0
#define BUS_ISA 1
#define MP_MAX_SIZE 0x10000

static uint8_t checksum(const void *p, size_t n)
{
	const uint8_t *b = p;
	uint8_t sum = 0;

	while (n--)
		sum += *b++;
	return -sum;
}

int mptable_write(struct gmem *m, unsigned int ncpus, uint32_t cpu_signature,
		  uint32_t cpu_features)
{
	size_t size = sizeof(struct mpf) + sizeof(struct mpc_header) +
		      ncpus * sizeof(struct mpc_cpu) + 2 * sizeof(struct mpc_bus) +
		      sizeof(struct mpc_ioapic) + 18 * sizeof(struct mpc_intsrc);
	uint8_t *base = gmem_ptr(m, MPTABLE_BASE, size);
	struct mpf *mpf = (struct mpf *)base;
	struct mpc_header *h;
	uint8_t *p;
	uint8_t ioapic_id = ncpus;
	uint16_t count = 0;

	if (!base || size > MP_MAX_SIZE || ncpus > 254)
		return -EINVAL;
	memset(base, 0, size);
	h = (struct mpc_header *)(mpf + 1);
	p = (uint8_t *)(h + 1);
	for (unsigned int i = 0; i < ncpus; i++, count++) {
		struct mpc_cpu *c = (struct mpc_cpu *)p;

		*c = (struct mpc_cpu){ MP_PROCESSOR, i, 0x14,
				       CPU_ENABLED | (i == 0 ? CPU_BSP : 0),
				       cpu_signature, cpu_features, { 0, 0 } };
		p += sizeof(*c);
	}
	*(struct mpc_bus *)p = (struct mpc_bus){ MP_BUS, BUS_PCI, "PCI   " };
	p += sizeof(struct mpc_bus);
	*(struct mpc_bus *)p = (struct mpc_bus){ MP_BUS, BUS_ISA, "ISA   " };
	p += sizeof(struct mpc_bus);
	count += 2;
	*(struct mpc_ioapic *)p = (struct mpc_ioapic){ MP_IOAPIC, ioapic_id, 0x11, 1,
						       IOAPIC_BASE };
	p += sizeof(struct mpc_ioapic);
	count++;
	/* ISA IRQs on the IOAPIC pin of the same number, except the PIT's
	 * IRQ 0 on pin 2 (what the GSI routing does); IRQ 2 is the cascade. */
	for (unsigned int irq = 0; irq < 16; irq++) {
		if (irq == 2)
			continue;
		*(struct mpc_intsrc *)p = (struct mpc_intsrc){
			MP_INTSRC, MP_INT, 0, BUS_ISA, irq, ioapic_id, irq ? irq : 2 };
		p += sizeof(struct mpc_intsrc);
		count++;
	}
	*(struct mpc_intsrc *)p = (struct mpc_intsrc){ MP_LINTSRC, MP_EXTINT, 0, BUS_ISA, 0,
						       0xff, 0 };
	p += sizeof(struct mpc_intsrc);
	*(struct mpc_intsrc *)p = (struct mpc_intsrc){ MP_LINTSRC, MP_NMI, 0, BUS_ISA, 0,
						       0xff, 1 };
	p += sizeof(struct mpc_intsrc);
	count += 2;

	memcpy(h->sig, "PCMP", 4);
	h->length = p - (uint8_t *)h;
	h->spec = 4;
	memcpy(h->oem, "IOVM    ", 8);
	memcpy(h->product, "IOVM VM     ", 12);
	h->count = count;
	h->lapic = LAPIC_BASE;
	h->checksum = checksum(h, h->length);

	memcpy(mpf->sig, "_MP_", 4);
	mpf->physptr = MPTABLE_BASE + sizeof(*mpf);
	mpf->length = 1;
	mpf->specrev = 4;
	mpf->checksum = checksum(mpf, sizeof(*mpf));
	return 0;
}
