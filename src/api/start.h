/* Starting a command's control socket: the server, every part's commands,
 * then the listening thread. The commands (src/cmd) call only this. */
#ifndef IOVM_API_START_H
#define IOVM_API_START_H

#include <stddef.h>

#include "api/api.h"
#include "api/objects.h"

/* Makes the server for o, registers the commands and listens on path
 * (mode 0600). 0 with *out set, or -errno with a one-line message in err
 * (without "iovm: "). Stop it with api_free before o's devices go. */
int api_start(struct api_objects *o, const char *path, struct api_server **out,
	      char *err, size_t errlen);

/* The core commands (core.c): query-version, query-status,
 * query-commands, query-disks, query-shares, shutdown, pause, resume. */
int api_add_core(struct api_server *s, struct api_objects *o);

#endif
