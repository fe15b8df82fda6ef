/* The LSI 53C895A as a PCI function (in `iovm run` or over virtio-pcidev
 * for UML): vendor 0x1000 device
 * 0x0012, BAR0 registers in I/O space, BAR1 the same registers in memory
 * space, BAR2 the 8 KiB SCRIPTS RAM, INTA#. One HBA carries every
 * --disk ...,if=lsi, each a target (LUN 0) at its target= ID. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "hw/pci.h"
#include "lib/log.h"
#include "scsi/disk.h"
#include "scsi/lsi_pci.h"
#include "scsi/lsi53c895a.h"
#include "scsi/lsi_regs.h"

/* PCI memory BARs are at least a page: the 1 KiB register window repeats
 * in it, as the 256 registers repeat in the chip's own window. */
#define LSI_MMIO_BAR 4096

struct lsi_pci {
	struct lsi *hba;
	struct pci_dev *pd;
	int irq_fd;
	unsigned int nbe;
	struct blk_backend be[LSI_MAX_TARGETS];
};

static void reg_bar(void *opaque, uint64_t off, void *data, unsigned int len,
		    bool is_write)
{
	struct lsi_pci *lp = opaque;

	lsi_reg_io(lp->hba, off & (LSI_NREGS - 1), data, len, is_write);
}

static void ram_bar(void *opaque, uint64_t off, void *data, unsigned int len,
		    bool is_write)
{
	struct lsi_pci *lp = opaque;

	lsi_ram_io(lp->hba, off, data, len, is_write);
}

/* Level rises: signal the INTx irqfd; it falls when the guest reads the
 * status registers, and the resample after EOI asks intx_pending. */
static void set_irq(void *opaque, int level)
{
	struct lsi_pci *lp = opaque;
	uint64_t one = 1;

	if (level && write(lp->irq_fd, &one, sizeof(one)) < 0)
		return;	/* counter saturated: already pending */
}

static bool intx_pending(struct pci_dev *pd)
{
	struct lsi_pci *lp = pci_dev_opaque(pd);

	return lsi_irq_pending(lp->hba);
}

static void bar_mapped(struct pci_dev *pd, unsigned int bar, uint64_t addr,
		       bool mapped)
{
	struct lsi_pci *lp = pci_dev_opaque(pd);

	if (bar == 2)
		lsi_set_ram_base(lp->hba, mapped ? addr : 0);
	else if (bar == 1)
		lsi_set_mmio_base(lp->hba, mapped ? addr : 0, LSI_MMIO_BAR);
}

static const struct pci_dev_ops lsi_pci_ops = {
	.bar_mapped = bar_mapped,
	.intx_pending = intx_pending,
};

static void lsi_pci_shutdown(void *opaque)
{
	struct lsi_pci *lp = opaque;
	unsigned int rd, wr;

	/* The PCI bus's INTx resample thread outlives the VM's devices: stop
	 * it asking this HBA (and wait for a call in progress) before the HBA
	 * is freed. */
	pci_irq_unbind(lp->pd, lp->irq_fd);
	/* The queue depth the driver really used, for the operator and the
	 * tests that check tagged queueing. */
	lsi_cmds_peak(lp->hba, &rd, &wr);
	if (rd || wr)
		pr_info("lsi: at most %u READ and %u WRITE commands were in flight at once",
			rd, wr);
	if (lsi_cmds_aborted(lp->hba))
		pr_info("lsi: %lu commands were aborted by resets and ABORT messages",
			lsi_cmds_aborted(lp->hba));
	/* Drains the HBA's in-flight I/O; then what the guest wrote goes to
	 * stable storage before the disks close. */
	lsi_destroy(lp->hba);
	for (unsigned int i = 0; i < lp->nbe; i++) {
		int ret = blk_flush(&lp->be[i]);

		if (ret)
			pr_err("lsi %s: flush: %s", blk_name(&lp->be[i]),
			       strerror(-ret));
		blk_close(&lp->be[i]);
	}
	close(lp->irq_fd);
	free(lp);
}

