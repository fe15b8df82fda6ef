/* Which block driver a disk's path names: a file (none), Ceph RBD
 * (rbd:POOL/IMAGE) or NBD (the NBD URI schemes), and how a device's queue
 * thread spins on them. */
#include "block/driver.h"

const struct blk_driver *blk_driver_for(const char *path, const char **missing)
{
	*missing = NULL;
	if (config_path_is_rbd(path)) {
#ifdef IOVM_HAVE_RBD
		return &blk_rbd_driver;
#else
		*missing = "Ceph RBD (librbd)";
#endif
	} else if (config_path_is_nbd(path)) {
#ifdef IOVM_HAVE_NBD
		return &blk_nbd_driver;
#else
		*missing = "NBD (libnbd)";
#endif
	}
	return NULL;
}

void blk_spin_of(struct blk_spin *s, const struct blk_backend *const *be,
		 const struct disk_cfg *const *cfgs, unsigned int n)
{
	bool full = false;

	for (unsigned int i = 0; i < n; i++)
		full |= blk_is_local(be[i]) || cfgs[i]->poll_set;
	s->ns = config_disks_poll_us(cfgs, n) * 1000ull;
	s->completions = full;
	s->answer_ns = full || s->ns < BLK_SPIN_NET_ANSWER_NS ?
		       s->ns : BLK_SPIN_NET_ANSWER_NS;
}
