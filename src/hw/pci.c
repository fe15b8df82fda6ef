/* PCI bus 0: config space, capabilities, BAR decode and moves, the MSI-X
 * table with masking, INTx with resample, all over a host (struct
 * pci_host_ops) that carries accesses and interrupts. The KVM host is here
 * too: mechanism #1 ports, BARs on the VM's exit buses, MSI routes and
 * irqfds; INTx resample notifications are watched by one small thread. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "hw/pci.h"
#include "lib/le.h"
#include "lib/log.h"
#include "vm/vm.h"

#define PCI_COMMAND 0x04
#define PCI_CMD_IO 0x1
#define PCI_CMD_MEM 0x2
#define PCI_CMD_MASTER 0x4
#define PCI_CMD_INTX_DISABLE 0x400
#define PCI_STATUS 0x06
#define PCI_STATUS_CAP_LIST 0x10
#define PCI_BAR0 0x10
#define PCI_CAP_PTR 0x34
#define PCI_INT_LINE 0x3c
#define PCI_INT_PIN 0x3d
#define PCI_CAP_START 0x40

#define MSIX_CTRL_ENABLE 0x8000
#define MSIX_CTRL_MASKALL 0x4000
#define MSIX_VEC_MASKED 1

#define MAX_BINDINGS 80

struct pci_bar {
	uint64_t size;
	uint64_t addr;
	bool pio;
	bool mapped;
	bus_io_fn fn;
	void *opaque;
};

struct msix_vec {
	uint32_t addr_lo, addr_hi, data, ctrl;
	int gsi;
	bool pending;
};

/* An eventfd routed to a vector or the INTx line, and where KVM has it. */
struct binding {
	int fd;
	unsigned int vec;
	int gsi;		/* irqfd currently assigned to this gsi, or -1 */
	bool resample;
};

struct pci_dev {
	struct pci_bus *bus;
	unsigned int slot;
	uint8_t cfg[256];
	uint8_t wmask[256];
	unsigned int cap_end;		/* next free capability offset */
	uint8_t last_cap;
	struct pci_bar bar[PCI_NUM_BARS];
	const struct pci_dev_ops *ops;
	void *opaque;
	/* MSI-X */
	unsigned int msix_cap;		/* 0: none */
	unsigned int msix_nvec;
	unsigned int msix_bar;
	uint32_t pba_off;
	struct msix_vec *vec;
	/* INTx */
	int resample_fd;
	struct binding bind[MAX_BINDINGS];
	unsigned int nbind;
	pthread_mutex_t lock;		/* irq state: vCPUs and resample thread */
};

struct pci_bus {
	const struct pci_host_ops *host;
	void *hopaque;
	const struct gmem *mem;
	uint32_t addr;			/* 0xCF8 */
	struct pci_dev *dev[PCI_MAX_SLOTS];
	struct pci_dev bridge;
	pthread_mutex_t lock;		/* config accesses, BAR moves */
	pthread_mutex_t intx_lock;	/* the resample thread's setup */
	int epoll_fd;			/* INTx resample fds */
	int stop_fd;
	pthread_t resample_thread;
	bool resample_running;
};

static void dev_init(struct pci_dev *pd, struct pci_bus *bus, unsigned int slot,
		     const struct pci_dev_info *info)
{
	pd->bus = bus;
	pd->slot = slot;
	le_put16(pd->cfg + 0x00, info->vendor);
	le_put16(pd->cfg + 0x02, info->device);
	pd->cfg[0x08] = info->revision;
	pd->cfg[0x09] = info->class_code;
	pd->cfg[0x0a] = info->class_code >> 8;
	pd->cfg[0x0b] = info->class_code >> 16;
	le_put16(pd->cfg + 0x2c, info->subsys_vendor);
	le_put16(pd->cfg + 0x2e, info->subsys);
	/* command: I/O, memory, bus master, INTx disable are writable */
	le_put16(pd->wmask + PCI_COMMAND,
	      PCI_CMD_IO | PCI_CMD_MEM | PCI_CMD_MASTER | PCI_CMD_INTX_DISABLE);
	pd->wmask[0x0c] = 0xff;		/* cache line size */
	pd->wmask[0x0d] = 0xff;		/* latency timer */
	pd->wmask[PCI_INT_LINE] = 0xff;
	pd->cap_end = PCI_CAP_START;
	pd->resample_fd = -1;
	pthread_mutex_init(&pd->lock, NULL);
}

