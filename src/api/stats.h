/* The control socket's statistics commands: query-stats and metrics. */
#ifndef IOVM_API_STATS_H
#define IOVM_API_STATS_H

#include "api/api.h"
#include "api/objects.h"

/* Registers query-stats ({"disk": NAME, "share": NAME}, both optional) and
 * metrics (no arguments; {"text": "..."}) on s, reading o. 0 or -errno. */
int api_add_stats(struct api_server *s, struct api_objects *o);

#endif
