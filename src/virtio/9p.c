/* virtio-9p: a few alike threads share the queue. One at a time owns the
 * ring: it pops request chains and serves them itself, reads and writes
 * included, so a request served from the page cache costs no thread
 * wake-up at all (on a loaded host a cross-CPU wake-up costs more than a
 * 128 KiB copy). Only requests that wait by nature (fsync, flush) go to the
 * other threads, and reads the page cache cannot satisfy (tried first with
 * RWF_NOWAIT). So that a request that blocks after all (a write throttled
 * by writeback, a slow metadata update) does not hold up the ones behind
 * it, one idle thread stands by: when the owner has been inside one
 * request for longer than VIRTIO_9P_STALL_NS and is asleep in it, the
 * standby takes the ring over, and the old owner leaves it once its
 * request is answered.
 * Requests are served straight on the chains' iovecs (guest memory) and
 * the replies pushed in completion order. Per-request state is a slot from
 * a pool sized at queue start. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/resource.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lib/clock.h"
#include "lib/log.h"
#include "p9/proto.h"
#include "p9/server.h"
#include "virtio/9p.h"
#include "virtio/ring.h"

struct v9p_slot {
	struct p9_req req;
	struct v9p_slot *next;
	struct virtq_elem e;
	struct iovec *iov;		/* VIRTIO_9P_MAX_IOV entries */
};

struct v9p;

/* One serving thread. */
struct v9p_thread {
	struct v9p *v;
	pthread_t id;
	pid_t tid;
	uint64_t serving_since;		/* atomic: when it began the request
					 * it serves as owner; 0: none */
};

struct v9p {
	struct virtio_dev dev;
	struct p9_server *srv;
	uint64_t poll_ns;		/* how long the ring's owner watches it,
					 * kicks suppressed, before it sleeps
					 * (the share's poll-us=) */
	struct p9_session *sess;	/* one mount per queue start */
	uint8_t *config;
	struct virtq *vq;
	bool running;
	bool stop;			/* under lock */
	bool broken;
	struct v9p_thread threads[VIRTIO_9P_THREADS];
	unsigned int nthreads;
	pthread_mutex_t lock;		/* everything below but push_lock */
	bool owned;			/* a thread owns the ring */
	unsigned int gen;		/* ownership generation: a takeover
					 * bumps it, telling the old owner */
	struct v9p_thread *owner;	/* valid while owned */
	bool owner_sleeping;		/* the owner waits on the kick fd */
	bool standby;			/* a thread watches the owner */
	pthread_cond_t cond;		/* idle threads: work or ownership */
	pthread_cond_t standby_cond;	/* the standby: the owner woke */
	pthread_cond_t slot_cond;	/* a slot was freed */
	pthread_mutex_t push_lock;	/* the used ring */
	struct v9p_slot *slots;
	struct iovec *iovs;
	unsigned int nslots;
	struct v9p_slot *free_list;
	struct v9p_slot *ready_head, *ready_tail;
	unsigned int inflight;		/* slots taken */
	unsigned int handed;		/* requests queued or served by the
					 * other threads */
};

static struct v9p *to_v9p(struct virtio_dev *dev)
{
	return (struct v9p *)dev;
}

static void wake_all_locked(struct v9p *v)
{
	pthread_cond_broadcast(&v->cond);
	pthread_cond_broadcast(&v->standby_cond);
	pthread_cond_broadcast(&v->slot_cond);
}

static void mark_broken(struct v9p *v, const char *why)
{
	pthread_mutex_lock(&v->lock);
	if (v->broken) {
		pthread_mutex_unlock(&v->lock);
		return;
	}
	v->broken = true;
	wake_all_locked(v);
	pthread_mutex_unlock(&v->lock);
	pr_guest("virtio-9p: %s; device needs reset", why);
	if (v->dev.transport.needs_reset)
		v->dev.transport.needs_reset(&v->dev);
}

