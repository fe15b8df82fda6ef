/* The I/O trace's per-thread buffers and their dump files (lib/iotrace.h);
 * built only with meson -Dio_trace=true (and into its unit test). Each
 * buffer belongs to one thread: no lock, no atomic on the record path. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "lib/clock.h"
#include "lib/iotrace.h"
#include "lib/log.h"

_Static_assert(sizeof(struct iotrace_rec) == 24, "record layout");
_Static_assert(sizeof(struct iotrace_file_hdr) == 88, "header layout");

/* Far more than a run needs; bounds the mapping a typo can ask for. */
#define IOTRACE_MAX_EVENTS (1ull << 28)

struct iotrace_buf {
	struct iotrace_rec *rec;
	uint64_t n, cap;
	uint64_t dropped;
	uint64_t start_ns;
	uint16_t queue;
	char prefix[4096];
	char name[32];
};

__thread struct iotrace_buf *iotrace_cur;

static unsigned int dumps;	/* the files' <n>, process-wide */

void iotrace_record(struct iotrace_buf *b, unsigned int ev, uint32_t id,
		    uint32_t arg)
{
	struct iotrace_rec *r;

	if (b->n == b->cap) {
		b->dropped++;
		return;
	}
	r = &b->rec[b->n++];
	r->ns = mono_ns();
	r->id = id;
	r->arg = arg;
	r->queue = b->queue;
	r->ev = (uint8_t)ev;
}

static uint64_t events_wanted(void)
{
	const char *s = getenv("IOVM_IO_TRACE_EVENTS");
	char *end;
	unsigned long long v;

	if (!s || !*s)
		return IOTRACE_DEFAULT_EVENTS;
	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno || *end || !v || v > IOTRACE_MAX_EVENTS) {
		pr_warn("io-trace: IOVM_IO_TRACE_EVENTS=%s is not 1 to %llu; using %u",
			s, IOTRACE_MAX_EVENTS, IOTRACE_DEFAULT_EVENTS);
		return IOTRACE_DEFAULT_EVENTS;
	}
	return v;
}

void iotrace_thread_start(const char *name, unsigned int queue)
{
	const char *prefix = getenv("IOVM_IO_TRACE");
	struct iotrace_buf *b;
	uint64_t cap;
	void *p;

	if (!prefix || !*prefix || iotrace_cur)
		return;
	if (strlen(prefix) >= sizeof(b->prefix)) {
		pr_warn("io-trace: IOVM_IO_TRACE is too long; not tracing");
		return;
	}
	cap = events_wanted();
	b = calloc(1, sizeof(*b));
	/* Pages are touched as records fill them: a large buffer costs the
	 * memory of the events recorded, not its size. */
	p = mmap(NULL, cap * sizeof(struct iotrace_rec), PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (!b || p == MAP_FAILED) {
		pr_warn("io-trace: %s: no memory for %llu events; not tracing",
			name, (unsigned long long)cap);
		if (p != MAP_FAILED)
			munmap(p, cap * sizeof(struct iotrace_rec));
		free(b);
		return;
	}
	b->rec = p;
	b->cap = cap;
	b->queue = (uint16_t)queue;
	snprintf(b->prefix, sizeof(b->prefix), "%s", prefix);
	/* The name goes into a file name: no directory separators. */
	for (size_t i = 0; name[i] && i < sizeof(b->name) - 1; i++)
		b->name[i] = name[i] == '/' ? '_' : name[i];
	b->start_ns = mono_ns();
	iotrace_cur = b;
}

static int write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len) {
		ssize_t n = write(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static int dump(const struct iotrace_buf *b, const char *path,
		uint64_t end_ns)
{
	struct iotrace_file_hdr h = {
		.version = IOTRACE_VERSION,
		.rec_size = sizeof(struct iotrace_rec),
		.nrec = b->n,
		.dropped = b->dropped,
		.start_ns = b->start_ns,
		.end_ns = end_ns,
		.pid = (uint32_t)getpid(),
		.queue = b->queue,
	};
	int fd, ret;

	memcpy(h.magic, IOTRACE_MAGIC, sizeof(h.magic));
	memcpy(h.name, b->name, sizeof(h.name));
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	ret = write_all(fd, &h, sizeof(h));
	if (!ret)
		ret = write_all(fd, b->rec, b->n * sizeof(*b->rec));
	if (close(fd) && !ret)
		ret = -errno;
	return ret;
}

int iotrace_thread_end(void)
{
	struct iotrace_buf *b = iotrace_cur;
	uint64_t end_ns = mono_ns();
	char path[sizeof(b->prefix) + 64];
	int ret;

	if (!b)
		return 0;
	iotrace_cur = NULL;
	snprintf(path, sizeof(path), "%s.%d.%s.%u", b->prefix, (int)getpid(),
		 b->name, __atomic_fetch_add(&dumps, 1, __ATOMIC_RELAXED));
	ret = dump(b, path, end_ns);
	if (ret)
		pr_err("io-trace: %s: %s", path, strerror(-ret));
	else
		pr_info("io-trace: %s: %llu events, %llu dropped", path,
			(unsigned long long)b->n, (unsigned long long)b->dropped);
	munmap(b->rec, b->cap * sizeof(*b->rec));
	free(b);
	return ret;
}