static void pio_cf8(void *opaque, uint64_t off, void *data, unsigned int len,
		    bool is_write);

struct pci_bus *pci_bus_create_host(const struct pci_host_ops *ops, void *host,
				    const struct gmem *mem)
{
	struct pci_bus *bus = calloc(1, sizeof(*bus));
	const struct pci_dev_info bridge = { .vendor = 0x1b36, .device = 0x0008,
					     .class_code = 0x060000 };

	if (!bus)
		return NULL;
	bus->host = ops;
	bus->hopaque = host;
	bus->mem = mem;
	bus->epoll_fd = bus->stop_fd = -1;
	pthread_mutex_init(&bus->lock, NULL);
	pthread_mutex_init(&bus->intx_lock, NULL);
	dev_init(&bus->bridge, bus, 0, &bridge);
	bus->dev[0] = &bus->bridge;
	return bus;
}

const struct gmem *pci_bus_gmem(const struct pci_bus *bus)
{
	return bus->mem;
}

struct pci_dev *pci_bus_dev(struct pci_bus *bus, unsigned int slot)
{
	return slot && slot < PCI_MAX_SLOTS ? bus->dev[slot] : NULL;
}

int pci_bus_add_shutdown_hook(struct pci_bus *bus, void (*fn)(void *opaque),
			      void *opaque)
{
	return bus->host->add_shutdown_hook(bus->hopaque, fn, opaque);
}

int pci_ioeventfd(struct pci_dev *pd, uint64_t addr, unsigned int len, int fd,
		  bool assign)
{
	const struct pci_host_ops *h = pd->bus->host;

	return h->ioeventfd ? h->ioeventfd(pd->bus->hopaque, addr, len, fd, assign)
			    : -EOPNOTSUPP;
}

void pci_bus_destroy(struct pci_bus *bus)
{
	uint64_t one = 1;

	if (!bus)
		return;
	if (bus->resample_running) {
		if (write(bus->stop_fd, &one, sizeof(one)) < 0)
			pr_warn("PCI: stopping the INTx thread: %s", strerror(errno));
		pthread_join(bus->resample_thread, NULL);
	}
	if (bus->epoll_fd >= 0)
		close(bus->epoll_fd);
	if (bus->stop_fd >= 0)
		close(bus->stop_fd);
	for (unsigned int i = 1; i < PCI_MAX_SLOTS; i++) {
		struct pci_dev *pd = bus->dev[i];

		if (!pd)
			continue;
		if (pd->resample_fd >= 0)
			close(pd->resample_fd);
		free(pd->vec);
		free(pd);
	}
	free(bus);
}

struct pci_dev *pci_dev_add(struct pci_bus *bus, const struct pci_dev_info *info,
			    const struct pci_dev_ops *ops, void *opaque)
{
	for (unsigned int s = 1; s < PCI_MAX_SLOTS; s++) {
		struct pci_dev *pd;

		if (bus->dev[s])
			continue;
		pd = calloc(1, sizeof(*pd));
		if (!pd)
			return NULL;
		dev_init(pd, bus, s, info);
		pd->ops = ops;
		pd->opaque = opaque;
		pd->cfg[PCI_INT_PIN] = 1;	/* INTA# */
		pd->cfg[PCI_INT_LINE] = pci_intx_gsi(s);
		bus->dev[s] = pd;
		return pd;
	}
	return NULL;
}

void *pci_dev_opaque(const struct pci_dev *pd)
{
	return pd->opaque;
}

unsigned int pci_dev_slot(const struct pci_dev *pd)
{
	return pd->slot;
}

