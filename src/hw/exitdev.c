/* isa-debug-exit semantics: write v -> exit status (v << 1) | 1. */
#include <string.h>

#include "hw/exitdev.h"
#include "vm/vm.h"

static void exitdev_io(void *opaque, uint64_t offset, void *data,
		       unsigned int len, bool is_write)
{
	uint32_t v = 0;

	if (!is_write) {
		memset(data, 0xff, len);
		return;
	}
	memcpy(&v, data, len < sizeof(v) ? len : sizeof(v));
	vm_request_stop(opaque, exitdev_status(v));
}

int exitdev_create(struct vm *vm)
{
	return bus_register(vm_pio_bus(vm), EXITDEV_PORT, 1, exitdev_io, vm);
}
