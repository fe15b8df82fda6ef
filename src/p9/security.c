/* 9P server security models (mapped-xattr, none, passthrough): which
 * owners and modes of the guest's reach the host, and what the guest sees. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "p9/server_internal.h"

/* mapped-xattr keeps every host object the server's, at these modes. */
#define MAPPED_FILE_MODE 0600
#define MAPPED_DIR_MODE 0700

/* Outside passthrough no host object is made setuid, nor setgid unless it
 * is a folder (where setgid only picks the group of new entries, and they
 * stay the server's anyway). */
static uint32_t host_safe_mode(mode_t type, uint32_t mode)
{
	mode &= 07777;
	return S_ISDIR(type) ? mode & ~S_ISUID : mode & ~(S_ISUID | S_ISGID);
}

/* The mode a new object gets from the create call itself: never more
 * than the model allows, so there is no window with a setuid file. */
uint32_t create_mode(struct p9_server *srv, mode_t type, uint32_t mode)
{
	switch (srv->sec) {
	case P9_SEC_PASSTHROUGH:
		return mode & 07777;
	case P9_SEC_NONE:
		return host_safe_mode(type, mode);
	default:
		return S_ISDIR(type) ? MAPPED_DIR_MODE : MAPPED_FILE_MODE;
	}
}

static int mx_put(int fd, const char *name, uint64_t v, size_t len)
{
	char path[40];
	uint8_t b[8];

	for (size_t i = 0; i < len; i++)
		b[i] = v >> (8 * i);
	proc_path(fd, path, sizeof(path));
	return setxattr(path, name, b, len, 0) ? -errno : 0;
}

static bool mx_get(const char *path, bool follow, const char *name,
		   uint64_t *v, size_t len)
{
	uint8_t b[8];

	if ((follow ? getxattr(path, name, b, len) :
		      lgetxattr(path, name, b, len)) != (ssize_t)len)
		return false;
	*v = 0;
	for (size_t i = 0; i < len; i++)
		*v |= (uint64_t)b[i] << (8 * i);
	return true;
}

/* The type a guest's stored mode may give a host object: a regular host
 * file stands for the guest's FIFOs, sockets and device nodes; anything
 * else on the host is what it is. */
static mode_t mapped_type(mode_t host, uint32_t stored)
{
	if (S_ISREG(host)) {
		switch (stored & S_IFMT) {
		case S_IFIFO:
		case S_IFSOCK:
		case S_IFCHR:
		case S_IFBLK:
			return stored & S_IFMT;
		}
	}
	return host & S_IFMT;
}

/* Overlays the stored owner, mode and rdev on st, the host's stat of the
 * object at path (a /proc/self/fd magic link, followed). Symlinks carry
 * no user xattrs. The server always stores mode, uid and gid together,
 * so an object without a stored mode (one the host made) costs one
 * lookup, not three. */
static void mapped_overlay(const char *path, struct stat *st)
{
	uint64_t v;

	if (S_ISLNK(st->st_mode) || !mx_get(path, true, VIRTFS_MODE, &v, 4))
		return;
	st->st_mode = mapped_type(st->st_mode, v) | (v & 07777);
	if (mx_get(path, true, VIRTFS_UID, &v, 4))
		st->st_uid = v;
	if (mx_get(path, true, VIRTFS_GID, &v, 4))
		st->st_gid = v;
	if ((S_ISCHR(st->st_mode) || S_ISBLK(st->st_mode)) &&
	    mx_get(path, true, VIRTFS_RDEV, &v, 8))
		st->st_rdev = v;
}

/* The attributes the guest sees for a node. */
int node_guest_stat(struct p9_server *srv, struct p9_node *n,
		    struct stat *st)
{
	char path[40];

	if (fstatat(n->fd, "", st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW))
		return -errno;
	if (srv->sec == P9_SEC_MAPPED_XATTR) {
		proc_path(n->fd, path, sizeof(path));
		mapped_overlay(path, st);
	}
	return 0;
}

/* Gives a new object (fd: an O_PATH descriptor of it) the owner and mode
 * the client asked for, as far as the security model lets them reach the
 * host: passthrough applies both (the owner only when running as root),
 * none keeps the server's owner and a safe mode, mapped-xattr stores the
 * client's owner, mode (type included) and rdev and keeps the host object
 * the server's at 0600/0700. The process umask must not apply, so the
 * mode is set again after the create. Returns -errno when mapped-xattr
 * cannot store the attributes; the caller then removes the object. */
