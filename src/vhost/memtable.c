/* vhost-user messages on the memory table: SET_MEM_TABLE and the
 * CONFIGURE_MEM_SLOTS ones (ADD/REM_MEM_REG, GET_MAX_MEM_SLOTS). */
#include "lib/log.h"
#include "vhost/server_internal.h"

int vhu_do_set_mem_table(struct vhu_server *s, struct vhu_msg *m)
{
	const struct vhu_mem_table *t = &m->p.mem;
	int ret;

	vhu_stop_all(s);
	vhu_mem_clear(&s->mem);
	for (unsigned int i = 0; i < t->nregions; i++) {
		ret = vhu_mem_add(&s->mem, &t->r[i], m->fds[i], s->err, sizeof(s->err));
		if (ret)
			return ret;
	}
	return vhu_sync_all(s);
}

/* Memory changes while rings run (hotplug): rings are re-mapped, and a
 * ring whose memory is momentarily gone (a region being replaced by REM
 * then ADD) stays stopped until its memory is back. */
static void sync_after_mem_change(struct vhu_server *s)
{
	for (unsigned int i = 0; i < s->nq; i++)
		if (vhu_queue_sync(s, i))
			pr_debug("vhost-user: vring %u waits for its memory: %s", i, s->err);
	s->err[0] = 0;
}

int vhu_do_add_mem_reg(struct vhu_server *s, struct vhu_msg *m)
{
	int ret;

	vhu_stop_all(s);
	ret = vhu_mem_add(&s->mem, &m->p.memreg.r, m->fds[0], s->err, sizeof(s->err));
	if (ret)
		return ret;
	sync_after_mem_change(s);
	return 0;
}

int vhu_do_rem_mem_reg(struct vhu_server *s, struct vhu_msg *m)
{
	int ret;

	vhu_stop_all(s);
	ret = vhu_mem_remove(&s->mem, &m->p.memreg.r, s->err, sizeof(s->err));
	if (ret)
		return ret;
	sync_after_mem_change(s);
	return 0;
}

int vhu_do_get_max_mem_slots(struct vhu_server *s, struct vhu_msg *m)
{
	uint64_t n = VHU_MEM_MAX_REGIONS;

	return vhu_reply(s, m, &n, sizeof(n));
}
