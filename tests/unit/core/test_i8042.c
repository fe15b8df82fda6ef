/* i8042 reset paths and self-tests, ACPI PM1 power-off, and the exit
 * device's status rule. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "arch/x86/acpi.h"
#include "hw/acpi_pm.h"
#include "hw/exitdev.h"
#include "hw/i8042.h"

static int resets;

static void on_reset(void *opaque)
{
	resets++;
}

static uint8_t rd(struct i8042 *k, bool cmd_port)
{
	uint8_t v;

	(cmd_port ? i8042_cmd_io : i8042_data_io)(k, 0, &v, 1, false);
	return v;
}

static void wr(struct i8042 *k, bool cmd_port, uint8_t v)
{
	(cmd_port ? i8042_cmd_io : i8042_data_io)(k, 0, &v, 1, true);
}

static void test_reset_pulse(void **state)
{
	struct i8042 k;

	resets = 0;
	i8042_init(&k, on_reset, NULL);
	wr(&k, true, 0xfe);
	assert_int_equal(resets, 1);
	wr(&k, true, 0xff);				/* pulse nothing */
	assert_int_equal(resets, 1);
	wr(&k, true, 0xd1);				/* write output port */
	assert_true(rd(&k, true) & 0x08);		/* expecting data */
	wr(&k, false, 0x00);				/* reset line low */
	assert_int_equal(resets, 2);
	wr(&k, true, 0xd1);
	wr(&k, false, 0x01);
	assert_int_equal(resets, 2);
}

static void test_self_tests_and_ctr(void **state)
{
	struct i8042 k;

	i8042_init(&k, on_reset, NULL);
	assert_false(rd(&k, true) & 0x01);
	wr(&k, true, 0xaa);
	assert_true(rd(&k, true) & 0x01);
	assert_int_equal(rd(&k, false), 0x55);
	assert_false(rd(&k, true) & 0x01);
	wr(&k, true, 0xab);
	assert_int_equal(rd(&k, false), 0x00);
	wr(&k, true, 0x60);
	wr(&k, false, 0x21);
	wr(&k, true, 0x20);
	assert_int_equal(rd(&k, false), 0x21);
	wr(&k, false, 0xed);				/* keyboard byte: dropped */
	assert_false(rd(&k, true) & 0x01);
}

static void test_exit_status(void **state)
{
	assert_int_equal(exitdev_status(0), 1);
	assert_int_equal(exitdev_status(0x21), 0x43);
	assert_int_equal(exitdev_status(0x7f), 0xff);
}

static int poweroffs;

static void on_poweroff(void *opaque)
{
	poweroffs++;
}

static void test_acpi_pm(void **state)
{
	struct acpi_pm pm;
	uint16_t v;
	uint32_t d;
	uint8_t b;

	poweroffs = 0;
	acpi_pm_init(&pm, on_poweroff, NULL);
	acpi_pm_io(&pm, ACPI_PM1_CNT_OFF, &v, 2, false);
	assert_int_equal(v & 1, 1);				/* SCI_EN */
	d = 0xffffffff;
	acpi_pm_io(&pm, 0, &d, 4, false);
	assert_int_equal(d, 0);					/* STS, EN */
	v = 0x0121;
	acpi_pm_io(&pm, 2, &v, 2, true);			/* PM1_EN */
	acpi_pm_io(&pm, 2, &v, 2, false);
	assert_int_equal(v, 0x0121);
	v = (1 << 10) | (1 << 13);				/* S1: not ours */
	acpi_pm_io(&pm, ACPI_PM1_CNT_OFF, &v, 2, true);
	assert_int_equal(poweroffs, 0);
	v = 5 << 10;						/* type, no SLP_EN */
	acpi_pm_io(&pm, ACPI_PM1_CNT_OFF, &v, 2, true);
	assert_int_equal(poweroffs, 0);
	acpi_pm_io(&pm, ACPI_PM1_CNT_OFF, &v, 2, false);
	assert_int_equal(v, (5 << 10) | 1);			/* SLP_EN reads 0 */
	b = ((5 << 10) | (1 << 13)) >> 8;			/* byte write */
	acpi_pm_io(&pm, ACPI_PM1_CNT_OFF + 1, &b, 1, true);
	assert_int_equal(poweroffs, 1);
	/* Accesses past the block read zero and do nothing. */
	d = 0xffffffff;
	acpi_pm_io(&pm, 6, &d, 2, true);
	acpi_pm_io(&pm, 6, &d, 2, false);
	assert_int_equal(d & 0xffff, 0);
	assert_int_equal(poweroffs, 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_reset_pulse),
		cmocka_unit_test(test_self_tests_and_ctr),
		cmocka_unit_test(test_exit_status),
		cmocka_unit_test(test_acpi_pm),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
