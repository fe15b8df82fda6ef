/* Unit test of the DSDT's PCI host bridge: the AML is parsed back (package
 * lengths, names, the _CRS resource template, every _PRT entry) and checked
 * against the wiring the PCI model uses (pci_intx_gsi, the PCI hole). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "arch/x86/acpi.h"
#include "arch/x86/layout.h"
#include "hw/pci.h"
#include "vm/vm.h"

#define RAM (1u << 20)

static uint32_t rd32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return v;
}

static uint16_t rd16(const uint8_t *p)
{
	return p[0] | p[1] << 8;
}

/* PkgLength at *p: returns the end of the package it measures. */
static const uint8_t *pkg_end(const uint8_t **p)
{
	const uint8_t *start = *p;
	unsigned int extra = start[0] >> 6;
	uint32_t len;

	if (!extra) {
		len = start[0] & 0x3f;
	} else {
		len = start[0] & 0x0f;
		for (unsigned int i = 1; i <= extra; i++)
			len |= (uint32_t)start[i] << (4 + 8 * (i - 1));
	}
	*p = start + 1 + extra;
	return start + len;
}

/* An integer term (Zero, One, Byte/Word/DWordConst). */
static uint32_t integer(const uint8_t **p)
{
	const uint8_t *q = *p;

	switch (q[0]) {
	case 0x00:
	case 0x01:
		*p = q + 1;
		return q[0];
	case 0x0a:
		*p = q + 2;
		return q[1];
	case 0x0b:
		*p = q + 3;
		return rd16(q + 1);
	case 0x0c:
		*p = q + 5;
		return rd32(q + 1);
	}
	fail_msg("not an integer: opcode %#x", q[0]);
	return 0;
}

static const uint8_t *find_dsdt(const uint8_t *ram, uint32_t *len)
{
	const uint8_t *rsdp = ram + ACPI_BASE, *rsdt, *fadt, *dsdt;
	uint8_t sum = 0;

	rsdt = ram + rd32(rsdp + 16);
	fadt = ram + rd32(rsdt + 36);
	assert_memory_equal(fadt, "FACP", 4);
	dsdt = ram + rd32(fadt + 40);
	assert_memory_equal(dsdt, "DSDT", 4);
	*len = rd32(dsdt + 4);
	assert_true(rd32(fadt + 40) + *len <= MPTABLE_BASE);
	for (uint32_t i = 0; i < *len; i++)
		sum += dsdt[i];
	assert_int_equal(sum, 0);
	return dsdt;
}

/* Walks the _CRS buffer's resource descriptors to the end tag, which must
 * close the buffer exactly, and checks the windows. */
static void check_crs(const uint8_t *p, const uint8_t *end)
{
	bool bus = false, mem = false, pio = false, cf8 = false, tag_end = false;

	while (p < end && !tag_end) {
		if (!(p[0] & 0x80)) {		/* small item */
			unsigned int len = p[0] & 7, tag = (p[0] >> 3) & 0xf;

			assert_true(p + 1 + len <= end);
			if (tag == 0x8)		/* I/O port */
				cf8 |= rd16(p + 2) == 0xcf8 && p[7] == 8;
			if (tag == 0xf) {
				tag_end = true;
				assert_true(p + 1 + len == end);
			}
			p += 1 + len;
			continue;
		}
		unsigned int len = rd16(p + 1);

		assert_true(p + 3 + len <= end);
		if (p[0] == 0x88 && p[3] == 2)	/* word bus number */
			bus = rd16(p + 8) == 0 && rd16(p + 10) == 0;
		if (p[0] == 0x88 && p[3] == 1)	/* word I/O window */
			pio |= rd16(p + 8) <= 0xc000 && rd16(p + 10) == 0xffff;
		if (p[0] == 0x87 && p[3] == 0)	/* dword memory window */
			mem = rd32(p + 10) <= VM_PCI_HOLE_START &&
			      rd32(p + 14) >= VM_PCI_HOLE_END - 1 &&
			      rd32(p + 22) == rd32(p + 14) - rd32(p + 10) + 1;
		p += 3 + len;
	}
	assert_true(tag_end);
	assert_true(bus);
	assert_true(cf8);
	assert_true(pio);
	assert_true(mem);
}

