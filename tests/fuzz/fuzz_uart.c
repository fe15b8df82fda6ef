/* Guest-facing legacy devices: the 16550A UART, the i8042 and the ACPI PM1
 * registers, driven by a
 * stream of register accesses. Each access is 3 bytes: device/register and
 * direction, value, receive-input count. */
#include <stdint.h>
#include <string.h>

#include "hw/acpi_pm.h"
#include "hw/i8042.h"
#include "hw/serial.h"

static void tx(void *opaque, uint8_t b) { }
static void irq(void *opaque, int level) { }
static void reset(void *opaque) { }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct serial_ops ops = { tx, irq, NULL };
	struct serial *s = serial_new(&ops);
	struct i8042 k;
	struct acpi_pm pm;

	if (!s)
		return 0;
	i8042_init(&k, reset, NULL);
	acpi_pm_init(&pm, reset, NULL);
	for (size_t i = 0; i + 3 <= size; i += 3) {
		uint8_t op = data[i], v = data[i + 1];
		unsigned int len = 1u << ((op >> 5) & 3);
		uint8_t buf[8];
		bool wr = op & 0x80;

		memset(buf, v, sizeof(buf));
		if ((op & 0x18) == 0x18)
			acpi_pm_io(&pm, op & 7, buf, len > 8 - (op & 7) ? 8 - (op & 7) : len, wr);
		else if (op & 0x10)
			((op & 4) ? i8042_cmd_io : i8042_data_io)(&k, 0, buf, 1, wr);
		else
			serial_io(s, op & 7, buf, len > 4 ? 4 : len, wr);
		if (data[i + 2] & 0x80) {
			uint8_t in[128];

			memset(in, v, sizeof(in));
			serial_rx(s, in, data[i + 2] & 0x7f);
		}
	}
	serial_free(s);
	return 0;
}
