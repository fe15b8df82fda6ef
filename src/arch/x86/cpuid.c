/* CPUID for the guest. Feature names follow Linux's /proc/cpuinfo. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "arch/x86/cpuid.h"

enum reg { EAX, EBX, ECX, EDX };

struct feature {
	const char *name;
	uint32_t fn, index;
	enum reg reg;
	uint8_t bit;
};

static const struct feature features[] = {
	{ "fpu", 1, 0, EDX, 0 }, { "vme", 1, 0, EDX, 1 }, { "de", 1, 0, EDX, 2 },
	{ "pse", 1, 0, EDX, 3 }, { "tsc", 1, 0, EDX, 4 }, { "msr", 1, 0, EDX, 5 },
	{ "pae", 1, 0, EDX, 6 }, { "mce", 1, 0, EDX, 7 }, { "cx8", 1, 0, EDX, 8 },
	{ "apic", 1, 0, EDX, 9 }, { "sep", 1, 0, EDX, 11 }, { "mtrr", 1, 0, EDX, 12 },
	{ "pge", 1, 0, EDX, 13 }, { "mca", 1, 0, EDX, 14 }, { "cmov", 1, 0, EDX, 15 },
	{ "pat", 1, 0, EDX, 16 }, { "pse36", 1, 0, EDX, 17 }, { "clflush", 1, 0, EDX, 19 },
	{ "mmx", 1, 0, EDX, 23 }, { "fxsr", 1, 0, EDX, 24 }, { "sse", 1, 0, EDX, 25 },
	{ "sse2", 1, 0, EDX, 26 }, { "ht", 1, 0, EDX, 28 },
	{ "pni", 1, 0, ECX, 0 }, { "sse3", 1, 0, ECX, 0 }, { "pclmulqdq", 1, 0, ECX, 1 },
	{ "ssse3", 1, 0, ECX, 9 }, { "fma", 1, 0, ECX, 12 }, { "cx16", 1, 0, ECX, 13 },
	{ "pcid", 1, 0, ECX, 17 }, { "sse4_1", 1, 0, ECX, 19 }, { "sse4_2", 1, 0, ECX, 20 },
	{ "x2apic", 1, 0, ECX, 21 }, { "movbe", 1, 0, ECX, 22 }, { "popcnt", 1, 0, ECX, 23 },
	{ "tsc_deadline_timer", 1, 0, ECX, 24 }, { "aes", 1, 0, ECX, 25 },
	{ "xsave", 1, 0, ECX, 26 }, { "osxsave", 1, 0, ECX, 27 }, { "avx", 1, 0, ECX, 28 },
	{ "f16c", 1, 0, ECX, 29 }, { "rdrand", 1, 0, ECX, 30 }, { "hypervisor", 1, 0, ECX, 31 },
	{ "fsgsbase", 7, 0, EBX, 0 }, { "bmi1", 7, 0, EBX, 3 }, { "hle", 7, 0, EBX, 4 },
	{ "avx2", 7, 0, EBX, 5 }, { "smep", 7, 0, EBX, 7 }, { "bmi2", 7, 0, EBX, 8 },
	{ "erms", 7, 0, EBX, 9 }, { "invpcid", 7, 0, EBX, 10 }, { "rtm", 7, 0, EBX, 11 },
	{ "mpx", 7, 0, EBX, 14 }, { "avx512f", 7, 0, EBX, 16 }, { "avx512dq", 7, 0, EBX, 17 },
	{ "rdseed", 7, 0, EBX, 18 }, { "adx", 7, 0, EBX, 19 }, { "smap", 7, 0, EBX, 20 },
	{ "avx512ifma", 7, 0, EBX, 21 }, { "clflushopt", 7, 0, EBX, 23 },
	{ "clwb", 7, 0, EBX, 24 }, { "avx512pf", 7, 0, EBX, 26 }, { "avx512er", 7, 0, EBX, 27 },
	{ "avx512cd", 7, 0, EBX, 28 }, { "sha_ni", 7, 0, EBX, 29 },
	{ "avx512bw", 7, 0, EBX, 30 }, { "avx512vl", 7, 0, EBX, 31 },
	{ "avx512vbmi", 7, 0, ECX, 1 }, { "umip", 7, 0, ECX, 2 }, { "pku", 7, 0, ECX, 3 },
	{ "ospke", 7, 0, ECX, 4 }, { "waitpkg", 7, 0, ECX, 5 },
	{ "avx512_vbmi2", 7, 0, ECX, 6 }, { "shstk", 7, 0, ECX, 7 }, { "gfni", 7, 0, ECX, 8 },
	{ "vaes", 7, 0, ECX, 9 }, { "vpclmulqdq", 7, 0, ECX, 10 },
	{ "avx512_vnni", 7, 0, ECX, 11 }, { "avx512_bitalg", 7, 0, ECX, 12 },
	{ "avx512_vpopcntdq", 7, 0, ECX, 14 }, { "la57", 7, 0, ECX, 16 },
	{ "rdpid", 7, 0, ECX, 22 }, { "movdiri", 7, 0, ECX, 27 }, { "movdir64b", 7, 0, ECX, 28 },
	{ "fsrm", 7, 0, EDX, 4 }, { "avx512_vp2intersect", 7, 0, EDX, 8 },
	{ "md_clear", 7, 0, EDX, 10 }, { "serialize", 7, 0, EDX, 14 },
	{ "tsxldtrk", 7, 0, EDX, 16 }, { "ibt", 7, 0, EDX, 20 }, { "amx_bf16", 7, 0, EDX, 22 },
	{ "avx512_fp16", 7, 0, EDX, 23 }, { "amx_tile", 7, 0, EDX, 24 },
	{ "amx_int8", 7, 0, EDX, 25 }, { "spec_ctrl", 7, 0, EDX, 26 },
	{ "stibp", 7, 0, EDX, 27 }, { "flush_l1d", 7, 0, EDX, 28 },
	{ "arch_capabilities", 7, 0, EDX, 29 }, { "ssbd", 7, 0, EDX, 31 },
	{ "avx_vnni", 7, 1, EAX, 4 }, { "avx512_bf16", 7, 1, EAX, 5 },
	{ "xsaveopt", 0xd, 1, EAX, 0 }, { "xsavec", 0xd, 1, EAX, 1 },
	{ "xgetbv1", 0xd, 1, EAX, 2 }, { "xsaves", 0xd, 1, EAX, 3 },
	{ "lahf_lm", 0x80000001, 0, ECX, 0 }, { "abm", 0x80000001, 0, ECX, 5 },
	{ "sse4a", 0x80000001, 0, ECX, 6 }, { "3dnowprefetch", 0x80000001, 0, ECX, 8 },
	{ "xop", 0x80000001, 0, ECX, 11 }, { "fma4", 0x80000001, 0, ECX, 16 },
	{ "tbm", 0x80000001, 0, ECX, 21 }, { "topoext", 0x80000001, 0, ECX, 22 },
	{ "syscall", 0x80000001, 0, EDX, 11 }, { "nx", 0x80000001, 0, EDX, 20 },
	{ "mmxext", 0x80000001, 0, EDX, 22 }, { "fxsr_opt", 0x80000001, 0, EDX, 25 },
	{ "pdpe1gb", 0x80000001, 0, EDX, 26 }, { "rdtscp", 0x80000001, 0, EDX, 27 },
	{ "lm", 0x80000001, 0, EDX, 29 },
};

#define NFEATURES (sizeof(features) / sizeof(features[0]))

/* Everything that needs XSAVE-managed state, plus CX16, SMAP, SMEP. */
static const char *const pvm_hidden[] = {
	"xsave", "osxsave", "avx", "avx2", "fma", "f16c", "avx512f", "avx512dq",
	"avx512ifma", "avx512pf", "avx512er", "avx512cd", "avx512bw", "avx512vl",
	"avx512vbmi", "avx512_vbmi2", "avx512_vnni", "avx512_bitalg",
	"avx512_vpopcntdq", "avx512_vp2intersect", "avx512_fp16", "avx512_bf16",
	"avx_vnni", "vaes", "vpclmulqdq", "amx_bf16", "amx_tile", "amx_int8",
	"pku", "ospke", "shstk", "ibt", "mpx", "xsaveopt", "xsavec", "xgetbv1",
	"xsaves", "cx16", "smap", "smep",
};

