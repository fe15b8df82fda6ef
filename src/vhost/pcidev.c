/* virtio-pcidev: iovm's PCI functions for User-Mode Linux. A transport under
 * the same function code as `iovm run` (hw/pci.c and the device models on
 * it): config-space and BAR accesses arrive as cmd-queue messages instead of
 * KVM exits, interrupts leave as irq-queue messages instead of irqfds, and
 * DMA goes to the vhost-user memory table.
 *
 * Threads: one session thread serves both queues, in order (PCI ordering:
 * writes are posted, a read sees every earlier write), and watches the
 * eventfds the function signals its interrupts on: pci.c binds each to a
 * route through pcidev_host below, as it binds irqfds under KVM. Masking,
 * the pending bits and INTx re-assertion stay in pci.c; this file only
 * turns a signalled route into a message: MSI with the data of the vector's
 * table entry (UML's MSI data is the Linux IRQ number), or INT. The
 * vhost-user server thread starts and stops the session thread through
 * queue_start/queue_stop. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "hw/pci.h"
#include "lib/iov.h"
#include "lib/le.h"
#include "lib/log.h"
#include "vhost/pcidev.h"
#include "virtio/ring.h"
#include "virtio/virtio.h"

#define ROUTE_INTX VPCIDEV_MAX_MSI	/* the function's INTA# */
#define MAX_BINDINGS 96			/* pci.c's own limit is 80 */
#define MAX_HOOKS 8
#define MAX_IOV 64
#define QUEUE_MAX 1024			/* UML asks for 256 */

#define TAG_STOP 1
#define TAG_CMD 2
#define TAG_IRQ 3
#define TAG_BIND 0x100

struct binding {
	int fd;			/* -1: free */
	unsigned int route;
	int resample_fd;
};

struct msi_route {
	uint64_t addr;
	uint32_t data;
	bool pending;		/* signalled, waiting for an irq buffer */
};

struct vpcidev {
	struct virtio_dev dev;
	vpcidev_make_fn make;
	void *make_opaque;
	pthread_mutex_t lock;	/* routes and bindings: pci.c calls in */
	int epfd, stop_fd;
	pthread_t thread;
	bool thread_running;
	struct virtq *vq[2];	/* running queues, else NULL */
	bool broken[2];		/* the driver broke this ring: ignored */
	/* The session */
	struct pci_bus *bus;
	struct pci_dev *pd;
	void (*hook[MAX_HOOKS])(void *opaque);
	void *hook_opaque[MAX_HOOKS];
	unsigned int nhooks;
	/* Interrupt routes */
	struct msi_route msi[VPCIDEV_MAX_MSI];
	unsigned int nmsi;
	struct binding bind[MAX_BINDINGS];
	bool intx_pending;	/* to send */
	bool intx_asserted;	/* sent, the driver not yet done with it */
	int intx_resample_fd;
	uint16_t intx_avail;	/* irq ring's avail index when INT left */
	struct vpcidev_stats st;
};

static struct vpcidev *to_vp(struct virtio_dev *dev)
{
	return (struct vpcidev *)dev;
}

/* --- the bus host: routes and bindings --------------------------------- */

static int host_msi_alloc(void *host)
{
	struct vpcidev *vp = host;

	if (vp->nmsi == VPCIDEV_MAX_MSI)
		return -ENOSPC;
	return vp->nmsi++;
}

static int host_msi_set(void *host, unsigned int route, uint64_t addr, uint32_t data)
{
	struct vpcidev *vp = host;

	if (route >= vp->nmsi)
		return -EINVAL;
	pthread_mutex_lock(&vp->lock);
	vp->msi[route].addr = addr;
	vp->msi[route].data = data;
	pthread_mutex_unlock(&vp->lock);
	return 0;
}

static int host_intx_route(void *host, unsigned int slot)
{
	return ROUTE_INTX;
}

