/* Which block driver a disk's path names: a file (none), Ceph RBD
 * (rbd:POOL/IMAGE) or NBD (the NBD URI schemes). */
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
