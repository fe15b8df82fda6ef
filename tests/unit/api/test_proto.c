/* api/proto.c: the request line parser and the argument checks, on good
 * requests and on every kind of bad one a client can send. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"

struct parsed {
	struct json_object *root;
	const char *name;
	struct json_object *id;
	struct api_req req;
	int ret;
};

static void parse(struct parsed *p, const char *line)
{
	p->ret = api_parse_request(line, strlen(line), &p->root, &p->name, &p->id, &p->req);
}

static void done(struct parsed *p)
{
	json_object_put(p->root);
}

/* The request fails with a GenericError whose text holds want. */
static void expect_bad(const char *line, const char *want)
{
	struct parsed p;

	parse(&p, line);
	assert_int_equal(p.ret, -1);
	assert_string_equal(p.req.err_class, API_ERR_GENERIC);
	if (!strstr(p.req.err_desc, want))
		fail_msg("'%s': error '%s' does not say '%s'", line, p.req.err_desc, want);
	done(&p);
}

static void test_good(void **state)
{
	struct parsed p;

	parse(&p, "{\"execute\": \"query-status\"}");
	assert_int_equal(p.ret, 0);
	assert_string_equal(p.name, "query-status");
	assert_null(p.id);
	/* no "arguments": an empty object, not NULL */
	assert_non_null(p.req.args);
	assert_int_equal(json_object_object_length(p.req.args), 0);
	assert_null(p.req.ret);
	done(&p);

	parse(&p, "  {\"id\": {\"a\": [1, 2]}, \"arguments\": {\"disk\": \"disk0\", "
		  "\"n\": 7, \"on\": true}, \"execute\": \"x\"}\r\n");
	assert_int_equal(p.ret, 0);
	assert_string_equal(p.name, "x");
	assert_non_null(p.id);
	assert_string_equal(json_object_to_json_string_ext(p.id, JSON_C_TO_STRING_PLAIN),
			    "{\"a\":[1,2]}");
	assert_int_equal(json_object_object_length(p.req.args), 3);
	done(&p);

	/* a string id, echoed as given */
	parse(&p, "{\"execute\":\"q\",\"id\":\"abc\"}");
	assert_int_equal(p.ret, 0);
	assert_string_equal(json_object_get_string(p.id), "abc");
	done(&p);
}

static void test_malformed(void **state)
{
	expect_bad("", "empty");
	expect_bad("   \r", "empty");
	expect_bad("{", "not JSON");
	expect_bad("{\"execute\": ", "not JSON");
	expect_bad("{\"execute\": \"a\"", "not JSON");
	expect_bad("{execute: \"a\"}", "not JSON");
	expect_bad("{'execute': 'a'}", "not JSON");
	expect_bad("{\"execute\": \"a\",}", "not JSON");
	expect_bad("{\"execute\": \"a\"} {}", "not JSON");
	expect_bad("{\"execute\": \"a\"}x", "not JSON");
	expect_bad("\x01\x02garbage\xff", "not JSON");
	/* invalid UTF-8 inside a string */
	expect_bad("{\"execute\": \"\xc3\x28\"}", "not JSON");
	/* nesting past the bound */
	expect_bad("{\"execute\": \"a\", \"id\": [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}",
		   "not JSON");
}

static void test_nul(void **state)
{
	static const char line[] = "{\"execute\": \"a\"}\0{\"x\":1}";
	struct parsed p;

	p.ret = api_parse_request(line, sizeof(line) - 1, &p.root, &p.name, &p.id, &p.req);
	assert_int_equal(p.ret, -1);
	assert_non_null(strstr(p.req.err_desc, "NUL"));
	done(&p);
}

static void test_not_object(void **state)
{
	expect_bad("[1, 2]", "must be a JSON object, not array");
	expect_bad("\"execute\"", "must be a JSON object, not string");
	expect_bad("null", "must be a JSON object");
	expect_bad("true", "must be a JSON object");
	expect_bad("12", "");	/* a number: not an object however it is read */
}

static void test_members(void **state)
{
	struct parsed p;

	expect_bad("{}", "no \"execute\"");
	expect_bad("{\"arguments\": {}}", "no \"execute\"");
	expect_bad("{\"execute\": 1}", "\"execute\" must be a string, not int");
	expect_bad("{\"execute\": null}", "\"execute\" must be a string");
	expect_bad("{\"execute\": [\"a\"]}", "\"execute\" must be a string, not array");
	expect_bad("{\"execute\": \"a\", \"arguments\": []}", "\"arguments\" must be an object, not array");
	expect_bad("{\"execute\": \"a\", \"arguments\": \"x=1\"}", "\"arguments\" must be an object");
	expect_bad("{\"execute\": \"a\", \"argument\": {}}", "unknown member 'argument'");

	/* an error still carries the id, for the reply */
	parse(&p, "{\"execute\": 5, \"id\": 42}");
	assert_int_equal(p.ret, -1);
	assert_non_null(p.id);
	assert_int_equal(json_object_get_int(p.id), 42);
	done(&p);
}

static void test_oversized(void **state)
{
	size_t n = API_MAX_LINE + 1;
	char *line = malloc(n + 1);
	struct parsed p;
	int pre = snprintf(line, n + 1, "{\"execute\": \"a\", \"id\": \"");

	memset(line + pre, 'x', n - pre - 2);
	memcpy(line + n - 2, "\"}", 3);
	assert_int_equal(strlen(line), n);
	parse(&p, line);
	assert_int_equal(p.ret, -1);
	assert_non_null(strstr(p.req.err_desc, "longer than"));
	done(&p);
	/* exactly the limit is fine */
	memmove(line + pre, line + pre + 1, n - pre);
	assert_int_equal(strlen(line), API_MAX_LINE);
	parse(&p, line);
	assert_int_equal(p.ret, 0);
	done(&p);
	free(line);
}