static int host_irqfd(void *host, unsigned int route, int fd, int resample_fd,
		      bool assign)
{
	struct vpcidev *vp = host;
	struct epoll_event ev = { .events = EPOLLIN };
	int ret = 0, i, free_i = -1;

	pthread_mutex_lock(&vp->lock);
	for (i = 0; i < MAX_BINDINGS; i++) {
		if (vp->bind[i].fd == fd)
			break;
		if (vp->bind[i].fd < 0 && free_i < 0)
			free_i = i;
	}
	if (!assign) {
		if (i < MAX_BINDINGS) {
			epoll_ctl(vp->epfd, EPOLL_CTL_DEL, fd, NULL);
			vp->bind[i].fd = -1;
			/* The line's resample fd, while any fd is on it. */
			vp->intx_resample_fd = -1;
			for (i = 0; i < MAX_BINDINGS; i++)
				if (vp->bind[i].fd >= 0 && vp->bind[i].route == ROUTE_INTX)
					vp->intx_resample_fd = vp->bind[i].resample_fd;
		}
		goto out;
	}
	if (i < MAX_BINDINGS) {
		ret = -EBUSY;	/* as KVM: one route per eventfd */
		goto out;
	}
	if (free_i < 0) {
		ret = -ENOSPC;
		goto out;
	}
	ev.data.u64 = TAG_BIND + free_i;
	/* Level-triggered: a count already there is delivered at once. */
	if (epoll_ctl(vp->epfd, EPOLL_CTL_ADD, fd, &ev)) {
		ret = -errno;
		goto out;
	}
	vp->bind[free_i] = (struct binding){ fd, route, resample_fd };
	if (route == ROUTE_INTX)
		vp->intx_resample_fd = resample_fd;
out:
	pthread_mutex_unlock(&vp->lock);
	return ret;
}

static int host_add_shutdown_hook(void *host, void (*fn)(void *opaque), void *opaque)
{
	struct vpcidev *vp = host;

	if (vp->nhooks == MAX_HOOKS)
		return -ENOSPC;
	vp->hook[vp->nhooks] = fn;
	vp->hook_opaque[vp->nhooks++] = opaque;
	return 0;
}

/* No address space: UML names the BAR and the offset in each message. */
static const struct pci_host_ops pcidev_host = {
	.msi_alloc = host_msi_alloc,
	.msi_set = host_msi_set,
	.intx_route = host_intx_route,
	.irqfd = host_irqfd,
	.add_shutdown_hook = host_add_shutdown_hook,
};

/* --- the irq queue: messages to the driver ----------------------------- */

static uint16_t irq_avail_idx(struct virtq *vq)
{
	return vq->last_avail + virtq_avail_count(vq);
}

/* Puts one message in the next irq buffer; false when the driver has none
 * free (the interrupt stays pending until it returns one). */
static bool irq_send(struct vpcidev *vp, uint8_t op, uint64_t addr, uint32_t data)
{
	struct virtq *vq = vp->vq[VPCIDEV_IRQ_Q];
	struct iovec iov[MAX_IOV];
	struct virtq_elem e;
	uint8_t buf[sizeof(struct vpcidev_msg) + 4] = { 0 };
	struct vpcidev_msg m = { .op = op, .addr = addr };
	uint32_t len = sizeof(m);
	int ret;

	if (!vq || vp->broken[VPCIDEV_IRQ_Q])
		return false;
	ret = virtq_pop(vq, &e, iov, MAX_IOV);
	if (ret < 0) {
		pr_guest("virtio-pcidev: irq queue: malformed ring; device needs reset");
		vp->broken[VPCIDEV_IRQ_Q] = true;
		vp->dev.transport.needs_reset(&vp->dev);
		return false;
	}
	if (!ret)
		return false;
	if (op == VPCIDEV_OP_MSI) {
		m.size = 4;
		le_put32(buf + sizeof(m), data);
		len += 4;
	}
	memcpy(buf, &m, sizeof(m));
	/* A buffer too small for the message is returned empty: the driver
	 * drops a message shorter than its header. */
	if (e.out_num || e.in_len < len)
		len = 0;
	else
		iov_from_buf(iov, e.in_num, 0, buf, len);
	virtq_push(vq, e.head, len);
	return true;
}

