/* The control socket's request line: parsed with json-c into a command
 * name, its arguments and id, and the checked access to those arguments
 * that every command handler uses (api.h). */
#include <stdio.h>
#include <string.h>

#include "api/api.h"

/* Nesting a request may have: arguments are flat values or small objects;
 * a bound keeps a hostile line from costing more than its length. */
#define API_MAX_DEPTH 16

int api_error(struct api_req *req, const char *cls, const char *fmt, ...)
{
	va_list ap;

	snprintf(req->err_class, sizeof(req->err_class), "%s", cls);
	va_start(ap, fmt);
	vsnprintf(req->err_desc, sizeof(req->err_desc), fmt, ap);
	va_end(ap);
	return -1;
}

static bool is_space(char c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

static const char *const request_members[] = { "execute", "arguments", "id", NULL };

static bool in_list(const char *key, const char *const *names)
{
	for (; *names; names++)
		if (!strcmp(key, *names))
			return true;
	return false;
}

/* The JSON value of the whole line, or NULL with req's error set. */
static struct json_object *parse_json(const char *line, size_t len,
				      struct api_req *req)
{
	struct json_tokener *tok;
	struct json_object *v;
	enum json_tokener_error e;
	size_t end;

	if (len > API_MAX_LINE) {
		api_error(req, API_ERR_GENERIC, "request longer than %u bytes", API_MAX_LINE);
		return NULL;
	}
	/* json-c would stop at a NUL and take the rest for trailing bytes. */
	if (memchr(line, 0, len)) {
		api_error(req, API_ERR_GENERIC, "request contains a NUL byte");
		return NULL;
	}
	while (len && is_space(line[len - 1]))
		len--;
	if (!len) {
		api_error(req, API_ERR_GENERIC, "empty request");
		return NULL;
	}
	tok = json_tokener_new_ex(API_MAX_DEPTH);
	if (!tok) {
		api_error(req, API_ERR_GENERIC, "out of memory");
		return NULL;
	}
	json_tokener_set_flags(tok, JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8);
	v = json_tokener_parse_ex(tok, line, (int)len);
	e = json_tokener_get_error(tok);
	end = json_tokener_get_parse_end(tok);
	if (!v && e == json_tokener_continue) {
		/* A bare number or literal waits for what follows it: the
		 * line is all there is. */
		v = json_tokener_parse_ex(tok, " ", 1);
		e = json_tokener_get_error(tok);
		end = len;
	}
	json_tokener_free(tok);
	if (e == json_tokener_continue) {
		api_error(req, API_ERR_GENERIC, "not JSON: the request ends inside a value");
		return NULL;
	}
	if (!v && e == json_tokener_success) {	/* json-c's null */
		api_error(req, API_ERR_GENERIC, "the request must be a JSON object, not null");
		return NULL;
	}
	if (e != json_tokener_success) {
		json_object_put(v);
		api_error(req, API_ERR_GENERIC, "not JSON: %s at byte %zu",
			  json_tokener_error_desc(e), end);
		return NULL;
	}
	if (end != len) {
		json_object_put(v);
		api_error(req, API_ERR_GENERIC,
			  "not JSON: bytes after the request object at byte %zu", end);
		return NULL;
	}
	return v;
}

int api_parse_request(const char *line, size_t len, struct json_object **root,
		      const char **name, struct json_object **id,
		      struct api_req *req)
{
	struct json_object *v, *exec, *args;

	*root = NULL;
	*name = NULL;
	*id = NULL;
	req->args = NULL;
	req->ret = NULL;
	req->err_class[0] = 0;
	req->err_desc[0] = 0;
	req->after = NULL;
	req->after_opaque = NULL;
	v = parse_json(line, len, req);
	if (!v)
		return -1;
	*root = v;
	if (!json_object_is_type(v, json_type_object))
		return api_error(req, API_ERR_GENERIC,
				 "the request must be a JSON object, not %s",
				 json_type_to_name(json_object_get_type(v)));
	/* The id first: an error about the rest is still answered with it. */
	json_object_object_get_ex(v, "id", id);
	json_object_object_foreach(v, key, val) {
		(void)val;
		if (!in_list(key, request_members))
			return api_error(req, API_ERR_GENERIC,
					 "unknown member '%.64s' in the request (expected "
					 "execute, arguments, id)", key);
	}
	if (!json_object_object_get_ex(v, "execute", &exec))
		return api_error(req, API_ERR_GENERIC, "the request has no \"execute\"");
	if (!json_object_is_type(exec, json_type_string))
		return api_error(req, API_ERR_GENERIC, "\"execute\" must be a string, not %s",
				 json_type_to_name(json_object_get_type(exec)));
	if (json_object_object_get_ex(v, "arguments", &args)) {
		if (!json_object_is_type(args, json_type_object))
			return api_error(req, API_ERR_GENERIC,
					 "\"arguments\" must be an object, not %s",
					 json_type_to_name(json_object_get_type(args)));
	} else {
		/* Owned by the root, so that one put frees everything. */
		args = json_object_new_object();
		if (!args || json_object_object_add(v, "arguments", args)) {
			json_object_put(args);
			return api_error(req, API_ERR_GENERIC, "out of memory");
		}
	}
	*name = json_object_get_string(exec);
	req->args = args;
	return 0;
}

/* The argument's value if present and of type want: 0; 1 if absent and
 * not required; -1 with req's error set otherwise. */
static int get_arg(struct api_req *req, const char *name, bool required,
		   enum json_type want, const char *what, struct json_object **out)
{
	struct json_object *v;

	if (!req->args || !json_object_object_get_ex(req->args, name, &v)) {
		if (required)
			return api_error(req, API_ERR_GENERIC, "missing argument '%s' (%s)",
					 name, what);
		return 1;
	}
	if (!json_object_is_type(v, want))
		return api_error(req, API_ERR_GENERIC, "argument '%s': expected %s, got %s",
				 name, what, json_type_to_name(json_object_get_type(v)));
	*out = v;
	return 0;
}

int api_arg_str(struct api_req *req, const char *name, bool required,
		const char **out)
{
	struct json_object *v;
	int ret = get_arg(req, name, required, json_type_string, "a string", &v);

	if (ret)
		return ret;
	/* "\u0000" would cut the name short of what the client meant. */
	if ((size_t)json_object_get_string_len(v) != strlen(json_object_get_string(v)))
		return api_error(req, API_ERR_GENERIC,
				 "argument '%s': the string contains a NUL character", name);
	*out = json_object_get_string(v);
	return 0;
}

int api_arg_u64(struct api_req *req, const char *name, bool required,
		uint64_t *out)
{
	struct json_object *v;
	int ret = get_arg(req, name, required, json_type_int, "a non-negative integer", &v);

	if (ret)
		return ret;
	/* json-c keeps integers as int64 or, above INT64_MAX, uint64 (and
	 * reads one past UINT64_MAX as UINT64_MAX: callers bound theirs). */
	if (json_object_get_int64(v) < 0)
		return api_error(req, API_ERR_GENERIC,
				 "argument '%s': %s is out of range (0 to %llu)", name,
				 json_object_to_json_string(v), (unsigned long long)UINT64_MAX);
	*out = json_object_get_uint64(v);
	return 0;
}

int api_arg_bool(struct api_req *req, const char *name, bool required,
		 bool *out)
{
	struct json_object *v;
	int ret = get_arg(req, name, required, json_type_boolean, "true or false", &v);

	if (ret)
		return ret;
	*out = json_object_get_boolean(v);
	return 0;
}

int api_args_only(struct api_req *req, const char *const *names)
{
	if (!req->args)
		return 0;
	json_object_object_foreach(req->args, key, val) {
		(void)val;
		if (!in_list(key, names))
			return api_error(req, API_ERR_GENERIC, "unknown argument '%.64s'", key);
	}
	return 0;
}