uint8_t *pci_cfg_space(struct pci_dev *pd)
{
	return pd->cfg;
}

uint8_t *pci_cfg_wmask(struct pci_dev *pd)
{
	return pd->wmask;
}

/* --- BARs -------------------------------------------------------------- */

static bool bar_should_map(struct pci_dev *pd, unsigned int i)
{
	const struct pci_bar *b = &pd->bar[i];
	uint16_t cmd = le_get16(pd->cfg + PCI_COMMAND);

	/* On an address-decoding host, address 0 is "not placed". */
	if (!b->size || (!b->addr && pd->bus->host->bar_map))
		return false;
	return cmd & (b->pio ? PCI_CMD_IO : PCI_CMD_MEM);
}

/* Brings the decode state of BAR i (and the host's registration of it) in
 * line with its address and the command register. Called with bus->lock
 * held. */
static void bar_update(struct pci_dev *pd, unsigned int i, uint64_t old_addr)
{
	const struct pci_host_ops *h = pd->bus->host;
	struct pci_bar *b = &pd->bar[i];
	bool want = bar_should_map(pd, i);
	int ret;

	if (b->mapped && (!want || old_addr != b->addr)) {
		if (pd->ops && pd->ops->bar_mapped)
			pd->ops->bar_mapped(pd, i, old_addr, false);
		if (h->bar_map)
			h->bar_map(pd->bus->hopaque, old_addr, b->size, b->pio,
				   NULL, NULL, false);
		b->mapped = false;
	}
	if (want && !b->mapped) {
		ret = h->bar_map ? h->bar_map(pd->bus->hopaque, b->addr, b->size,
					      b->pio, b->fn, b->opaque, true) : 0;
		if (ret == -ERANGE)
			return;	/* outside the host's window: does not decode */
		if (ret) {
			pr_guest("PCI %02x: BAR%u at %#llx overlaps another range",
				 pd->slot, i, (unsigned long long)b->addr);
			return;
		}
		b->mapped = true;
		if (pd->ops && pd->ops->bar_mapped)
			pd->ops->bar_mapped(pd, i, b->addr, true);
	}
}

int pci_bar_access(struct pci_dev *pd, unsigned int bar, uint64_t off,
		   void *data, unsigned int len, bool is_write)
{
	const struct pci_bar *b;

	if (bar >= PCI_NUM_BARS || !len || len > 8)
		return -EINVAL;
	b = &pd->bar[bar];
	/* A BAR that does not decode answers nothing: a master abort. */
	if (!b->size || !__atomic_load_n(&b->mapped, __ATOMIC_ACQUIRE))
		return -ENXIO;
	if (off >= b->size || len > b->size - off)
		return -ERANGE;
	b->fn(b->opaque, off, data, len, is_write);
	return 0;
}

uint64_t pci_bar_size(const struct pci_dev *pd, unsigned int bar)
{
	return bar < PCI_NUM_BARS ? pd->bar[bar].size : 0;
}

int pci_bar_add(struct pci_dev *pd, unsigned int bar, uint64_t size, bool pio,
		bus_io_fn fn, void *opaque)
{
	struct pci_bar *b;
	uint64_t addr = 0;

	if (bar >= PCI_NUM_BARS || (size & (size - 1)) || pd->bar[bar].size)
		return -EINVAL;
	if (pio ? size < 4 || size > 256 : size < 4096 || size > (1u << 30))
		return -EINVAL;
	/* A host with an address space places the BAR as firmware would
	 * (and enables its decoding); elsewhere the driver places it. */
	if (pd->bus->host->bar_alloc) {
		addr = pd->bus->host->bar_alloc(pd->bus->hopaque, size, pio);
		if (!addr)
			return -ENOSPC;
		le_put16(pd->cfg + PCI_COMMAND, le_get16(pd->cfg + PCI_COMMAND) |
			 (pio ? PCI_CMD_IO : PCI_CMD_MEM));
	}
	b = &pd->bar[bar];
	b->size = size;
	b->pio = pio;
	b->addr = addr;
	b->fn = fn;
	b->opaque = opaque;
	le_put32(pd->cfg + PCI_BAR0 + 4 * bar, (uint32_t)addr | (pio ? 1 : 0));
	pthread_mutex_lock(&pd->bus->lock);
	bar_update(pd, bar, addr);
	pthread_mutex_unlock(&pd->bus->lock);
	return 0;
}

