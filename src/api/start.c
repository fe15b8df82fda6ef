/* api_start: one server per command, with every part's commands. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "api/limits.h"
#include "api/start.h"
#include "api/stats.h"

int api_start(struct api_objects *o, const char *path, struct api_server **out,
	      char *err, size_t errlen)
{
	struct api_server *s = api_new();
	int ret;

	if (!s) {
		snprintf(err, errlen, "--api-socket: out of memory");
		return -ENOMEM;
	}
	/* One line per part of the API, each registering its commands:
	 * if (!ret) ret = api_add_PART(s, o); */
	ret = api_add_core(s, o);
	if (!ret)
		ret = api_add_stats(s, o);
	if (!ret)
		ret = api_add_limits(s, o);
	if (!ret)
		ret = api_add_resize(s, o);
	if (ret) {
		snprintf(err, errlen, "--api-socket: cannot register the commands: %s",
			 strerror(-ret));
		api_free(s);
		return ret;
	}
	ret = api_listen(s, path, err, errlen);
	if (ret) {
		api_free(s);
		return ret;
	}
	*out = s;
	return 0;
}
