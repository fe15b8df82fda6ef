/* `iovm run` option parsing (no KVM): defaults, every option, bad values,
 * plus the size parser and --disk/--share specs it relies on. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "config.h"
#include "lib/kvopt.h"
#include "cmd/run_opts.h"

#define ARGV(...) (char *[]){ "run", __VA_ARGS__, NULL }
#define ARGC(...) ((int)(sizeof((char *[]){ "run", __VA_ARGS__ }) / sizeof(char *)))
#define PARSE(o, err, ...) run_parse_args(ARGC(__VA_ARGS__), ARGV(__VA_ARGS__), o, err, sizeof(err))

static void test_defaults(void **state)
{
	struct run_opts o;
	char err[256];

	assert_int_equal(PARSE(&o, err, "--kernel", "k"), 0);
	assert_string_equal(o.cfg.kernel, "k");
	assert_int_equal(o.cfg.mem_size, 512ull << 20);
	assert_int_equal(o.cfg.cpus, 1);
	assert_null(o.cfg.initrd);
	assert_null(o.cfg.append);
	assert_null(o.cfg.cpu_features);
	assert_false(o.help || o.verbose || o.quiet);
	run_opts_free(&o);
}

static void test_all_options(void **state)
{
	struct run_opts o;
	char err[256];

	assert_int_equal(PARSE(&o, err, "-k", "vmlinuz", "--initrd", "rd.gz", "--append",
			       "console=ttyS0 quiet", "-m", "4G", "--cpus", "4", "--cpu",
			       "-avx,+sse4_2", "--disk", "path=a.img,if=virtio-scsi,target=2",
			       "-d", "b.img", "--share", "path=/tmp,tag=t", "-v"), 0);
	assert_string_equal(o.cfg.kernel, "vmlinuz");
	assert_string_equal(o.cfg.initrd, "rd.gz");
	assert_string_equal(o.cfg.append, "console=ttyS0 quiet");
	assert_int_equal(o.cfg.mem_size, 4ull << 30);
	assert_int_equal(o.cfg.cpus, 4);
	assert_string_equal(o.cfg.cpu_features, "-avx,+sse4_2");
	assert_int_equal(o.cfg.ndisks, 2);
	assert_string_equal(o.cfg.disks[0].path, "a.img");
	assert_int_equal(o.cfg.disks[0].iface, DISK_IF_VIRTIO_SCSI);
	assert_int_equal(o.cfg.disks[0].target, 2);
	assert_string_equal(o.cfg.disks[1].path, "b.img");
	assert_int_equal(o.cfg.disks[1].iface, DISK_IF_VIRTIO_BLK);
	assert_int_equal(o.cfg.nshares, 1);
	assert_string_equal(o.cfg.shares[0].tag, "t");
	assert_true(o.verbose);
	run_opts_free(&o);

	assert_int_equal(PARSE(&o, err, "--help"), 0);
	assert_true(o.help);
	run_opts_free(&o);
	assert_int_equal(PARSE(&o, err, "-V"), 0);
	assert_true(o.version);
	run_opts_free(&o);
	assert_int_equal(PARSE(&o, err, "-q", "--kernel=x", "--memory=16M"), 0);
	assert_true(o.quiet);
	assert_int_equal(o.cfg.mem_size, 16ull << 20);
	run_opts_free(&o);
}

static void expect_error(int argc, char **argv, const char *needle)
{
	struct run_opts o;
	char err[256];

	assert_int_equal(run_parse_args(argc, argv, &o, err, sizeof(err)), -EINVAL);
	if (!strstr(err, needle))
		fail_msg("error '%s' does not mention '%s'", err, needle);
	assert_null(strchr(err, '\n'));
	run_opts_free(&o);
}

#define EXPECT_ERROR(needle, ...) expect_error(ARGC(__VA_ARGS__), ARGV(__VA_ARGS__), needle)

static void test_bad_options(void **state)
{
	EXPECT_ERROR("--kernel FILE is required", "--memory", "1G");
	EXPECT_ERROR("unknown option '--bogus'", "--kernel", "k", "--bogus");
	EXPECT_ERROR("unknown option '-z'", "--kernel", "k", "-z");
	EXPECT_ERROR("needs a value", "--kernel");
	EXPECT_ERROR("not a size", "-k", "k", "--memory", "lots");
	EXPECT_ERROR("out of range", "-k", "k", "--memory", "1M");
	EXPECT_ERROR("out of range", "-k", "k", "--memory", "2T");
	EXPECT_ERROR("multiple of 4 KiB", "-k", "k", "--memory", "16777217");
	EXPECT_ERROR("--cpus", "-k", "k", "--cpus", "0");
	EXPECT_ERROR("--cpus", "-k", "k", "--cpus", "65");
	EXPECT_ERROR("--cpus", "-k", "k", "--cpus", "two");
	EXPECT_ERROR("unknown CPU feature 'warp'", "-k", "k", "--cpu", "+sse2,-warp");
	EXPECT_ERROR("empty feature", "-k", "k", "--cpu", "+sse2,,");
	EXPECT_ERROR("--disk", "-k", "k", "--disk", "path=a,if=floppy");
	EXPECT_ERROR("tag=NAME is required", "-k", "k", "--share", "path=/tmp");
	EXPECT_ERROR("unexpected argument 'extra'", "-k", "k", "extra");
}

static void test_parse_size(void **state)
{
	uint64_t v;

	assert_int_equal(parse_size("512", &v), 0);
	assert_int_equal(v, 512);
	assert_int_equal(parse_size("64K", &v), 0);
	assert_int_equal(v, 64 << 10);
	assert_int_equal(parse_size("512M", &v), 0);
	assert_int_equal(v, 512ull << 20);
	assert_int_equal(parse_size("2G", &v), 0);
	assert_int_equal(v, 2ull << 30);
	assert_int_equal(parse_size("1T", &v), 0);
	assert_int_equal(v, 1ull << 40);
	assert_int_not_equal(parse_size("", &v), 0);
	assert_int_not_equal(parse_size("G", &v), 0);
	assert_int_not_equal(parse_size("12Q", &v), 0);
	assert_int_not_equal(parse_size("-1", &v), 0);
	assert_int_not_equal(parse_size("99999999999999999999", &v), 0);
	assert_int_not_equal(parse_size("20000000T", &v), 0);
}

static void test_config_specs(void **state)
{
	static const char *const bad_poll[] = {
		"path=x,poll-us=10001", "path=x,poll-us=-1",
		"path=x,poll-us=", "path=x,poll-us=5us",
	};
	struct disk_cfg d;
	struct share_cfg s;
	char err[256];

	assert_int_equal(config_parse_disk("path=x.img,if=lsi,ro,cache=writeback,target=3",
					   &d, err, sizeof(err)), 0);
	assert_int_equal(d.iface, DISK_IF_LSI);
	assert_true(d.ro);
	assert_int_equal(d.cache, CACHE_WRITEBACK);
	assert_int_equal(d.target, 3);
	free((char *)d.path);
	assert_int_equal(config_parse_disk("if=lsi,path=x,lun=1", &d, err, sizeof(err)), -EINVAL);
	free((char *)d.path);
	assert_int_equal(config_parse_disk("if=virtio-blk,path=x,target=1", &d, err,
					   sizeof(err)), -EINVAL);
	free((char *)d.path);
	assert_int_equal(config_parse_disk("queues=65,path=x", &d, err, sizeof(err)), -EINVAL);
	free((char *)d.path);
	assert_int_equal(config_parse_disk("ro,cache=none", &d, err, sizeof(err)), -EINVAL);
	for (size_t i = 0; i < sizeof(bad_poll) / sizeof(bad_poll[0]); i++) {
		err[0] = 0;
		assert_int_equal(config_parse_disk(bad_poll[i], &d, err, sizeof(err)),
				 -EINVAL);
		assert_non_null(strstr(err, "poll-us="));
		free((char *)d.path);
	}
	assert_int_equal(config_parse_share("path=/srv,tag=srv,msize=1M", true, &s, err,
					    sizeof(err)), 0);
	assert_int_equal(s.msize, 1u << 20);
	assert_int_equal(s.poll_us, CONFIG_POLL_US_DEFAULT);
	assert_false(s.poll_set);
	free((char *)s.path);
	free((char *)s.tag);
	/* poll-us=: virtio-9p's ring watch, as for disks */
	assert_int_equal(config_parse_share("path=/srv,poll-us=0", false, &s, err,
					    sizeof(err)), 0);
	assert_int_equal(s.poll_us, 0);
	assert_true(s.poll_set);
	free((char *)s.path);
	assert_int_equal(config_parse_share("path=/srv,poll-us=10001", false, &s, err,
					    sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "poll-us="));
	/* security=: the safe mapped-xattr unless told otherwise */
	assert_int_equal(s.security, SHARE_SEC_MAPPED_XATTR);
	assert_int_equal(config_parse_share("path=/srv,security=none", false, &s, err,
					    sizeof(err)), 0);
	assert_int_equal(s.security, SHARE_SEC_NONE);
	free((char *)s.path);
	assert_int_equal(config_parse_share("path=/srv,security=passthrough", false, &s,
					    err, sizeof(err)), 0);
	assert_int_equal(s.security, SHARE_SEC_PASSTHROUGH);
	free((char *)s.path);
	assert_int_equal(config_parse_share("path=/srv,security=mapped", false, &s, err,
					    sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "security="));
	assert_int_equal(config_parse_share("path=/srv,tag=srv,msize=1G", true, &s, err,
					    sizeof(err)), -EINVAL);
	free((char *)s.path);
	free((char *)s.tag);
}

