/* GSI routing table: fixed PC wiring first, then the routed MSI GSIs. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "vm/gsi.h"

static void add_irqchip(struct kvm_irq_routing *rt, unsigned int gsi,
			unsigned int chip, unsigned int pin)
{
	struct kvm_irq_routing_entry *e = &rt->entries[rt->nr++];

	memset(e, 0, sizeof(*e));
	e->gsi = gsi;
	e->type = KVM_IRQ_ROUTING_IRQCHIP;
	e->u.irqchip.irqchip = chip;
	e->u.irqchip.pin = pin;
}

/* ISA IRQs 0-15 on both PICs (2 is their cascade), GSIs 0-23 on the
 * IOAPIC, except that the PIT's IRQ 0 arrives on IOAPIC pin 2 as on real
 * chipsets (the MP table and the MADT say so with an override). */
static void fixed_routes(struct gsi_table *t)
{
	struct kvm_irq_routing *rt = t->rt;

	rt->nr = 0;
	for (unsigned int i = 0; i < 16; i++)
		if (i != 2)
			add_irqchip(rt, i, i < 8 ? KVM_IRQCHIP_PIC_MASTER : KVM_IRQCHIP_PIC_SLAVE,
				    i % 8);
	add_irqchip(rt, 0, KVM_IRQCHIP_IOAPIC, 2);
	for (unsigned int i = 1; i < GSI_IOAPIC_PINS; i++)
		if (i != 2)
			add_irqchip(rt, i, KVM_IRQCHIP_IOAPIC, i);
	t->nfixed = rt->nr;
}

static void rebuild(struct gsi_table *t)
{
	struct kvm_irq_routing *rt = t->rt;

	rt->nr = t->nfixed;
	for (unsigned int i = 0; i < t->nmsi; i++) {
		struct kvm_irq_routing_entry *e;

		if (!t->used[i] || !t->routed[i])
			continue;
		e = &rt->entries[rt->nr++];
		memset(e, 0, sizeof(*e));
		e->gsi = GSI_IOAPIC_PINS + i;
		e->type = KVM_IRQ_ROUTING_MSI;
		e->u.msi = t->msi[i];
	}
}

int gsi_table_init(struct gsi_table *t, unsigned int max_entries)
{
	memset(t, 0, sizeof(*t));
	t->rt = calloc(1, sizeof(*t->rt) +
		       (2 * GSI_IOAPIC_PINS + GSI_MAX_MSI) * sizeof(t->rt->entries[0]));
	if (!t->rt)
		return -ENOMEM;
	fixed_routes(t);
	/* Every routed MSI GSI takes one entry next to the fixed ones. */
	if (max_entries > t->nfixed)
		t->nmsi = max_entries - t->nfixed;
	if (t->nmsi > GSI_MAX_MSI)
		t->nmsi = GSI_MAX_MSI;
	return 0;
}

void gsi_table_free(struct gsi_table *t)
{
	free(t->rt);
	t->rt = NULL;
}

int gsi_msi_alloc(struct gsi_table *t)
{
	for (unsigned int i = 0; i < t->nmsi; i++) {
		if (!t->used[i]) {
			t->used[i] = true;
			t->routed[i] = false;
			return GSI_IOAPIC_PINS + i;
		}
	}
	return -ENOSPC;
}

int gsi_msi_set(struct gsi_table *t, unsigned int gsi, uint64_t addr,
		uint32_t data)
{
	unsigned int i = gsi - GSI_IOAPIC_PINS;

	if (gsi < GSI_IOAPIC_PINS || i >= t->nmsi || !t->used[i])
		return -EINVAL;
	t->routed[i] = addr != 0;
	t->msi[i] = (struct kvm_irq_routing_msi){
		.address_lo = (uint32_t)addr,
		.address_hi = (uint32_t)(addr >> 32),
		.data = data,
	};
	rebuild(t);
	return 0;
}
