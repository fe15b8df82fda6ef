/* virtio-pci modern (1.x) transport: puts a struct virtio_dev on the PCI bus
 * with common/notify/ISR/device/PCI-cfg capabilities, queue kicks on KVM
 * ioeventfds and interrupts on irqfds (MSI-X, or INTx as a fallback). */
#ifndef IOVM_VIRTIO_PCI_H
#define IOVM_VIRTIO_PCI_H

#include "virtio/virtio.h"

struct pci_bus;

#define VIRTIO_PCI_VENDOR 0x1af4
#define VIRTIO_PCI_DEVICE_BASE 0x1040	/* + virtio device id */

/* BAR 0 layout (memory): one structure per page. */
#define VPCI_COMMON_OFF 0x0000
#define VPCI_ISR_OFF 0x1000
#define VPCI_DEVICE_OFF 0x2000
#define VPCI_NOTIFY_OFF 0x3000
#define VPCI_NOTIFY_MULT 4
#define VPCI_BAR0_SIZE 0x4000
#define VPCI_MSIX_BAR 2

/* Device status bits. */
#define VIRTIO_STATUS_ACKNOWLEDGE 1
#define VIRTIO_STATUS_DRIVER 2
#define VIRTIO_STATUS_DRIVER_OK 4
#define VIRTIO_STATUS_FEATURES_OK 8
#define VIRTIO_STATUS_NEEDS_RESET 64
#define VIRTIO_STATUS_FAILED 128

/* Common configuration offsets (virtio 1.2, 4.1.4.3). */
#define VPCI_DFSELECT 0x00
#define VPCI_DF 0x04
#define VPCI_GFSELECT 0x08
#define VPCI_GF 0x0c
#define VPCI_MSIX_CONFIG 0x10
#define VPCI_NUM_QUEUES 0x12
#define VPCI_STATUS 0x14
#define VPCI_CFG_GENERATION 0x15
#define VPCI_Q_SELECT 0x16
#define VPCI_Q_SIZE 0x18
#define VPCI_Q_MSIX 0x1a
#define VPCI_Q_ENABLE 0x1c
#define VPCI_Q_NOFF 0x1e
#define VPCI_Q_DESC 0x20
#define VPCI_Q_AVAIL 0x28
#define VPCI_Q_USED 0x30
#define VPCI_COMMON_LEN 0x38

/* Puts dev on the bus (next free slot). The transport owns dev from here:
 * at the bus's shutdown (the VM's, or the end of a virtio-pcidev session)
 * it drains the queues, flushes and destroys the device.
 * Prints a clear error and returns -errno on failure. */
int virtio_pci_create(struct pci_bus *bus, struct virtio_dev *dev);

#endif