/* poll-us= reaches the device as the largest its disks give, or the
 * default when none gives one; 0 is a value, not "unset". */
static void test_poll_us(void **state)
{
	struct disk_cfg a, b, c;
	const struct disk_cfg *both[2] = { &a, &b }, *one[1] = { &c };
	char err[256];

	assert_int_equal(config_parse_disk("path=a,poll-us=0", &a, err, sizeof(err)), 0);
	assert_true(a.poll_set);
	assert_int_equal(a.poll_us, 0);
	assert_int_equal(config_parse_disk("path=b", &b, err, sizeof(err)), 0);
	assert_false(b.poll_set);
	assert_int_equal(config_disks_poll_us(both, 2), 0);
	assert_int_equal(config_disks_poll_us(both + 1, 1), CONFIG_POLL_US_DEFAULT);
	assert_int_equal(config_parse_disk("path=c,poll-us=10000", &c, err, sizeof(err)), 0);
	assert_int_equal(config_disks_poll_us(one, 1), 10000);
	free((char *)b.path);
	assert_int_equal(config_parse_disk("path=b,poll-us=200", &b, err, sizeof(err)), 0);
	assert_int_equal(config_disks_poll_us(both, 2), 200);
	free((char *)a.path);
	free((char *)b.path);
	free((char *)c.path);
}