/* Sends what is pending, as far as irq buffers go. Called with vp->lock. */
static void irq_flush(struct vpcidev *vp)
{
	struct virtq *vq = vp->vq[VPCIDEV_IRQ_Q];
	bool sent = false;

	if (!vq)
		return;
	for (unsigned int r = 0; r < vp->nmsi; r++) {
		struct msi_route *m = &vp->msi[r];

		if (!m->pending)
			continue;
		if (!irq_send(vp, VPCIDEV_OP_MSI, m->addr, m->data))
			goto out;
		m->pending = false;
		vp->st.msi++;
		sent = true;
	}
	if (vp->intx_pending && !vp->intx_asserted) {
		if (!irq_send(vp, VPCIDEV_OP_INT, 1, 0))
			goto out;
		vp->intx_pending = false;
		vp->intx_asserted = true;
		vp->intx_avail = irq_avail_idx(vq);
		vp->st.intx++;
		sent = true;
	}
out:
	if (sent)
		virtq_notify(vq);
}

/* Binding i's eventfd was signalled: its route fires. */
static void route_fire(struct vpcidev *vp, unsigned int i)
{
	struct binding *b;
	uint64_t cnt;

	pthread_mutex_lock(&vp->lock);
	b = &vp->bind[i];
	if (b->fd < 0 || read(b->fd, &cnt, sizeof(cnt)) != sizeof(cnt) || !cnt)
		goto out;
	if (b->route == ROUTE_INTX) {
		/* While the line is up a new signal changes nothing (as on
		 * a level line); once the driver is done with the INT the
		 * resample asks the device whether it is still up. */
		if (!vp->intx_asserted)
			vp->intx_pending = true;
	} else if (b->route < vp->nmsi) {
		/* A vector never programmed goes nowhere, as under KVM. */
		if (vp->msi[b->route].addr)
			vp->msi[b->route].pending = true;
	}
	irq_flush(vp);
out:
	pthread_mutex_unlock(&vp->lock);
}

/* The driver returned irq buffers. UML handles each message (running the
 * interrupt handler) before it gives the buffer back, so a buffer coming
 * back after INT left is the end of its handler: the EOI of a level line.
 * In INTx mode INT is the only message, so the first buffer back after it
 * is its own. */
static void irq_returned(struct vpcidev *vp)
{
	uint64_t one = 1;

	pthread_mutex_lock(&vp->lock);
	if (vp->intx_asserted &&
	    irq_avail_idx(vp->vq[VPCIDEV_IRQ_Q]) != vp->intx_avail) {
		vp->intx_asserted = false;
		if (vp->intx_resample_fd >= 0 &&
		    write(vp->intx_resample_fd, &one, sizeof(one)) < 0)
			pr_warn("virtio-pcidev: INTx resample: %s", strerror(errno));
	}
	irq_flush(vp);
	pthread_mutex_unlock(&vp->lock);
}

/* --- the cmd queue: accesses from the driver --------------------------- */

/* The largest naturally aligned access (8, 4, 2 or 1 bytes) at addr that
 * fits in left bytes: how a copy to or from a BAR is split for the device's
 * register handlers. */
static unsigned int chunk_len(uint64_t addr, uint64_t left)
{
	unsigned int n = 8;

	while (n > 1 && ((addr & (n - 1)) || n > left))
		n >>= 1;
	return n;
}

static bool cfg_size_ok(uint32_t size)
{
	return size == 1 || size == 2 || size == 4 || size == 8;
}

/* A reply that only says "nothing answered": all-ones, as a master abort
 * reads on real PCI, in as much of the reply buffer as the request asked
 * for. */
static uint32_t reply_ones(const struct iovec *in, unsigned int in_num,
			   uint64_t in_len, uint64_t want)
{
	static const uint8_t ones[64] = {
		[0 ... 63] = 0xff,
	};
	uint64_t n = want < in_len ? want : in_len, done = 0;

	if (n > VPCIDEV_MAX_XFER)
		n = VPCIDEV_MAX_XFER;
	while (done < n) {
		size_t k = n - done < sizeof(ones) ? n - done : sizeof(ones);

		iov_from_buf(in, in_num, done, ones, k);
		done += k;
	}
	return n;
}

