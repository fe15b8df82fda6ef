/* virtio-9p: a few alike threads share the queue (leader/followers): the
 * one polling the kick eventfd pops request chains, answers quick metadata
 * requests itself and queues those that move data or may wait (read, write,
 * readdir, fsync, ...), which the others serve. Requests are served
 * straight on the chains' iovecs (guest memory) and the replies pushed in
 * completion order. Per-request state is a slot from a pool sized at queue
 * start. */
#include <errno.h>
#include <poll.h>
#include <sys/resource.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lib/log.h"
#include "p9/server.h"
#include "virtio/9p.h"
#include "virtio/ring.h"

struct v9p_slot {
	struct p9_req req;
	struct v9p_slot *next;
	struct virtq_elem e;
	struct iovec *iov;		/* VIRTIO_9P_MAX_IOV entries */
};

struct v9p {
	struct virtio_dev dev;
	struct p9_server *srv;
	struct p9_session *sess;	/* one mount per queue start */
	uint8_t *config;
	struct virtq *vq;
	bool running;
	bool stop;			/* under lock */
	bool broken;
	pthread_t threads[VIRTIO_9P_THREADS];
	unsigned int nthreads;
	bool polling;			/* a thread owns the kick fd */
	pthread_mutex_t lock;		/* slots, ready queue, stop */
	pthread_cond_t cond;		/* idle threads: work or polling */
	pthread_cond_t slot_cond;	/* a slot was freed */
	pthread_mutex_t push_lock;	/* the used ring */
	struct v9p_slot *slots;
	struct iovec *iovs;
	unsigned int nslots;
	struct v9p_slot *free_list;
	struct v9p_slot *ready_head, *ready_tail;
	unsigned int inflight;
};

static struct v9p *to_v9p(struct virtio_dev *dev)
{
	return (struct v9p *)dev;
}

static void mark_broken(struct v9p *v, const char *why)
{
	pthread_mutex_lock(&v->lock);
	if (v->broken) {
		pthread_mutex_unlock(&v->lock);
		return;
	}
	v->broken = true;
	pthread_mutex_unlock(&v->lock);
	pr_guest("virtio-9p: %s; device needs reset", why);
	if (v->dev.transport.needs_reset)
		v->dev.transport.needs_reset(&v->dev);
}

static void slot_release(struct v9p *v, struct v9p_slot *s)
{
	pthread_mutex_lock(&v->lock);
	s->next = v->free_list;
	v->free_list = s;
	__atomic_sub_fetch(&v->inflight, 1, __ATOMIC_RELAXED);
	pthread_cond_broadcast(&v->slot_cond);
	pthread_mutex_unlock(&v->lock);
}

static void serve(struct v9p *v, struct v9p_slot *s)
{
	size_t len = 0;

	if (s->e.in_num)
		len = p9_handle(v->sess, &s->req, s->iov, s->e.out_num,
				s->iov + s->e.out_num, s->e.in_num);
	pthread_mutex_lock(&v->push_lock);
	virtq_push(v->vq, s->e.head, len);
	virtq_notify(v->vq);
	pthread_mutex_unlock(&v->push_lock);
	/* Delivered: a Tflush waiting on this tag may now answer. */
	p9_req_end(v->sess, &s->req);
	slot_release(v, s);
}

static struct v9p_slot *take_slot(struct v9p *v)
{
	struct v9p_slot *s;

