/* ACPI tables (ACPI 6.x layouts) for power-off and PCI interrupt routing. */
#include <errno.h>
#include <string.h>

#include "arch/x86/acpi.h"
#include "arch/x86/layout.h"
#include "hw/pci.h"
#include "lib/le.h"
#include "vm/vm.h"

#define RSDP_ADDR (ACPI_BASE)
#define RSDT_ADDR (ACPI_BASE + 0x40)
#define XSDT_ADDR (ACPI_BASE + 0x80)
#define FADT_ADDR (ACPI_BASE + 0x100)
#define FACS_ADDR (ACPI_BASE + 0x240)	/* 64-byte aligned */
#define MADT_ADDR (ACPI_BASE + 0x300)
#define DSDT_ADDR (ACPI_BASE + 0x600)
#define DSDT_MAX 0xa00
#define ACPI_SIZE (0x600 + DSDT_MAX)

#define FADT_LEN 276
#define HDR_LEN 36

struct gas {
	uint8_t space, bit_width, bit_offset, access_size;
	uint64_t address;
} __attribute__((packed));

/* DefName \_S5_ = Package (4) { 5, 5, 0, 0 }: SLP_TYPa, SLP_TYPb. */
static const uint8_t s5_aml[] = {
	0x08, '_', 'S', '5', '_', 0x12, 0x08, 0x04,
	0x0a, ACPI_S5_TYP, 0x0a, ACPI_S5_TYP, 0x00, 0x00,
};

/* The PCI host bridge's resources: bus 0, the config ports, all I/O ports
 * but those, and the PCI hole where BARs live. */
static const uint8_t pci0_crs[] = {
	/* WordBusNumber (producer, MinFixed, MaxFixed) 0..0 */
	0x88, 0x0d, 0x00, 0x02, 0x0c, 0x00, 0x00, 0x00, 0x00, 0x00,
	0x00, 0x00, 0x00, 0x00, 0x01, 0x00,
	/* IO (Decode16, 0xcf8, 0xcf8, 1, 8) */
	0x47, 0x01, 0xf8, 0x0c, 0xf8, 0x0c, 0x01, 0x08,
	/* WordIO (producer, EntireRange) 0x0000..0x0cf7 */
	0x88, 0x0d, 0x00, 0x01, 0x0c, 0x03, 0x00, 0x00, 0x00, 0x00,
	0xf7, 0x0c, 0x00, 0x00, 0xf8, 0x0c,
	/* WordIO (producer, EntireRange) 0x0d00..0xffff */
	0x88, 0x0d, 0x00, 0x01, 0x0c, 0x03, 0x00, 0x00, 0x00, 0x0d,
	0xff, 0xff, 0x00, 0x00, 0x00, 0xf3,
	/* DWordMemory (producer, MinFixed, MaxFixed, non-cacheable, RW):
	 * the PCI hole, filled in by write_dsdt */
	0x87, 0x17, 0x00, 0x00, 0x0c, 0x01, 0x00, 0x00, 0x00, 0x00,
	0, 0, 0, 0, 0, 0, 0, 0, 0x00, 0x00, 0x00, 0x00, 0, 0, 0, 0,
	/* EndTag */
	0x79, 0x00,
};
/* The DWordMemory's minimum: before it the end tag, length,
 * translation and maximum. */
#define CRS_MEM_MIN (sizeof(pci0_crs) - 2 - 16)

/* A growing AML byte stream; PkgLength fields are written when their
 * package closes, in the fewest bytes that hold the length. */
struct aml {
	uint8_t *p;
	size_t n;
};

static void aml_bytes(struct aml *a, const void *b, size_t n)
{
	memcpy(a->p + a->n, b, n);
	a->n += n;
}

static void aml_byte(struct aml *a, uint8_t b)
{
	a->p[a->n++] = b;
}

static void aml_dword(struct aml *a, uint32_t v)
{
	aml_byte(a, 0x0c);	/* DWordPrefix */
	aml_bytes(a, &v, 4);
}

static size_t aml_open(struct aml *a)
{
	size_t at = a->n;

	a->n += 3;		/* the longest PkgLength we need */
	return at;
}

static void aml_close(struct aml *a, size_t at)
{
	size_t body = a->n - at - 3, len;
	uint8_t enc[3];
	unsigned int k;

	if (body + 1 <= 0x3f) {
		k = 1;
		enc[0] = body + 1;
	} else if (body + 2 <= 0xfff) {
		k = 2;
		len = body + 2;
		enc[0] = 0x40 | (len & 0xf);
		enc[1] = len >> 4;
	} else {
		k = 3;
		len = body + 3;
		enc[0] = 0x80 | (len & 0xf);
		enc[1] = len >> 4;
		enc[2] = len >> 12;
	}
	memmove(a->p + at + k, a->p + at + 3, body);
	memcpy(a->p + at, enc, k);
	a->n = at + k + body;
}

static void aml_name(struct aml *a, const char seg[4])
{
	aml_byte(a, 0x08);	/* NameOp */
	aml_bytes(a, seg, 4);
}