static void cfg_io(struct vpcidev *vp, uint64_t addr, uint8_t *data, unsigned int len,
		   bool is_write)
{
	unsigned int slot = pci_dev_slot(vp->pd);

	/* pci.c serves dwords at most; an 8-byte access is two of them. */
	for (unsigned int done = 0; done < len; done += 4)
		pci_cfg_access(vp->bus, slot, addr + done, data + done,
			       len - done < 4 ? len - done : 4, is_write);
}

static uint32_t refuse(struct vpcidev *vp, const char *why, const struct vpcidev_msg *m,
		       const struct iovec *in, unsigned int in_num, uint64_t in_len)
{
	__atomic_fetch_add(&vp->st.refused, 1, __ATOMIC_RELAXED);
	pr_guest("virtio-pcidev: refused op %u bar %u size %u addr %#llx: %s", m->op,
		 m->bar, m->size, (unsigned long long)m->addr, why);
	return reply_ones(in, in_num, in_len, m->size ? m->size : in_len);
}

static uint32_t serve_msg(struct vpcidev *vp, const struct iovec *iov, unsigned int out_num,
			  unsigned int in_num)
{
	const struct iovec *in = iov + out_num;
	uint64_t out_len = iov_size(iov, out_num), in_len = iov_size(in, in_num);
	struct vpcidev_msg m = { 0 };
	uint8_t buf[8];
	bool is_write, memset_op;
	uint64_t bar_size;

	__atomic_fetch_add(&vp->st.cmds, 1, __ATOMIC_RELAXED);
	if (out_len < sizeof(m)) {
		m.size = 0;
		return refuse(vp, "message shorter than its header", &m, in, in_num, in_len);
	}
	iov_to_buf(iov, out_num, 0, &m, sizeof(m));
	if (!vp->pd)
		return refuse(vp, "no function", &m, in, in_num, in_len);
	switch (m.op) {
	case VPCIDEV_OP_CFG_READ:
	case VPCIDEV_OP_CFG_WRITE:
		is_write = m.op == VPCIDEV_OP_CFG_WRITE;
		if (!cfg_size_ok(m.size) || m.addr >= VPCIDEV_CFG_SPACE ||
		    m.size > VPCIDEV_CFG_SPACE - m.addr)
			return refuse(vp, "config access outside config space or of a bad size",
				      &m, in, in_num, in_len);
		if (is_write) {
			if (out_len - sizeof(m) < m.size)
				return refuse(vp, "write data shorter than its size", &m, in,
					      in_num, in_len);
			iov_to_buf(iov, out_num, sizeof(m), buf, m.size);
			cfg_io(vp, m.addr, buf, m.size, true);
			return 0;
		}
		if (in_len < m.size)
			return refuse(vp, "reply buffer smaller than the read", &m, in, in_num,
				      in_len);
		cfg_io(vp, m.addr, buf, m.size, false);
		iov_from_buf(in, in_num, 0, buf, m.size);
		return m.size;
	case VPCIDEV_OP_MMIO_READ:
	case VPCIDEV_OP_MMIO_WRITE:
	case VPCIDEV_OP_MMIO_MEMSET:
		break;
	default:
		return refuse(vp, "unknown operation", &m, in, in_num, in_len);
	}
	is_write = m.op != VPCIDEV_OP_MMIO_READ;
	memset_op = m.op == VPCIDEV_OP_MMIO_MEMSET;
	bar_size = pci_bar_size(vp->pd, m.bar);
	if (m.bar >= PCI_NUM_BARS || !bar_size)
		return refuse(vp, "no such BAR", &m, in, in_num, in_len);
	if (!m.size || m.size > VPCIDEV_MAX_XFER || m.addr >= bar_size ||
	    m.size > bar_size - m.addr)
		return refuse(vp, "access outside the BAR or too large", &m, in, in_num, in_len);
	if (is_write && out_len - sizeof(m) < (memset_op ? 1 : m.size))
		return refuse(vp, "write data shorter than its size", &m, in, in_num, in_len);
	if (!is_write && in_len < m.size)
		return refuse(vp, "reply buffer smaller than the read", &m, in, in_num, in_len);
	if (memset_op)
		iov_to_buf(iov, out_num, sizeof(m), buf, 1);
	for (uint64_t off = 0; off < m.size;) {
		unsigned int n = chunk_len(m.addr + off, m.size - off);

		if (memset_op)
			memset(buf, buf[0], n);
		else if (is_write)
			iov_to_buf(iov, out_num, sizeof(m) + off, buf, n);
		else
			memset(buf, 0xff, n);
		/* A BAR that does not decode (memory decoding off) drops
		 * writes and reads all-ones, as a master abort does. */
		pci_bar_access(vp->pd, m.bar, m.addr + off, buf, n, is_write);
		if (!is_write)
			iov_from_buf(in, in_num, off, buf, n);
		off += n;
	}
	return is_write ? 0 : m.size;
}