uint64_t pci_bar_addr(const struct pci_dev *pd, unsigned int bar, bool *mapped)
{
	if (bar >= PCI_NUM_BARS)
		return 0;
	if (mapped)
		*mapped = pd->bar[bar].mapped;
	return pd->bar[bar].addr;
}

static void bar_write(struct pci_dev *pd, unsigned int i, uint32_t v)
{
	struct pci_bar *b = &pd->bar[i];
	uint64_t old = b->addr;

	if (!b->size)
		return;	/* the device has no such BAR: it reads as 0 */
	b->addr = v & ~(uint32_t)(b->size - 1) & (b->pio ? ~3u : ~15u);
	le_put32(pd->cfg + PCI_BAR0 + 4 * i, (uint32_t)b->addr | (b->pio ? 1 : 0));
	bar_update(pd, i, old);
}

/* --- capabilities ------------------------------------------------------ */

int pci_cap_add(struct pci_dev *pd, const void *cap, unsigned int len)
{
	unsigned int off = (pd->cap_end + 3) & ~3u;

	if (len < 2 || off + len > 256)
		return -ENOSPC;
	memcpy(pd->cfg + off, cap, len);
	pd->cfg[off + 1] = 0;
	if (pd->last_cap)
		pd->cfg[pd->last_cap + 1] = off;
	else
		pd->cfg[PCI_CAP_PTR] = off;
	le_put16(pd->cfg + PCI_STATUS, le_get16(pd->cfg + PCI_STATUS) | PCI_STATUS_CAP_LIST);
	pd->last_cap = off;
	pd->cap_end = off + len;
	return off;
}

/* --- interrupts -------------------------------------------------------- */

static bool msix_on(const struct pci_dev *pd)
{
	return pd->msix_cap &&
	       (le_get16(pd->cfg + pd->msix_cap + 2) & MSIX_CTRL_ENABLE);
}

bool pci_msix_enabled(const struct pci_dev *pd)
{
	return msix_on(pd);
}

static bool vec_masked(const struct pci_dev *pd, unsigned int v)
{
	return (le_get16(pd->cfg + pd->msix_cap + 2) & MSIX_CTRL_MASKALL) ||
	       (pd->vec[v].ctrl & MSIX_VEC_MASKED);
}

static void *resample_thread(void *arg);

static int intx_setup(struct pci_dev *pd)
{
	struct pci_bus *bus = pd->bus;
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = pd };

	if (pd->resample_fd >= 0)
		return 0;
	pthread_mutex_lock(&bus->intx_lock);
	if (!bus->resample_running) {
		bus->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
		bus->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		if (bus->epoll_fd < 0 || bus->stop_fd < 0)
			goto fail;
		struct epoll_event sev = { .events = EPOLLIN, .data.ptr = NULL };

		if (epoll_ctl(bus->epoll_fd, EPOLL_CTL_ADD, bus->stop_fd, &sev) ||
		    pthread_create(&bus->resample_thread, NULL, resample_thread, bus))
			goto fail;
		bus->resample_running = true;
	}
	pd->resample_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (pd->resample_fd < 0 ||
	    epoll_ctl(bus->epoll_fd, EPOLL_CTL_ADD, pd->resample_fd, &ev))
		goto fail;
	pthread_mutex_unlock(&bus->intx_lock);
	return 0;
fail:
	pthread_mutex_unlock(&bus->intx_lock);
	pr_err("PCI: INTx setup: %s", strerror(errno));
	return -errno;
}

/* Where binding b should be now: a gsi, or -1 (nowhere: its eventfd keeps
 * counting, which is the pending state). Called with pd->lock held. */