	pthread_mutex_lock(&v->lock);
	while (!v->free_list && !v->stop)
		pthread_cond_wait(&v->slot_cond, &v->lock);
	s = v->stop ? NULL : v->free_list;
	if (s) {
		v->free_list = s->next;
		__atomic_add_fetch(&v->inflight, 1, __ATOMIC_RELAXED);
	}
	pthread_mutex_unlock(&v->lock);
	return s;
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

/* The poller's work: pops every available chain, serves quick metadata
 * requests on the spot and queues those that may block. Returns false
 * when the ring broke or the device stops. */
static bool process_ring(struct v9p *v)
{
	for (;;) {
		virtq_disable_kicks(v->vq);
		for (;;) {
			struct v9p_slot *s = take_slot(v);
			int ret;

			if (!s)
				return false;
			ret = virtq_pop(v->vq, &s->e, s->iov, VIRTIO_9P_MAX_IOV);
			if (ret <= 0) {
				slot_release(v, s);
				if (ret < 0) {
					mark_broken(v, ret == -ENOBUFS ?
						    "request with too many segments" :
						    "malformed descriptor chain");
					return false;
				}
				break;
			}
			if (!s->e.in_num)
				pr_guest("virtio-9p: request without room for a reply");
			/* Registered in arrival order, for Tflush. */
			p9_req_begin(v->sess, &s->req, s->iov, s->e.out_num);
			if (p9_req_may_block(&s->req)) {
				/* An idle thread starts on it now: the poller
				 * may go on popping, or wait for a free slot. */
				pthread_mutex_lock(&v->lock);
				enqueue_locked(v, s);
				pthread_cond_signal(&v->cond);
				pthread_mutex_unlock(&v->lock);
			} else {
				serve(v, s);
			}
		}
		if (!virtq_enable_kicks(v->vq))
			return true;
	}
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

/* Waits for a kick (or a stop, which also writes the kick eventfd). A
 * driver that got its last reply usually sends its next request within
 * microseconds: when nothing is in flight, watching the ring for a short
 * while first saves a thread wake-up per request on that path (as QEMU's
 * adaptive iothread polling does). With requests in flight the CPU is
 * left to the threads serving them. */
static void wait_kick(struct v9p *v)
{
	struct pollfd pfd = { .fd = v->vq->kick_fd, .events = POLLIN };
	uint64_t cnt, until = now_ns() + VIRTIO_9P_POLL_NS;

	while (!__atomic_load_n(&v->inflight, __ATOMIC_RELAXED) &&
	       now_ns() < until) {
		if (virtq_avail_count(v->vq) || __atomic_load_n(&v->stop, __ATOMIC_RELAXED))
			return;
		__builtin_ia32_pause();
	}
	if (poll(&pfd, 1, -1) > 0 && read(v->vq->kick_fd, &cnt, sizeof(cnt)) < 0) {
		/* EAGAIN: another reader took it; the ring is looked at
		 * anyway */
	}
}

/* Every thread is alike (leader/followers): one at a time is the poller,
 * waiting on the kick eventfd and popping; it serves metadata itself. When
 * it has queued requests that may block, it hands the poller role to an
 * idle thread and serves one of them, so a data request costs a single
 * thread wake-up on its way, and a getattr arriving meanwhile is still
 * popped and answered by the new poller. */
static void *v9p_thread(void *arg)
{
	struct v9p *v = arg;

	pthread_setname_np(pthread_self(), "iovm-9p");
	pthread_mutex_lock(&v->lock);
	for (;;) {
		struct v9p_slot *s = dequeue_locked(v);

		if (s) {
			pthread_mutex_unlock(&v->lock);
			serve(v, s);
			pthread_mutex_lock(&v->lock);
			continue;
		}
		if (v->stop)
			break;
		if (v->polling || v->broken) {
			pthread_cond_wait(&v->cond, &v->lock);
			continue;
		}
		v->polling = true;
		pthread_mutex_unlock(&v->lock);
		if (!process_ring(v)) {
			/* broken or stopping: only a stop ends the wait */
			pthread_mutex_lock(&v->lock);
			v->polling = false;
			pthread_cond_broadcast(&v->cond);
			while (!v->stop && !v->ready_head)
				pthread_cond_wait(&v->cond, &v->lock);
			continue;
		}
		pthread_mutex_lock(&v->lock);
		if (v->ready_head) {
			/* Serve one queued request here; another thread
			 * takes over polling and the rest of the queue. */
			v->polling = false;
			pthread_cond_signal(&v->cond);
			continue;
		}
		pthread_mutex_unlock(&v->lock);
		wait_kick(v);
		pthread_mutex_lock(&v->lock);
		v->polling = false;
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
	v->inflight = 0;
	v->vq = vq;
	v->stop = v->broken = false;
	v->polling = false;
	for (v->nthreads = 0; v->nthreads < VIRTIO_9P_THREADS; v->nthreads++) {
		ret = pthread_create(&v->threads[v->nthreads], NULL,
				     v9p_thread, v);
		if (ret)
			break;
	}
	ret = v->nthreads ? 0 : EAGAIN;
	if (ret) {
		pthread_mutex_lock(&v->lock);
		__atomic_store_n(&v->stop, true, __ATOMIC_RELAXED);
		pthread_cond_broadcast(&v->cond);
		pthread_cond_broadcast(&v->slot_cond);
		pthread_mutex_unlock(&v->lock);
		for (unsigned int i = 0; i < v->nthreads; i++)
			pthread_join(v->threads[i], NULL);
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
	pthread_cond_broadcast(&v->cond);
	pthread_cond_broadcast(&v->slot_cond);
	pthread_mutex_unlock(&v->lock);
	if (write(v->vq->kick_fd, &one, sizeof(one)) < 0)
		pr_warn("virtio-9p: waking the queue thread: %s", strerror(errno));
	for (unsigned int i = 0; i < v->nthreads; i++)
		pthread_join(v->threads[i], NULL);
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
	pthread_mutex_destroy(&v->push_lock);
	free(v->config);
	free(v);
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
	struct p9_server_cfg scfg = { .path = cfg->path, .ro = cfg->ro,
				      .msize = cfg->msize };
	size_t tl = cfg->tag ? strlen(cfg->tag) : 0;
	struct rlimit rl;
	struct v9p *v;

	if (!tl || tl > 0xffff) {
		snprintf(err, errlen, "--share %s: a tag= is required for virtio-9p",
			 cfg->path);
		return NULL;
	}
	/* Every path the guest walks holds an O_PATH descriptor: raise the
	 * soft limit to the hard one, and keep half of it for the rest of
	 * the VM (disks, eventfds, other shares). */
	if (!getrlimit(RLIMIT_NOFILE, &rl)) {
		if (rl.rlim_cur < rl.rlim_max) {
			rl.rlim_cur = rl.rlim_max;
			setrlimit(RLIMIT_NOFILE, &rl);
			getrlimit(RLIMIT_NOFILE, &rl);
		}
		if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur / 2 < 16384)
			scfg.lim.max_nodes = rl.rlim_cur / 2 > 256 ? rl.rlim_cur / 2 : 256;
	}
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
	v->config[0] = tl;
	v->config[1] = tl >> 8;
	memcpy(v->config + 2, cfg->tag, tl);
	pthread_mutex_init(&v->lock, NULL);
	pthread_cond_init(&v->cond, NULL);
	pthread_cond_init(&v->slot_cond, NULL);
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
