/* LSI 53C895A PCI-SCSI HBA: the device's life cycle, its targets, and the
 * HBA thread that runs the SCRIPTS processor and reaps backend completions.
 * The register file is lsi_regfile.c, the SCSI bus lsi_bus.c, DMA
 * lsi_dma.c, the SCRIPTS processor lsi_scripts.c. */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "lib/clock.h"
#include "lib/log.h"
#include "scsi/lsi_internal.h"
#include "scsi/lsi_scripts.h"

/* The bound promised in lsi53c895a.h, checked at build time: a command is
 * a fixed-size object whatever it transfers. */
_Static_assert(sizeof(struct lsi_cmd) <= 4096,
	       "per-command host memory must stay bounded");

size_t lsi_cmd_mem_bound(void)
{
	return sizeof(struct lsi_cmd);
}

/* ---- running ------------------------------------------------------------- */

/* A backend queue whose io_uring failed (anything but a transient EAGAIN,
 * EBUSY or EINTR) would leave its requests in flight for ever and the
 * guest waiting on their commands: fail them all instead (their commands
 * end in CHECK CONDITION), once; commands after that fail at once. Called
 * with s->lock held, like every completion. */
static void io_check(struct lsi *s, int ret)
{
	if (ret >= 0 || ret == -EAGAIN || ret == -EBUSY || ret == -EINTR)
		return;
	if (!s->io_failed) {
		s->io_failed = true;
		pr_err("lsi: backend io_uring: %s; failing its %u requests in flight",
		       strerror(-ret), blkq_inflight(s->q));
	}
	blkq_abort(s->q, -EIO);
}

static void reap(struct lsi *s, bool wait)
{
	io_check(s, blkq_reap(s->q, wait));
}

static void submit(struct lsi *s)
{
	io_check(s, blkq_submit(s->q));
}

long lsi_poll(struct lsi *s, bool wait, long budget)
{
	long total = 0;

	pthread_mutex_lock(&s->lock);
	for (;;) {
		long n;

		reap(s, false);
		n = lsi_scripts_run(s, budget - total);
		total += n;
		submit(s);
		if (total >= budget)
			break;
		if (s->scr == LSI_SCR_RUN)
			continue;
		if (!wait || !blkq_inflight(s->q))
			break;
		reap(s, true);
	}
	pthread_mutex_unlock(&s->lock);
	return total;
}

/* Slices in a row without any bus activity before the thread starts to
 * pause between slices: SCRIPTS that spin on memory (some drivers poll a
 * mailbox that way) still see changes within a millisecond, but cannot
 * take a whole host CPU. */
#define LSI_IDLE_SLICES 16

/* Before sleeping, the thread polls its kick and completion fds for up to
 * ns: at low queue depth the next event (the guest's next command, the
 * disk's completion) usually comes within it, and a thread that need not
 * be woken answers sooner. */
static bool spin_poll(uint64_t ns, struct pollfd *pfd, unsigned int n)
{
	uint64_t deadline;

	if (!ns)
		return false;
	deadline = mono_ns() + ns;
	do {
		if (poll(pfd, n, 0) > 0)
			return true;
	} while (mono_ns() < deadline);
	return false;
}

