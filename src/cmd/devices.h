/* Creation of the devices a VM configuration asks for (disks, shares). */
#ifndef IOVM_DEVICES_H
#define IOVM_DEVICES_H

#include "config.h"

struct api_objects;
struct pci_bus;
struct vm;

/* Called by `iovm run` after the VM and its core devices exist and before
 * the vCPUs start. Prints a clear error and returns -errno on failure.
 * objs (NULL: none) gets each disk and share, in --disk/--share order,
 * for the control socket. */
int devices_create(struct vm *vm, const struct vm_config *cfg,
		   struct api_objects *objs);

/* The same functions on a given bus (ncpus: request queues to offer).
 * Prints a clear error and returns -errno on failure. */
int devices_add(struct pci_bus *pci, const struct vm_config *cfg, unsigned int ncpus,
		struct api_objects *objs);
/* How many PCI functions devices_add makes for cfg. */
unsigned int devices_count(const struct vm_config *cfg);

#endif
