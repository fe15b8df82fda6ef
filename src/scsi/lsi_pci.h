/* The LSI 53C895A HBA on the VM's PCI bus, with its --disk ...,if=lsi. */
#ifndef IOVM_SCSI_LSI_PCI_H
#define IOVM_SCSI_LSI_PCI_H

#include "config.h"

struct pci_bus;

struct blk_backend;

/* One HBA with the n disks as targets (target= or the lowest free IDs).
 * Prints a one-line error and returns -errno on failure. be (NULL: not
 * wanted) gets each disk's backend, in the order of disks, for the
 * control socket. */
int lsi_pci_create(struct pci_bus *bus,
		   const struct disk_cfg *const *disks, unsigned int n,
		   struct blk_backend **be);

#endif