static void slot_release(struct v9p *v, struct v9p_slot *s, bool handed)
{
	pthread_mutex_lock(&v->lock);
	s->next = v->free_list;
	v->free_list = s;
	v->inflight--;
	if (handed)
		__atomic_sub_fetch(&v->handed, 1, __ATOMIC_RELAXED);
	pthread_cond_broadcast(&v->slot_cond);
	pthread_mutex_unlock(&v->lock);
}

/* Called with v->lock held. */
static void enqueue_locked(struct v9p *v, struct v9p_slot *s)
{
	s->next = NULL;
	if (v->ready_tail)
		v->ready_tail->next = s;
	else
		v->ready_head = s;
	v->ready_tail = s;
}

static struct v9p_slot *dequeue_locked(struct v9p *v)
{
	struct v9p_slot *s = v->ready_head;

	if (s) {
		v->ready_head = s->next;
		if (!v->ready_head)
			v->ready_tail = NULL;
	}
	return s;
}

/* Queues a popped request for the threads that may block. */
static void hand_off(struct v9p *v, struct v9p_slot *s)
{
	pthread_mutex_lock(&v->lock);
	enqueue_locked(v, s);
	__atomic_add_fetch(&v->handed, 1, __ATOMIC_RELAXED);
	pthread_cond_signal(&v->cond);
	pthread_mutex_unlock(&v->lock);
}

/* handed: s came from the queue (counted in v->handed). */
static void serve(struct v9p *v, struct v9p_slot *s, bool handed)
{
	size_t len = 0;

	if (s->e.in_num)
		len = p9_handle(v->sess, &s->req, s->iov, s->e.out_num,
				s->iov + s->e.out_num, s->e.in_num);
	if (s->req.again) {
		/* A read the page cache cannot satisfy: the disk would
		 * block the owner, another thread does it. */
		s->req.nowait = false;
		hand_off(v, s);
		return;
	}
	pthread_mutex_lock(&v->push_lock);
	virtq_push(v->vq, s->e.head, len);
	virtq_notify(v->vq);
	pthread_mutex_unlock(&v->push_lock);
	/* Delivered: a Tflush waiting on this tag may now answer. */
	p9_req_end(v->sess, &s->req);
	slot_release(v, s, handed);
}

/* A free slot for the owner of generation gen; NULL when the device stops
 * or breaks, or another thread took the ring over. */
static struct v9p_slot *take_slot(struct v9p *v, unsigned int gen)
{
	struct v9p_slot *s = NULL;

	pthread_mutex_lock(&v->lock);
	while (!v->free_list && !v->stop && !v->broken && v->gen == gen)
		pthread_cond_wait(&v->slot_cond, &v->lock);
	if (!v->stop && !v->broken && v->gen == gen) {
		s = v->free_list;
		v->free_list = s->next;
		v->inflight++;
	}
	pthread_mutex_unlock(&v->lock);
	return s;
}

/* Requests that wait by nature, for the disk (fsync) or for other
 * requests (flush): served by the other threads, never by the owner. */
static bool waits(const struct p9_req *r)
{
	return r->hdr_ok && (r->type == P9_TFSYNC || r->type == P9_TFLUSH);
}

enum ring_state { RING_EMPTY, RING_LOST, RING_DOWN };

/* The owner's work: pops every available chain and serves it, kicks
 * suppressed meanwhile. Returns RING_EMPTY with the ring drained and kicks
 * still suppressed, RING_LOST when the standby took the ring over (the
 * ring is not touched again), RING_DOWN when the ring broke or the device
 * stops. */
static enum ring_state process_ring(struct v9p_thread *t, unsigned int gen)
{
	struct v9p *v = t->v;