/* Package { Package (4) { 0xssssFFFF, pin, 0, gsi }, ... }: slot s's
 * INTA# on GSI pci_intx_gsi(s), every slot but the bridge's, once. */
static void check_prt(const uint8_t *p, const uint8_t *end)
{
	unsigned int n = *p++, seen = 0;

	assert_int_equal(n, PCI_MAX_SLOTS - 1);
	for (unsigned int i = 0; i < n; i++) {
		const uint8_t *e;
		uint32_t addr, pin, src, gsi, slot;

		assert_int_equal(*p++, 0x12);	/* PackageOp */
		e = pkg_end(&p);
		assert_true(e <= end);
		assert_int_equal(*p++, 4);
		addr = integer(&p);
		pin = integer(&p);
		src = integer(&p);
		gsi = integer(&p);
		assert_true(p == e);
		assert_int_equal(addr & 0xffff, 0xffff);
		slot = addr >> 16;
		assert_true(slot >= 1 && slot < PCI_MAX_SLOTS);
		assert_false(seen & (1u << slot));
		seen |= 1u << slot;
		assert_int_equal(pin, 0);
		assert_int_equal(src, 0);
		assert_int_equal(gsi, pci_intx_gsi(slot));
	}
	assert_true(p == end);
}

static void test_pci0(void **state)
{
	struct gmem m = { .n = 1 };
	uint8_t *ram = calloc(1, RAM);
	const uint8_t *dsdt, *p, *end, *scope_end, *dev_end;
	bool hid = false, crs = false, prt = false;
	uint32_t len;

	assert_non_null(ram);
	m.r[0] = (struct gmem_region){ 0, RAM, ram };
	assert_int_equal(acpi_write_tables(&m, 2), 0);
	dsdt = find_dsdt(ram, &len);
	end = dsdt + len;
	p = dsdt + 36;
	/* \_S5_ first, untouched */
	assert_memory_equal(p, "\x08_S5_\x12", 6);
	p += 5;
	p++;
	p = pkg_end(&p);
	/* Scope (\_SB) spans the rest of the table */
	assert_int_equal(*p++, 0x10);
	scope_end = pkg_end(&p);
	assert_true(scope_end == end);
	assert_memory_equal(p, "\\_SB_", 5);
	p += 5;
	/* Device (PCI0) fills the scope */
	assert_memory_equal(p, "\x5b\x82", 2);
	p += 2;
	dev_end = pkg_end(&p);
	assert_true(dev_end == scope_end);
	assert_memory_equal(p, "PCI0", 4);
	p += 4;
	while (p < dev_end) {
		char name[5] = { 0 };

		assert_int_equal(*p++, 0x08);	/* NameOp */
		memcpy(name, p, 4);
		p += 4;
		if (!strcmp(name, "_HID")) {
			assert_int_equal(integer(&p), 0x030ad041);	/* PNP0A03 */
			hid = true;
		} else if (!strcmp(name, "_UID")) {
			assert_int_equal(integer(&p), 0);
		} else if (!strcmp(name, "_CRS")) {
			const uint8_t *b;
			uint32_t size;

			assert_int_equal(*p++, 0x11);	/* BufferOp */
			b = pkg_end(&p);
			size = integer(&p);
			assert_true(p + size == b);
			check_crs(p, b);
			p = b;
			crs = true;
		} else if (!strcmp(name, "_PRT")) {
			const uint8_t *b;

			assert_int_equal(*p++, 0x12);	/* PackageOp */
			b = pkg_end(&p);
			check_prt(p, b);
			p = b;
			prt = true;
		} else {
			fail_msg("unexpected object %s in PCI0", name);
		}
	}
	assert_true(p == dev_end);
	assert_true(hid && crs && prt);
	free(ram);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pci0),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