uint32_t vpcidev_serve_msg(struct virtio_dev *dev, const struct iovec *iov,
			   unsigned int out_num, unsigned int in_num)
{
	return serve_msg(to_vp(dev), iov, out_num, in_num);
}

static void cmd_serve(struct vpcidev *vp)
{
	struct virtq *vq = vp->vq[VPCIDEV_CMD_Q];
	struct iovec iov[MAX_IOV];
	struct virtq_elem e;
	bool served = false;
	int ret;

	if (!vq || vp->broken[VPCIDEV_CMD_Q])
		return;
	for (;;) {
		ret = virtq_pop(vq, &e, iov, MAX_IOV);
		if (ret < 0) {
			pr_guest("virtio-pcidev: cmd queue: malformed ring or chain; device needs reset");
			vp->broken[VPCIDEV_CMD_Q] = true;
			vp->dev.transport.needs_reset(&vp->dev);
			break;
		}
		if (!ret) {
			/* Re-armed kicks: look once more before sleeping. */
			if (!virtq_enable_kicks(vq))
				break;
			continue;
		}
		virtq_disable_kicks(vq);
		virtq_push(vq, e.head, serve_msg(vp, iov, e.out_num, e.in_num));
		served = true;
	}
	/* UML polls its reads' completions; the interrupt frees the posted
	 * writes' buffers. */
	if (served)
		virtq_notify(vq);
}

/* --- the session thread ------------------------------------------------ */

static void drain_fd(int fd)
{
	uint64_t cnt;

	if (read(fd, &cnt, sizeof(cnt)) < 0 && errno != EAGAIN)
		pr_debug("virtio-pcidev: kick: %s", strerror(errno));
}

static void *session_thread(void *arg)
{
	struct vpcidev *vp = arg;
	struct epoll_event ev[16];

	for (;;) {
		int n = epoll_wait(vp->epfd, ev, 16, -1);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			pr_err("virtio-pcidev: epoll_wait: %s", strerror(errno));
			return NULL;
		}
		for (int i = 0; i < n; i++) {
			uint64_t tag = ev[i].data.u64;

			if (tag == TAG_STOP)
				return NULL;
			if (tag == TAG_CMD) {
				drain_fd(vp->vq[VPCIDEV_CMD_Q]->kick_fd);
				cmd_serve(vp);
			} else if (tag == TAG_IRQ) {
				drain_fd(vp->vq[VPCIDEV_IRQ_Q]->kick_fd);
				irq_returned(vp);
			} else if (tag >= TAG_BIND && tag < TAG_BIND + MAX_BINDINGS) {
				route_fire(vp, tag - TAG_BIND);
			}
		}
	}
}

static void watch_kick(struct vpcidev *vp, unsigned int q, bool on)
{
	struct epoll_event ev = { .events = EPOLLIN,
				  .data.u64 = q == VPCIDEV_CMD_Q ? TAG_CMD : TAG_IRQ };

	if (!vp->vq[q])
		return;
	if (on) {
		if (epoll_ctl(vp->epfd, EPOLL_CTL_ADD, vp->vq[q]->kick_fd, &ev))
			pr_err("virtio-pcidev: watching queue %u: %s", q, strerror(errno));
	} else {
		epoll_ctl(vp->epfd, EPOLL_CTL_DEL, vp->vq[q]->kick_fd, NULL);
	}
}

