/* The control socket's I/O limit commands: set-limits, query-limits. */
#ifndef IOVM_API_LIMITS_H
#define IOVM_API_LIMITS_H

#include "api/api.h"
#include "api/objects.h"

/* Registers set-limits and query-limits on o's disks. 0 or -errno. */
int api_add_limits(struct api_server *s, struct api_objects *o);

/* Runs the command name ("set-limits" or "query-limits") on req as the
 * server would: 0 with req->ret set, or -1 with req's error set (also for
 * any other name). For the fuzz harness, which has no server. */
int api_limits_run(struct api_objects *o, const char *name,
		   struct api_req *req);

#endif
