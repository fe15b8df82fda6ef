/* 16550A UART register model (what Linux's 8250 driver and early printk
 * use: FIFO detection, loopback test, THR-empty and RX interrupts) and the
 * host console behind it. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

#include "hw/serial.h"
#include "lib/log.h"
#include "vm/vm.h"

enum { RBR_THR, IER, IIR_FCR, LCR, MCR, LSR, MSR, SCR };

#define IER_RDI 0x01
#define IER_THRI 0x02
#define IER_RLSI 0x04
#define IER_MSI 0x08
#define IIR_NONE 0x01
#define IIR_MSI 0x00
#define IIR_THRI 0x02
#define IIR_RDI 0x04
#define IIR_FIFO 0xc0
#define FCR_ENABLE 0x01
#define FCR_CLEAR_RX 0x02
#define LCR_DLAB 0x80
#define MCR_DTR 0x01
#define MCR_RTS 0x02
#define MCR_OUT1 0x04
#define MCR_OUT2 0x08
#define MCR_LOOP 0x10
#define LSR_DR 0x01
#define LSR_OE 0x02
#define LSR_THRE 0x20
#define LSR_TEMT 0x40
#define MSR_CTS 0x10
#define MSR_DSR 0x20
#define MSR_RI 0x40
#define MSR_DCD 0x80

struct serial {
	pthread_mutex_t lock;
	struct serial_ops ops;
	uint8_t ier, lcr, mcr, lsr_err, msr_delta, scr, dll, dlm, fcr;
	bool thri_pending;	/* THR empty, not yet acknowledged */
	int irq_level;
	uint8_t rx[SERIAL_RX_SIZE];
	unsigned int rx_head, rx_count;
};

struct serial *serial_new(const struct serial_ops *ops)
{
	struct serial *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	pthread_mutex_init(&s->lock, NULL);
	s->ops = *ops;
	s->dll = 12;		/* 9600 baud, as after a BIOS */
	s->lcr = 0x03;
	return s;
}

void serial_free(struct serial *s)
{
	if (!s)
		return;
	pthread_mutex_destroy(&s->lock);
	free(s);
}

static uint8_t msr_value(const struct serial *s)
{
	uint8_t m = s->msr_delta;

	/* In loopback the modem inputs follow the modem outputs; Linux's
	 * 8250 probe checks exactly that. */
	if (s->mcr & MCR_LOOP)
		return m | ((s->mcr & MCR_RTS) ? MSR_CTS : 0) |
		       ((s->mcr & MCR_DTR) ? MSR_DSR : 0) |
		       ((s->mcr & MCR_OUT1) ? MSR_RI : 0) |
		       ((s->mcr & MCR_OUT2) ? MSR_DCD : 0);
	return m | MSR_DCD | MSR_DSR | MSR_CTS;
}

static uint8_t iir_value(const struct serial *s)
{
	uint8_t fifo = (s->fcr & FCR_ENABLE) ? IIR_FIFO : 0;

	if ((s->ier & IER_RDI) && s->rx_count)
		return fifo | IIR_RDI;
	if ((s->ier & IER_THRI) && s->thri_pending)
		return fifo | IIR_THRI;
	if ((s->ier & IER_MSI) && (s->msr_delta & 0x0f))
		return fifo | IIR_MSI;
	return fifo | IIR_NONE;
}

/* Lock held. OUT2 gates the interrupt line on a PC. */
static void update_irq(struct serial *s)
{
	int level = !(iir_value(s) & IIR_NONE) && (s->mcr & MCR_OUT2);

	if (level != s->irq_level) {
		s->irq_level = level;
		if (s->ops.set_irq)
			s->ops.set_irq(s->ops.opaque, level);
	}
}

static void rx_push(struct serial *s, uint8_t b)
{
	if (s->rx_count == SERIAL_RX_SIZE) {
		s->lsr_err |= LSR_OE;
		return;
	}
	s->rx[(s->rx_head + s->rx_count) % SERIAL_RX_SIZE] = b;
	s->rx_count++;
}

static uint8_t rx_pop(struct serial *s)
{
	uint8_t b;

	if (!s->rx_count)
		return 0;
	b = s->rx[s->rx_head];
	s->rx_head = (s->rx_head + 1) % SERIAL_RX_SIZE;
	s->rx_count--;
	return b;
}

static void reg_write(struct serial *s, unsigned int reg, uint8_t v)
{
	switch (reg) {
	case RBR_THR:
		if (s->lcr & LCR_DLAB) {
			s->dll = v;
			break;
		}
		if (s->mcr & MCR_LOOP)
			rx_push(s, v);
		else if (s->ops.tx)
			s->ops.tx(s->ops.opaque, v);
		/* Transmission is instant: THR is empty again at once. */
		s->thri_pending = true;
		break;
	case IER:
		if (s->lcr & LCR_DLAB) {
			s->dlm = v;
			break;
		}
		/* Enabling the THR interrupt with THR empty raises it. */
		if ((v & IER_THRI) && !(s->ier & IER_THRI))
			s->thri_pending = true;
		s->ier = v & 0x0f;
		break;
	case IIR_FCR:
		if (v & FCR_CLEAR_RX)
			s->rx_count = s->rx_head = 0;
		s->fcr = v & 0xc9;
		break;
	case LCR:
		s->lcr = v;
		break;
	case MCR:
		s->mcr = v & 0x1f;
		break;
	case SCR:
		s->scr = v;
		break;
	default:		/* LSR, MSR: read-only */
		break;
	}
}

