/* Guest-facing legacy devices: the 16550A UART and the i8042, driven by a
 * stream of register accesses. Each access is 3 bytes: device/register and
 * direction, value, receive-input count. */
#include <stdint.h>
#include <string.h>

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

	if (!s)
		return 0;
	i8042_init(&k, reset, NULL);
	for (size_t i = 0; i + 3 <= size; i += 3) {
		uint8_t op = data[i], v = data[i + 1];
		unsigned int len = 1u << ((op >> 5) & 3);
		uint8_t buf[8];
		bool wr = op & 0x80;

		memset(buf, v, sizeof(buf));
		if (op & 0x10)
			((op & 8) ? i8042_cmd_io : i8042_data_io)(&k, 0, buf, 1, wr);
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