static int pick_targets(const struct disk_cfg *const *disks, unsigned int n,
			unsigned int *ids)
{
	bool used[LSI_MAX_TARGETS] = { false };

	used[LSI_HOST_ID] = true;
	for (unsigned int i = 0; i < n; i++) {
		unsigned int t = disks[i]->target;

		if (!disks[i]->target_set)
			continue;
		if (t >= LSI_MAX_TARGETS || t == LSI_HOST_ID) {
			pr_err("--disk %s: if=lsi target=%u: must be 0-15 but not %u (the HBA)",
			       disks[i]->path, t, LSI_HOST_ID);
			return -EINVAL;
		}
		if (used[t]) {
			pr_err("--disk %s: if=lsi target=%u is already taken",
			       disks[i]->path, t);
			return -EINVAL;
		}
		used[t] = true;
		ids[i] = t;
	}
	for (unsigned int i = 0; i < n; i++) {
		unsigned int t = 0;

		if (disks[i]->target_set)
			continue;
		while (t < LSI_MAX_TARGETS && used[t])
			t++;
		if (t == LSI_MAX_TARGETS) {
			pr_err("--disk %s: no free target ID left on the LSI HBA",
			       disks[i]->path);
			return -ENOSPC;
		}
		used[t] = true;
		ids[i] = t;
	}
	return 0;
}

int lsi_pci_create(struct pci_bus *bus,
		   const struct disk_cfg *const *disks, unsigned int n,
		   struct blk_backend **be)
{
	const struct pci_dev_info info = {
		.vendor = LSI_PCI_VENDOR,
		.device = LSI_PCI_DEVICE,
		.subsys_vendor = LSI_PCI_VENDOR,
		.subsys = 0x1000,
		.class_code = LSI_PCI_CLASS,
		.revision = LSI_PCI_REVISION,
	};
	struct lsi_params p = { 0 };
	unsigned int ids[LSI_MAX_TARGETS];
	struct lsi_pci *lp;
	int ret;

	if (n > LSI_MAX_TARGETS - 1) {
		pr_err("--disk: at most %u disks with if=lsi", LSI_MAX_TARGETS - 1);
		return -EINVAL;
	}
	ret = pick_targets(disks, n, ids);
	if (ret)
		return ret;
	lp = calloc(1, sizeof(*lp));
	if (!lp)
		return -ENOMEM;
	lp->irq_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	p.mem = pci_bus_gmem(bus);
	p.set_irq = set_irq;
	p.irq_opaque = lp;
	p.threaded = true;
	p.spin_ns = config_disks_poll_us(disks, n) * 1000ull;
	lp->hba = lsi_create(&p);
	if (lp->irq_fd < 0 || !lp->hba) {
		pr_err("lsi: cannot create the HBA: %s", strerror(ENOMEM));
		ret = -ENOMEM;
		goto fail;
	}
	for (unsigned int i = 0; i < n; i++) {
		char err[512];

		ret = blk_open(&lp->be[i], disks[i], err, sizeof(err));
		if (ret) {
			pr_err("--disk: %s", err);
			goto fail;
		}
		lp->nbe++;
		ret = lsi_attach(lp->hba, ids[i], &lp->be[i]);
		if (ret) {
			pr_err("--disk %s: cannot attach to the LSI HBA: %s",
			       disks[i]->path, strerror(-ret));
			goto fail;
		}
		ret = scsi_disk_pr_setup(lsi_target_disk(lp->hba, ids[i]),
					 disks[i]->pr_state, disks[i]->pr_id,
					 err, sizeof(err));
		if (ret) {
			pr_err("--disk: %s", err);
			goto fail;
		}
	}
	lp->pd = pci_dev_add(bus, &info, &lsi_pci_ops, lp);
	if (!lp->pd) {
		pr_err("lsi: no free PCI slot");
		ret = -ENOSPC;
		goto fail;
	}
	ret = pci_bar_add(lp->pd, 0, LSI_IO_BAR_SIZE, true, reg_bar, lp);
	if (!ret)
		ret = pci_bar_add(lp->pd, 1, LSI_MMIO_BAR, false, reg_bar, lp);
	if (!ret)
		ret = pci_bar_add(lp->pd, 2, LSI_RAM_SIZE, false, ram_bar, lp);
	if (!ret)
		ret = pci_irq_bind(lp->pd, lp->irq_fd, PCI_NO_VECTOR);
	if (!ret)
		ret = lsi_start(lp->hba);
	if (ret) {
		/* BAR handlers may already point at lp: keep it (the VM
		 * does not start after this error). */
		pr_err("lsi: PCI setup: %s", strerror(-ret));
		return ret;
	}
	for (unsigned int i = 0; be && i < n; i++)
		be[i] = &lp->be[i];
	return pci_bus_add_shutdown_hook(bus, lsi_pci_shutdown, lp);
fail:
	lsi_destroy(lp->hba);
	for (unsigned int i = 0; i < lp->nbe; i++)
		blk_close(&lp->be[i]);
	if (lp->irq_fd >= 0)
		close(lp->irq_fd);
	free(lp);
	return ret;
}
