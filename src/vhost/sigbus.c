/* SIGBUS from truncated guest RAM files, survived.
 *
 * The problem: the back-end mmaps the files a vhost-user client sends as
 * its guest RAM. A memfd is refused unless sealed against shrinking (mem.c),
 * but tmpfs, hugetlbfs and ordinary files (UML's memory file, QEMU's
 * memory-backend-file) cannot be sealed, and a client that truncates one
 * turns the back-end's next load or store past the new end of file (ring
 * reads, request header copies, used ring writes) into a SIGBUS, which
 * would kill the back-end and with it every later client. (The kernel's
 * own accesses, io_uring reading or writing data buffers, just fail with
 * EFAULT: an I/O error for that request.)
 *
 * The design:
 * - Every mapped region is registered in a fixed, process-wide table of
 *   slots (start, length, page size, owner). A SIGBUS handler (SA_SIGINFO)
 *   looks the faulting address up there. Inside a region, it maps anonymous
 *   zero pages over the faulting page with MAP_FIXED (mmap is a system
 *   call, async-signal-safe), so the interrupted access completes when the
 *   handler returns: loads read zeros, stores go to memory nobody else
 *   sees. It then records the address for the owner and writes to the
 *   owner's eventfd (write is async-signal-safe too). Only the page that
 *   faulted is replaced: pages still inside the file keep the client's data,
 *   so requests already in flight on them complete as they would have.
 * - The server's socket thread polls that eventfd next to the socket; when
 *   it fires, it logs which region was truncated and drops the client the
 *   ordinary way (queues drained and stopped, disks flushed, memory
 *   unmapped), then serves the next one. Until then the queue threads see
 *   zeros where the truncated memory was: a malformed ring at worst, which
 *   they already treat as untrusted input.
 * - Any other SIGBUS (outside every region, or not an address error) goes
 *   to the handler that was installed before ours, or takes the default
 *   action (a core dump), as if we had not been there.
 *
 * Threads: the handler runs on whichever thread faulted (a queue thread,
 * or the socket thread while it sets a ring up), concurrently with the
 * socket thread adding and removing regions (ADD/REM_MEM_REG). It takes no
 * lock: each slot is a seqlock (the writers, serialised by a mutex, make the
 * sequence odd while they change the slot; the handler retries a read that
 * saw an odd or changed sequence). A writer is never the thread the handler
 * interrupted mid-update, since updating a slot touches no guest memory. A
 * slot is removed before its mapping is unmapped, and the server stops
 * every thread that could touch a region before it removes it, so the
 * handler never maps over an address range that has been given back and
 * reused. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include "vhost/sigbus.h"

struct guard_slot {
	unsigned int seq;	/* odd while a writer changes the slot */
	uintptr_t base;
	size_t len;		/* 0: free */
	size_t page;
	struct vhu_fault *owner;
};

static struct guard_slot slots[VHU_GUARD_SLOTS];
static pthread_mutex_t slots_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sigaction prev_action;

#define LOAD(p) __atomic_load_n(p, __ATOMIC_RELAXED)
#define STORE(p, v) __atomic_store_n(p, v, __ATOMIC_RELAXED)

/* A consistent copy of slot i (seqlock read side). */
static void read_slot(unsigned int i, struct guard_slot *out)
{
	struct guard_slot *s = &slots[i];

	for (;;) {
		unsigned int seq = __atomic_load_n(&s->seq, __ATOMIC_ACQUIRE);

		if (seq & 1)
			continue;	/* another thread is changing it */
		out->base = LOAD(&s->base);
		out->len = LOAD(&s->len);
		out->page = LOAD(&s->page);
		out->owner = LOAD(&s->owner);
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if (LOAD(&s->seq) == seq)
			return;
	}
}

/* Writer side; slots_lock held. */
static void write_slot(unsigned int i, uintptr_t base, size_t len, size_t page,
		       struct vhu_fault *owner)
{
	struct guard_slot *s = &slots[i];
	unsigned int seq = LOAD(&s->seq);

	STORE(&s->seq, seq + 1);
	__atomic_thread_fence(__ATOMIC_RELEASE);
	STORE(&s->base, base);
	STORE(&s->len, len);
	STORE(&s->page, page);
	STORE(&s->owner, owner);
	__atomic_store_n(&s->seq, seq + 2, __ATOMIC_RELEASE);
}

/* Replaces the page at addr with zeros if it lies in a guarded region.
 * Async-signal-safe: loads, mmap, write. */