/* pr-state= and pr-id=: SCSI disks only; pr-id is a nexus name the
 * guest sees (1-127 printable characters, no spaces). */
static void test_pr_options(void **state)
{
	static const char *const bad[] = {
		"path=x,if=virtio-scsi,pr-id=", "path=x,if=virtio-scsi,pr-id",
		"path=x,if=virtio-scsi,pr-id=a b",
		"path=x,if=virtio-scsi,pr-state=",
		"path=x,pr-state=x.pr", "path=x,pr-id=n1",
	};
	char err[256], id[28 + 127 + 1];
	struct disk_cfg d;

	assert_int_equal(config_parse_disk("path=x,if=virtio-scsi,pr-state=/s/x.pr,"
					   "pr-id=node1,pr-id=node2", &d, err,
					   sizeof(err)), 0);
	assert_string_equal(d.pr_state, "/s/x.pr");
	assert_string_equal(d.pr_id, "node2");
	config_free_disk(&d);
	assert_null(d.pr_state);
	assert_int_equal(config_parse_disk("path=x,if=lsi,pr-state=none", &d, err,
					   sizeof(err)), 0);
	assert_string_equal(d.pr_state, "none");
	assert_null(d.pr_id);
	config_free_disk(&d);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = 0;
		assert_int_equal(config_parse_disk(bad[i], &d, err, sizeof(err)), -EINVAL);
		assert_non_null(strstr(err, "pr-"));
		assert_null(d.path);
	}
	memset(id, 'n', sizeof(id));
	snprintf(id, sizeof(id), "path=x,if=virtio-scsi,pr-id=");
	id[strlen(id)] = 'n';
	id[sizeof(id) - 1] = 0;	/* 127 characters of id: fine */
	assert_int_equal(config_parse_disk(id, &d, err, sizeof(err)), 0);
	assert_int_equal(strlen(d.pr_id), 127);
	config_free_disk(&d);
	assert_false(config_pr_id_ok(""));
	assert_false(config_pr_id_ok("a\tb"));
	assert_true(config_pr_id_ok("host:/run/vm1.sock"));
}