	virtq_disable_kicks(v->vq);
	for (;;) {
		struct v9p_slot *s = take_slot(v, gen);
		int ret;

		if (!s) {
			bool lost;

			pthread_mutex_lock(&v->lock);
			lost = v->gen != gen && !v->stop && !v->broken;
			pthread_mutex_unlock(&v->lock);
			return lost ? RING_LOST : RING_DOWN;
		}
		ret = virtq_pop(v->vq, &s->e, s->iov, VIRTIO_9P_MAX_IOV);
		if (ret <= 0) {
			slot_release(v, s, false);
			if (ret < 0) {
				mark_broken(v, ret == -ENOBUFS ?
					    "request with too many segments" :
					    "malformed descriptor chain");
				return RING_DOWN;
			}
			return RING_EMPTY;
		}
		if (!s->e.in_num)
			pr_guest("virtio-9p: request without room for a reply");
		/* Registered in arrival order, for Tflush. */
		p9_req_begin(v->sess, &s->req, s->iov, s->e.out_num);
		if (waits(&s->req)) {
			hand_off(v, s);
			continue;
		}
		s->req.nowait = true;
		/* The release store pairs with the standby's acquire load:
		 * a takeover sees the ring as this pop left it. */
		__atomic_store_n(&t->serving_since, mono_ns(), __ATOMIC_RELEASE);
		serve(v, s, false);
		__atomic_store_n(&t->serving_since, 0, __ATOMIC_RELEASE);
	}
}

/* Waits for a request with the ring drained. A driver that got its last
 * reply usually sends its next request within microseconds: watching the
 * ring for a short while, kicks still suppressed, saves the driver its
 * notification (a VM exit) and us a wake-up, as QEMU's adaptive iothread
 * polling does. Not while handed-off requests are being served: the CPU is
 * theirs. Then kicks are re-armed and the thread sleeps on the kick fd.
 * Returns false when the device stops. */
static bool wait_kick(struct v9p *v, unsigned int gen)
{
	struct pollfd pfd = { .fd = v->vq->kick_fd, .events = POLLIN };
	uint64_t cnt, until = mono_ns() + v->poll_ns;
	unsigned int spins = 0;

	while (!__atomic_load_n(&v->handed, __ATOMIC_RELAXED)) {
		if (virtq_avail_count(v->vq))
			return true;
		if (__atomic_load_n(&v->stop, __ATOMIC_RELAXED))
			return false;
		/* the clock is read every few rounds only: it costs more
		 * than a look at the ring */
		if (!(++spins & 15) && mono_ns() >= until)
			break;
		__builtin_ia32_pause();
	}
	if (virtq_enable_kicks(v->vq))
		return true;
	pthread_mutex_lock(&v->lock);
	if (v->gen == gen)
		v->owner_sleeping = true;
	pthread_mutex_unlock(&v->lock);
	if (poll(&pfd, 1, -1) > 0 && read(v->vq->kick_fd, &cnt, sizeof(cnt)) < 0) {
		/* EAGAIN: nobody else reads it, but the ring is looked at
		 * anyway */
	}
	pthread_mutex_lock(&v->lock);
	if (v->gen == gen)
		v->owner_sleeping = false;
	/* The standby sleeps untimed while the owner sleeps: it has to
	 * watch again. */
	if (v->standby)
		pthread_cond_signal(&v->standby_cond);
	pthread_mutex_unlock(&v->lock);
	return true;
}

/* Owns the ring (generation gen) until it is lost, broken or stopped.
 * Called and returns with v->lock not held. */
static void own_ring(struct v9p_thread *t, unsigned int gen)
{
	struct v9p *v = t->v;
	enum ring_state st;

	while ((st = process_ring(t, gen)) == RING_EMPTY) {
		if (!wait_kick(v, gen)) {
			st = RING_DOWN;
			break;
		}
	}
	if (st == RING_LOST)
		return;
	pthread_mutex_lock(&v->lock);
	if (v->gen == gen)
		v->owned = false;
	wake_all_locked(v);
	pthread_mutex_unlock(&v->lock);
}