static int wanted_gsi(struct pci_dev *pd, const struct binding *b, bool *resample)
{
	*resample = false;
	if (msix_on(pd)) {
		if (b->vec >= pd->msix_nvec || vec_masked(pd, b->vec))
			return -1;
		return pd->vec[b->vec].gsi;
	}
	if (le_get16(pd->cfg + PCI_COMMAND) & PCI_CMD_INTX_DISABLE)
		return -1;
	*resample = true;
	return pd->bus->host->intx_route(pd->bus->hopaque, pd->slot);
}

static void binding_apply(struct pci_dev *pd, struct binding *b)
{
	const struct pci_host_ops *h = pd->bus->host;
	bool resample;
	int gsi = wanted_gsi(pd, b, &resample);
	int ret;

	if (gsi == b->gsi && resample == b->resample)
		return;
	if (b->gsi >= 0)
		h->irqfd(pd->bus->hopaque, b->gsi, b->fd, -1, false);
	b->gsi = -1;
	if (gsi < 0)
		return;
	if (resample && intx_setup(pd))
		return;
	/* Assigning an eventfd that already counts injects at once: that
	 * is how a latched (pending) interrupt is delivered on unmask. */
	ret = h->irqfd(pd->bus->hopaque, gsi, b->fd, resample ? pd->resample_fd : -1,
		       true);
	if (ret) {
		pr_err("PCI %02x: irqfd on gsi %d: %s", pd->slot, gsi, strerror(-ret));
		return;
	}
	b->gsi = gsi;
	b->resample = resample;
}

static void apply_all(struct pci_dev *pd)
{
	for (unsigned int i = 0; i < pd->nbind; i++)
		binding_apply(pd, &pd->bind[i]);
}

int pci_irq_bind(struct pci_dev *pd, int fd, unsigned int vec)
{
	struct binding *b = NULL;

	pthread_mutex_lock(&pd->lock);
	for (unsigned int i = 0; i < pd->nbind; i++)
		if (pd->bind[i].fd == fd)
			b = &pd->bind[i];
	if (!b) {
		if (pd->nbind == MAX_BINDINGS) {
			pthread_mutex_unlock(&pd->lock);
			return -ENOSPC;
		}
		b = &pd->bind[pd->nbind++];
		b->fd = fd;
		b->gsi = -1;
		b->resample = false;
	}
	b->vec = vec;
	binding_apply(pd, b);
	pthread_mutex_unlock(&pd->lock);
	return 0;
}

void pci_irq_unbind(struct pci_dev *pd, int fd)
{
	pthread_mutex_lock(&pd->lock);
	for (unsigned int i = 0; i < pd->nbind; i++) {
		struct binding *b = &pd->bind[i];

		if (b->fd != fd)
			continue;
		if (b->gsi >= 0)
			pd->bus->host->irqfd(pd->bus->hopaque, b->gsi, b->fd, -1, false);
		*b = pd->bind[--pd->nbind];
		break;
	}
	pthread_mutex_unlock(&pd->lock);
}

/* Reads (and consumes) the counts of the eventfds parked on a masked
 * vector into its pending bit. Called with pd->lock held. */
static void collect_pending(struct pci_dev *pd, unsigned int v)
{
	for (unsigned int i = 0; i < pd->nbind; i++) {
		struct binding *b = &pd->bind[i];
		uint64_t cnt;

		if (b->vec != v || b->gsi >= 0)
			continue;
		if (read(b->fd, &cnt, sizeof(cnt)) == sizeof(cnt) && cnt)
			pd->vec[v].pending = true;
	}
}

/* Delivers a latched interrupt after an unmask, through one of the
 * vector's now-assigned eventfds. */
static void deliver_pending(struct pci_dev *pd, unsigned int v)
{
	uint64_t one = 1;

	if (!pd->vec[v].pending || vec_masked(pd, v) || !msix_on(pd))
		return;
	for (unsigned int i = 0; i < pd->nbind; i++) {
		if (pd->bind[i].vec == v && pd->bind[i].gsi >= 0) {
			if (write(pd->bind[i].fd, &one, sizeof(one)) == sizeof(one))
				pd->vec[v].pending = false;
			return;
		}
	}
}