int set_new_attrs(struct p9_server *srv, int fd, uint32_t uid,
		  uint32_t gid, uint32_t mode, uint64_t rdev)
{
	struct stat st;
	uint32_t want;
	char nm[16];
	int ret;

	if (fstat(fd, &st))
		return -errno;
	if (S_ISLNK(st.st_mode)) {
		if (srv->sec == P9_SEC_PASSTHROUGH && srv->is_root)
			(void)!fchownat(fd, "", uid, gid,
					AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW);
		return 0;
	}
	switch (srv->sec) {
	case P9_SEC_PASSTHROUGH:
		/* chown clears setuid and setgid: the mode is compared after */
		if (srv->is_root &&
		    !fchownat(fd, "", uid, gid, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) &&
		    fstat(fd, &st))
			return -errno;
		want = mode & 07777;
		break;
	case P9_SEC_NONE:
		want = host_safe_mode(st.st_mode, mode);
		break;
	default:
		ret = mx_put(fd, VIRTFS_UID, uid, 4);
		if (!ret)
			ret = mx_put(fd, VIRTFS_GID, gid, 4);
		if (!ret)
			ret = mx_put(fd, VIRTFS_MODE, mode, 4);
		if (!ret && (S_ISCHR(mode) || S_ISBLK(mode)))
			ret = mx_put(fd, VIRTFS_RDEV, rdev, 8);
		if (ret)
			return ret;
		want = create_mode(srv, st.st_mode, mode);
		break;
	}
	if ((st.st_mode & 07777) != want) {
		proc_name(fd, nm);
		(void)!fchmodat(srv->procfd, nm, want, 0);
	}
	return 0;
}

/* Mode and owner under passthrough and none. */
int setattr_host(struct op *o, struct p9_fid *f, const struct stat *st)
{
	uint32_t valid = o->m->u.tsetattr.valid;
	struct p9_server *srv = o->srv;
	int fd = f->node->fd;
	uint32_t mode = o->m->u.tsetattr.mode & 07777;
	char nm[16];

	proc_name(fd, nm);
	if (valid & P9_SETATTR_MODE) {
		if (srv->sec != P9_SEC_PASSTHROUGH)
			mode = host_safe_mode(st->st_mode, mode);
		if (fchmodat(srv->procfd, nm, mode, 0))
			return -errno;
	}
	/* none: the host file stays the server's; like QEMU's none, the
	 * client is not told that its chown did not reach the host. */
	if ((valid & (P9_SETATTR_UID | P9_SETATTR_GID)) &&
	    srv->sec == P9_SEC_PASSTHROUGH) {
		uid_t uid = valid & P9_SETATTR_UID ? o->m->u.tsetattr.uid : (uid_t)-1;
		gid_t gid = valid & P9_SETATTR_GID ? o->m->u.tsetattr.gid : (gid_t)-1;

		if (fchownat(fd, "", uid, gid, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW))
			return -errno;
	}
	return 0;
}

/* Mode and owner under mapped-xattr: stored, the host object untouched. A
 * symlink cannot carry them; its chown is accepted and changes nothing. */
int setattr_mapped(struct op *o, struct p9_fid *f, const struct stat *st)
{
	uint32_t valid = o->m->u.tsetattr.valid;
	struct stat gst = *st;
	char path[40];
	int fd = f->node->fd, ret;

	if (S_ISLNK(st->st_mode) ||
	    !(valid & (P9_SETATTR_MODE | P9_SETATTR_UID | P9_SETATTR_GID)))
		return 0;
	/* The guest's view so far (the stored type of a guest's FIFO or
	 * device is kept), changed as asked, stored whole: see
	 * mapped_overlay. */
	proc_path(fd, path, sizeof(path));
	mapped_overlay(path, &gst);
	if (valid & P9_SETATTR_MODE)
		gst.st_mode = (gst.st_mode & S_IFMT) |
			      (o->m->u.tsetattr.mode & 07777);
	if (valid & P9_SETATTR_UID)
		gst.st_uid = o->m->u.tsetattr.uid;
	if (valid & P9_SETATTR_GID)
		gst.st_gid = o->m->u.tsetattr.gid;
	ret = mx_put(fd, VIRTFS_UID, gst.st_uid, 4);
	if (!ret)
		ret = mx_put(fd, VIRTFS_GID, gst.st_gid, 4);
	if (!ret)
		ret = mx_put(fd, VIRTFS_MODE, gst.st_mode, 4);
	return ret;
}

/* mapped-xattr: the type of a regular host file as the guest made it
 * (a FIFO, socket or device node it created with mknod). */
uint8_t mapped_dtype(int dirfd, const char *name)
{
	char path[300];
	uint64_t v;

	snprintf(path, sizeof(path), "/proc/self/fd/%d/%s", dirfd, name);
	if (!mx_get(path, false, VIRTFS_MODE, &v, 4))
		return DT_REG;
	switch (mapped_type(S_IFREG, v)) {
	case S_IFIFO: return DT_FIFO;
	case S_IFSOCK: return DT_SOCK;
	case S_IFCHR: return DT_CHR;
	case S_IFBLK: return DT_BLK;
	default: return DT_REG;
	}
}
