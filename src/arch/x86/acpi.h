/* Minimal ACPI: enough for a guest to power itself off (FADT with a PM1
 * register block, DSDT with \_S5), plus a MADT with the same CPUs, IOAPIC
 * and overrides as the MP table: Linux ignores the MP table once it finds
 * ACPI without a MADT. The DSDT also describes the PCI host bridge (PCI0)
 * with a _PRT giving each slot's INTA# GSI, which Linux on ACPI takes
 * instead of the MP table's interrupt entries. */
#ifndef IOVM_ARCH_X86_ACPI_H
#define IOVM_ARCH_X86_ACPI_H

#include <stdint.h>

#include "lib/gmem.h"

#define ACPI_PM_BASE 0x600	/* PM1a_EVT (4 bytes) then PM1a_CNT (2) */
#define ACPI_PM_LEN 8
#define ACPI_PM1_CNT_OFF 4
#define ACPI_SCI_IRQ 9
#define ACPI_S5_TYP 5		/* SLP_TYP of \_S5 in our DSDT */

#define ACPI_MAX_CPUS 64

/* Writes RSDP, RSDT, XSDT, FADT, FACS, DSDT and MADT from ACPI_BASE. */
int acpi_write_tables(struct gmem *m, unsigned int ncpus);

#endif
