/* Minimal ACPI: enough for a guest to power itself off (FADT with a PM1
 * register block, DSDT with \_S5), plus a MADT with the same CPUs, IOAPIC
 * and overrides as the MP table: Linux ignores the MP table once it finds
 * ACPI without a MADT. The DSDT also describes the PCI host bridge (PCI0)
 * with a _PRT giving each slot's INTA# GSI, which Linux on ACPI takes
 * instead of the MP table's interrupt entries. */
#ifndef IOVM_ARCH_X86_ACPI_H
#define IOVM_ARCH_X86_ACPI_H

#include <stdint.h>

#include "hw/acpi_pm.h"	/* the PM1 block the FADT and DSDT describe */
#include "lib/gmem.h"

#define ACPI_SCI_IRQ 9

#define ACPI_MAX_CPUS 64

/* Writes RSDP, RSDT, XSDT, FADT, FACS, DSDT and MADT from ACPI_BASE. */
int acpi_write_tables(struct gmem *m, unsigned int ncpus);

#endif
