/* virtio-pcidev, the device side of User-Mode Linux's PCI over virtio
 * (arch/um/drivers/virt-pci.c): one PCI function of iovm's own bus served
 * to UML as a virtio device with a cmd queue (config-space and BAR
 * accesses) and an irq queue (INTx and MSI messages), over vhost-user. */
#ifndef IOVM_VHOST_PCIDEV_H
#define IOVM_VHOST_PCIDEV_H

#include <stdint.h>
#include <sys/uio.h>

struct pci_bus;
struct virtio_dev;

#define VPCIDEV_CMD_Q 0
#define VPCIDEV_IRQ_Q 1

/* The protocol's operations and message header (virtio_pcidev.h; native
 * endian, data little-endian). */
enum {
	VPCIDEV_OP_CFG_READ = 1,
	VPCIDEV_OP_CFG_WRITE,
	VPCIDEV_OP_MMIO_READ,
	VPCIDEV_OP_MMIO_WRITE,
	VPCIDEV_OP_MMIO_MEMSET,
	VPCIDEV_OP_INT,
	VPCIDEV_OP_MSI,
	VPCIDEV_OP_PME,
};

struct vpcidev_msg {
	uint8_t op;
	uint8_t bar;
	uint16_t reserved;
	uint32_t size;
	uint64_t addr;
};

#define VPCIDEV_CFG_SPACE 4096		/* what UML's config window spans */
#define VPCIDEV_MAX_XFER 65536		/* largest BAR read or write served */
#define VPCIDEV_MAX_MSI 128		/* MSI-X vectors (UML uses <= 32) */

/* Makes the session's PCI function on a fresh bus (at its first free
 * slot), as `iovm run` would on its own: 0 or -errno (a one-line error
 * printed). Called when the front-end starts the cmd queue; the function
 * is drained and destroyed through the bus's shutdown hooks when the queue
 * stops (disconnect, reset, a memory table change), so each session, and
 * each memory table, starts from a function just out of reset. */
typedef int (*vpcidev_make_fn)(struct pci_bus *bus, void *opaque);

/* A virtio device for the vhost-user server (vhost/server.h); the server
 * sets its guest memory, which is also the functions' DMA memory (UML's
 * physical addresses). NULL when out of memory. */
struct virtio_dev *vpcidev_create(vpcidev_make_fn make, void *opaque);

/* What the transport did in the current (or last) session, for tests and
 * the operator's log (a line when a session ends). */
struct vpcidev_stats {
	uint64_t cmds;		/* cmd-queue messages served */
	uint64_t refused;	/* of which refused (bad op, size, BAR...) */
	uint64_t msi;		/* MSI messages sent */
	uint64_t intx;		/* INTx messages sent */
};
void vpcidev_get_stats(struct virtio_dev *dev, struct vpcidev_stats *st);

/* Serves one cmd-queue message as the queue thread does: iov[0..out_num)
 * is the driver's (header and write data), iov[out_num..out_num+in_num)
 * the reply buffer. Returns the bytes written to the reply. For the
 * fuzzer; call only while no session thread runs. */
uint32_t vpcidev_serve_msg(struct virtio_dev *dev, const struct iovec *iov,
			   unsigned int out_num, unsigned int in_num);

/* The session's bus (NULL outside one), for tests and the fuzzer: they
 * start a session with vpcidev_session_begin instead of a cmd queue. */
struct pci_bus *vpcidev_bus(struct virtio_dev *dev);
int vpcidev_session_begin(struct virtio_dev *dev);
void vpcidev_session_end(struct virtio_dev *dev);

#endif