/* Whether thread tid sleeps (state S or D in /proc): blocked on the disk,
 * a lock or a peer, rather than running. A request that keeps its thread
 * running (a long copy) would gain nothing from a second thread on a busy
 * host, and one more writer would only spin on the file's lock. */
static bool thread_sleeps(pid_t tid)
{
	char path[64], buf[256], *p;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/self/task/%d/stat", (int)tid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return true;	/* cannot tell: assume the worst */
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return true;
	buf[n] = 0;
	/* "tid (comm) S ...": the name may hold ')' */
	p = strrchr(buf, ')');
	return !p || !p[1] || !p[2] || p[2] == 'S' || p[2] == 'D';
}

/* The standby: while the owner is busy, looks every VIRTIO_9P_STALL_NS
 * whether it has been inside one request for that long, and takes the
 * ring over if so. Called with v->lock held; returns with it held, when
 * there is other work (queued requests, no owner, a stop) or after a
 * takeover ended. */
static void stand_by(struct v9p_thread *t)
{
	struct v9p *v = t->v;

	v->standby = true;
	while (!v->stop && !v->broken && v->owned && !v->ready_head) {
		uint64_t since = __atomic_load_n(&v->owner->serving_since,
						 __ATOMIC_ACQUIRE);
		uint64_t now = mono_ns(), wake;
		struct timespec ts;

		if (since && now - since >= VIRTIO_9P_STALL_NS) {
			struct v9p_thread *o = v->owner;
			unsigned int gen = v->gen;
			bool sleeps;

			pthread_mutex_unlock(&v->lock);
			sleeps = thread_sleeps(o->tid);
			pthread_mutex_lock(&v->lock);
			if (v->gen != gen || v->stop || v->broken ||
			    __atomic_load_n(&o->serving_since, __ATOMIC_ACQUIRE) != since)
				continue;	/* it moved on meanwhile */
			if (!sleeps) {
				/* busy on the CPU: look again later */
				since = now;
				goto wait;
			}
			gen = ++v->gen;

			v->owner = t;
			v->owner_sleeping = false;
			v->standby = false;
			/* an idle thread stands by in turn */
			pthread_cond_signal(&v->cond);
			pthread_mutex_unlock(&v->lock);
			own_ring(t, gen);
			pthread_mutex_lock(&v->lock);
			return;
		}
		if (v->owner_sleeping) {
			pthread_cond_wait(&v->standby_cond, &v->lock);
			continue;
		}
wait:
		clock_gettime(CLOCK_MONOTONIC, &ts);
		wake = (since ? since : now) + VIRTIO_9P_STALL_NS - now;
		ts.tv_sec += wake / 1000000000ull;
		ts.tv_nsec += wake % 1000000000ull;
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		pthread_cond_timedwait(&v->standby_cond, &v->lock, &ts);
	}
	v->standby = false;
}

/* Every thread is alike: it serves queued requests, else owns the ring if
 * nobody does, else stands by if nobody does, else sleeps. */
static void *v9p_thread(void *arg)
{
	struct v9p_thread *t = arg;
	struct v9p *v = t->v;

	pthread_setname_np(pthread_self(), "iovm-9p");
	t->tid = gettid();
	pthread_mutex_lock(&v->lock);
	for (;;) {
		struct v9p_slot *s = dequeue_locked(v);

		if (s) {
			pthread_mutex_unlock(&v->lock);
			serve(v, s, true);
			pthread_mutex_lock(&v->lock);
			continue;
		}
		if (v->stop)
			break;
		if (v->broken) {
			pthread_cond_wait(&v->cond, &v->lock);
		} else if (!v->owned) {
			unsigned int gen = ++v->gen;

			v->owned = true;
			v->owner = t;
			v->owner_sleeping = false;
			pthread_mutex_unlock(&v->lock);
			own_ring(t, gen);
			pthread_mutex_lock(&v->lock);
		} else if (!v->standby) {
			stand_by(t);
		} else {
			pthread_cond_wait(&v->cond, &v->lock);
		}
	}
	pthread_mutex_unlock(&v->lock);
	return NULL;
}