static void thread_stop(struct vpcidev *vp)
{
	uint64_t one = 1, cnt;

	if (!vp->thread_running)
		return;
	if (write(vp->stop_fd, &one, sizeof(one)) < 0)
		pr_err("virtio-pcidev: stopping the session thread: %s", strerror(errno));
	pthread_join(vp->thread, NULL);
	if (read(vp->stop_fd, &cnt, sizeof(cnt)) < 0)
		pr_debug("virtio-pcidev: stop fd: %s", strerror(errno));
	vp->thread_running = false;
	watch_kick(vp, VPCIDEV_CMD_Q, false);
	watch_kick(vp, VPCIDEV_IRQ_Q, false);
}

static int thread_start(struct vpcidev *vp)
{
	uint64_t one = 1;

	if (vp->thread_running || (!vp->vq[0] && !vp->vq[1]))
		return 0;
	watch_kick(vp, VPCIDEV_CMD_Q, true);
	watch_kick(vp, VPCIDEV_IRQ_Q, true);
	if (pthread_create(&vp->thread, NULL, session_thread, vp)) {
		watch_kick(vp, VPCIDEV_CMD_Q, false);
		watch_kick(vp, VPCIDEV_IRQ_Q, false);
		return -EAGAIN;
	}
	vp->thread_running = true;
	/* Whatever the driver queued before we watched. */
	for (unsigned int q = 0; q < 2; q++)
		if (vp->vq[q] && write(vp->vq[q]->kick_fd, &one, sizeof(one)) < 0)
			pr_debug("virtio-pcidev: self-kick: %s", strerror(errno));
	return 0;
}

/* --- sessions ---------------------------------------------------------- */

int vpcidev_session_begin(struct virtio_dev *dev)
{
	struct vpcidev *vp = to_vp(dev);
	int ret;

	if (vp->bus)
		return 0;
	vp->nmsi = 0;
	memset(vp->msi, 0, sizeof(vp->msi));
	memset(&vp->st, 0, sizeof(vp->st));	/* counted per session */
	vp->intx_pending = vp->intx_asserted = false;
	vp->intx_resample_fd = -1;
	vp->bus = pci_bus_create_host(&pcidev_host, vp, vp->dev.mem);
	if (!vp->bus)
		return -ENOMEM;
	ret = vp->make(vp->bus, vp->make_opaque);
	vp->pd = pci_bus_dev(vp->bus, 1);
	if (!ret && !vp->pd) {
		pr_err("virtio-pcidev: no PCI function was made");
		ret = -ENODEV;
	}
	if (ret) {
		vpcidev_session_end(dev);
		return ret;
	}
	pr_info("virtio-pcidev: PCI function %04x:%04x ready",
		le_get16(pci_cfg_space(vp->pd)), le_get16(pci_cfg_space(vp->pd) + 2));
	return 0;
}

void vpcidev_session_end(struct virtio_dev *dev)
{
	struct vpcidev *vp = to_vp(dev);

	struct vpcidev_stats st;

	if (!vp->bus)
		return;
	vpcidev_get_stats(dev, &st);
	if (st.cmds)
		pr_info("virtio-pcidev: session over: %llu cmd messages (%llu refused), "
			"%llu MSI and %llu INTx messages",
			(unsigned long long)st.cmds, (unsigned long long)st.refused,
			(unsigned long long)st.msi, (unsigned long long)st.intx);
	/* The functions drain their in-flight I/O, flush and unbind. */
	for (unsigned int i = 0; i < vp->nhooks; i++)
		vp->hook[i](vp->hook_opaque[i]);
	vp->nhooks = 0;
	pci_bus_destroy(vp->bus);
	vp->bus = NULL;
	vp->pd = NULL;
	for (unsigned int i = 0; i < MAX_BINDINGS; i++) {
		if (vp->bind[i].fd >= 0)
			epoll_ctl(vp->epfd, EPOLL_CTL_DEL, vp->bind[i].fd, NULL);
		vp->bind[i].fd = -1;
	}
}

