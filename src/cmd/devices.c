/* Device creation from the configuration: one PCI function per --disk /
 * --share (all if=virtio-scsi disks on one HBA, all if=lsi on another), on
 * the bus of `iovm run`'s VM or of a virtio-pcidev session. */
#include <errno.h>

#include "api/objects.h"
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

/* What the control socket shows of disk i (NULL objs: nothing). */
static void show_disk(struct api_objects *objs, unsigned int base, unsigned int i,
		      struct blk_backend *be, unsigned int queues, void *dev)
{
	struct api_disk *d;

	if (!objs)
		return;
	d = &objs->disks[base + i];
	d->be = be;
	d->queues = queues;
	d->dev = dev;
}

int devices_add(struct pci_bus *pci, const struct vm_config *cfg, unsigned int ncpus,
		struct api_objects *objs)
{
	const struct disk_cfg *vscsi_disks[CONFIG_MAX_DISKS];
	unsigned int vscsi_idx[CONFIG_MAX_DISKS], nvscsi = 0;
	const struct disk_cfg *lsi_disks[CONFIG_MAX_DISKS];
	unsigned int lsi_idx[CONFIG_MAX_DISKS], nlsi = 0;
	struct blk_backend *lsi_be[CONFIG_MAX_DISKS];
	unsigned int base = objs ? objs->ndisks : 0;
	struct virtio_dev *dev;
	char err[512];
	int ret;

	/* Named in --disk order, whichever device each ends up on. */
	for (unsigned int i = 0; objs && i < cfg->ndisks; i++)
		if (!api_add_disk(objs, &cfg->disks[i], NULL, 0))
			return -ENOSPC;
	for (unsigned int i = 0; i < cfg->ndisks; i++) {
		const struct disk_cfg *d = &cfg->disks[i];

		switch (d->iface) {
		case DISK_IF_VIRTIO_BLK:
			dev = virtio_blk_create(d, ncpus, err, sizeof(err));
			ret = add_virtio(pci, dev, "--disk", err);
			if (!ret)
				show_disk(objs, base, i, virtio_blk_backend(dev),
					  dev->num_queues, dev);
			break;
		case DISK_IF_VIRTIO_SCSI:
			vscsi_idx[nvscsi] = i;
			vscsi_disks[nvscsi++] = d;	/* one HBA for all */
			ret = 0;
			break;
		case DISK_IF_LSI:
			lsi_idx[nlsi] = i;
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
		dev = virtio_scsi_create(vscsi_disks, nvscsi, ncpus, err, sizeof(err));
		ret = add_virtio(pci, dev, "--disk", err);
		if (ret)
			return ret;
		for (unsigned int i = 0; i < nvscsi; i++)
			show_disk(objs, base, vscsi_idx[i], virtio_scsi_backend(dev, i),
				  dev->num_queues - VIRTIO_SCSI_REQ_Q0, dev);
	}
	if (nlsi) {
		ret = lsi_pci_create(pci, lsi_disks, nlsi, lsi_be);
		if (ret)
			return ret;
		/* One HBA thread serves the chip. */
		for (unsigned int i = 0; i < nlsi; i++)
			show_disk(objs, base, lsi_idx[i], lsi_be[i], 1, NULL);
	}
	for (unsigned int i = 0; i < cfg->nshares; i++) {
		dev = virtio_9p_create(&cfg->shares[i], err, sizeof(err));
		ret = add_virtio(pci, dev, "--share", err);
		if (ret)
			return ret;
		if (objs && !api_add_share(objs, &cfg->shares[i], virtio_9p_server(dev)))
			return -ENOSPC;
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

int devices_create(struct vm *vm, const struct vm_config *cfg,
		   struct api_objects *objs)
{
	struct pci_bus *pci = pci_bus_create(vm);

	if (!pci)
		return -ENOMEM;
	return devices_add(pci, cfg, vm_ncpus(vm), objs);
}
