/* The control socket (--api-socket PATH, issue 18): newline-delimited JSON
 * requests and replies in QMP's shape, served by one thread of its own.
 *
 *   -> {"execute": "query-stats", "arguments": {"disk": "disk0"}, "id": 7}
 *   <- {"return": {...}, "id": 7}
 *   <- {"error": {"class": "GenericError", "desc": "..."}, "id": 7}
 *
 * One object per line, each way. "arguments" is optional (an object when
 * present); "id" is optional, any JSON value, echoed. Several clients at
 * once; a malformed or oversized request (more than API_MAX_LINE bytes
 * before its newline) gets an error object and the connection goes on with
 * the next line; nothing a client sends reaches the VM's or the devices'
 * threads except through a handler. The socket is made with mode 0600.
 *
 * Handlers run on the API thread, one at a time, never on a vCPU or queue
 * thread; what they read of the data path (statistics) they read without
 * taking its locks (see block/stats.h), what they change (limits, size)
 * goes through that layer's own calls. */
#ifndef IOVM_API_API_H
#define IOVM_API_API_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <json-c/json.h>

/* Longest request line, newline excluded. */
#define API_MAX_LINE (64u << 10)
/* Most clients connected at once; one more is told so and closed. */
#define API_MAX_CLIENTS 16
/* Replies a client may leave unread; past that it is disconnected (it
 * stopped reading), so that it holds neither memory nor the thread. */
#define API_MAX_OUTPUT (8u << 20)

/* Error classes, as QMP names them. */
#define API_ERR_GENERIC "GenericError"
#define API_ERR_NOT_FOUND "CommandNotFound"
#define API_ERR_DEVICE "DeviceNotFound"

/* One request being answered. */
struct api_req {
	struct json_object *args;	/* "arguments" (an empty object if none) */
	struct json_object *ret;	/* the handler's result; NULL: {} */
	char err_class[32];		/* set by api_error */
	char err_desc[256];
	/* Set by a handler that succeeded: run on the API thread once the
	 * reply has been handed to the socket (shutdown: the client hears
	 * "return" before the process goes). NULL: nothing. */
	void (*after)(void *opaque);
	void *after_opaque;
};

/* A command: returns 0 with req->ret set (or left NULL for {}), or -1
 * after api_error. opaque is what api_register was given. */
typedef int (*api_fn)(void *opaque, struct api_req *req);

/* Sets req's error (class: API_ERR_*) and returns -1. */
int api_error(struct api_req *req, const char *cls, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Arguments, checked: 0 and *out set, 1 if absent and not required (*out
 * untouched), or -1 with req's error set naming the argument and what was
 * wanted (wrong type, out of range, missing). */
int api_arg_str(struct api_req *req, const char *name, bool required,
		const char **out);
int api_arg_u64(struct api_req *req, const char *name, bool required,
		uint64_t *out);
int api_arg_bool(struct api_req *req, const char *name, bool required,
		 bool *out);
/* Fails (-1, GenericError) if args has a member not in names (NULL-ended):
 * a misspelt argument is an error, not ignored. */
int api_args_only(struct api_req *req, const char *const *names);

struct api_server;

struct api_server *api_new(void);
/* Adds a command (before api_listen). summary: one line for
 * "query-commands". 0 or -errno (-EEXIST for a name taken). */
int api_register(struct api_server *s, const char *name, api_fn fn,
		 void *opaque, const char *summary);
/* The i-th command registered (in order): 0 with *name and *summary set,
 * or -1 past the last. For "query-commands". */
int api_command_at(struct api_server *s, unsigned int i, const char **name,
		   const char **summary);
/* Binds PATH (mode 0600; a stale socket there is replaced, any other file
 * is an error) and starts the thread. 0 or -errno with err set. */
int api_listen(struct api_server *s, const char *path, char *err,
	       size_t errlen);
/* Stops the thread, closes every client, removes the socket, frees. */
void api_free(struct api_server *s);
/* Zeroed memory that lives until api_free: handlers' state. NULL when
 * out of memory. */
void *api_alloc(struct api_server *s, size_t size);

/* The request line parser, apart for unit tests and the fuzz harness:
 * parses one line (len bytes, no newline) into the command name, its
 * arguments and id. Returns 0, or -1 with req's error set (not JSON, not
 * an object, "execute" missing or not a string, "arguments" not an
 * object, unknown member). *root holds what *name, req->args and *id point
 * into: json_object_put it when done (also after an error, if set). */
int api_parse_request(const char *line, size_t len, struct json_object **root,
		      const char **name, struct json_object **id,
		      struct api_req *req);

#endif
