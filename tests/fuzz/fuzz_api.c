/* libFuzzer harness for the control socket's request parser: any bytes as
 * one request line, then the argument checks every handler uses on what
 * parsed. Must never crash, leak or read past the line; an error always
 * comes with a class and a description. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"

static const char *const names[] = { "disk", "iops", "on", NULL };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct json_object *root, *id;
	struct api_req req;
	const char *name, *s;
	uint64_t u;
	bool b;

	/* The server hands the parser a copy without its newline; an exact
	 * allocation lets ASan see a read past the end. */
	char *line = malloc(size ? size : 1);

	if (!line)
		return 0;
	memcpy(line, data, size);
	if (api_parse_request(line, size, &root, &name, &id, &req)) {
		if (!req.err_class[0] || !req.err_desc[0])
			abort();
	} else {
		if (!name || !req.args)
			abort();
		api_arg_str(&req, "disk", false, &s);
		api_arg_u64(&req, "iops", false, &u);
		api_arg_bool(&req, "on", false, &b);
		api_args_only(&req, names);
		if (id)
			json_object_to_json_string(id);
	}
	json_object_put(root);
	free(line);
	return 0;
}