/* \_S5_, then Scope (\_SB) { Device (PCI0) { _HID, _UID, _CRS, _PRT } }.
 * Linux ignores the MP table's interrupt entries once it runs on ACPI, so
 * the _PRT is what tells it that INTA# of slot s is GSI pci_intx_gsi(s)
 * (level-triggered, active low, as _PRT GSIs are). Returns the AML size. */
static size_t write_dsdt_aml(uint8_t *p)
{
	struct aml a = { p, 0 };
	uint8_t crs[sizeof(pci0_crs)];
	uint32_t lo = VM_PCI_HOLE_START, hi = VM_PCI_HOLE_END - 1;
	uint32_t size = VM_PCI_HOLE_END - VM_PCI_HOLE_START;
	size_t scope, dev, buf, prt;

	aml_bytes(&a, s5_aml, sizeof(s5_aml));
	aml_byte(&a, 0x10);			/* ScopeOp */
	scope = aml_open(&a);
	aml_bytes(&a, "\\_SB_", 5);
	aml_bytes(&a, "\x5b\x82", 2);		/* DeviceOp */
	dev = aml_open(&a);
	aml_bytes(&a, "PCI0", 4);
	aml_name(&a, "_HID");
	aml_dword(&a, 0x030ad041);		/* EisaId ("PNP0A03") */
	aml_name(&a, "_UID");
	aml_byte(&a, 0x00);			/* Zero */

	memcpy(crs, pci0_crs, sizeof(crs));
	memcpy(crs + CRS_MEM_MIN, &lo, 4);
	memcpy(crs + CRS_MEM_MIN + 4, &hi, 4);
	memcpy(crs + CRS_MEM_MIN + 12, &size, 4);
	aml_name(&a, "_CRS");
	aml_byte(&a, 0x11);			/* BufferOp */
	buf = aml_open(&a);
	aml_byte(&a, 0x0a);			/* BytePrefix: buffer size */
	aml_byte(&a, sizeof(crs));
	aml_bytes(&a, crs, sizeof(crs));
	aml_close(&a, buf);

	/* Package { Package { 0xssssFFFF, pin 0 (INTA#), Zero, GSI }, ... }
	 * for every slot but the host bridge's. */
	aml_name(&a, "_PRT");
	aml_byte(&a, 0x12);			/* PackageOp */
	prt = aml_open(&a);
	aml_byte(&a, PCI_MAX_SLOTS - 1);
	for (unsigned int s = 1; s < PCI_MAX_SLOTS; s++) {
		size_t e;

		aml_byte(&a, 0x12);
		e = aml_open(&a);
		aml_byte(&a, 4);
		aml_dword(&a, s << 16 | 0xffff);
		aml_byte(&a, 0x00);		/* INTA# */
		aml_byte(&a, 0x00);		/* Zero: a GSI, not a link */
		aml_byte(&a, 0x0a);
		aml_byte(&a, pci_intx_gsi(s));
		aml_close(&a, e);
	}
	aml_close(&a, prt);
	aml_close(&a, dev);
	aml_close(&a, scope);
	return a.n;
}

static uint8_t checksum(const uint8_t *p, size_t n)
{
	uint8_t s = 0;

	while (n--)
		s += *p++;
	return -s;
}

static void header(uint8_t *t, const char *sig, uint32_t len, uint8_t rev)
{
	memcpy(t, sig, 4);
	le_put32(t + 4, len);
	t[8] = rev;
	memcpy(t + 10, "IOVM  ", 6);
	memcpy(t + 16, "IOVMACPI", 8);
	le_put32(t + 24, 1);
	memcpy(t + 28, "IOVM", 4);
	le_put32(t + 32, 1);
}

static void finish(uint8_t *t, uint32_t len)
{
	t[9] = 0;
	t[9] = checksum(t, len);
}

static void io_gas(uint8_t *p, uint8_t width, uint64_t port)
{
	struct gas g = { 1, width, 0, 0, port };	/* system I/O */

	memcpy(p, &g, sizeof(g));
}

static void write_fadt(uint8_t *f)
{
	header(f, "FACP", FADT_LEN, 6);
	le_put32(f + 36, FACS_ADDR);
	le_put32(f + 40, DSDT_ADDR);
	le_put16(f + 46, ACPI_SCI_IRQ);
	/* SMI_CMD 0: the machine is always in ACPI mode (SCI_EN set). */
	le_put32(f + 56, ACPI_PM_BASE);				/* PM1a_EVT_BLK */
	le_put32(f + 64, ACPI_PM_BASE + ACPI_PM1_CNT_OFF);	/* PM1a_CNT_BLK */
	f[88] = 4;						/* PM1_EVT_LEN */
	f[89] = 2;						/* PM1_CNT_LEN */
	/* IAPC_BOOT_ARCH: 8042 present, no VGA, no CMOS RTC. */
	le_put16(f + 109, (1 << 1) | (1 << 2) | (1 << 5));
	/* Flags: WBINVD works, no fixed power or sleep button. */
	le_put32(f + 112, (1 << 0) | (1 << 4) | (1 << 5));
	f[131] = 3;						/* FADT minor */
	le_put64(f + 132, FACS_ADDR);
	le_put64(f + 140, DSDT_ADDR);
	io_gas(f + 148, 32, ACPI_PM_BASE);			/* X_PM1a_EVT_BLK */
	io_gas(f + 172, 16, ACPI_PM_BASE + ACPI_PM1_CNT_OFF);	/* X_PM1a_CNT_BLK */
	memcpy(f + 268, "IOVM    ", 8);			/* hypervisor id */
	finish(f, FADT_LEN);
}