/* Parses line (which must be good) into p for the argument tests. */
static void parse_args(struct parsed *p, const char *args)
{
	char line[512];

	snprintf(line, sizeof(line), "{\"execute\": \"t\", \"arguments\": %s}", args);
	parse(p, line);
	assert_int_equal(p->ret, 0);
}

static void expect_arg_error(struct parsed *p, int ret, const char *want)
{
	assert_int_equal(ret, -1);
	assert_string_equal(p->req.err_class, API_ERR_GENERIC);
	if (!strstr(p->req.err_desc, want))
		fail_msg("error '%s' does not say '%s'", p->req.err_desc, want);
	p->req.err_class[0] = p->req.err_desc[0] = 0;
}

static void test_args(void **state)
{
	struct parsed p;
	const char *s = "untouched";
	uint64_t u = 99;
	bool b = false;

	parse_args(&p, "{\"s\": \"disk0\", \"u\": 18446744073709551615, \"z\": 0, "
		       "\"b\": true, \"neg\": -1, \"f\": 1.5, \"bs\": \"true\", "
		       "\"nul\": \"a\\u0000b\", \"small\": -9223372036854775809}");
	assert_int_equal(api_arg_str(&p.req, "s", true, &s), 0);
	assert_string_equal(s, "disk0");
	assert_int_equal(api_arg_u64(&p.req, "u", true, &u), 0);
	assert_true(u == UINT64_MAX);
	assert_int_equal(api_arg_u64(&p.req, "z", false, &u), 0);
	assert_true(u == 0);
	assert_int_equal(api_arg_bool(&p.req, "b", true, &b), 0);
	assert_true(b);

	/* absent: 1 and untouched when optional, an error when required */
	s = "untouched";
	assert_int_equal(api_arg_str(&p.req, "missing", false, &s), 1);
	assert_string_equal(s, "untouched");
	expect_arg_error(&p, api_arg_str(&p.req, "missing", true, &s),
			 "missing argument 'missing'");
	expect_arg_error(&p, api_arg_bool(&p.req, "missing", true, &b), "missing argument");
	expect_arg_error(&p, api_arg_u64(&p.req, "missing", true, &u), "missing argument");

	/* wrong types */
	expect_arg_error(&p, api_arg_str(&p.req, "u", true, &s),
			 "argument 'u': expected a string, got int");
	expect_arg_error(&p, api_arg_u64(&p.req, "s", true, &u),
			 "argument 's': expected a non-negative integer, got string");
	expect_arg_error(&p, api_arg_u64(&p.req, "f", true, &u), "got double");
	expect_arg_error(&p, api_arg_u64(&p.req, "b", true, &u), "got boolean");
	expect_arg_error(&p, api_arg_bool(&p.req, "bs", true, &b),
			 "argument 'bs': expected true or false, got string");
	expect_arg_error(&p, api_arg_bool(&p.req, "z", true, &b), "got int");
	expect_arg_error(&p, api_arg_str(&p.req, "nul", true, &s), "NUL");

	/* out of range */
	u = 99;
	expect_arg_error(&p, api_arg_u64(&p.req, "neg", true, &u), "out of range");
	assert_true(u == 99);
	expect_arg_error(&p, api_arg_u64(&p.req, "small", true, &u), "out of range");
	done(&p);
}

static void test_args_only(void **state)
{
	static const char *const names[] = { "disk", "iops", NULL };
	static const char *const none[] = { NULL };
	struct parsed p;

	parse_args(&p, "{\"disk\": \"disk0\", \"iops\": 5}");
	assert_int_equal(api_args_only(&p.req, names), 0);
	expect_arg_error(&p, api_args_only(&p.req, none), "unknown argument");
	done(&p);

	parse_args(&p, "{\"disk\": \"disk0\", \"iosp\": 5}");
	expect_arg_error(&p, api_args_only(&p.req, names), "unknown argument 'iosp'");
	done(&p);

	parse_args(&p, "{}");
	assert_int_equal(api_args_only(&p.req, none), 0);
	done(&p);
}

static void test_error_text(void **state)
{
	struct api_req req = { 0 };
	char longer[600];

	assert_int_equal(api_error(&req, API_ERR_DEVICE, "no disk '%s'", "d9"), -1);
	assert_string_equal(req.err_class, "DeviceNotFound");
	assert_string_equal(req.err_desc, "no disk 'd9'");
	/* cut to fit, never overrun */
	memset(longer, 'y', sizeof(longer) - 1);
	longer[sizeof(longer) - 1] = 0;
	api_error(&req, API_ERR_NOT_FOUND, "%s", longer);
	assert_int_equal(strlen(req.err_desc), sizeof(req.err_desc) - 1);
	assert_string_equal(req.err_class, "CommandNotFound");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_good),
		cmocka_unit_test(test_malformed),
		cmocka_unit_test(test_nul),
		cmocka_unit_test(test_not_object),
		cmocka_unit_test(test_members),
		cmocka_unit_test(test_oversized),
		cmocka_unit_test(test_args),
		cmocka_unit_test(test_args_only),
		cmocka_unit_test(test_error_text),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