static void *resample_thread(void *arg)
{
	struct pci_bus *bus = arg;
	struct epoll_event ev[8];

	for (;;) {
		int n = epoll_wait(bus->epoll_fd, ev, 8, -1);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return NULL;
		for (int i = 0; i < n; i++) {
			struct pci_dev *pd = ev[i].data.ptr;
			uint64_t cnt, one = 1;

			if (!pd)
				return NULL;	/* stop_fd */
			if (read(pd->resample_fd, &cnt, sizeof(cnt)) != sizeof(cnt))
				continue;
			/* The guest EOI'd and KVM lowered the line; raise it
			 * again if the device still has something to say. The
			 * device is asked only while it has a binding on the
			 * line, under pd->lock: a device that unbinds its
			 * eventfds before freeing itself (virtio-pci at VM
			 * shutdown) is never called after that. */
			pthread_mutex_lock(&pd->lock);
			for (unsigned int k = 0; k < pd->nbind; k++) {
				if (pd->bind[k].gsi < 0 || !pd->bind[k].resample)
					continue;
				if (pd->ops && pd->ops->intx_pending &&
				    pd->ops->intx_pending(pd) &&
				    write(pd->bind[k].fd, &one, 8) != 8)
					pr_warn("PCI: INTx re-assert failed");
				break;
			}
			pthread_mutex_unlock(&pd->lock);
		}
	}
}

/* --- MSI-X table and PBA ----------------------------------------------- */

static void vec_route(struct pci_dev *pd, unsigned int v)
{
	struct msix_vec *m = &pd->vec[v];

	if (m->gsi < 0)
		return;
	pd->bus->host->msi_set(pd->bus->hopaque, m->gsi,
			       ((uint64_t)m->addr_hi << 32) | m->addr_lo, m->data);
}

static void msix_bar_io(void *opaque, uint64_t off, void *data,
			unsigned int len, bool is_write)
{
	struct pci_dev *pd = opaque;
	uint64_t table_len = 16ull * pd->msix_nvec;

	if (len != 4 && len != 8) {
		if (!is_write)
			memset(data, 0xff, len);
		return;
	}
	pthread_mutex_lock(&pd->lock);
	if (off >= pd->pba_off) {
		uint64_t w = (off - pd->pba_off) / 8 * 64, bits = 0;

		if (!is_write) {
			for (unsigned int v = w; v < w + 64 && v < pd->msix_nvec; v++) {
				if (vec_masked(pd, v) || !msix_on(pd))
					collect_pending(pd, v);
				if (pd->vec[v].pending)
					bits |= 1ull << (v - w);
			}
			if (off & 4)
				bits >>= 32;
			memcpy(data, &bits, len);
		}
		pthread_mutex_unlock(&pd->lock);
		return;
	}
	for (unsigned int done = 0; done < len; done += 4) {
		uint64_t o = off + done;
		unsigned int v = o / 16, field = (o % 16) / 4;
		uint32_t *f, val;
		bool was_masked;

		if (o >= table_len) {
			if (!is_write)
				memset((uint8_t *)data + done, 0, 4);
			continue;
		}
		f = &pd->vec[v].addr_lo + field;
		if (!is_write) {
			memcpy((uint8_t *)data + done, f, 4);
			continue;
		}
		memcpy(&val, (uint8_t *)data + done, 4);
		was_masked = vec_masked(pd, v);
		if (field == 3)
			val &= MSIX_VEC_MASKED;
		*f = val;
		if (field < 3) {
			vec_route(pd, v);
			continue;
		}
		if (was_masked && !vec_masked(pd, v)) {
			collect_pending(pd, v);
			apply_all(pd);
			deliver_pending(pd, v);
		} else if (!was_masked && vec_masked(pd, v)) {
			apply_all(pd);
		}
	}
	pthread_mutex_unlock(&pd->lock);
}

