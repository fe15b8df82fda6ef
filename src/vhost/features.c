/* vhost-user messages on the device as a whole: feature and protocol
 * feature negotiation, owner, reset, queue count. */
#include <errno.h>
#include <inttypes.h>

#include "lib/log.h"
#include "vhost/server_internal.h"
#include "virtio/virtio.h"

/* Features the vhost-user transport itself cannot provide, whatever the
 * device offers: an IOMMU (no IOTLB messages), packed rings (ring.c is
 * split only), dirty logging for migration. */
#define VHU_UNSUPPORTED_FEATURES                                          \
	((1ull << 33) /* ACCESS_PLATFORM */ | (1ull << 34) /* RING_PACKED */ | \
	 (1ull << 26) /* VHOST_F_LOG_ALL */)

#define VHU_PROTOCOL_FEATURES                                             \
	((1ull << VHU_PF_MQ) | (1ull << VHU_PF_REPLY_ACK) |                  \
	 (1ull << VHU_PF_BACKEND_REQ) |                                     \
	 (1ull << VHU_PF_CONFIG) | (1ull << VHU_PF_RESET_DEVICE) |           \
	 (1ull << VHU_PF_CONFIGURE_MEM_SLOTS) |                             \
	 (1ull << VHU_PF_INFLIGHT_SHMFD))

int vhu_do_get_features(struct vhu_server *s, struct vhu_msg *m)
{
	uint64_t f = (s->dev->host_features & ~VHU_UNSUPPORTED_FEATURES) |
		     (1ull << VHU_F_PROTOCOL_FEATURES);

	return vhu_reply(s, m, &f, sizeof(f));
}

int vhu_do_set_features(struct vhu_server *s, struct vhu_msg *m)
{
	uint64_t offered = (s->dev->host_features & ~VHU_UNSUPPORTED_FEATURES) |
			   (1ull << VHU_F_PROTOCOL_FEATURES);
	uint64_t f = m->p.u64;
	uint64_t old = s->dev->guest_features;
	int ret;

	/* QEMU acks some device features without asking the back-end (its
	 * vhost-user-scsi sets CHANGE whatever was offered): such bits are
	 * dropped, so the device only ever sees features it offered. */
	if (f & ~offered) {
		pr_debug("vhost-user: ignoring unoffered features 0x%" PRIx64, f & ~offered);
		f &= offered;
	}
	vhu_stop_all(s);
	s->dev->guest_features = f & ~(1ull << VHU_F_PROTOCOL_FEATURES);
	ret = s->dev->ops->features_ok ? s->dev->ops->features_ok(s->dev) : 0;
	if (ret) {
		s->dev->guest_features = old;
		return vhu_fail(s, -EINVAL, "the device refused features 0x%" PRIx64, f);
	}
	s->features = f;
	/* Without protocol features rings are enabled from the start;
	 * with them, SET_VRING_ENABLE decides. */
	if (!(f & (1ull << VHU_F_PROTOCOL_FEATURES)))
		for (unsigned int i = 0; i < s->nq; i++)
			s->q[i].enabled = true;
	return vhu_sync_all(s);
}

int vhu_do_get_protocol_features(struct vhu_server *s, struct vhu_msg *m)
{
	uint64_t f = VHU_PROTOCOL_FEATURES;

	return vhu_reply(s, m, &f, sizeof(f));
}

int vhu_do_set_protocol_features(struct vhu_server *s, struct vhu_msg *m)
{
	if (m->p.u64 & ~(uint64_t)VHU_PROTOCOL_FEATURES)
		return vhu_fail(s, -EINVAL, "protocol features 0x%" PRIx64 " include unoffered bits",
				m->p.u64);
	__atomic_store_n(&s->protocol_features, m->p.u64, __ATOMIC_RELAXED);
	return 0;
}

int vhu_do_set_owner(struct vhu_server *s, struct vhu_msg *m)
{
	return 0;
}

/* RESET_OWNER (deprecated) and RESET_DEVICE: all rings stop and forget
 * their state (the inflight buffer too: it describes the old rings);
 * memory and the connection stay. */
void vhu_reset_device(struct vhu_server *s)
{
	vhu_stop_all(s);
	if (s->dev->ops->flush)
		s->dev->ops->flush(s->dev);
	for (unsigned int i = 0; i < s->nq; i++)
		vhu_queue_reset(&s->q[i]);
	vhu_inflight_clear(s);
	s->features = 0;
	s->dev->guest_features = 0;
}

int vhu_do_reset(struct vhu_server *s, struct vhu_msg *m)
{
	vhu_reset_device(s);
	return 0;
}

int vhu_do_get_queue_num(struct vhu_server *s, struct vhu_msg *m)
{
	uint64_t n = s->nq;

	return vhu_reply(s, m, &n, sizeof(n));
}
