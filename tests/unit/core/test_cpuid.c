/* CPUID filtering: the PVM hide list, --cpu names, per-vCPU topology. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "arch/x86/cpuid.h"

static struct cpuid_set s, out;

static void add(uint32_t fn, uint32_t idx, uint32_t a, uint32_t b, uint32_t c, uint32_t d)
{
	s.e[s.n++] = (struct kvm_cpuid_entry2){
		.function = fn, .index = idx,
		.flags = (fn == 7 || fn == 0xd || fn == 4 || fn == 0xb) ?
			 KVM_CPUID_FLAG_SIGNIFCANT_INDEX : 0,
		.eax = a, .ebx = b, .ecx = c, .edx = d };
}

static int setup(void **state)
{
	s.n = 0;
	add(0, 0, 0xd, 0x756e6547, 0x6c65746e, 0x49656e69);
	add(1, 0, 0x806f8, 0x00000800, 0xfffa3223, 0x178bfbff);
	add(4, 0, 0x121, 0x1c0003f, 0x3f, 0);
	add(7, 0, 0, 0xffffffff, 0xffffffff, 0xffffffff);
	add(7, 1, 0x30, 0, 0, 0);
	add(0xb, 0, 1, 1, 0x100, 7);
	add(0xd, 0, 0x2e7, 0x340, 0xa88, 0);
	add(0xd, 1, 0xf, 0, 0, 0);
	add(0x80000001, 0, 0, 0, 0x121, 0x2c100800);
	add(0x80000008, 0, 0x3030, 0, 0, 0);
	return 0;
}

static uint32_t reg(uint32_t fn, uint32_t idx, int r)
{
	struct kvm_cpuid_entry2 *e = cpuid_find(&s, fn, idx);

	assert_non_null(e);
	return r == 0 ? e->eax : r == 1 ? e->ebx : r == 2 ? e->ecx : e->edx;
}

static void test_pvm_filter(void **state)
{
	cpuid_hide_pvm(&s);
	assert_false(reg(1, 0, 2) & (1u << 26));	/* xsave */
	assert_false(reg(1, 0, 2) & (1u << 27));	/* osxsave */
	assert_false(reg(1, 0, 2) & (1u << 28));	/* avx */
	assert_false(reg(1, 0, 2) & (1u << 13));	/* cx16 */
	assert_true(reg(1, 0, 2) & (1u << 20));		/* sse4_2 stays */
	assert_false(reg(7, 0, 1) & (1u << 5));		/* avx2 */
	assert_false(reg(7, 0, 1) & (1u << 7));		/* smep */
	assert_false(reg(7, 0, 1) & (1u << 20));	/* smap */
	assert_false(reg(7, 0, 1) & (1u << 16));	/* avx512f */
	assert_true(reg(7, 0, 1) & (1u << 9));		/* erms stays */
	assert_false(reg(7, 1, 0) & (1u << 4));		/* avx_vnni */
	assert_int_equal(reg(0xd, 0, 0), 0);
	assert_int_equal(reg(0xd, 0, 1), 0);
	assert_int_equal(reg(0xd, 1, 0), 0);
	assert_true(reg(0x80000001, 0, 3) & (1u << 29));	/* lm stays */
}

static void test_features_option(void **state)
{
	char err[256];

	assert_int_equal(cpuid_apply_features(&s, "-sse4_2,+cx16,avx", err, sizeof(err)), 0);
	assert_false(reg(1, 0, 2) & (1u << 20));
	assert_true(reg(1, 0, 2) & (1u << 13));
	assert_true(reg(1, 0, 2) & (1u << 28));
	assert_int_equal(cpuid_apply_features(&s, "-lm,-nx", err, sizeof(err)), 0);
	assert_false(reg(0x80000001, 0, 3) & (1u << 29));
	assert_false(reg(0x80000001, 0, 3) & (1u << 20));
	assert_int_equal(cpuid_apply_features(&s, "-smap,+hyperdrive", err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "'hyperdrive'"));
	assert_int_equal(cpuid_apply_features(&s, "+", err, sizeof(err)), -EINVAL);
	assert_int_equal(cpuid_apply_features(NULL, "+sse2", err, sizeof(err)), 0);
	assert_true(cpuid_feature_known("xsave"));
	assert_false(cpuid_feature_known("xsav"));
	{
		char names[4096];

		cpuid_feature_names(names, sizeof(names));
		assert_non_null(strstr(names, "avx512f"));
		assert_non_null(strstr(names, "smap"));
	}
}

static void test_topology(void **state)
{
	struct kvm_cpuid_entry2 *e;
	unsigned int nb = 0;

	cpuid_for_vcpu(&s, 2, 3, &out);
	e = cpuid_find(&out, 1, 0);
	assert_int_equal(e->ebx >> 24, 2);		/* APIC id */
	assert_int_equal((e->ebx >> 16) & 0xff, 3);	/* logical count */
	assert_true(e->edx & (1u << 28));		/* HTT */
	e = cpuid_find(&out, 0xb, 0);
	assert_int_equal(e->edx, 2);
	assert_int_equal(e->ebx, 1);
	assert_int_equal(e->ecx, 0x100);
	e = cpuid_find(&out, 0xb, 1);
	assert_int_equal(e->eax, 2);			/* shift for 3 cores */
	assert_int_equal(e->ebx, 3);
	assert_int_equal(e->ecx, 0x201);
	assert_int_equal(e->edx, 2);
	e = cpuid_find(&out, 4, 0);
	assert_int_equal(e->eax >> 26, 3);
	for (unsigned int i = 0; i < out.n; i++)
		nb += out.e[i].function == 0xb;
	assert_int_equal(nb, 3);			/* the host's entry replaced */
	cpuid_for_vcpu(&s, 0, 1, &out);
	e = cpuid_find(&out, 1, 0);
	assert_int_equal(e->ebx >> 24, 0);
	assert_false(e->edx & (1u << 28));
	/* The input set is left alone. */
	assert_int_equal(reg(1, 0, 1), 0x00000800);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(test_pvm_filter, setup),
		cmocka_unit_test_setup(test_features_option, setup),
		cmocka_unit_test_setup(test_topology, setup),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