/* --api-socket PATH; --paused only with it (nothing else could resume). */
static void test_api_options(void **state)
{
	struct run_opts o;
	char err[256];

	assert_int_equal(PARSE(&o, err, "-k", "k", "--api-socket", "/run/vm.api", "--paused"), 0);
	assert_string_equal(o.api_socket, "/run/vm.api");
	assert_true(o.paused);
	run_opts_free(&o);
	assert_int_equal(PARSE(&o, err, "-k", "k"), 0);
	assert_null(o.api_socket);
	assert_false(o.paused);
	run_opts_free(&o);
	assert_int_equal(PARSE(&o, err, "-k", "k", "--paused"), -EINVAL);
	assert_non_null(strstr(err, "--paused needs --api-socket"));
	run_opts_free(&o);
	assert_int_equal(PARSE(&o, err, "-k", "k", "--api-socket", ""), -EINVAL);
	assert_non_null(strstr(err, "the path is empty"));
	run_opts_free(&o);
	assert_int_equal(PARSE(&o, err, "-k", "k", "--api-socket"), -EINVAL);
	assert_non_null(strstr(err, "needs a value"));
	run_opts_free(&o);
}

/* Every option is documented in --help, and the --disk/--share keys too. */
static void test_help_covers_options(void **state)
{
	static const char *const needles[] = {
		"--kernel", "--initrd", "--append", "--memory", "--cpus", "--cpu ",
		"--disk", "--share", "--verbose", "--quiet", "--help", "--version",
		"if=", "ro", "cache=", "queues=", "target=", "lun=", "tag=", "msize=",
		"poll-us=", "pr-state=", "pr-id=", "iops=", "bps-wr=", "iops-burst=",
		"--api-socket", "--paused",
		"avx512f", "xsave", "Examples:", "(V<<1)|1",
	};
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	assert_non_null(f);
	run_usage(f);
	fclose(f);
	for (size_t i = 0; i < sizeof(needles) / sizeof(needles[0]); i++)
		if (!strstr(buf, needles[i]))
			fail_msg("--help does not mention '%s'", needles[i]);
	/* Lines fit a terminal. */
	for (char *l = buf, *nl; (nl = strchr(l, '\n')); l = nl + 1)
		assert_true(nl - l <= 80);
	free(buf);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_defaults),
		cmocka_unit_test(test_all_options),
		cmocka_unit_test(test_bad_options),
		cmocka_unit_test(test_parse_size),
		cmocka_unit_test(test_config_specs),
		cmocka_unit_test(test_poll_us),
		cmocka_unit_test(test_pr_options),
		cmocka_unit_test(test_help_covers_options),
		cmocka_unit_test(test_api_options),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
