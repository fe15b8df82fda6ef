/* PM1 event and control registers. Byte, word and dword accesses at any
 * offset act on a little-endian register file; only PM1_CNT has effects. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "hw/acpi_pm.h"
#include "lib/log.h"
#include "vm/vm.h"

#define PM1_STS 0
#define PM1_EN 2
#define PM1_CNT ACPI_PM1_CNT_OFF
#define SCI_EN 0x0001
#define SLP_TYP_SHIFT 10
#define SLP_TYP_MASK (7u << SLP_TYP_SHIFT)
#define SLP_EN (1u << 13)

static pthread_mutex_t pm_lock = PTHREAD_MUTEX_INITIALIZER;

void acpi_pm_init(struct acpi_pm *pm, void (*poweroff)(void *opaque), void *opaque)
{
	memset(pm, 0, sizeof(*pm));
	pm->poweroff = poweroff;
	pm->opaque = opaque;
	pm->cnt = SCI_EN;
}

static uint8_t reg_byte(const struct acpi_pm *pm, unsigned int off)
{
	switch (off) {
	case PM1_EN: return pm->en;
	case PM1_EN + 1: return pm->en >> 8;
	case PM1_CNT: return pm->cnt;
	case PM1_CNT + 1: return pm->cnt >> 8;
	default: return 0;	/* PM1_STS: no events; the rest: reserved */
	}
}

void acpi_pm_io(void *opaque, uint64_t offset, void *data, unsigned int len,
		bool is_write)
{
	struct acpi_pm *pm = opaque;
	uint8_t *b = data;
	bool off = false;

	pthread_mutex_lock(&pm_lock);
	for (unsigned int i = 0; i < len; i++) {
		unsigned int o = offset + i;

		if (!is_write) {
			b[i] = reg_byte(pm, o);
			continue;
		}
		if (o == PM1_EN)
			pm->en = (pm->en & 0xff00) | b[i];
		else if (o == PM1_EN + 1)
			pm->en = (pm->en & 0x00ff) | b[i] << 8;
		else if (o == PM1_CNT)
			pm->cnt = (pm->cnt & 0xff00) | b[i] | SCI_EN;
		else if (o == PM1_CNT + 1) {
			uint16_t v = (pm->cnt & 0x00ff) | b[i] << 8;

			if ((v & SLP_EN) &&
			    ((v & SLP_TYP_MASK) >> SLP_TYP_SHIFT) == ACPI_S5_TYP)
				off = true;
			pm->cnt = v & ~SLP_EN;
		}
	}
	pthread_mutex_unlock(&pm_lock);
	if (off && pm->poweroff)
		pm->poweroff(pm->opaque);
}

static void vm_poweroff(void *opaque)
{
	pr_info("guest powered off (ACPI S5)");
	vm_request_stop(opaque, 0);
}

int acpi_pm_create(struct vm *vm)
{
	struct acpi_pm *pm = malloc(sizeof(*pm));

	if (!pm)
		return -ENOMEM;
	acpi_pm_init(pm, vm_poweroff, vm);
	return bus_register(vm_pio_bus(vm), ACPI_PM_BASE, ACPI_PM_LEN, acpi_pm_io, pm);
}