struct pci_bus *vpcidev_bus(struct virtio_dev *dev)
{
	return to_vp(dev)->bus;
}

/* --- the virtio device ------------------------------------------------- */

static int d_queue_start(struct virtio_dev *dev, unsigned int index, struct virtq *vq)
{
	struct vpcidev *vp = to_vp(dev);
	int ret = 0;

	if (index > 1)
		return -EINVAL;
	thread_stop(vp);
	if (index == VPCIDEV_CMD_Q)
		ret = vpcidev_session_begin(dev);
	if (!ret) {
		vp->vq[index] = vq;
		vp->broken[index] = false;
		if (index == VPCIDEV_IRQ_Q)
			vp->intx_asserted = false;	/* a new ring: no INT out */
	}
	if (thread_start(vp) && !ret)
		ret = -EAGAIN;
	return ret;
}

static void d_queue_stop(struct virtio_dev *dev, unsigned int index)
{
	struct vpcidev *vp = to_vp(dev);

	if (index > 1)
		return;
	thread_stop(vp);
	vp->vq[index] = NULL;
	if (index == VPCIDEV_CMD_Q)
		vpcidev_session_end(dev);
	if (thread_start(vp))
		pr_err("virtio-pcidev: cannot restart the session thread");
}

static void d_config_read(struct virtio_dev *dev, uint32_t offset, void *data, uint32_t len)
{
	memset(data, 0, len);	/* virtio-pcidev has no config space */
}

static void d_config_write(struct virtio_dev *dev, uint32_t offset, const void *data,
			   uint32_t len)
{
}

static void d_destroy(struct virtio_dev *dev)
{
	struct vpcidev *vp = to_vp(dev);

	thread_stop(vp);
	vp->vq[0] = vp->vq[1] = NULL;
	vpcidev_session_end(dev);
	close(vp->epfd);
	close(vp->stop_fd);
	free(vp);
}

static const struct virtio_dev_ops vpcidev_ops = {
	.config_read = d_config_read,
	.config_write = d_config_write,
	.queue_start = d_queue_start,
	.queue_stop = d_queue_stop,
	.destroy = d_destroy,
};

void vpcidev_get_stats(struct virtio_dev *dev, struct vpcidev_stats *st)
{
	struct vpcidev *vp = to_vp(dev);

	/* cmds and refused are the session thread's alone: atomics; msi and
	 * intx change under the lock. */
	pthread_mutex_lock(&vp->lock);
	st->msi = vp->st.msi;
	st->intx = vp->st.intx;
	pthread_mutex_unlock(&vp->lock);
	st->cmds = __atomic_load_n(&vp->st.cmds, __ATOMIC_RELAXED);
	st->refused = __atomic_load_n(&vp->st.refused, __ATOMIC_RELAXED);
}

struct virtio_dev *vpcidev_create(vpcidev_make_fn make, void *opaque)
{
	struct vpcidev *vp = calloc(1, sizeof(*vp));
	struct epoll_event ev = { .events = EPOLLIN, .data.u64 = TAG_STOP };

	if (!vp)
		return NULL;
	vp->dev.name = "virtio-pcidev";
	vp->dev.num_queues = 2;
	vp->dev.max_queue_size = QUEUE_MAX;
	vp->dev.host_features = 1ull << VIRTIO_F_VERSION_1;
	vp->dev.ops = &vpcidev_ops;
	vp->make = make;
	vp->make_opaque = opaque;
	vp->intx_resample_fd = -1;
	pthread_mutex_init(&vp->lock, NULL);
	for (unsigned int i = 0; i < MAX_BINDINGS; i++)
		vp->bind[i].fd = -1;
	vp->epfd = epoll_create1(EPOLL_CLOEXEC);
	vp->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (vp->epfd < 0 || vp->stop_fd < 0 ||
	    epoll_ctl(vp->epfd, EPOLL_CTL_ADD, vp->stop_fd, &ev)) {
		if (vp->epfd >= 0)
			close(vp->epfd);
		if (vp->stop_fd >= 0)
			close(vp->stop_fd);
		free(vp);
		return NULL;
	}
	return &vp->dev;
}
