/* 16550A register model: what Linux's 8250 probe, early printk and the
 * interrupt-driven driver rely on. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "hw/serial.h"

static char txbuf[64];
static unsigned int ntx;
static int irq_level, irq_changes;

static void tx(void *opaque, uint8_t b)
{
	if (ntx < sizeof(txbuf) - 1)
		txbuf[ntx++] = b;
}

static void set_irq(void *opaque, int level)
{
	irq_level = level;
	irq_changes++;
}

static struct serial *s;

static int setup(void **state)
{
	struct serial_ops ops = { tx, set_irq, NULL };

	ntx = 0;
	memset(txbuf, 0, sizeof(txbuf));
	irq_level = irq_changes = 0;
	s = serial_new(&ops);
	return s ? 0 : -1;
}

static int teardown(void **state)
{
	serial_free(s);
	return 0;
}

static uint8_t in(unsigned int reg)
{
	uint8_t v;

	serial_io(s, reg, &v, 1, false);
	return v;
}

static void out(unsigned int reg, uint8_t v)
{
	serial_io(s, reg, &v, 1, true);
}

static void test_tx_and_lsr(void **state)
{
	out(0, 'h');
	out(0, 'i');
	assert_string_equal(txbuf, "hi");
	assert_int_equal(in(5) & 0x60, 0x60);		/* THRE | TEMT */
	assert_int_equal(in(5) & 0x01, 0);		/* no data */
	out(7, 0xa5);
	assert_int_equal(in(7), 0xa5);			/* scratch */
}

static void test_dlab(void **state)
{
	out(3, 0x83);					/* DLAB */
	out(0, 0x01);
	out(1, 0x00);
	assert_int_equal(in(0), 0x01);
	assert_int_equal(in(1), 0x00);
	assert_int_equal(ntx, 0);			/* DLL is no THR */
	out(3, 0x03);
	assert_int_equal(in(3), 0x03);
	out(1, 0x0f);
	assert_int_equal(in(1), 0x0f);			/* IER again */
}

static void test_fifo_detect_and_loopback(void **state)
{
	out(2, 0xc7);					/* FIFO on, clear */
	assert_int_equal(in(2) & 0xc0, 0xc0);		/* 16550A */
	out(4, 0x1a);					/* loop, RTS, OUT2 */
	assert_int_equal(in(6) & 0xf0, 0x90);		/* CTS | DCD */
	out(4, 0x1f);
	assert_int_equal(in(6) & 0xf0, 0xf0);
	out(0, 'x');					/* loops back */
	assert_int_equal(ntx, 0);
	assert_int_equal(in(5) & 1, 1);
	assert_int_equal(in(0), 'x');
	out(4, 0x0b);
	assert_int_equal(in(6) & 0xb0, 0xb0);		/* carrier, DSR, CTS */
}

static void test_interrupts(void **state)
{
	uint8_t data[3] = { 'a', 'b', 'c' };

	out(4, 0x08);					/* OUT2: line enabled */
	assert_int_equal(in(2) & 0x0f, 0x01);
	out(1, 0x02);					/* THRE interrupt */
	assert_int_equal(irq_level, 1);
	assert_int_equal(in(2) & 0x0f, 0x02);		/* reading IIR acks */
	assert_int_equal(irq_level, 0);
	assert_int_equal(in(2) & 0x0f, 0x01);
	out(0, 'z');					/* THR empties again */
	assert_int_equal(irq_level, 1);
	out(1, 0x00);
	assert_int_equal(irq_level, 0);

	out(1, 0x01);					/* RX interrupt */
	assert_int_equal(serial_rx(s, data, 3), 3);
	assert_int_equal(irq_level, 1);
	assert_int_equal(in(2) & 0x0f, 0x04);
	assert_int_equal(in(0), 'a');
	assert_int_equal(in(0), 'b');
	assert_int_equal(irq_level, 1);
	assert_int_equal(in(0), 'c');
	assert_int_equal(irq_level, 0);
	assert_int_equal(in(5) & 1, 0);
	/* Without OUT2 the line stays low. */
	out(4, 0x00);
	serial_rx(s, data, 1);
	assert_int_equal(irq_level, 0);
	assert_int_equal(in(2) & 0x0f, 0x04);
}

static void test_rx_bounds(void **state)
{
	static uint8_t big[SERIAL_RX_SIZE + 100];

	memset(big, 'q', sizeof(big));
	assert_int_equal(serial_rx(s, big, sizeof(big)), SERIAL_RX_SIZE);
	assert_int_equal(serial_rx_space(s), 0);
	assert_int_equal(serial_rx(s, big, 1), 0);
	out(2, 0x03);					/* clear RX FIFO */
	assert_int_equal(serial_rx_space(s), SERIAL_RX_SIZE);
	assert_int_equal(in(0), 0);			/* empty reads 0 */
	/* Loopback into a full FIFO sets overrun, reported once. */
	serial_rx(s, big, SERIAL_RX_SIZE);
	out(4, 0x10);
	out(0, 'o');
	assert_int_equal(in(5) & 0x02, 0x02);
	assert_int_equal(in(5) & 0x02, 0);
}

static void test_wide_access(void **state)
{
	uint32_t v = 0;

	out(7, 0x42);
	serial_io(s, 7, &v, 4, false);
	assert_int_equal(v, 0xffffff42);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_tx_and_lsr, setup, teardown),
		cmocka_unit_test_setup_teardown(test_dlab, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fifo_detect_and_loopback, setup, teardown),
		cmocka_unit_test_setup_teardown(test_interrupts, setup, teardown),
		cmocka_unit_test_setup_teardown(test_rx_bounds, setup, teardown),
		cmocka_unit_test_setup_teardown(test_wide_access, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