static void free_pool(struct v9p *v)
{
	free(v->slots);
	free(v->iovs);
	v->slots = NULL;
	v->iovs = NULL;
	v->nslots = 0;
}

static int v9p_queue_start(struct virtio_dev *dev, unsigned int index,
			   struct virtq *vq)
{
	struct v9p *v = to_v9p(dev);
	int ret;

	if (index != 0)
		return -EINVAL;
	if (v->running)
		return -EBUSY;
	v->nslots = vq->size;
	v->slots = calloc(v->nslots, sizeof(*v->slots));
	v->iovs = calloc((size_t)v->nslots * VIRTIO_9P_MAX_IOV, sizeof(*v->iovs));
	v->sess = p9_session_new(v->srv);
	if (!v->slots || !v->iovs || !v->sess) {
		free_pool(v);
		p9_session_free(v->sess);
		v->sess = NULL;
		return -ENOMEM;
	}
	v->free_list = NULL;
	for (unsigned int i = 0; i < v->nslots; i++) {
		v->slots[i].iov = v->iovs + (size_t)i * VIRTIO_9P_MAX_IOV;
		v->slots[i].next = v->free_list;
		v->free_list = &v->slots[i];
	}
	v->ready_head = v->ready_tail = NULL;
	v->inflight = v->handed = 0;
	v->vq = vq;
	v->stop = v->broken = false;
	v->owned = v->standby = v->owner_sleeping = false;
	v->owner = NULL;
	for (v->nthreads = 0; v->nthreads < VIRTIO_9P_THREADS; v->nthreads++) {
		struct v9p_thread *t = &v->threads[v->nthreads];

		t->v = v;
		t->serving_since = 0;
		ret = pthread_create(&t->id, NULL, v9p_thread, t);
		if (ret)
			break;
	}
	ret = v->nthreads ? 0 : EAGAIN;
	if (ret) {
		pthread_mutex_lock(&v->lock);
		__atomic_store_n(&v->stop, true, __ATOMIC_RELAXED);
		wake_all_locked(v);
		pthread_mutex_unlock(&v->lock);
		for (unsigned int i = 0; i < v->nthreads; i++)
			pthread_join(v->threads[i].id, NULL);
		free_pool(v);
		p9_session_free(v->sess);
		v->sess = NULL;
		return -ret;
	}
	v->running = true;
	return 0;
}

static void v9p_queue_stop(struct virtio_dev *dev, unsigned int index)
{
	struct v9p *v = to_v9p(dev);
	uint64_t one = 1;

	if (index != 0 || !v->running)
		return;
	/* Drain: every popped request is served and pushed first. */
	pthread_mutex_lock(&v->lock);
	while (v->inflight)
		pthread_cond_wait(&v->slot_cond, &v->lock);
	__atomic_store_n(&v->stop, true, __ATOMIC_RELAXED);
	wake_all_locked(v);
	pthread_mutex_unlock(&v->lock);
	if (write(v->vq->kick_fd, &one, sizeof(one)) < 0)
		pr_warn("virtio-9p: waking the queue thread: %s", strerror(errno));
	for (unsigned int i = 0; i < v->nthreads; i++)
		pthread_join(v->threads[i].id, NULL);
	free_pool(v);
	/* A reset ends the mount: its fids go with it. */
	p9_session_free(v->sess);
	v->sess = NULL;
	v->running = false;
}

static void v9p_config_read(struct virtio_dev *dev, uint32_t offset,
			    void *data, uint32_t len)
{
	struct v9p *v = to_v9p(dev);

	if (offset > dev->config_len || len > dev->config_len - offset)
		return;
	memcpy(data, v->config + offset, len);
}

static void v9p_config_write(struct virtio_dev *dev, uint32_t offset,
			     const void *data, uint32_t len)
{
	/* The mount tag is read-only. */
}

