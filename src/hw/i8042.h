/* i8042 keyboard controller: the parts a PC guest uses to reset itself
 * (command 0xFE, or the output port's reset line) and its self-tests. */
#ifndef IOVM_HW_I8042_H
#define IOVM_HW_I8042_H

#include <stdbool.h>
#include <stdint.h>

#define I8042_DATA_PORT 0x60
#define I8042_CMD_PORT 0x64

struct vm;

struct i8042 {
	void (*reset)(void *opaque);	/* the guest pulsed the reset line */
	void *opaque;
	uint8_t ctr;			/* controller configuration byte */
	uint8_t out;			/* output buffer */
	bool out_full;
	uint8_t pending_cmd;		/* command waiting for its data byte */
};

void i8042_init(struct i8042 *k, void (*reset)(void *opaque), void *opaque);

/* Bus callbacks for the data (0x60) and command/status (0x64) ports. */
void i8042_data_io(void *opaque, uint64_t offset, void *data, unsigned int len,
		   bool is_write);
void i8042_cmd_io(void *opaque, uint64_t offset, void *data, unsigned int len,
		  bool is_write);

int i8042_create(struct vm *vm);

#endif