static void *lsi_thread(void *arg)
{
	struct lsi *s = arg;
	struct pollfd pfd[2];
	unsigned int idle = 0;

	/* Named like the other I/O threads, so users (and bench/blk.sh
	 * --pin) can place it. */
	pthread_setname_np(pthread_self(), "iovm-lsi");
	pfd[0].fd = s->kick_fd;
	pfd[0].events = POLLIN;
	pfd[1].fd = blkq_event_fd(s->q);
	pfd[1].events = POLLIN;
	pthread_mutex_lock(&s->lock);
	while (!s->stopping) {
		uint64_t v;

		unsigned long ev = s->bus_events;

		reap(s, false);
		lsi_scripts_run(s, LSI_SCRIPTS_SLICE);
		submit(s);
		if (s->scr == LSI_SCR_RUN) {
			/* Let register accesses in between slices. */
			pthread_mutex_unlock(&s->lock);
			idle = ev == s->bus_events ? idle + 1 : 0;
			if (idle > LSI_IDLE_SLICES &&
			    poll(pfd, pfd[1].fd >= 0 ? 2 : 1, 1) > 0 &&
			    read(s->kick_fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
				pr_err("lsi: kick read: %s", strerror(errno));
			pthread_mutex_lock(&s->lock);
			continue;
		}
		idle = 0;
		pthread_mutex_unlock(&s->lock);
		if (!spin_poll(s->p.spin_ns, pfd, pfd[1].fd >= 0 ? 2 : 1))
			poll(pfd, pfd[1].fd >= 0 ? 2 : 1, -1);
		if (read(s->kick_fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
			pr_err("lsi: kick read: %s", strerror(errno));
		pthread_mutex_lock(&s->lock);
	}
	/* Shutdown: in-flight backend I/O finishes into guest memory. */
	while (blkq_inflight(s->q))
		if (blkq_reap(s->q, true) < 0)
			break;
	pthread_mutex_unlock(&s->lock);
	return NULL;
}

struct lsi *lsi_create(const struct lsi_params *p)
{
	struct lsi *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	s->p = *p;
	s->kick_fd = -1;
	pthread_mutex_init(&s->lock, NULL);
	s->cmds = calloc(LSI_MAX_CMDS, sizeof(*s->cmds));
	s->param_mem = malloc((size_t)LSI_PARAM_BUFS * SCSI_PARAM_MAX);
	/* One segment in flight per command, plus the target's own stages
	 * (flush after a write-through write). */
	s->q = blkq_create(2 * LSI_MAX_CMDS);
	if (!s->cmds || !s->param_mem || !s->q)
		goto fail;
	if (p->threaded) {
		s->kick_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		if (s->kick_fd < 0)
			goto fail;
	}
	for (int i = LSI_MAX_CMDS - 1; i >= 0; i--) {
		s->cmds[i].s = s;
		s->cmds[i].next = s->free_cmds;
		s->free_cmds = &s->cmds[i];
	}
	s->param_free = (1u << LSI_PARAM_BUFS) - 1;
	s->resel_tail = &s->resel_head;
	s->bus_status = -1;
	lsi_chip_reset(s);
	return s;
fail:
	if (s->q)
		blkq_destroy(s->q);
	if (s->kick_fd >= 0)
		close(s->kick_fd);
	free(s->param_mem);
	free(s->cmds);
	free(s);
	return NULL;
}

int lsi_attach(struct lsi *s, unsigned int target, struct blk_backend *be)
{
	struct lsi_target *t;

	if (target >= LSI_MAX_TARGETS || target == LSI_HOST_ID)
		return -EINVAL;
	t = &s->tgt[target];
	if (t->disk)
		return -EBUSY;
	memset(&t->luns, 0, sizeof(t->luns));
	t->luns.bits[0] = 1;	/* LUN 0 */
	t->disk = scsi_disk_create(be, &t->luns);
	if (!t->disk)
		return -errno ? -errno : -ENOMEM;
	t->be = be;
	return 0;
}

struct scsi_disk *lsi_target_disk(struct lsi *s, unsigned int target)
{
	return target < LSI_MAX_TARGETS ? s->tgt[target].disk : NULL;
}

int lsi_resized(void *dev, struct blk_backend *be)
{
	struct lsi *s = dev;

	for (unsigned int i = 0; i < LSI_MAX_TARGETS; i++) {
		if (s->tgt[i].disk && s->tgt[i].be == be) {
			scsi_disk_resized(s->tgt[i].disk);
			return 0;
		}
	}
	return -ENODEV;
}

int lsi_start(struct lsi *s)
{
	int ret;

	if (!s->p.threaded)
		return 0;
	ret = pthread_create(&s->thread, NULL, lsi_thread, s);
	if (ret)
		return -ret;
	s->thread_started = true;
	return 0;
}

void lsi_destroy(struct lsi *s)
{
	if (!s)
		return;
	if (s->thread_started) {
		pthread_mutex_lock(&s->lock);
		s->stopping = true;
		pthread_mutex_unlock(&s->lock);
		lsi_kick(s);
		pthread_join(s->thread, NULL);
	} else {
		while (blkq_inflight(s->q))
			if (blkq_reap(s->q, true) < 0)
				break;
	}
	blkq_destroy(s->q);
	for (unsigned int i = 0; i < LSI_MAX_TARGETS; i++)
		if (s->tgt[i].disk)
			scsi_disk_destroy(s->tgt[i].disk);
	if (s->kick_fd >= 0)
		close(s->kick_fd);
	pthread_mutex_destroy(&s->lock);
	free(s->param_mem);
	free(s->cmds);
	free(s);
}

bool lsi_irq_pending(struct lsi *s)
{
	return __atomic_load_n(&s->irq_level, __ATOMIC_SEQ_CST);
}

unsigned int lsi_cmds_active(const struct lsi *s)
{
	return s->active;
}

void lsi_cmds_peak(const struct lsi *s, unsigned int *reads, unsigned int *writes)
{
	*reads = s->peak_rw[0];
	*writes = s->peak_rw[1];
}

unsigned long lsi_cmds_aborted(const struct lsi *s)
{
	return s->aborted_total;
}
