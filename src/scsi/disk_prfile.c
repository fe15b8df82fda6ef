/* SCSI disk target: the persistent reservation state file that every iovm
 * process opening one image shares (IMAGE.pr, or pr-state=FILE).
 *
 * Layout: a header page (magic, the committed generation, the creation
 * time) and two slots, each one whole version of the state with its
 * generation and a checksum. A writer, under an OFD lock on byte 0, writes
 * generation g+1 into the slot that does not hold g, then publishes it by
 * storing g+1 into the header: a crash before that store leaves g intact,
 * one after it leaves g+1 complete. Readers take no lock: the header's
 * generation is one atomic load, compared on every command with the one
 * their cached decision was made for; when it moved they copy the slot and
 * check its generation and checksum (a slot is only rewritten two commits
 * later, so a copy that fails was being rewritten: they retry).
 *
 * Every process holds a read lock on byte 1 while attached: whoever gets a
 * write lock there is alone, which is the logical unit's power on: the
 * state is cleared unless APTPL was set. */
#include <errno.h>
#include <sched.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "lib/log.h"
#include "scsi/disk_pr.h"

#define PRF_MAGIC "IOVMPRS1"
#define PRF_VERSION 1
#define PRF_PAGE 4096
#define PRF_SIZE (3 * PRF_PAGE)

struct prf_header {
	char magic[8];
	uint32_t version;
	uint32_t state_size;	/* sizeof(struct pr_state) */
	uint64_t gen;		/* committed generation: slot gen & 1 */
	uint64_t created_ns;	/* CLOCK_MONOTONIC_COARSE when created */
};

_Static_assert(sizeof(struct pr_state) <= PRF_PAGE, "a slot is one page");

static struct prf_header *hdr(const struct disk_pr *pr)
{
	return pr->map;
}

static struct pr_state *slot(const struct disk_pr *pr, uint64_t gen)
{
	return (struct pr_state *)((char *)pr->map + PRF_PAGE * (1 + (gen & 1)));
}

uint64_t prf_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

static uint64_t checksum(const struct pr_state *st)
{
	const uint8_t *p = (const uint8_t *)&st->prgen;
	const uint8_t *e = (const uint8_t *)(st + 1);
	uint64_t h = 0xcbf29ce484222325ull;	/* FNV-1a */

	for (; p < e; p++)
		h = (h ^ *p) * 0x100000001b3ull;
	return h;
}

void prf_empty(struct pr_state *st)
{
	memset(st, 0, sizeof(*st));
}

static void format(void *map, uint64_t now)
{
	struct prf_header *h = map;
	struct pr_state *s0 = (struct pr_state *)((char *)map + PRF_PAGE);

	prf_empty(s0);
	s0->sum = checksum(s0);
	h->version = PRF_VERSION;
	h->state_size = sizeof(struct pr_state);
	h->gen = 0;
	h->created_ns = now;
	memcpy(h->magic, PRF_MAGIC, 8);	/* last: a torn format reads as new */
}

uint64_t prf_gen(const struct disk_pr *pr)
{
	return __atomic_load_n(&hdr(pr)->gen, __ATOMIC_ACQUIRE);
}

/* A version whose checksum holds may still come from a hostile or buggy
 * writer of the file: its counts and strings are checked before use. */
static bool sane(const struct pr_state *st)
{
	if (st->nregs > PR_MAX_REGS || st->type > 8 || st->scope > 15 ||
	    memchr(st->holder, 0, PR_ID_MAX) == NULL ||
	    memchr(st->spc2, 0, PR_ID_MAX) == NULL)
		return false;
	for (uint32_t i = 0; i < st->nregs; i++)
		if (!memchr(st->regs[i].id, 0, PR_ID_MAX) || !st->regs[i].id[0])
			return false;
	return true;
}

int prf_snapshot(const struct disk_pr *pr, struct pr_state *st, uint64_t *gen)
{
	const uint64_t *genp = &hdr(pr)->gen;

	/* Lock-free: a commit that lands while the slot is copied shows as
	 * a moved generation, and the copy is tried again. A file whose
	 * generation stays still under a bad slot is corrupt (-EBADMSG);
	 * one whose generation never stops moving (another process
	 * committing faster than this one can copy) is only busy: -EAGAIN,
	 * and the caller tries again on its next command. */
	for (int tries = 0; tries < 1024; tries++) {
		uint64_t g = __atomic_load_n(genp, __ATOMIC_ACQUIRE);

		if (tries >= 16)
			sched_yield();

		/* the committed slot; the previous one if a power loss tore it */
		for (uint64_t back = 0; back < 2 && back <= g; back++) {
			memcpy(st, slot(pr, g - back), sizeof(*st));
			__atomic_thread_fence(__ATOMIC_ACQUIRE);
			if (st->seq == g - back && st->sum == checksum(st) &&
			    sane(st)) {
				*gen = g;
				return 0;
			}
		}
		if (__atomic_load_n(genp, __ATOMIC_ACQUIRE) == g)
			return -EBADMSG;	/* nobody was writing: corrupt */
	}
	return -EAGAIN;
}

