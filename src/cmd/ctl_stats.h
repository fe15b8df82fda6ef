/* iovm ctl's statistics commands: `stats [--watch N]` (an iostat -x-like
 * table of query-stats) and `metrics` (the Prometheus text). */
#ifndef IOVM_CMD_CTL_STATS_H
#define IOVM_CMD_CTL_STATS_H

#include <stdbool.h>
#include <stdio.h>

#include <json-c/json.h>

/* Prints query-stats' "return" as a table: a line per disk total and per
 * queue, then a line per share. With prev (an earlier reply) and secs
 * (the time between the two), rates and latencies cover that interval
 * (r/s, w/s, MB/s, average and p99 from the histograms' difference);
 * without, the counts since start. */
void ctl_stats_table(FILE *out, struct json_object *cur,
		     struct json_object *prev, double secs);

/* One request on the control socket: its "return" (the caller's to put),
 * or NULL with a one-line reason in err. */
typedef struct json_object *(*ctl_call_fn)(void *ctx, const char *cmd,
					   struct json_object *args,
					   char *err, size_t errlen);

/* `iovm ctl ... stats [--json] [--watch N] [disk=NAME] [share=NAME]`,
 * argv after "stats": prints once, or every N seconds until SIGINT or
 * SIGTERM. Returns the exit status. */
int ctl_stats_main(int argc, char **argv, bool json, ctl_call_fn call,
		   void *ctx);
/* `iovm ctl ... metrics`: prints the text as is (with --json, the reply). */
int ctl_metrics_main(int argc, char **argv, bool json, ctl_call_fn call,
		     void *ctx);

#endif
