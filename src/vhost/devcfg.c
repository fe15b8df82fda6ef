/* vhost-user config space messages: GET_CONFIG and SET_CONFIG on the
 * device's config space. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "lib/log.h"
#include "vhost/server_internal.h"
#include "virtio/virtio.h"

int vhu_do_get_config(struct vhu_server *s, struct vhu_msg *m)
{
	struct vhu_config *c = &m->p.cfg;
	uint32_t len = s->dev->config_len;

	if (c->offset > VHU_MAX_CONFIG || c->size > VHU_MAX_CONFIG - c->offset) {
		/* An empty payload is the protocol's error reply. */
		return vhu_reply(s, m, c, 0);
	}
	/* The front-end may ask for its own idea of the config size, which
	 * can be larger than ours: the rest reads as zero, as it would for
	 * a device without those fields. */
	memset(c->data, 0, c->size);
	if (c->offset < len)
		s->dev->ops->config_read(s->dev, c->offset, c->data,
					 c->size < len - c->offset ? c->size : len - c->offset);
	return vhu_reply(s, m, c, VHU_CONFIG_HDR_SIZE + c->size);
}

int vhu_do_set_config(struct vhu_server *s, struct vhu_msg *m)
{
	const struct vhu_config *c = &m->p.cfg;
	uint32_t len = s->dev->config_len;

	if (c->flags > 1)
		return vhu_fail(s, -EINVAL, "SET_CONFIG: unknown flags 0x%x", c->flags);
	if (c->offset > len || c->size > len - c->offset) {
		snprintf(s->err, sizeof(s->err), "SET_CONFIG: offset %u size %u outside config space of %u bytes",
			 c->offset, c->size, len);
		return VHU_NACK;
	}
	if (!s->dev->ops->config_write) {
		snprintf(s->err, sizeof(s->err), "SET_CONFIG: config space is read-only");
		return VHU_NACK;
	}
	/* The device's config_write ignores writes to read-only fields, as
	 * it does for a driver on virtio-pci. */
	s->dev->ops->config_write(s->dev, c->offset, c->data, c->size);
	return 0;
}
