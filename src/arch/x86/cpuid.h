/* The guest's CPUID: what KVM supports, minus what this host's KVM cannot
 * run (PVM), adjusted by --cpu, with each vCPU's APIC id and topology. */
#ifndef IOVM_ARCH_X86_CPUID_H
#define IOVM_ARCH_X86_CPUID_H

#include <linux/kvm.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CPUID_MAX_ENTRIES 256

struct cpuid_set {
	unsigned int n;
	struct kvm_cpuid_entry2 e[CPUID_MAX_ENTRIES];
};

/* Features hidden from the guest when the host KVM is PVM: XSAVE and all
 * that depends on it, CMPXCHG16B, SMAP (CLAC/STAC) and SMEP, which PVM's
 * emulator cannot run or enforce. */
void cpuid_hide_pvm(struct cpuid_set *s);

/* Applies "+name,-name,..." (a bare name means +). Returns 0, or -EINVAL
 * with a one-line message in err for an unknown name or bad syntax. */
int cpuid_apply_features(struct cpuid_set *s, const char *spec, char *err,
			 size_t errlen);

/* Fills out with the entries of vCPU idx (of ncpus): APIC ids in leaves 1
 * and 0xB, one package with ncpus cores. */
void cpuid_for_vcpu(const struct cpuid_set *s, unsigned int idx,
		    unsigned int ncpus, struct cpuid_set *out);

/* Looks an entry up; NULL when absent. */
struct kvm_cpuid_entry2 *cpuid_find(struct cpuid_set *s, uint32_t fn,
				    uint32_t index);

/* Does the feature named name exist in the table? (For tests and --help.) */
bool cpuid_feature_known(const char *name);

/* Writes the comma-separated list of feature names into buf. */
void cpuid_feature_names(char *buf, size_t len);

/* KVM_GET_SUPPORTED_CPUID, then the PVM filter when the host is PVM. */
int cpuid_get_supported(int kvm_fd, struct cpuid_set *s);

/* true when the kvm_pvm module is loaded (/sys/module/kvm_pvm). */
bool cpuid_host_is_pvm(void);

#endif
