/* 16550A UART: the guest's console at 0x3f8, IRQ 4. */
#ifndef IOVM_HW_SERIAL_H
#define IOVM_HW_SERIAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SERIAL_COM1_BASE 0x3f8
#define SERIAL_COM1_IRQ 4
#define SERIAL_RX_SIZE 1024

struct vm;

struct serial_ops {
	void (*tx)(void *opaque, uint8_t byte);		/* guest output */
	void (*set_irq)(void *opaque, int level);
	void *opaque;
};

struct serial;

/* The register model alone (unit tests drive it directly). */
struct serial *serial_new(const struct serial_ops *ops);
void serial_free(struct serial *s);

/* Bus callback: offset 0-7 from the base. */
void serial_io(void *opaque, uint64_t offset, void *data, unsigned int len,
	       bool is_write);

/* Bytes for the guest to read; returns how many fit in the receive FIFO. */
size_t serial_rx(struct serial *s, const uint8_t *buf, size_t len);
size_t serial_rx_space(struct serial *s);

/* COM1 of a VM: registered on its port bus, output to stdout, input from
 * stdin (raw mode when a terminal, restored at exit and by
 * serial_console_restore). */
int serial_console_create(struct vm *vm);
void serial_console_restore(void);

#endif