static uint8_t reg_read(struct serial *s, unsigned int reg)
{
	uint8_t v;

	switch (reg) {
	case RBR_THR:
		if (s->lcr & LCR_DLAB)
			return s->dll;
		return rx_pop(s);
	case IER:
		return (s->lcr & LCR_DLAB) ? s->dlm : s->ier;
	case IIR_FCR:
		v = iir_value(s);
		/* Reading IIR acknowledges a THR-empty interrupt. */
		if ((v & 0x0f) == IIR_THRI)
			s->thri_pending = false;
		return v;
	case LCR:
		return s->lcr;
	case MCR:
		return s->mcr;
	case LSR:
		v = LSR_THRE | LSR_TEMT | s->lsr_err | (s->rx_count ? LSR_DR : 0);
		s->lsr_err = 0;
		return v;
	case MSR:
		v = msr_value(s);
		s->msr_delta = 0;
		return v;
	default:
		return s->scr;
	}
}

void serial_io(void *opaque, uint64_t offset, void *data, unsigned int len,
	       bool is_write)
{
	struct serial *s = opaque;
	uint8_t *b = data;

	pthread_mutex_lock(&s->lock);
	/* Wider accesses act on the first byte, as an 8-bit chip would;
	 * the rest read as all-ones (nothing there). */
	if (is_write) {
		reg_write(s, offset & 7, b[0]);
	} else {
		b[0] = reg_read(s, offset & 7);
		memset(b + 1, 0xff, len - 1);
	}
	update_irq(s);
	pthread_mutex_unlock(&s->lock);
}

size_t serial_rx_space(struct serial *s)
{
	size_t n;

	pthread_mutex_lock(&s->lock);
	n = SERIAL_RX_SIZE - s->rx_count;
	pthread_mutex_unlock(&s->lock);
	return n;
}

size_t serial_rx(struct serial *s, const uint8_t *buf, size_t len)
{
	size_t n;

	pthread_mutex_lock(&s->lock);
	n = SERIAL_RX_SIZE - s->rx_count;
	if (n > len)
		n = len;
	for (size_t i = 0; i < n; i++)
		rx_push(s, buf[i]);
	update_irq(s);
	pthread_mutex_unlock(&s->lock);
	return n;
}

/* --- the host side: stdout, stdin, terminal mode --- */

static struct termios saved_tio;
static int tio_saved;

void serial_console_restore(void)
{
	if (__atomic_exchange_n(&tio_saved, 0, __ATOMIC_SEQ_CST))
		tcsetattr(STDIN_FILENO, TCSANOW, &saved_tio);
}

static void console_tx(void *opaque, uint8_t byte)
{
	ssize_t r;

	do
		r = write(STDOUT_FILENO, &byte, 1);
	while (r < 0 && errno == EINTR);
}

static void console_irq(void *opaque, int level)
{
	vm_irq_line(opaque, SERIAL_COM1_IRQ, level);
}

static bool console_input(void *opaque)
{
	struct serial *s = opaque;
	uint8_t buf[256];
	size_t space = serial_rx_space(s);
	ssize_t n;

	if (!space) {
		/* The guest is not reading: leave the bytes in stdin and
		 * give it a moment, rather than dropping them. */
		usleep(1000);
		return true;
	}
	n = read(STDIN_FILENO, buf, space < sizeof(buf) ? space : sizeof(buf));
	if (n < 0)
		return errno == EINTR || errno == EAGAIN;
	if (n == 0)
		return false;
	serial_rx(s, buf, n);
	return true;
}

/* A crash must not leave the user's terminal raw: restore, then die of
 * the same signal (the handler is reset by SA_RESETHAND). */
static void fatal_signal(int sig)
{
	if (tio_saved)
		tcsetattr(STDIN_FILENO, TCSANOW, &saved_tio);
	raise(sig);
}

static void restore_on_fatal_signals(void)
{
	static const int sigs[] = { SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT };
	struct sigaction sa = { .sa_handler = fatal_signal,
				.sa_flags = SA_RESETHAND | SA_NODEFER };

	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		sigaction(sigs[i], &sa, NULL);
}

static int raw_terminal(void)
{
	struct termios t;

	if (!isatty(STDIN_FILENO) || tcgetattr(STDIN_FILENO, &saved_tio))
		return 0;
	t = saved_tio;
	cfmakeraw(&t);
	/* Keep ISIG: Ctrl-C stops the VM (iovm run --help says so) and
	 * keep output post-processing so the host's lines stay intact. */
	t.c_lflag |= ISIG;
	t.c_oflag |= OPOST;
	if (tcsetattr(STDIN_FILENO, TCSANOW, &t))
		return -errno;
	tio_saved = 1;
	atexit(serial_console_restore);
	restore_on_fatal_signals();
	return 0;
}

int serial_console_create(struct vm *vm)
{
	struct serial_ops ops = { console_tx, console_irq, vm };
	struct serial *s = serial_new(&ops);
	int ret;

	if (!s)
		return -ENOMEM;
	signal(SIGPIPE, SIG_IGN);	/* a closed stdout must not kill the VM */
	ret = bus_register(vm_pio_bus(vm), SERIAL_COM1_BASE, 8, serial_io, s);
	if (!ret)
		ret = raw_terminal();
	if (!ret)
		ret = vm_set_input(vm, STDIN_FILENO, console_input, s);
	if (ret)
		pr_err("serial console: %s", strerror(-ret));
	return ret;
}
