/* The VM's GSI routing table, kept in userspace and pushed whole to KVM
 * (KVM_SET_GSI_ROUTING) on each change: the PC's fixed IOAPIC/PIC wiring
 * plus the MSI routes devices program. */
#ifndef IOVM_VM_GSI_H
#define IOVM_VM_GSI_H

#include <linux/kvm.h>
#include <stdbool.h>
#include <stdint.h>

#define GSI_IOAPIC_PINS 24	/* GSIs below are IOAPIC inputs */
#define GSI_MAX_MSI 1024	/* MSI routes: GSIs 24 .. 24 + 1023 */

struct gsi_table {
	struct kvm_irq_routing *rt;	/* what is pushed to KVM */
	unsigned int nfixed;		/* IOAPIC/PIC entries at its start */
	unsigned int nmsi;		/* usable MSI GSIs (KVM's limit) */
	bool used[GSI_MAX_MSI];
	bool routed[GSI_MAX_MSI];
	struct kvm_irq_routing_msi msi[GSI_MAX_MSI];
};

/* max_entries: KVM's limit on routing entries (KVM_CAP_IRQ_ROUTING). */
int gsi_table_init(struct gsi_table *t, unsigned int max_entries);
void gsi_table_free(struct gsi_table *t);

/* A free MSI GSI (not routed until set), or -ENOSPC. */
int gsi_msi_alloc(struct gsi_table *t);

/* (Re)programs an allocated MSI GSI and rebuilds t->rt; addr 0 routes it
 * nowhere. -EINVAL for a GSI that is not an allocated MSI one. */
int gsi_msi_set(struct gsi_table *t, unsigned int gsi, uint64_t addr,
		uint32_t data);

#endif
