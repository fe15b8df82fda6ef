/* `iovm run`: options -> VM -> core devices -> kernel -> devices -> run. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "api/metrics_http.h"
#include "api/start.h"
#include "arch/x86/boot.h"
#include "cmd/commands.h"
#include "cmd/devices.h"
#include "hw/acpi_pm.h"
#include "hw/exitdev.h"
#include "hw/i8042.h"
#include "hw/serial.h"
#include "lib/log.h"
#include "vm/machine.h"
#include "cmd/run_opts.h"

/* Clear errors for missing files before KVM is even opened. */
static int check_readable(const char *path, const char *what)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0) {
		int e = errno;

		pr_err("cannot open %s '%s': %s", what, path, strerror(e));
		return -e;
	}
	close(fd);
	return 0;
}

static int build_machine(struct vm *vm, const struct vm_config *cfg,
			 struct api_objects *objs)
{
	int ret;

	ret = serial_console_create(vm);
	if (!ret && (ret = i8042_create(vm)))
		pr_err("i8042: %s", strerror(-ret));
	if (!ret && (ret = exitdev_create(vm)))
		pr_err("exit device: %s", strerror(-ret));
	if (!ret && (ret = acpi_pm_create(vm)))
		pr_err("ACPI PM registers: %s", strerror(-ret));
	if (!ret)
		ret = x86_setup(vm, cfg);
	if (!ret)
		ret = devices_create(vm, cfg, objs);
	return ret;
}

/* The control socket's hooks: the VM's own pause and stop. */
static int api_pause(void *owner) { return vm_pause(owner); }
static int api_resume(void *owner) { return vm_resume(owner); }
static bool api_paused(void *owner) { return vm_paused(owner); }

static int api_shutdown(void *owner)
{
	/* As SIGTERM does (vCPUs stopped, devices drained and flushed),
	 * but asked for: status 0. */
	vm_request_stop(owner, 0);
	return 0;
}

static int start_api(struct vm *vm, struct api_objects *objs, const char *path,
		     struct api_server **api)
{
	char err[512];

	objs->command = "run";
	objs->pause = api_pause;
	objs->resume = api_resume;
	objs->paused = api_paused;
	objs->shutdown = api_shutdown;
	objs->owner = vm;
	if (api_start(objs, path, api, err, sizeof(err))) {
		pr_err("%s", err);
		return -1;
	}
	return 0;
}

int cmd_run(int argc, char **argv)
{
	/* Static: sized for every disk and share, and read by the API
	 * thread until api_free. */
	static struct api_objects objs;
	struct api_server *api = NULL;
	struct metrics_http *metrics = NULL;
	struct run_opts o;
	struct vm_params p;
	struct vm *vm = NULL;
	char err[512];
	int ret, status = 1;

	ret = run_parse_args(argc, argv, &o, err, sizeof(err));
	if (ret) {
		pr_err("%s", err);
		run_opts_free(&o);
		return 2;
	}
	if (o.help || o.version) {
		if (o.help)
			run_usage(stdout);
		else
			printf("iovm %s\n", IOVM_VERSION);
		run_opts_free(&o);
		return 0;
	}
	if (o.verbose)
		log_threshold = LOG_DEBUG;
	else if (o.quiet)
		log_threshold = LOG_ERR;
	if (check_readable(o.cfg.kernel, "kernel") ||
	    (o.cfg.initrd && check_readable(o.cfg.initrd, "initrd")))
		goto out;
	if (vm_block_signals())
		goto out;
	p = (struct vm_params){ .mem_size = o.cfg.mem_size, .ncpus = o.cfg.cpus };
	if (vm_create(&p, &vm) ||
	    build_machine(vm, &o.cfg, o.api_socket || o.metrics_listen ? &objs : NULL))
		goto out;
	if (o.metrics_listen) {
		metrics = metrics_http_start(o.metrics_listen, &objs, err, sizeof(err));
		if (!metrics) {
			pr_err("%s", err);
			goto out;
		}
	}
	/* Before the socket exists, so that it never says running: no
	 * vCPU runs yet, each parks at its start. */
	if (o.paused)
		vm_pause(vm);
	if (o.api_socket && start_api(vm, &objs, o.api_socket, &api))
		goto out;
	status = vm_run(vm);
	pr_debug("VM stopped with exit status %d", status);
	if (o.verbose)
		vm_report_memory(vm);
out:
	metrics_http_stop(metrics);
	api_free(api);
	serial_console_restore();
	vm_destroy(vm);
	run_opts_free(&o);
	return status;
}