static int ofd_lock(int fd, short type, off_t at, bool wait)
{
	struct flock fl = { .l_type = type, .l_whence = SEEK_SET, .l_start = at,
			    .l_len = 1 };
	int ret;

	do
		ret = fcntl(fd, wait ? F_OFD_SETLKW : F_OFD_SETLK, &fl);
	while (ret < 0 && errno == EINTR);
	return ret < 0 ? -errno : 0;
}

int prf_lock(struct disk_pr *pr)
{
	return pr->mode == PR_FILE ? ofd_lock(pr->fd, F_WRLCK, 0, true) : 0;
}

void prf_unlock(struct disk_pr *pr)
{
	if (pr->mode == PR_FILE)
		ofd_lock(pr->fd, F_UNLCK, 0, false);
}

void prf_commit(struct disk_pr *pr, struct pr_state *st, uint64_t gen)
{
	struct pr_state *s = slot(pr, gen + 1);
	bool sync = pr->mode == PR_FILE && (st->aptpl || slot(pr, gen)->aptpl);

	if (pr->mode == PR_FILE) {
		/* let every process that looked for the file before it
		 * existed see it before a change that matters (disk_pr.h) */
		uint64_t now = prf_now_ns(), c = hdr(pr)->created_ns;

		if (c <= now && now - c < PRF_SETTLE_NS) {
			uint64_t ns = PRF_SETTLE_NS - (now - c);
			struct timespec ts = { .tv_sec = ns / 1000000000ull,
					       .tv_nsec = ns % 1000000000ull };

			while (nanosleep(&ts, &ts) && errno == EINTR)
				;
		}
	}
	st->seq = gen + 1;
	st->sum = checksum(st);
	memcpy(s, st, sizeof(*st));
	if (sync && msync((char *)pr->map + PRF_PAGE * (1 + ((gen + 1) & 1)),
			  PRF_PAGE, MS_SYNC))
		pr_warn("%s: msync: %s", pr->path, strerror(errno));
	__atomic_store_n(&hdr(pr)->gen, gen + 1, __ATOMIC_RELEASE);
	if (sync && msync(pr->map, PRF_PAGE, MS_SYNC))
		pr_warn("%s: msync: %s", pr->path, strerror(errno));
}

static int local_init(struct disk_pr *pr)
{
	pr->local = aligned_alloc(PRF_PAGE, PRF_SIZE);
	if (!pr->local)
		return -ENOMEM;
	memset(pr->local, 0, PRF_SIZE);
	format(pr->local, 0);
	pr->map = pr->local;
	__atomic_store_n(&pr->genp, &hdr(pr)->gen, __ATOMIC_RELEASE);
	return 0;
}

/* Back to in-process state (the local memory stays mapped for readers
 * that still look at it), starting from an empty state. */
static void go_local(struct disk_pr *pr)
{
	struct prf_header *h = pr->local;

	__atomic_store_n(&pr->mode, PR_LOCAL, __ATOMIC_RELAXED);
	pr->map = pr->local;
	__atomic_store_n(&pr->genp, &h->gen, __ATOMIC_RELEASE);
	prf_empty(&pr->cur);
	__atomic_store_n(&pr->cache, h->gen << 8, __ATOMIC_RELEASE);
}

static void warn_local(struct disk_pr *pr, const char *what, int err)
{
	if (!pr->warned)
		pr_warn("%s: cannot %s the persistent reservation state file (%s): "
			"reservations of this disk stay within this process",
			pr->path, what, strerror(err));
	pr->warned = true;
	go_local(pr);
}

/* Power on (no other process attached): the state survives only with
 * APTPL, and never an SPC-2 reservation; then ours of a previous life
 * (same pr-id): a RESERVE(6) goes with the lost nexus. */
static void on_attach(struct disk_pr *pr, struct pr_state *st, uint64_t *gen,
		      bool first)
{
	bool changed = false;

	if (first && !st->aptpl && (st->nregs || st->type || st->spc2[0])) {
		uint32_t cs = st->clear_seq, rs = st->release_seq;

		prf_empty(st);
		st->clear_seq = cs;
		st->release_seq = rs;
		changed = true;
	}
	if ((first && st->spc2[0]) || !strcmp(st->spc2, pr->id)) {
		st->spc2[0] = 0;
		changed = true;
	}
	if (changed) {
		prf_commit(pr, st, *gen);
		*gen += 1;
	}
}

/* Attaches the open state file fd: formats a new one, checks an old one,
 * takes the presence lock. On failure fd is closed and nothing changed. */