static bool fix_fault(uintptr_t addr)
{
	for (unsigned int i = 0; i < VHU_GUARD_SLOTS; i++) {
		struct guard_slot s;
		uintptr_t page, expected = 0;
		uint64_t one = 1;

		read_slot(i, &s);
		if (!s.len || addr < s.base || addr - s.base >= s.len)
			continue;
		page = addr & ~(uintptr_t)(s.page - 1);
		if (mmap((void *)page, s.page, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == MAP_FAILED)
			return false;
		__atomic_compare_exchange_n(&s.owner->addr, &expected, addr, false,
					    __ATOMIC_RELEASE, __ATOMIC_RELAXED);
		/* A write that fails otherwise finds the counter full,
		 * hence readable already: nothing is lost. */
		while (write(s.owner->efd, &one, sizeof(one)) < 0 && errno == EINTR)
			;
		return true;
	}
	return false;
}

/* Not ours: behave as the handler before us would have. */
static void pass_on(int sig, siginfo_t *si, void *uc)
{
	if (prev_action.sa_flags & SA_SIGINFO) {
		prev_action.sa_sigaction(sig, si, uc);
		return;
	}
	if (prev_action.sa_handler != SIG_DFL && prev_action.sa_handler != SIG_IGN) {
		prev_action.sa_handler(sig);
		return;
	}
	if (prev_action.sa_handler == SIG_IGN && si->si_code <= 0)
		return;		/* sent with kill(), and ignored before */
	/* Default action: a fault repeats when we return and then kills
	 * (with a core dump, at the faulting instruction); a signal sent
	 * with kill() is sent again, and delivered once we return. */
	sigaction(SIGBUS, &(struct sigaction){ .sa_handler = SIG_DFL }, NULL);
	if (si->si_code <= 0)
		raise(SIGBUS);
}

static void on_sigbus(int sig, siginfo_t *si, void *uc)
{
	int saved_errno = errno;

	if (si->si_code == BUS_ADRERR && fix_fault((uintptr_t)si->si_addr)) {
		errno = saved_errno;
		return;
	}
	errno = saved_errno;
	pass_on(sig, si, uc);
}

/* Puts our handler in place, unless it is there already. Whoever replaced
 * it since (a test harness, a library) is passed on to, like the handler
 * before us at the first install. */
static int install(void)
{
	static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	struct sigaction sa, cur;
	int ret = 0;

	pthread_mutex_lock(&lock);
	if (sigaction(SIGBUS, NULL, &cur) < 0) {
		ret = -errno;
	} else if (!(cur.sa_flags & SA_SIGINFO) || cur.sa_sigaction != on_sigbus) {
		memset(&sa, 0, sizeof(sa));
		sa.sa_sigaction = on_sigbus;
		sa.sa_flags = SA_SIGINFO | SA_RESTART;
		sigemptyset(&sa.sa_mask);
		if (sigaction(SIGBUS, &sa, &prev_action) < 0)
			ret = -errno;
	}
	pthread_mutex_unlock(&lock);
	return ret;
}

int vhu_fault_init(struct vhu_fault *f)
{
	sigset_t set;
	int ret;

	f->addr = 0;
	f->efd = -1;
	ret = install();
	if (ret)
		return ret;
	/* A thread with SIGBUS blocked dies on a fault whatever the
	 * handler: make sure this one (and the threads it starts) can
	 * take it. */
	sigemptyset(&set);
	sigaddset(&set, SIGBUS);
	pthread_sigmask(SIG_UNBLOCK, &set, NULL);
	f->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	return f->efd < 0 ? -errno : 0;
}

void vhu_fault_fini(struct vhu_fault *f)
{
	if (f->efd >= 0)
		close(f->efd);
	f->efd = -1;
}

int vhu_guard_add(void *base, size_t len, size_t page, struct vhu_fault *owner)
{
	int ret = -ENOSPC;

	pthread_mutex_lock(&slots_lock);
	for (unsigned int i = 0; i < VHU_GUARD_SLOTS; i++) {
		if (LOAD(&slots[i].len))
			continue;
		write_slot(i, (uintptr_t)base, len, page, owner);
		ret = i;
		break;
	}
	pthread_mutex_unlock(&slots_lock);
	return ret;
}

void vhu_guard_remove(int slot)
{
	if (slot < 0 || slot >= VHU_GUARD_SLOTS)
		return;
	pthread_mutex_lock(&slots_lock);
	write_slot(slot, 0, 0, 0, NULL);
	pthread_mutex_unlock(&slots_lock);
}

bool vhu_fault_take(struct vhu_fault *f, uintptr_t *addr)
{
	uint64_t n;

	if (read(f->efd, &n, sizeof(n)) != sizeof(n))
		return false;
	*addr = __atomic_exchange_n(&f->addr, 0, __ATOMIC_ACQUIRE);
	return true;
}
