/* Intel MultiProcessor table: how a guest without ACPI finds its vCPUs,
 * its IOAPIC and the ISA interrupt wiring. */
#ifndef IOVM_ARCH_X86_MPTABLE_H
#define IOVM_ARCH_X86_MPTABLE_H

#include <stdint.h>

#include "lib/gmem.h"

/* Writes the floating pointer and the configuration table at
 * MPTABLE_BASE for ncpus processors (APIC ids 0..ncpus-1, the IOAPIC gets
 * id ncpus). cpu_signature/features: CPUID leaf 1 EAX/EDX. */
int mptable_write(struct gmem *m, unsigned int ncpus, uint32_t cpu_signature,
		  uint32_t cpu_features);

#endif
