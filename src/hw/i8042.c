/* i8042 model. Port 0x61 (PIT gate, speaker) is served by KVM's in-kernel
 * PIT (KVM_PIT_SPEAKER_DUMMY), so it never reaches userspace. No keyboard
 * or mouse is attached: device commands get no reply, as on a PC without
 * them. Serialised by the caller's exits being rare; a lock keeps the
 * command/data pair atomic across vCPUs. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "hw/i8042.h"
#include "lib/log.h"
#include "vm/vm.h"

#define STS_OBF 0x01
#define STS_SYS 0x04
#define STS_CMD 0x08
#define STS_UNLOCKED 0x10

#define CMD_READ_CTR 0x20
#define CMD_WRITE_CTR 0x60
#define CMD_AUX_DISABLE 0xa7
#define CMD_AUX_ENABLE 0xa8
#define CMD_AUX_TEST 0xa9
#define CMD_SELF_TEST 0xaa
#define CMD_KBD_TEST 0xab
#define CMD_KBD_DISABLE 0xad
#define CMD_KBD_ENABLE 0xae
#define CMD_READ_OUTPORT 0xd0
#define CMD_WRITE_OUTPORT 0xd1
#define CMD_PULSE_BASE 0xf0

static pthread_mutex_t i8042_lock = PTHREAD_MUTEX_INITIALIZER;

void i8042_init(struct i8042 *k, void (*reset)(void *opaque), void *opaque)
{
	memset(k, 0, sizeof(*k));
	k->reset = reset;
	k->opaque = opaque;
	k->ctr = 0x45;		/* kbd IRQ, system flag, translation */
}

static void reply(struct i8042 *k, uint8_t v)
{
	k->out = v;
	k->out_full = true;
}

static void command(struct i8042 *k, uint8_t cmd)
{
	switch (cmd) {
	case CMD_READ_CTR:
		reply(k, k->ctr);
		break;
	case CMD_WRITE_CTR:
	case CMD_WRITE_OUTPORT:
		k->pending_cmd = cmd;
		break;
	case CMD_SELF_TEST:
		reply(k, 0x55);
		break;
	case CMD_KBD_TEST:
	case CMD_AUX_TEST:
		reply(k, 0x00);
		break;
	case CMD_READ_OUTPORT:
		reply(k, 0x01);	/* reset line high: running */
		break;
	case CMD_KBD_DISABLE:
		k->ctr |= 0x10;
		break;
	case CMD_KBD_ENABLE:
		k->ctr &= ~0x10;
		break;
	case CMD_AUX_DISABLE:
		k->ctr |= 0x20;
		break;
	case CMD_AUX_ENABLE:
		k->ctr &= ~0x20;
		break;
	default:
		/* 0xf0-0xff pulse output lines low for bits clear in the low
		 * nibble; bit 0 is the CPU reset line (0xfe is the classic). */
		if (cmd >= CMD_PULSE_BASE && !(cmd & 1) && k->reset)
			k->reset(k->opaque);
		break;
	}
}

static void data_write(struct i8042 *k, uint8_t v)
{
	uint8_t cmd = k->pending_cmd;

	k->pending_cmd = 0;
	if (cmd == CMD_WRITE_CTR)
		k->ctr = v;
	else if (cmd == CMD_WRITE_OUTPORT && !(v & 1) && k->reset)
		k->reset(k->opaque);
	/* Otherwise a byte for the (absent) keyboard: dropped. */
}

void i8042_data_io(void *opaque, uint64_t offset, void *data, unsigned int len,
		   bool is_write)
{
	struct i8042 *k = opaque;
	uint8_t *b = data;

	pthread_mutex_lock(&i8042_lock);
	if (is_write) {
		data_write(k, b[0]);
	} else {
		memset(b, 0xff, len);
		b[0] = k->out;
		k->out_full = false;
	}
	pthread_mutex_unlock(&i8042_lock);
}

void i8042_cmd_io(void *opaque, uint64_t offset, void *data, unsigned int len,
		  bool is_write)
{
	struct i8042 *k = opaque;
	uint8_t *b = data;

	pthread_mutex_lock(&i8042_lock);
	if (is_write) {
		command(k, b[0]);
	} else {
		memset(b, 0xff, len);
		b[0] = STS_SYS | STS_UNLOCKED | (k->pending_cmd ? STS_CMD : 0) |
		       (k->out_full ? STS_OBF : 0);
	}
	pthread_mutex_unlock(&i8042_lock);
}

static void vm_reset(void *opaque)
{
	pr_info("guest reset through the i8042: ending the VM");
	vm_request_reset(opaque);
}

int i8042_create(struct vm *vm)
{
	struct i8042 *k = malloc(sizeof(*k));
	int ret;

	if (!k)
		return -ENOMEM;
	i8042_init(k, vm_reset, vm);
	ret = bus_register(vm_pio_bus(vm), I8042_DATA_PORT, 1, i8042_data_io, k);
	if (!ret)
		ret = bus_register(vm_pio_bus(vm), I8042_CMD_PORT, 1, i8042_cmd_io, k);
	return ret;
}
