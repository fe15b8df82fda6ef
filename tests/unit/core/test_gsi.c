/* GSI routing table: the PC's fixed wiring and MSI route bookkeeping. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "vm/gsi.h"

static const struct kvm_irq_routing_entry *find(const struct gsi_table *t,
						unsigned int gsi, unsigned int chip)
{
	for (unsigned int i = 0; i < t->rt->nr; i++) {
		const struct kvm_irq_routing_entry *e = &t->rt->entries[i];

		if (e->gsi != gsi)
			continue;
		if (chip == ~0u && e->type == KVM_IRQ_ROUTING_MSI)
			return e;
		if (e->type == KVM_IRQ_ROUTING_IRQCHIP && e->u.irqchip.irqchip == chip)
			return e;
	}
	return NULL;
}

static void test_fixed_wiring(void **state)
{
	static struct gsi_table t;

	assert_int_equal(gsi_table_init(&t, 4096), 0);
	/* 15 PIC inputs (no cascade), 23 IOAPIC inputs (pin 2 is IRQ 0). */
	assert_int_equal(t.rt->nr, 15 + 23);
	assert_int_equal(t.nfixed, t.rt->nr);
	assert_int_equal(find(&t, 0, KVM_IRQCHIP_IOAPIC)->u.irqchip.pin, 2);
	assert_null(find(&t, 2, KVM_IRQCHIP_IOAPIC));
	assert_null(find(&t, 2, KVM_IRQCHIP_PIC_MASTER));
	assert_int_equal(find(&t, 4, KVM_IRQCHIP_IOAPIC)->u.irqchip.pin, 4);
	assert_int_equal(find(&t, 4, KVM_IRQCHIP_PIC_MASTER)->u.irqchip.pin, 4);
	assert_int_equal(find(&t, 12, KVM_IRQCHIP_PIC_SLAVE)->u.irqchip.pin, 4);
	assert_int_equal(find(&t, 23, KVM_IRQCHIP_IOAPIC)->u.irqchip.pin, 23);
	assert_null(find(&t, 16, KVM_IRQCHIP_PIC_SLAVE));
	assert_int_equal(t.nmsi, GSI_MAX_MSI);
	gsi_table_free(&t);
}

static void test_msi_routes(void **state)
{
	static struct gsi_table t;
	const struct kvm_irq_routing_entry *e;
	int a, b;

	assert_int_equal(gsi_table_init(&t, 4096), 0);
	a = gsi_msi_alloc(&t);
	b = gsi_msi_alloc(&t);
	assert_int_equal(a, GSI_IOAPIC_PINS);
	assert_int_equal(b, GSI_IOAPIC_PINS + 1);
	/* Allocated but not programmed: not in the table. */
	assert_int_equal(t.rt->nr, t.nfixed);
	assert_int_equal(gsi_msi_set(&t, b, 0xfee01000, 0x4031), 0);
	assert_int_equal(t.rt->nr, t.nfixed + 1);
	e = find(&t, b, ~0u);
	assert_non_null(e);
	assert_int_equal(e->u.msi.address_lo, 0xfee01000);
	assert_int_equal(e->u.msi.address_hi, 0);
	assert_int_equal(e->u.msi.data, 0x4031);
	/* Reprogramming replaces, a 64-bit address is split. */
	assert_int_equal(gsi_msi_set(&t, b, 0x1fee02000ull, 0x41), 0);
	assert_int_equal(t.rt->nr, t.nfixed + 1);
	e = find(&t, b, ~0u);
	assert_int_equal(e->u.msi.address_hi, 1);
	assert_int_equal(e->u.msi.data, 0x41);
	assert_int_equal(gsi_msi_set(&t, a, 0xfee00000, 0x30), 0);
	assert_int_equal(t.rt->nr, t.nfixed + 2);
	/* addr 0 (masked / unprogrammed) removes the route, keeps the GSI. */
	assert_int_equal(gsi_msi_set(&t, b, 0, 0), 0);
	assert_int_equal(t.rt->nr, t.nfixed + 1);
	assert_null(find(&t, b, ~0u));
	assert_int_equal(gsi_msi_alloc(&t), GSI_IOAPIC_PINS + 2);
	/* Not MSI GSIs or not allocated: refused. */
	assert_int_equal(gsi_msi_set(&t, 4, 0xfee00000, 0), -EINVAL);
	assert_int_equal(gsi_msi_set(&t, GSI_IOAPIC_PINS + 10, 0xfee00000, 0), -EINVAL);
	assert_int_equal(gsi_msi_set(&t, ~0u, 0xfee00000, 0), -EINVAL);
	gsi_table_free(&t);
}

static void test_kvm_limit(void **state)
{
	static struct gsi_table t;
	int n = 0;

	/* Room for the fixed entries plus 3 MSI routes only. */
	assert_int_equal(gsi_table_init(&t, 15 + 23 + 3), 0);
	while (gsi_msi_alloc(&t) >= 0)
		n++;
	assert_int_equal(n, 3);
	assert_int_equal(gsi_msi_alloc(&t), -ENOSPC);
	for (int i = 0; i < 3; i++)
		assert_int_equal(gsi_msi_set(&t, GSI_IOAPIC_PINS + i, 0xfee00000, i), 0);
	assert_int_equal(t.rt->nr, 15 + 23 + 3);
	gsi_table_free(&t);
	/* A KVM without room for MSI routes at all. */
	assert_int_equal(gsi_table_init(&t, 10), 0);
	assert_int_equal(gsi_msi_alloc(&t), -ENOSPC);
	gsi_table_free(&t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fixed_wiring),
		cmocka_unit_test(test_msi_routes),
		cmocka_unit_test(test_kvm_limit),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
