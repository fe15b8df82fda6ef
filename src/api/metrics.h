/* The statistics of a command's disks and shares, as the control socket's
 * query-stats reply (JSON) and as Prometheus text exposition (version
 * 0.0.4) for the "metrics" command and --metrics-listen. Both read the
 * counters without locks of the data path (block/stats.h, p9/server.h). */
#ifndef IOVM_API_METRICS_H
#define IOVM_API_METRICS_H

#include <stddef.h>

#include <json-c/json.h>

#include "api/objects.h"

/* query-stats' "return": {"disks": [...], "shares": [...]}, every disk and
 * share, or only disk (when not NULL) and only share (when not NULL); when
 * one of them is given and the other not, the other list is empty. NULL
 * without memory. */
struct json_object *api_stats_json(struct api_objects *o,
				   const struct api_disk *disk,
				   const struct api_share *share);

/* The Prometheus text of every disk and share: a string to free, its
 * length in *len; NULL without memory. */
char *api_metrics_text(struct api_objects *o, size_t *len);

/* The percentiles query-stats reports, and their names. */
#define API_STATS_NPCT 4
extern const double api_stats_pct[API_STATS_NPCT];
extern const char *const api_stats_pct_name[API_STATS_NPCT];

#endif
