/* The control socket's I/O limit commands: set-limits, query-limits. */
#ifndef IOVM_API_LIMITS_H
#define IOVM_API_LIMITS_H

#include "api/api.h"
#include "api/objects.h"

/* Registers set-limits and query-limits on o's disks. 0 or -errno. */
int api_add_limits(struct api_server *s, struct api_objects *o);

#endif