static int attach(struct disk_pr *pr, int fd, char *err, size_t errlen)
{
	struct pr_state st;
	struct prf_header *h;
	struct stat sb;
	uint64_t gen;
	void *m;
	bool first;
	int ret = ofd_lock(fd, F_WRLCK, 0, true);

	if (ret) {
		snprintf(err, errlen, "%s: cannot lock (%s)", pr->path, strerror(-ret));
		goto out;
	}
	if (fstat(fd, &sb) || (sb.st_size == 0 && ftruncate(fd, PRF_SIZE))) {
		ret = -errno;
		snprintf(err, errlen, "%s: %s", pr->path, strerror(errno));
		goto out;
	}
	if (sb.st_size != 0 && sb.st_size != PRF_SIZE) {
		ret = -EBADMSG;
		snprintf(err, errlen, "%s: not an iovm persistent reservation state "
			 "file (%lld bytes, not %d); remove it to clear all reservations",
			 pr->path, (long long)sb.st_size, PRF_SIZE);
		goto out;
	}
	m = mmap(NULL, PRF_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED) {
		ret = -errno;
		snprintf(err, errlen, "%s: mmap: %s", pr->path, strerror(errno));
		goto out;
	}
	h = m;
	if (!memcmp(h->magic, "\0\0\0\0\0\0\0\0", 8)) {
		format(m, prf_now_ns());
	} else if (memcmp(h->magic, PRF_MAGIC, 8) || h->version != PRF_VERSION ||
		   h->state_size != sizeof(struct pr_state)) {
		munmap(m, PRF_SIZE);
		ret = -EBADMSG;
		snprintf(err, errlen, "%s: not an iovm persistent reservation state "
			 "file of this version; remove it to clear all reservations",
			 pr->path);
		goto out;
	}
	pr->map = m;
	pr->fd = fd;
	__atomic_store_n(&pr->mode, PR_FILE, __ATOMIC_RELAXED);
	if (prf_snapshot(pr, &st, &gen)) {
		munmap(m, PRF_SIZE);
		pr->map = pr->local;
		pr->fd = -1;
		__atomic_store_n(&pr->mode, PR_PROBE, __ATOMIC_RELAXED);
		ret = -EBADMSG;
		snprintf(err, errlen, "%s: persistent reservation state is corrupt "
			 "(bad checksum); remove it to clear all reservations",
			 pr->path);
		goto out;
	}
	first = ofd_lock(fd, F_WRLCK, 1, false) == 0;
	on_attach(pr, &st, &gen, first);
	ofd_lock(fd, F_RDLCK, 1, true);		/* present, with the others */
	pr->cur = st;
	__atomic_store_n(&pr->cache, gen << 8 | pr_decide(&st, pr->id),
			 __ATOMIC_RELEASE);
	__atomic_store_n(&pr->genp, &h->gen, __ATOMIC_RELEASE);
	ofd_lock(fd, F_UNLCK, 0, false);
	return 0;
out:
	close(fd);
	return ret;
}

int prf_init(struct disk_pr *pr, bool defer, char *err, size_t errlen)
{
	int fd, ret = local_init(pr);

	pr->fd = -1;
	if (ret) {
		snprintf(err, errlen, "persistent reservations: out of memory");
		return ret;
	}
	if (!pr->path) {
		__atomic_store_n(&pr->mode, PR_LOCAL, __ATOMIC_RELAXED);
		return 0;
	}
	if (pr->explicit_path) {
		fd = open(pr->path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
		if (fd < 0) {
			snprintf(err, errlen, "pr-state=%s: %s", pr->path, strerror(errno));
			return -errno;
		}
		return attach(pr, fd, err, errlen);
	}
	__atomic_store_n(&pr->mode, PR_PROBE, __ATOMIC_RELAXED);
	return defer ? 0 : prf_probe(pr, err, errlen);
}

int prf_probe(struct disk_pr *pr, char *err, size_t errlen)
{
	int fd;

	if (pr->mode != PR_PROBE)
		return 0;
	fd = open(pr->path, O_RDWR | O_CLOEXEC);
	if (fd < 0 && errno == ENOENT)
		return 0;
	if (fd < 0) {
		warn_local(pr, "open", errno);
		return 0;
	}
	return attach(pr, fd, err, errlen);
}

int prf_create(struct disk_pr *pr, char *err, size_t errlen)
{
	int fd;

	if (pr->mode != PR_PROBE)
		return 0;
	fd = open(pr->path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0) {
		warn_local(pr, "create", errno);
		return 0;
	}
	return attach(pr, fd, err, errlen);
}

void prf_close(struct disk_pr *pr)
{
	if (pr->map && pr->map != pr->local)
		munmap(pr->map, PRF_SIZE);
	if (pr->fd >= 0)
		close(pr->fd);
	free(pr->local);
	pr->map = pr->local = NULL;
	pr->fd = -1;
}