int pci_msix_init(struct pci_dev *pd, unsigned int nvec, unsigned int bar)
{
	uint8_t cap[12] = { PCI_CAP_ID_MSIX };
	uint64_t size;
	int off, ret;

	if (!nvec || nvec > PCI_MSIX_MAX_VECTORS || pd->msix_cap)
		return -EINVAL;
	pd->vec = calloc(nvec, sizeof(*pd->vec));
	if (!pd->vec)
		return -ENOMEM;
	pd->msix_nvec = nvec;
	pd->msix_bar = bar;
	pd->pba_off = (16 * nvec + 7) & ~7u;
	for (size = 4096; size < pd->pba_off + 8 * ((nvec + 63) / 64); size <<= 1)
		;
	for (unsigned int v = 0; v < nvec; v++) {
		pd->vec[v].ctrl = MSIX_VEC_MASKED;
		pd->vec[v].gsi = pd->bus->host->msi_alloc(pd->bus->hopaque);
		if (pd->vec[v].gsi < 0)
			return -ENOSPC;
	}
	le_put16(cap + 2, nvec - 1);
	le_put32(cap + 4, bar);			/* table at offset 0 */
	le_put32(cap + 8, pd->pba_off | bar);
	off = pci_cap_add(pd, cap, sizeof(cap));
	if (off < 0)
		return off;
	pd->msix_cap = off;
	le_put16(pd->wmask + off + 2, MSIX_CTRL_ENABLE | MSIX_CTRL_MASKALL);
	ret = pci_bar_add(pd, bar, size, false, msix_bar_io, pd);
	return ret;
}

/* --- configuration space ----------------------------------------------- */

static void cfg_write(struct pci_dev *pd, unsigned int off, const uint8_t *data,
		      unsigned int len)
{
	uint16_t old_cmd = le_get16(pd->cfg + PCI_COMMAND);
	uint16_t old_msix = pd->msix_cap ? le_get16(pd->cfg + pd->msix_cap + 2) : 0;

	if (off >= PCI_BAR0 && off < PCI_BAR0 + 24) {
		/* BARs: dword accesses only, as every OS does. */
		unsigned int i = (off - PCI_BAR0) / 4;
		uint32_t v;

		if (len != 4 || (off & 3))
			return;
		memcpy(&v, data, 4);
		bar_write(pd, i, v);
		return;
	}
	for (unsigned int i = 0; i < len; i++) {
		uint8_t m = pd->wmask[off + i];

		pd->cfg[off + i] = (pd->cfg[off + i] & ~m) | (data[i] & m);
	}
	if (le_get16(pd->cfg + PCI_COMMAND) != old_cmd) {
		for (unsigned int i = 0; i < PCI_NUM_BARS; i++)
			bar_update(pd, i, pd->bar[i].addr);
		pthread_mutex_lock(&pd->lock);
		apply_all(pd);
		pthread_mutex_unlock(&pd->lock);
	}
	if (pd->msix_cap && le_get16(pd->cfg + pd->msix_cap + 2) != old_msix) {
		pthread_mutex_lock(&pd->lock);
		for (unsigned int v = 0; v < pd->msix_nvec; v++)
			collect_pending(pd, v);
		apply_all(pd);
		for (unsigned int v = 0; v < pd->msix_nvec; v++)
			deliver_pending(pd, v);
		pthread_mutex_unlock(&pd->lock);
	}
}

void pci_cfg_access(struct pci_bus *bus, unsigned int slot, unsigned int off,
		    void *data, unsigned int len, bool is_write)
{
	struct pci_dev *pd = slot < PCI_MAX_SLOTS ? bus->dev[slot] : NULL;

	if (!pd || off + len > 256 || !len || len > 4) {
		if (!is_write)
			memset(data, 0xff, len);
		return;
	}
	pthread_mutex_lock(&bus->lock);
	if (is_write)
		cfg_write(pd, off, data, len);
	else
		memcpy(data, pd->cfg + off, len);
	if (off + len > PCI_CAP_START && pd->ops && pd->ops->cfg_access)
		pd->ops->cfg_access(pd, off, data, len, is_write);
	pthread_mutex_unlock(&bus->lock);
}

