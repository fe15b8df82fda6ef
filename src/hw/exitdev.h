/* The exit device: QEMU's isa-debug-exit at port 0xf4, so guest tests and
 * the probe end the VM with a status the same way on iovm and on QEMU. */
#ifndef IOVM_HW_EXITDEV_H
#define IOVM_HW_EXITDEV_H

#include <stdint.h>

#define EXITDEV_PORT 0xf4

struct vm;

/* A write of v exits the VM with status (v << 1) | 1. */
static inline int exitdev_status(uint32_t v)
{
	return (int)((v << 1) | 1);
}

int exitdev_create(struct vm *vm);

#endif