struct kvm_cpuid_entry2 *cpuid_find(struct cpuid_set *s, uint32_t fn,
				    uint32_t index)
{
	for (unsigned int i = 0; i < s->n; i++) {
		struct kvm_cpuid_entry2 *e = &s->e[i];

		if (e->function != fn)
			continue;
		if (!(e->flags & KVM_CPUID_FLAG_SIGNIFCANT_INDEX) || e->index == index)
			return e;
	}
	return NULL;
}

static uint32_t *reg_of(struct kvm_cpuid_entry2 *e, enum reg r)
{
	switch (r) {
	case EAX: return &e->eax;
	case EBX: return &e->ebx;
	case ECX: return &e->ecx;
	default: return &e->edx;
	}
}

static const struct feature *lookup(const char *name, size_t len)
{
	for (size_t i = 0; i < NFEATURES; i++)
		if (strlen(features[i].name) == len && !strncmp(features[i].name, name, len))
			return &features[i];
	return NULL;
}

bool cpuid_feature_known(const char *name)
{
	return lookup(name, strlen(name)) != NULL;
}

void cpuid_feature_names(char *buf, size_t len)
{
	size_t used = 0;

	if (len)
		buf[0] = '\0';
	for (size_t i = 0; i < NFEATURES && used < len; i++)
		used += snprintf(buf + used, len - used, "%s%s", i ? "," : "", features[i].name);
}

static void set_feature(struct cpuid_set *s, const struct feature *f, bool on)
{
	struct kvm_cpuid_entry2 *e = cpuid_find(s, f->fn, f->index);

	/* Adding a feature the host lacks in a leaf it does not report
	 * would show a leaf with nothing else in it; skip that. */
	if (!e)
		return;
	if (on)
		*reg_of(e, f->reg) |= 1u << f->bit;
	else
		*reg_of(e, f->reg) &= ~(1u << f->bit);
}

