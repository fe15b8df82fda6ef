/* libFuzzer harness for set-limits and query-limits: any bytes as one
 * request line; what parses runs through the handlers on one disk with no
 * file behind it (only its limits change). Must never crash or leak; an
 * error always has a class and a description; limits that were accepted
 * always pass disk_limits_check, and a refused request changes nothing. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "api/limits.h"
#include "block/backend.h"

static struct disk_cfg cfg = { .path = "/fuzz/disk.img" };
static struct blk_backend be = { .fd = -1, .fd_buffered = -1, .size = 1 << 20 };
static struct api_objects objs;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct json_object *root = NULL, *id;
	struct disk_limits before, after;
	struct api_req req;
	const char *name;
	char err[160];
	char *line = malloc(size ? size : 1);

	if (!line)
		return 0;
	if (!objs.ndisks)
		api_add_disk(&objs, &cfg, &be, 1);
	memcpy(line, data, size);
	if (!api_parse_request(line, size, &root, &name, &id, &req)) {
		blk_get_limits(&be, &before, NULL);
		req.ret = NULL;
		if (api_limits_run(&objs, name, &req)) {
			if (!req.err_class[0] || !req.err_desc[0])
				abort();
			blk_get_limits(&be, &after, NULL);
			if (memcmp(&before, &after, sizeof(before)))
				abort();
		} else {
			blk_get_limits(&be, &after, NULL);
			if (disk_limits_check(&after, err, sizeof(err)))
				abort();
			json_object_to_json_string(req.ret);
		}
		json_object_put(req.ret);
	}
	json_object_put(root);
	free(line);
	return 0;
}
