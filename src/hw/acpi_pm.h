/* ACPI PM1 register block (PM1a_EVT, PM1a_CNT): a guest writing SLP_EN
 * with the \_S5 sleep type powers the VM off (exit status 0). */
#ifndef IOVM_HW_ACPI_PM_H
#define IOVM_HW_ACPI_PM_H

#include <stdbool.h>
#include <stdint.h>

struct vm;

/* Where the block sits in port space (the FADT says so) and the sleep
 * type of \_S5 (the DSDT says so). */
#define ACPI_PM_BASE 0x600	/* PM1a_EVT (4 bytes) then PM1a_CNT (2) */
#define ACPI_PM_LEN 8
#define ACPI_PM1_CNT_OFF 4
#define ACPI_S5_TYP 5

struct acpi_pm {
	void (*poweroff)(void *opaque);
	void *opaque;
	uint16_t en;		/* PM1_EN */
	uint16_t cnt;		/* PM1_CNT, without SLP_EN */
};

void acpi_pm_init(struct acpi_pm *pm, void (*poweroff)(void *opaque), void *opaque);

/* Bus callback for ACPI_PM_BASE .. + ACPI_PM_LEN. */
void acpi_pm_io(void *opaque, uint64_t offset, void *data, unsigned int len,
		bool is_write);

int acpi_pm_create(struct vm *vm);

#endif