/* CPUs (APIC ids 0..n-1), the IOAPIC (id n), ISA IRQ 0 on GSI 2 and the
 * SCI as a level-triggered, active-high line, NMI on every LINT1. */
static uint32_t write_madt(uint8_t *t, unsigned int ncpus)
{
	uint8_t *p = t + HDR_LEN + 8;
	uint32_t len;

	le_put32(t + HDR_LEN, LAPIC_BASE);
	le_put32(t + HDR_LEN + 4, 1);				/* PCAT_COMPAT */
	for (unsigned int i = 0; i < ncpus; i++, p += 8) {
		p[0] = 0;					/* local APIC */
		p[1] = 8;
		p[2] = i;					/* processor uid */
		p[3] = i;					/* APIC id */
		le_put32(p + 4, 1);				/* enabled */
	}
	p[0] = 1;						/* I/O APIC */
	p[1] = 12;
	p[2] = ncpus;
	le_put32(p + 4, IOAPIC_BASE);
	le_put32(p + 8, 0);					/* GSI base */
	p += 12;
	p[0] = 2;						/* override */
	p[1] = 10;
	p[3] = 0;						/* IRQ 0 */
	le_put32(p + 4, 2);					/* -> GSI 2 */
	le_put16(p + 8, 0);					/* bus default */
	p += 10;
	p[0] = 2;
	p[1] = 10;
	p[3] = ACPI_SCI_IRQ;
	le_put32(p + 4, ACPI_SCI_IRQ);
	le_put16(p + 8, 0x1 | (0x3 << 2));				/* high, level */
	p += 10;
	p[0] = 4;						/* local APIC NMI */
	p[1] = 6;
	p[2] = 0xff;						/* all CPUs */
	le_put16(p + 3, 0);
	p[5] = 1;						/* LINT1 */
	p += 6;
	len = p - t;
	header(t, "APIC", len, 4);
	finish(t, len);
	return len;
}

int acpi_write_tables(struct gmem *m, unsigned int ncpus)
{
	uint8_t *base = gmem_ptr(m, ACPI_BASE, ACPI_SIZE);
	uint8_t *rsdp, *rsdt, *xsdt, *facs, *dsdt;
	size_t dsdt_len;

	if (!base || !ncpus || ncpus > ACPI_MAX_CPUS)
		return -EINVAL;
	memset(base, 0, ACPI_SIZE);
	rsdp = base + (RSDP_ADDR - ACPI_BASE);
	rsdt = base + (RSDT_ADDR - ACPI_BASE);
	xsdt = base + (XSDT_ADDR - ACPI_BASE);
	facs = base + (FACS_ADDR - ACPI_BASE);
	dsdt = base + (DSDT_ADDR - ACPI_BASE);

	write_fadt(base + (FADT_ADDR - ACPI_BASE));

	memcpy(facs, "FACS", 4);
	le_put32(facs + 4, 64);
	facs[32] = 2;						/* version */

	dsdt_len = HDR_LEN + write_dsdt_aml(dsdt + HDR_LEN);
	if (dsdt_len > DSDT_MAX)
		return -ENOSPC;
	header(dsdt, "DSDT", dsdt_len, 2);
	finish(dsdt, dsdt_len);

	write_madt(base + (MADT_ADDR - ACPI_BASE), ncpus);

	header(rsdt, "RSDT", HDR_LEN + 8, 1);
	le_put32(rsdt + HDR_LEN, FADT_ADDR);
	le_put32(rsdt + HDR_LEN + 4, MADT_ADDR);
	finish(rsdt, HDR_LEN + 8);

	header(xsdt, "XSDT", HDR_LEN + 16, 1);
	le_put64(xsdt + HDR_LEN, FADT_ADDR);
	le_put64(xsdt + HDR_LEN + 8, MADT_ADDR);
	finish(xsdt, HDR_LEN + 16);

	memcpy(rsdp, "RSD PTR ", 8);
	memcpy(rsdp + 9, "IOVM  ", 6);
	rsdp[15] = 2;						/* ACPI 2.0+ */
	le_put32(rsdp + 16, RSDT_ADDR);
	le_put32(rsdp + 20, 36);
	le_put64(rsdp + 24, XSDT_ADDR);
	rsdp[8] = checksum(rsdp, 20);
	rsdp[32] = checksum(rsdp, 36);
	return 0;
}