static int v9p_features_ok(struct virtio_dev *dev)
{
	return 0;
}

static void v9p_destroy(struct virtio_dev *dev)
{
	struct v9p *v = to_v9p(dev);

	v9p_queue_stop(dev, 0);
	p9_server_close(v->srv);
	pthread_mutex_destroy(&v->lock);
	pthread_cond_destroy(&v->cond);
	pthread_cond_destroy(&v->slot_cond);
	pthread_cond_destroy(&v->standby_cond);
	pthread_mutex_destroy(&v->push_lock);
	free(v->config);
	free(v);
}

struct p9_server *virtio_9p_server(struct virtio_dev *dev)
{
	return to_v9p(dev)->srv;
}

static const struct virtio_dev_ops v9p_ops = {
	.config_read = v9p_config_read,
	.config_write = v9p_config_write,
	.features_ok = v9p_features_ok,
	.queue_start = v9p_queue_start,
	.queue_stop = v9p_queue_stop,
	.destroy = v9p_destroy,
};

struct virtio_dev *virtio_9p_create(const struct share_cfg *cfg, char *err,
				    size_t errlen)
{
	struct p9_server_cfg scfg = {
		.path = cfg->path, .ro = cfg->ro, .msize = cfg->msize,
		.security = cfg->security == SHARE_SEC_PASSTHROUGH ? P9_SEC_PASSTHROUGH :
			    cfg->security == SHARE_SEC_NONE ? P9_SEC_NONE :
			    P9_SEC_MAPPED_XATTR,
	};
	size_t tl = cfg->tag ? strlen(cfg->tag) : 0;
	pthread_condattr_t ca;
	struct rlimit rl;
	struct v9p *v;

	if (!tl || tl > 0xffff) {
		snprintf(err, errlen, "--share %s: a tag= is required for virtio-9p",
			 cfg->path);
		return NULL;
	}
	/* Every path the guest walks holds an O_PATH descriptor: raise the
	 * soft limit to the hard one. The server keeps its reserve of it
	 * for the rest of the VM (disks, eventfds, io_uring); one session
	 * at a time, which may take the whole 9P budget (every share's
	 * guest is the same guest). */
	if (!getrlimit(RLIMIT_NOFILE, &rl) && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	scfg.max_sessions = 1;
	v = calloc(1, sizeof(*v));
	if (!v || !(v->config = malloc(2 + tl))) {
		free(v);
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	if (p9_server_open(&scfg, &v->srv, err, errlen)) {
		free(v->config);
		free(v);
		return NULL;
	}
	/* struct virtio_9p_config: le16 tag_len, then the tag (no NUL). */
	v->poll_ns = (uint64_t)cfg->poll_us * 1000;
	v->config[0] = tl;
	v->config[1] = tl >> 8;
	memcpy(v->config + 2, cfg->tag, tl);
	pthread_mutex_init(&v->lock, NULL);
	pthread_cond_init(&v->cond, NULL);
	pthread_cond_init(&v->slot_cond, NULL);
	/* the standby's deadlines are on the monotonic clock */
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&v->standby_cond, &ca);
	pthread_condattr_destroy(&ca);
	pthread_mutex_init(&v->push_lock, NULL);
	v->dev.name = "virtio-9p";
	v->dev.device_id = VIRTIO_ID_9P;
	v->dev.num_queues = 1;
	v->dev.max_queue_size = VIRTIO_9P_QUEUE_SIZE;
	v->dev.config_len = 2 + tl;
	v->dev.host_features = 1ull << VIRTIO_F_VERSION_1 |
			       1ull << VIRTIO_F_RING_INDIRECT_DESC |
			       1ull << VIRTIO_F_RING_EVENT_IDX |
			       1ull << VIRTIO_9P_F_MOUNT_TAG;
	v->dev.ops = &v9p_ops;
	return &v->dev;
}