void cpuid_hide_pvm(struct cpuid_set *s)
{
	for (size_t i = 0; i < sizeof(pvm_hidden) / sizeof(pvm_hidden[0]); i++)
		set_feature(s, lookup(pvm_hidden[i], strlen(pvm_hidden[i])), false);
	/* Leaf 0xD describes XSAVE state components; without XSAVE it
	 * must say nothing. */
	for (unsigned int i = 0; i < s->n; i++)
		if (s->e[i].function == 0xd)
			s->e[i].eax = s->e[i].ebx = s->e[i].ecx = s->e[i].edx = 0;
}

int cpuid_apply_features(struct cpuid_set *s, const char *spec, char *err,
			 size_t errlen)
{
	const char *p = spec;

	while (*p) {
		const char *end = strchr(p, ',');
		size_t len = end ? (size_t)(end - p) : strlen(p);
		bool on = true;
		const struct feature *f;

		if (*p == '+' || *p == '-') {
			on = *p == '+';
			p++;
			len--;
		}
		if (!len) {
			snprintf(err, errlen, "--cpu: empty feature name in '%s'", spec);
			return -EINVAL;
		}
		f = lookup(p, len);
		if (!f) {
			snprintf(err, errlen, "--cpu: unknown CPU feature '%.*s' (see iovm run --help)",
				 (int)len, p);
			return -EINVAL;
		}
		if (s)
			set_feature(s, f, on);
		p += len;
		if (*p == ',')
			p++;
	}
	return 0;
}

static unsigned int bits_for(unsigned int n)
{
	unsigned int b = 0;

	while ((1u << b) < n)
		b++;
	return b;
}

static void add_entry(struct cpuid_set *s, uint32_t fn, uint32_t index,
		      uint32_t eax, uint32_t ebx, uint32_t ecx, uint32_t edx)
{
	if (s->n >= CPUID_MAX_ENTRIES)
		return;
	s->e[s->n++] = (struct kvm_cpuid_entry2){
		.function = fn, .index = index,
		.flags = KVM_CPUID_FLAG_SIGNIFCANT_INDEX,
		.eax = eax, .ebx = ebx, .ecx = ecx, .edx = edx,
	};
}

void cpuid_for_vcpu(const struct cpuid_set *s, unsigned int idx,
		    unsigned int ncpus, struct cpuid_set *out)
{
	unsigned int shift = bits_for(ncpus);
	struct kvm_cpuid_entry2 *e;
	uint32_t max_basic = 0;

	out->n = 0;
	/* Topology leaves are rebuilt below: one package of ncpus cores. */
	for (unsigned int i = 0; i < s->n; i++)
		if (s->e[i].function != 0xb && s->e[i].function != 0x1f)
			out->e[out->n++] = s->e[i];
	if ((e = cpuid_find(out, 0, 0)))
		max_basic = e->eax;
	if ((e = cpuid_find(out, 1, 0))) {
		e->ebx = (e->ebx & 0x0000ffff) | (idx << 24) |
			 ((uint32_t)(ncpus > 255 ? 255 : ncpus) << 16);
		if (ncpus > 1)
			e->edx |= 1u << 28;
		else
			e->edx &= ~(1u << 28);
	}
	for (unsigned int i = 0; i < out->n; i++) {
		e = &out->e[i];
		if (e->function == 4 && (e->eax & 0x1f))
			e->eax = (e->eax & 0x03ffffff) | ((uint32_t)((1u << shift) - 1) << 26);
	}
	if ((e = cpuid_find(out, 0x80000008, 0)))
		e->ecx = (e->ecx & ~0xf0ffu) | (shift << 12) | (ncpus - 1);
	if (max_basic >= 0xb) {
		add_entry(out, 0xb, 0, 0, 1, 0x100, idx);
		add_entry(out, 0xb, 1, shift, ncpus, 0x201, idx);
		add_entry(out, 0xb, 2, 0, 0, 2, idx);
	}
}

bool cpuid_host_is_pvm(void)
{
	return access("/sys/module/kvm_pvm", F_OK) == 0;
}

int cpuid_get_supported(int kvm_fd, struct cpuid_set *s)
{
	struct kvm_cpuid2 *c = calloc(1, sizeof(*c) + CPUID_MAX_ENTRIES * sizeof(c->entries[0]));
	int ret = 0;

	if (!c)
		return -ENOMEM;
	c->nent = CPUID_MAX_ENTRIES;
	if (ioctl(kvm_fd, KVM_GET_SUPPORTED_CPUID, c)) {
		ret = -errno;
	} else {
		s->n = c->nent;
		memcpy(s->e, c->entries, s->n * sizeof(s->e[0]));
		if (cpuid_host_is_pvm())
			cpuid_hide_pvm(s);
	}
	free(c);
	return ret;
}
