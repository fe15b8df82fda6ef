/* Device creation from the configuration: one PCI function per --disk /
 * --share (all if=virtio-scsi disks on one HBA, all if=lsi on another), on
 * the bus of `iovm run`'s VM or of a virtio-pcidev session. */
#include <errno.h>

#include "cmd/devices.h"
#include "hw/pci.h"
#include "lib/log.h"
#include "scsi/lsi_pci.h"
#include "virtio/9p.h"
#include "virtio/blk.h"
#include "virtio/pci.h"
#include "virtio/scsi.h"
#include "vm/vm.h"

/* Puts a device model (NULL: its create failed, err says why) on the PCI
 * bus as a virtio-pci function. opt names the option for the error. */
static int add_virtio(struct pci_bus *pci, struct virtio_dev *dev,
		      const char *opt, const char *err)
{
	int ret;

	if (!dev) {
		pr_err("%s: %s", opt, err);
		return -EINVAL;
	}
	ret = virtio_pci_create(pci, dev);
	if (ret)
		dev->ops->destroy(dev);
	return ret;
}

static int add_virtio_blk(struct pci_bus *pci, const struct disk_cfg *d,
			  unsigned int ncpus)
{
	char err[512];

	return add_virtio(pci, virtio_blk_create(d, ncpus, err, sizeof(err)),
			  "--disk", err);
}

static int add_virtio_9p(struct pci_bus *pci, const struct share_cfg *s)
{
	char err[512];

	return add_virtio(pci, virtio_9p_create(s, err, sizeof(err)), "--share", err);
}

/* All if=virtio-scsi disks go on one HBA, as targets/LUNs of it. */
static int add_virtio_scsi(struct pci_bus *pci, const struct disk_cfg *const *disks,
			   unsigned int n, unsigned int ncpus)
{
	char err[512];

	return add_virtio(pci, virtio_scsi_create(disks, n, ncpus, err,
						      sizeof(err)),
			  "--disk", err);
}

int devices_add(struct pci_bus *pci, const struct vm_config *cfg, unsigned int ncpus)
{
	const struct disk_cfg *vscsi_disks[CONFIG_MAX_DISKS];
	unsigned int nvscsi = 0;
	const struct disk_cfg *lsi_disks[CONFIG_MAX_DISKS];
	unsigned int nlsi = 0;
	int ret;

	for (unsigned int i = 0; i < cfg->ndisks; i++) {
		const struct disk_cfg *d = &cfg->disks[i];

		switch (d->iface) {
		case DISK_IF_VIRTIO_BLK:
			ret = add_virtio_blk(pci, d, ncpus);
			break;
		case DISK_IF_VIRTIO_SCSI:
			vscsi_disks[nvscsi++] = d;	/* one HBA for all */
			ret = 0;
			break;
		case DISK_IF_LSI:
			lsi_disks[nlsi++] = d;	/* one HBA for all of them */
			ret = 0;
			break;
		default:
			pr_err("--disk %s: if=%s is not supported by this build yet",
			       d->path, disk_if_name(d->iface));
			ret = -ENOTSUP;
			break;
		}
		if (ret)
			return ret;
	}
	if (nvscsi) {
		ret = add_virtio_scsi(pci, vscsi_disks, nvscsi, ncpus);
		if (ret)
			return ret;
	}
	if (nlsi) {
		ret = lsi_pci_create(pci, lsi_disks, nlsi);
		if (ret)
			return ret;
	}
	for (unsigned int i = 0; i < cfg->nshares; i++) {
		ret = add_virtio_9p(pci, &cfg->shares[i]);
		if (ret)
			return ret;
	}
	return 0;
}

unsigned int devices_count(const struct vm_config *cfg)
{
	bool vscsi = false, lsi = false;
	unsigned int n = cfg->nshares;

	for (unsigned int i = 0; i < cfg->ndisks; i++) {
		switch (cfg->disks[i].iface) {
		case DISK_IF_VIRTIO_SCSI:
			vscsi = true;
			break;
		case DISK_IF_LSI:
			lsi = true;
			break;
		default:
			n++;
		}
	}
	return n + vscsi + lsi;
}

int devices_create(struct vm *vm, const struct vm_config *cfg)
{
	struct pci_bus *pci = pci_bus_create(vm);

	if (!pci)
		return -ENOMEM;
	return devices_add(pci, cfg, vm_ncpus(vm));
}
