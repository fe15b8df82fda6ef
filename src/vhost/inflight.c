/* vhost-user inflight I/O tracking (INFLIGHT_SHMFD): the buffer the
 * front-end keeps for us, in which a later back-end finds the requests left
 * in flight, and GET/SET_INFLIGHT_FD. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "vhost/server_internal.h"
#include "virtio/virtio.h"

/* Forgets the inflight buffer; the queues using it are stopped. */
void vhu_inflight_clear(struct vhu_server *s)
{
	if (s->inflight_map)
		munmap(s->inflight_map, s->inflight_len);
	for (unsigned int i = 0; i < s->inflight_nq; i++)
		free(s->inflight[i].resubmit);
	free(s->inflight);
	s->inflight = NULL;
	s->inflight_map = NULL;
	s->inflight_len = 0;
	s->inflight_nq = s->inflight_qsize = 0;
}

static int check_inflight(struct vhu_server *s, const struct vhu_inflight *in,
			  uint64_t *need)
{
	if (!in->num_queues || in->num_queues > s->nq)
		return vhu_fail(s, -EINVAL, "inflight buffer: %u queues, the device has %u",
				in->num_queues, s->nq);
	if (!in->queue_size || in->queue_size > s->dev->max_queue_size)
		return vhu_fail(s, -EINVAL, "inflight buffer: queue size %u, at most %u",
				in->queue_size, s->dev->max_queue_size);
	*need = in->num_queues * virtq_inflight_region_size(in->queue_size);
	return 0;
}

/* The front-end asks for a buffer to keep for us: a sealed memfd (it can
 * neither shrink under a later back-end nor grow), zeroed, so every
 * queue's region starts unused (version 0). */
int vhu_do_get_inflight_fd(struct vhu_server *s, struct vhu_msg *m)
{
	struct vhu_inflight in = m->p.inflight;
	uint64_t need;
	long pg = sysconf(_SC_PAGESIZE);
	int fd, ret = check_inflight(s, &in, &need);

	if (ret)
		return ret;
	need = (need + pg - 1) & ~(uint64_t)(pg - 1);
	fd = memfd_create("iovm-inflight", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return vhu_fail(s, -errno, "inflight buffer: memfd_create: %s", strerror(errno));
	if (ftruncate(fd, need) < 0 ||
	    fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0) {
		ret = vhu_fail(s, -errno, "inflight buffer of %" PRIu64 " bytes: %s", need,
			       strerror(errno));
		close(fd);
		return ret;
	}
	in.mmap_size = need;
	in.mmap_offset = 0;
	ret = vhu_msg_reply_fd(s->sock, m, &in, sizeof(in), fd);
	close(fd);
	return vhu_reply_sent(s, ret);
}

/* The buffer comes back (at every start, and to a new back-end after a
 * crash): map it, and each queue's region tells virtq_init what the
 * previous back-end left in flight. It must be a memfd sealed against
 * shrinking, as the ones we hand out are. */
int vhu_do_set_inflight_fd(struct vhu_server *s, struct vhu_msg *m)
{
	const struct vhu_inflight *in = &m->p.inflight;
	struct virtq_inflight *inf;
	struct stat st;
	uint64_t need;
	void *p;
	int seals, ret = check_inflight(s, in, &need);

	if (ret)
		return ret;
	seals = fcntl(m->fds[0], F_GET_SEALS);
	if (seals < 0 || !(seals & F_SEAL_SHRINK))
		return vhu_fail(s, -EPERM, "inflight buffer fd is not a memfd sealed against shrinking");
	if (fstat(m->fds[0], &st) < 0)
		return vhu_fail(s, -errno, "inflight buffer fd: %s", strerror(errno));
	if (in->mmap_size < need || in->mmap_offset % sysconf(_SC_PAGESIZE) ||
	    in->mmap_offset > (uint64_t)st.st_size ||
	    need > (uint64_t)st.st_size - in->mmap_offset)
		return vhu_fail(s, -EINVAL, "inflight buffer: %" PRIu64 " bytes at offset %" PRIu64
				" of a %" PRIu64 "-byte file, %u queues of %u need %" PRIu64,
				in->mmap_size, in->mmap_offset, (uint64_t)st.st_size,
				in->num_queues, in->queue_size, need);
	inf = calloc(in->num_queues, sizeof(*inf));
	if (!inf)
		return vhu_fail(s, -ENOMEM, "inflight buffer: out of memory");
	for (unsigned int i = 0; i < in->num_queues; i++) {
		inf[i].resubmit = calloc(in->queue_size, sizeof(*inf[i].resubmit));
		if (!inf[i].resubmit) {
			while (i--)
				free(inf[i].resubmit);
			free(inf);
			return vhu_fail(s, -ENOMEM, "inflight buffer: out of memory");
		}
	}
	p = mmap(NULL, need, PROT_READ | PROT_WRITE, MAP_SHARED, m->fds[0], in->mmap_offset);
	if (p == MAP_FAILED) {
		ret = vhu_fail(s, -errno, "inflight buffer: mmap: %s", strerror(errno));
		for (unsigned int i = 0; i < in->num_queues; i++)
			free(inf[i].resubmit);
		free(inf);
		return ret;
	}
	vhu_stop_all(s);
	vhu_inflight_clear(s);
	s->inflight_map = p;
	s->inflight_len = need;
	s->inflight_nq = in->num_queues;
	s->inflight_qsize = in->queue_size;
	s->inflight = inf;
	for (unsigned int i = 0; i < in->num_queues; i++)
		inf[i].region = (struct virtq_inflight_region *)
			(s->inflight_map + i * virtq_inflight_region_size(in->queue_size));
	return vhu_sync_all(s);
}