static void pio_cf8(void *opaque, uint64_t off, void *data, unsigned int len,
		    bool is_write)
{
	struct pci_bus *bus = opaque;
	uint32_t a;

	if (off < 4) {
		/* The address register is a dword; byte accesses to 0xCF8
		 * are other (legacy) mechanisms: ignore them. */
		if (off != 0 || len != 4) {
			if (!is_write)
				memset(data, 0xff, len);
			return;
		}
		if (is_write)
			memcpy(&bus->addr, data, 4);
		else
			memcpy(data, &bus->addr, 4);
		return;
	}
	a = __atomic_load_n(&bus->addr, __ATOMIC_RELAXED);
	/* enable bit, bus 0, function 0 only */
	if (!(a & 0x80000000u) || (a & 0x00ff0700u) || (off - 4) + len > 4) {
		if (!is_write)
			memset(data, 0xff, len);
		return;
	}
	pci_cfg_access(bus, (a >> 11) & 31, (a & 0xfc) + (off - 4), data, len,
		       is_write);
}

/* --- the KVM host: iovm run's VM ---------------------------------------- */

static int kvm_msi_alloc(void *host)
{
	return vm_msi_route_alloc(host);
}

static int kvm_msi_set(void *host, unsigned int route, uint64_t addr, uint32_t data)
{
	return vm_msi_route_set(host, route, addr, data);
}

static int kvm_intx_route(void *host, unsigned int slot)
{
	return pci_intx_gsi(slot);
}

static int kvm_irqfd(void *host, unsigned int route, int fd, int resample_fd,
		     bool assign)
{
	return vm_irqfd(host, route, fd, resample_fd, assign);
}

static int kvm_ioeventfd(void *host, uint64_t addr, unsigned int len, int fd,
			 bool assign)
{
	return vm_ioeventfd(host, addr, len, false, -1, fd, assign);
}

static int kvm_add_shutdown_hook(void *host, void (*fn)(void *opaque), void *opaque)
{
	return vm_add_shutdown_hook(host, fn, opaque);
}

static uint64_t kvm_bar_alloc(void *host, uint64_t size, bool pio)
{
	return pio ? vm_pci_pio_alloc(host, size) : vm_pci_mmio_alloc(host, size);
}

static int kvm_bar_map(void *host, uint64_t addr, uint64_t size, bool pio,
		       bus_io_fn fn, void *opaque, bool map)
{
	struct bus *b = pio ? vm_pio_bus(host) : vm_mmio_bus(host);

	if (!map)
		return bus_unregister(b, addr);
	/* Only the PCI hole: never let a BAR shadow RAM or the APICs. */
	if (pio ? addr + size > 0x10000 :
		  addr < VM_PCI_HOLE_START || addr + size > VM_PCI_HOLE_END)
		return -ERANGE;
	return bus_register(b, addr, size, fn, opaque);
}

static const struct pci_host_ops kvm_host_ops = {
	.msi_alloc = kvm_msi_alloc,
	.msi_set = kvm_msi_set,
	.intx_route = kvm_intx_route,
	.irqfd = kvm_irqfd,
	.ioeventfd = kvm_ioeventfd,
	.add_shutdown_hook = kvm_add_shutdown_hook,
	.bar_alloc = kvm_bar_alloc,
	.bar_map = kvm_bar_map,
};

struct pci_bus *pci_bus_create(struct vm *vm)
{
	struct pci_bus *bus = pci_bus_create_host(&kvm_host_ops, vm, vm_gmem(vm));
	int ret;

	if (!bus)
		return NULL;
	ret = bus_register(vm_pio_bus(vm), 0xcf8, 8, pio_cf8, bus);
	if (ret) {
		pr_err("PCI: cannot claim ports 0xcf8-0xcff: %s", strerror(-ret));
		free(bus);
		return NULL;
	}
	return bus;
}
