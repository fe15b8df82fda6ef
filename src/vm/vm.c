/* The KVM VM: capability checks, guest RAM around the PCI hole, in-kernel
 * irqchip and PIT, GSI routing, vCPU threads and their exit dispatch, and
 * the orderly stop that every exit path of the VM goes through. */
#include <errno.h>
#include <fcntl.h>
#include <linux/kvm.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/signalfd.h>
#include <sys/sysinfo.h>
#include <unistd.h>

#include "lib/log.h"
#include "vm/gsi.h"
#include "vm/machine.h"
#include "vm/vcpu_diag.h"

#define MAX_HOOKS 32
#define PCI_PIO_START 0xc000u
#define SIG_KICK SIGUSR1

struct vcpu {
	struct vm *vm;
	unsigned int idx;
	int fd;
	struct kvm_run *run;
	pthread_t thread;
	bool started;
};

struct hook {
	void (*fn)(void *opaque);
	void *opaque;
};

struct vm {
	int kvm_fd;
	int vm_fd;
	uint64_t mem_size;
	uint8_t *ram_low, *ram_high;
	uint64_t ram_low_size, ram_high_size;
	struct gmem gmem;
	struct bus pio, mmio;
	unsigned int ncpus;
	struct vcpu vcpus[VM_MAX_CPUS];
	size_t run_size;

	pthread_mutex_t lock;		/* routes, allocators, hooks */
	struct gsi_table gsi;
	uint64_t mmio_next;
	uint32_t pio_next;

	struct hook hooks[MAX_HOOKS];
	unsigned int nhooks;

	int stop_efd;
	atomic_bool stopping;

	/* vm_pause: every vCPU thread out of KVM_RUN, parked on pause_cond
	 * until vm_resume or the stop. */
	pthread_mutex_t pause_lock;
	pthread_cond_t pause_cond;
	atomic_bool pause_req;
	unsigned int nrunning;		/* vCPU threads in their loop */
	unsigned int nparked;		/* of them, waiting on pause_cond */
	atomic_bool reset_requested;
	atomic_int status;
	int input_fd;
	bool (*input_fn)(void *opaque);
	void *input_opaque;
};

/* Each vCPU dispatches as the bus reader of its own index. */
_Static_assert(VM_MAX_CPUS <= BUS_MAX_READERS, "a bus reader slot per vCPU");

struct gmem *vm_gmem(struct vm *vm) { return &vm->gmem; }
struct bus *vm_pio_bus(struct vm *vm) { return &vm->pio; }
struct bus *vm_mmio_bus(struct vm *vm) { return &vm->mmio; }
unsigned int vm_ncpus(const struct vm *vm) { return vm->ncpus; }
int vm_kvm_fd(const struct vm *vm) { return vm->kvm_fd; }
uint64_t vm_mem_size(const struct vm *vm) { return vm->mem_size; }

int vm_vcpu_fd(const struct vm *vm, unsigned int idx)
{
	return idx < vm->ncpus ? vm->vcpus[idx].fd : -EINVAL;
}

static const struct {
	int cap;
	const char *name;
} required_caps[] = {
	{ KVM_CAP_USER_MEMORY, "KVM_CAP_USER_MEMORY" },
	{ KVM_CAP_IRQCHIP, "KVM_CAP_IRQCHIP" },
	{ KVM_CAP_PIT2, "KVM_CAP_PIT2" },
	{ KVM_CAP_IRQ_ROUTING, "KVM_CAP_IRQ_ROUTING" },
	{ KVM_CAP_IRQFD, "KVM_CAP_IRQFD" },
	{ KVM_CAP_IRQFD_RESAMPLE, "KVM_CAP_IRQFD_RESAMPLE" },
	{ KVM_CAP_IOEVENTFD, "KVM_CAP_IOEVENTFD" },
	{ KVM_CAP_IMMEDIATE_EXIT, "KVM_CAP_IMMEDIATE_EXIT" },
	{ KVM_CAP_EXT_CPUID, "KVM_CAP_EXT_CPUID" },
	{ KVM_CAP_MP_STATE, "KVM_CAP_MP_STATE" },
};

static int open_kvm(void)
{
	int fd = open("/dev/kvm", O_RDWR | O_CLOEXEC);
	int ver;

	if (fd < 0) {
		int e = errno;

		if (e == ENOENT)
			pr_err("cannot open /dev/kvm: it does not exist (is the kvm module loaded?)");
		else if (e == EACCES || e == EPERM)
			pr_err("cannot open /dev/kvm: permission denied (add your user to the kvm group)");
		else
			pr_err("cannot open /dev/kvm: %s", strerror(e));
		return -e;
	}
	ver = ioctl(fd, KVM_GET_API_VERSION, 0);
	if (ver < 0) {
		pr_err("/dev/kvm is not a KVM device (KVM_GET_API_VERSION: %s)",
		       strerror(errno));
		close(fd);
		return -ENOTSUP;
	}
	if (ver != KVM_API_VERSION) {
		pr_err("/dev/kvm speaks KVM API version %d, iovm needs %d", ver,
		       KVM_API_VERSION);
		close(fd);
		return -ENOTSUP;
	}
	for (size_t i = 0; i < sizeof(required_caps) / sizeof(required_caps[0]); i++) {
		if (ioctl(fd, KVM_CHECK_EXTENSION, required_caps[i].cap) <= 0) {
			pr_err("this KVM lacks %s, which iovm needs", required_caps[i].name);
			close(fd);
			return -ENOTSUP;
		}
	}
	return fd;
}

static int check_memory(uint64_t size)
{
	struct sysinfo si;

	if (sysinfo(&si))
		return -errno;
	/* RAM is mapped without reservation; refuse only what the host
	 * could never back, so a typo like 512G is caught up front. */
	if (size / si.mem_unit > (uint64_t)si.totalram) {
		pr_err("--memory %llu MiB is more than this host's %llu MiB of RAM",
		       (unsigned long long)(size >> 20),
		       (unsigned long long)((uint64_t)si.totalram * si.mem_unit >> 20));
		return -ENOMEM;
	}
	return 0;
}

static void *map_ram(uint64_t size)
{
	void *p = mmap(NULL, size, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

	if (p == MAP_FAILED)
		return NULL;
	/* Huge pages cut the host page-table cost of a big guest; a small
	 * guest (the probe) touches little either way. */
	madvise(p, size, MADV_HUGEPAGE);
	return p;
}

static int add_slot(struct vm *vm, unsigned int slot, uint64_t gpa,
		    uint64_t size, void *hva)
{
	struct kvm_userspace_memory_region r = {
		.slot = slot,
		.guest_phys_addr = gpa,
		.memory_size = size,
		.userspace_addr = (uintptr_t)hva,
	};

	if (ioctl(vm->vm_fd, KVM_SET_USER_MEMORY_REGION, &r)) {
		int e = errno;

		pr_err("KVM_SET_USER_MEMORY_REGION: %s", strerror(e));
		return -e;
	}
	vm->gmem.r[vm->gmem.n++] = (struct gmem_region){ gpa, size, hva };
	return 0;
}

static int setup_memory(struct vm *vm)
{
	uint64_t low = vm->mem_size < VM_PCI_HOLE_START ? vm->mem_size : VM_PCI_HOLE_START;
	uint64_t high = vm->mem_size - low;
	int ret;

	vm->ram_low = map_ram(low);
	if (!vm->ram_low) {
		pr_err("cannot map %llu MiB of guest RAM: %s",
		       (unsigned long long)(low >> 20), strerror(errno));
		return -ENOMEM;
	}
	vm->ram_low_size = low;
	ret = add_slot(vm, 0, 0, low, vm->ram_low);
	if (ret || !high)
		return ret;
	vm->ram_high = map_ram(high);
	if (!vm->ram_high) {
		pr_err("cannot map %llu MiB of guest RAM above 4 GiB: %s",
		       (unsigned long long)(high >> 20), strerror(errno));
		return -ENOMEM;
	}
	vm->ram_high_size = high;
	return add_slot(vm, 1, VM_HIGH_RAM_START, high, vm->ram_high);
}

static int push_routes(struct vm *vm)
{
	return ioctl(vm->vm_fd, KVM_SET_GSI_ROUTING, vm->gsi.rt) ? -errno : 0;
}

static int setup_irqchip(struct vm *vm)
{
	struct kvm_pit_config pit = { .flags = KVM_PIT_SPEAKER_DUMMY };
	int n;

	if (ioctl(vm->vm_fd, KVM_SET_TSS_ADDR, 0xfffbd000ul) && errno != ENOTTY)
		pr_debug("KVM_SET_TSS_ADDR: %s", strerror(errno));
	if (ioctl(vm->vm_fd, KVM_CREATE_IRQCHIP, 0)) {
		int e = errno;

		pr_err("KVM_CREATE_IRQCHIP: %s", strerror(e));
		return -e;
	}
	if (ioctl(vm->vm_fd, KVM_CREATE_PIT2, &pit)) {
		int e = errno;

		pr_err("KVM_CREATE_PIT2: %s", strerror(e));
		return -e;
	}
	n = ioctl(vm->kvm_fd, KVM_CHECK_EXTENSION, KVM_CAP_IRQ_ROUTING);
	if (gsi_table_init(&vm->gsi, n > 0 ? (unsigned int)n : 0))
		return -ENOMEM;
	if (push_routes(vm)) {
		int e = errno;

		pr_err("KVM_SET_GSI_ROUTING: %s", strerror(e));
		return -e;
	}
	return 0;
}

static void kick_handler(int sig)
{
}

static int setup_vcpus(struct vm *vm)
{
	int max = ioctl(vm->kvm_fd, KVM_CHECK_EXTENSION, KVM_CAP_MAX_VCPUS);
	int sz = ioctl(vm->kvm_fd, KVM_GET_VCPU_MMAP_SIZE, 0);

	if (max <= 0)
		max = ioctl(vm->kvm_fd, KVM_CHECK_EXTENSION, KVM_CAP_NR_VCPUS);
	if (max > 0 && vm->ncpus > (unsigned int)max) {
		pr_err("--cpus %u is more than this KVM's limit of %d", vm->ncpus, max);
		return -EINVAL;
	}
	if (sz < (int)sizeof(struct kvm_run)) {
		pr_err("KVM_GET_VCPU_MMAP_SIZE: %s", strerror(errno));
		return -ENOTSUP;
	}
	vm->run_size = sz;
	for (unsigned int i = 0; i < vm->ncpus; i++) {
		struct vcpu *v = &vm->vcpus[i];

		v->vm = vm;
		v->idx = i;
		v->fd = ioctl(vm->vm_fd, KVM_CREATE_VCPU, i);
		if (v->fd < 0) {
			int e = errno;

			pr_err("KVM_CREATE_VCPU %u: %s", i, strerror(e));
			return -e;
		}
		v->run = mmap(NULL, sz, PROT_READ | PROT_WRITE, MAP_SHARED, v->fd, 0);
		if (v->run == MAP_FAILED) {
			v->run = NULL;
			pr_err("mmap of vCPU %u state: %s", i, strerror(errno));
			return -ENOMEM;
		}
	}
	return 0;
}

int vm_create(const struct vm_params *p, struct vm **out)
{
	struct vm *vm;
	int ret;

	if (!p->ncpus || p->ncpus > VM_MAX_CPUS) {
		pr_err("--cpus must be from 1 to %d", VM_MAX_CPUS);
		return -EINVAL;
	}
	ret = check_memory(p->mem_size);
	if (ret)
		return ret;
	vm = calloc(1, sizeof(*vm));
	if (!vm)
		return -ENOMEM;
	vm->vm_fd = vm->stop_efd = vm->input_fd = -1;
	for (unsigned int i = 0; i < VM_MAX_CPUS; i++)
		vm->vcpus[i].fd = -1;
	pthread_mutex_init(&vm->lock, NULL);
	pthread_mutex_init(&vm->pause_lock, NULL);
	pthread_cond_init(&vm->pause_cond, NULL);
	bus_init(&vm->pio);
	bus_init(&vm->mmio);
	vm->mem_size = p->mem_size;
	vm->ncpus = p->ncpus;
	vm->mmio_next = VM_PCI_HOLE_START;
	vm->pio_next = PCI_PIO_START;
	*out = vm;

	vm->kvm_fd = open_kvm();
	if (vm->kvm_fd < 0)
		return vm->kvm_fd;
	vm->vm_fd = ioctl(vm->kvm_fd, KVM_CREATE_VM, 0);
	if (vm->vm_fd < 0) {
		int e = errno;

		pr_err("KVM_CREATE_VM: %s", strerror(e));
		return -e;
	}
	vm->stop_efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (vm->stop_efd < 0)
		return -errno;
	ret = setup_memory(vm);
	if (!ret)
		ret = setup_irqchip(vm);
	if (!ret)
		ret = setup_vcpus(vm);
	return ret;
}

void vm_destroy(struct vm *vm)
{
	if (!vm)
		return;
	for (unsigned int i = 0; i < vm->ncpus; i++) {
		if (vm->vcpus[i].run)
			munmap(vm->vcpus[i].run, vm->run_size);
		if (vm->vcpus[i].fd >= 0)
			close(vm->vcpus[i].fd);
	}
	if (vm->ram_low)
		munmap(vm->ram_low, vm->ram_low_size);
	if (vm->ram_high)
		munmap(vm->ram_high, vm->ram_high_size);
	if (vm->vm_fd >= 0)
		close(vm->vm_fd);
	if (vm->kvm_fd >= 0)
		close(vm->kvm_fd);
	if (vm->stop_efd >= 0)
		close(vm->stop_efd);
	gsi_table_free(&vm->gsi);
	bus_destroy(&vm->pio);
	bus_destroy(&vm->mmio);
	pthread_mutex_destroy(&vm->lock);
	pthread_mutex_destroy(&vm->pause_lock);
	pthread_cond_destroy(&vm->pause_cond);
	free(vm);
}

int vm_ioeventfd(struct vm *vm, uint64_t addr, unsigned int len, bool pio,
		 int64_t datamatch, int fd, bool assign)
{
	struct kvm_ioeventfd io = {
		.addr = addr,
		.len = len,
		.fd = fd,
	};

	if (pio)
		io.flags |= KVM_IOEVENTFD_FLAG_PIO;
	if (datamatch >= 0) {
		io.flags |= KVM_IOEVENTFD_FLAG_DATAMATCH;
		io.datamatch = datamatch;
	}
	if (!assign)
		io.flags |= KVM_IOEVENTFD_FLAG_DEASSIGN;
	return ioctl(vm->vm_fd, KVM_IOEVENTFD, &io) ? -errno : 0;
}

int vm_irqfd(struct vm *vm, unsigned int gsi, int fd, int resample_fd,
	     bool assign)
{
	struct kvm_irqfd irq = { .fd = fd, .gsi = gsi };

	if (resample_fd >= 0) {
		irq.flags |= KVM_IRQFD_FLAG_RESAMPLE;
		irq.resamplefd = resample_fd;
	}
	if (!assign)
		irq.flags = KVM_IRQFD_FLAG_DEASSIGN;
	return ioctl(vm->vm_fd, KVM_IRQFD, &irq) ? -errno : 0;
}

int vm_irq_line(struct vm *vm, unsigned int gsi, int level)
{
	struct kvm_irq_level l = { .irq = gsi, .level = level };

	return ioctl(vm->vm_fd, KVM_IRQ_LINE, &l) ? -errno : 0;
}

int vm_msi_route_alloc(struct vm *vm)
{
	int ret;

	pthread_mutex_lock(&vm->lock);
	ret = gsi_msi_alloc(&vm->gsi);
	pthread_mutex_unlock(&vm->lock);
	return ret;
}

int vm_msi_route_set(struct vm *vm, unsigned int gsi, uint64_t addr,
		     uint32_t data)
{
	int ret;

	pthread_mutex_lock(&vm->lock);
	ret = gsi_msi_set(&vm->gsi, gsi, addr, data);
	if (!ret)
		ret = push_routes(vm);
	pthread_mutex_unlock(&vm->lock);
	return ret;
}

uint64_t vm_pci_mmio_alloc(struct vm *vm, uint64_t size)
{
	uint64_t base = 0;

	if (!size || (size & (size - 1)))
		return 0;
	pthread_mutex_lock(&vm->lock);
	uint64_t b = (vm->mmio_next + size - 1) & ~(size - 1);
	if (b >= vm->mmio_next && b + size <= VM_PCI_HOLE_END) {
		base = b;
		vm->mmio_next = b + size;
	}
	pthread_mutex_unlock(&vm->lock);
	return base;
}

uint16_t vm_pci_pio_alloc(struct vm *vm, uint16_t size)
{
	uint16_t base = 0;

	if (!size || (size & (size - 1)))
		return 0;
	pthread_mutex_lock(&vm->lock);
	uint32_t b = (vm->pio_next + size - 1) & ~((uint32_t)size - 1);
	if (b + size <= 0x10000) {
		base = b;
		vm->pio_next = b + size;
	}
	pthread_mutex_unlock(&vm->lock);
	return base;
}

int vm_add_shutdown_hook(struct vm *vm, void (*fn)(void *opaque), void *opaque)
{
	int ret = 0;

	pthread_mutex_lock(&vm->lock);
	if (vm->nhooks >= MAX_HOOKS)
		ret = -ENOSPC;
	else
		vm->hooks[vm->nhooks++] = (struct hook){ fn, opaque };
	pthread_mutex_unlock(&vm->lock);
	return ret;
}

int vm_set_input(struct vm *vm, int fd, bool (*fn)(void *opaque), void *opaque)
{
	if (vm->input_fn)
		return -EBUSY;
	vm->input_fd = fd;
	vm->input_fn = fn;
	vm->input_opaque = opaque;
	return 0;
}

static void kick_vcpus(struct vm *vm)
{
	for (unsigned int i = 0; i < vm->ncpus; i++) {
		struct vcpu *v = &vm->vcpus[i];

		/* immediate_exit covers a vCPU between its stop check and
		 * KVM_RUN; the signal covers one inside KVM_RUN. */
		__atomic_store_n(&v->run->immediate_exit, 1, __ATOMIC_SEQ_CST);
		if (v->started && !pthread_equal(v->thread, pthread_self()))
			pthread_kill(v->thread, SIG_KICK);
	}
}

void vm_request_stop(struct vm *vm, int status)
{
	bool expected = false;
	uint64_t one = 1;

	/* The first request decides the exit status. */
	if (!atomic_compare_exchange_strong(&vm->stopping, &expected, true))
		return;
	atomic_store(&vm->status, status);
	kick_vcpus(vm);
	if (write(vm->stop_efd, &one, sizeof(one)) < 0)
		pr_debug("stop eventfd: %s", strerror(errno));
	/* Parked vCPUs and a waiting vm_pause see the stop. */
	pthread_mutex_lock(&vm->pause_lock);
	pthread_cond_broadcast(&vm->pause_cond);
	pthread_mutex_unlock(&vm->pause_lock);
}

int vm_pause(struct vm *vm)
{
	pthread_mutex_lock(&vm->pause_lock);
	atomic_store(&vm->pause_req, true);
	pthread_mutex_unlock(&vm->pause_lock);
	/* Out of KVM_RUN (the signal) or never back in (immediate_exit):
	 * each thread then finds pause_req at the top of its loop. */
	kick_vcpus(vm);
	pthread_mutex_lock(&vm->pause_lock);
	while (vm->nparked < vm->nrunning && atomic_load(&vm->pause_req) &&
	       !atomic_load(&vm->stopping))
		pthread_cond_wait(&vm->pause_cond, &vm->pause_lock);
	pthread_mutex_unlock(&vm->pause_lock);
	return atomic_load(&vm->stopping) ? -ESHUTDOWN : 0;
}

int vm_resume(struct vm *vm)
{
	pthread_mutex_lock(&vm->pause_lock);
	atomic_store(&vm->pause_req, false);
	pthread_cond_broadcast(&vm->pause_cond);
	pthread_mutex_unlock(&vm->pause_lock);
	return 0;
}

bool vm_paused(struct vm *vm)
{
	return atomic_load(&vm->pause_req);
}

/* A vCPU thread waits here while the VM is paused. */
static void vcpu_park(struct vcpu *v)
{
	struct vm *vm = v->vm;

	pthread_mutex_lock(&vm->pause_lock);
	vm->nparked++;
	pthread_cond_broadcast(&vm->pause_cond);
	while (atomic_load(&vm->pause_req) && !atomic_load(&vm->stopping))
		pthread_cond_wait(&vm->pause_cond, &vm->pause_lock);
	vm->nparked--;
	pthread_mutex_unlock(&vm->pause_lock);
}

void vm_request_reset(struct vm *vm)
{
	atomic_store(&vm->reset_requested, true);
	vm_request_stop(vm, 0);
}

static void handle_pio(struct vm *vm, unsigned int reader, struct kvm_run *run)
{
	uint8_t *data = (uint8_t *)run + run->io.data_offset;
	bool wr = run->io.direction == KVM_EXIT_IO_OUT;
	unsigned int size = run->io.size;

	/* A string instruction (rep outsb) arrives as count items. */
	for (uint32_t i = 0; i < run->io.count; i++, data += size)
		if (!bus_dispatch(&vm->pio, reader, run->io.port, data, size, wr) &&
		    !wr)
			memset(data, 0xff, size);
}

static void handle_mmio(struct vm *vm, unsigned int reader, struct kvm_run *run)
{
	unsigned int len = run->mmio.len;

	if (len > sizeof(run->mmio.data))
		len = sizeof(run->mmio.data);
	if (!bus_dispatch(&vm->mmio, reader, run->mmio.phys_addr, run->mmio.data, len,
			  run->mmio.is_write) && !run->mmio.is_write)
		memset(run->mmio.data, 0xff, len);
}

/* Returns true when the vCPU must stop. */
static bool handle_exit(struct vcpu *v)
{
	struct kvm_run *run = v->run;
	struct vm *vm = v->vm;

	switch (run->exit_reason) {
	case KVM_EXIT_IO:
		handle_pio(vm, v->idx, run);
		return false;
	case KVM_EXIT_MMIO:
		handle_mmio(vm, v->idx, run);
		return false;
	case KVM_EXIT_INTR:
	case KVM_EXIT_HLT:
	case KVM_EXIT_IRQ_WINDOW_OPEN:
		return false;
	case KVM_EXIT_SHUTDOWN:
		if (atomic_load(&vm->reset_requested)) {
			vm_request_stop(vm, 0);
			return true;
		}
		break;
	case KVM_EXIT_SYSTEM_EVENT:
		if (run->system_event.type == KVM_SYSTEM_EVENT_SHUTDOWN ||
		    run->system_event.type == KVM_SYSTEM_EVENT_RESET) {
			pr_info("guest %s", run->system_event.type == KVM_SYSTEM_EVENT_RESET ?
				"reset" : "powered off");
			vm_request_stop(vm, 0);
			return true;
		}
		break;
	}
	vcpu_report_exit(vm_gmem(vm), v->idx, v->fd, run);
	vm_request_stop(vm, VM_STATUS_CRASH);
	return true;
}

static void *vcpu_thread(void *arg)
{
	struct vcpu *v = arg;
	struct vm *vm = v->vm;
	char name[16];

	snprintf(name, sizeof(name), "vcpu%u", v->idx);
	pthread_setname_np(pthread_self(), name);
	pthread_mutex_lock(&vm->pause_lock);
	vm->nrunning++;
	pthread_mutex_unlock(&vm->pause_lock);
	while (!atomic_load(&vm->stopping)) {
		if (atomic_load(&vm->pause_req)) {
			vcpu_park(v);
			continue;
		}
		if (ioctl(v->fd, KVM_RUN, 0) < 0) {
			if (errno == EINTR || errno == EAGAIN) {
				/* A kick (immediate_exit) ends one KVM_RUN: a
				 * pause that is over by now must not end the
				 * next. Stop and pause set their flag before they
				 * kick, so the loop's checks, after this, see
				 * any that is not over. */
				__atomic_store_n(&v->run->immediate_exit, 0, __ATOMIC_SEQ_CST);
				continue;
			}
			pr_err("vCPU %u: KVM_RUN: %s", v->idx, strerror(errno));
			vm_request_stop(vm, VM_STATUS_CRASH);
			break;
		}
		if (handle_exit(v))
			break;
	}
	pthread_mutex_lock(&vm->pause_lock);
	vm->nrunning--;
	pthread_cond_broadcast(&vm->pause_cond);
	pthread_mutex_unlock(&vm->pause_lock);
	return NULL;
}

int vm_block_signals(void)
{
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP);
	sigaddset(&set, SIGQUIT);
	return -pthread_sigmask(SIG_BLOCK, &set, NULL);
}

static int start_vcpus(struct vm *vm)
{
	struct sigaction sa = { .sa_handler = kick_handler };
	sigset_t set;

	sigemptyset(&sa.sa_mask);
	if (sigaction(SIG_KICK, &sa, NULL))
		return -errno;
	sigemptyset(&set);
	sigaddset(&set, SIG_KICK);
	pthread_sigmask(SIG_UNBLOCK, &set, NULL);
	for (unsigned int i = 0; i < vm->ncpus; i++) {
		struct vcpu *v = &vm->vcpus[i];
		int ret = pthread_create(&v->thread, NULL, vcpu_thread, v);

		if (ret) {
			pr_err("cannot start vCPU thread: %s", strerror(ret));
			vm_request_stop(vm, 1);
			return -ret;
		}
		v->started = true;
	}
	return 0;
}

static int signal_status(int sig)
{
	pr_info("%s: stopping the VM", strsignal(sig));
	return 128 + sig;
}

/* The main thread waits here for console input, signals and the stop. */
static void main_loop(struct vm *vm, int sfd)
{
	struct pollfd p[3] = {
		{ .fd = vm->stop_efd, .events = POLLIN },
		{ .fd = sfd, .events = POLLIN },
		{ .fd = vm->input_fn ? vm->input_fd : -1, .events = POLLIN },
	};

	while (!atomic_load(&vm->stopping)) {
		if (poll(p, 3, -1) < 0) {
			if (errno == EINTR)
				continue;
			pr_err("poll: %s", strerror(errno));
			vm_request_stop(vm, 1);
			break;
		}
		if (p[1].revents & POLLIN) {
			struct signalfd_siginfo si;

			if (read(sfd, &si, sizeof(si)) == sizeof(si))
				vm_request_stop(vm, signal_status(si.ssi_signo));
		}
		if (p[2].revents & POLLNVAL)	/* stdin closed */
			p[2].fd = -1;
		else if (p[2].revents & (POLLIN | POLLHUP | POLLERR)) {
			/* End of input: stop watching, the guest runs on. */
			if (!vm->input_fn(vm->input_opaque))
				p[2].fd = -1;
		}
	}
}

int vm_run(struct vm *vm)
{
	sigset_t set;
	int sfd, ret;

	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP);
	sigaddset(&set, SIGQUIT);
	sfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
	if (sfd < 0) {
		pr_err("signalfd: %s", strerror(errno));
		return 1;
	}
	ret = start_vcpus(vm);
	if (!ret)
		main_loop(vm, sfd);
	for (unsigned int i = 0; i < vm->ncpus; i++)
		if (vm->vcpus[i].started)
			pthread_join(vm->vcpus[i].thread, NULL);
	/* Devices finish in-flight I/O, newest first, as they were built on
	 * top of each other. */
	for (unsigned int i = vm->nhooks; i-- > 0;)
		vm->hooks[i].fn(vm->hooks[i].opaque);
	close(sfd);
	return ret ? 1 : atomic_load(&vm->status);
}


/* Resident KiB of the mapping that starts at addr, from /proc/self/smaps. */
static unsigned long mapping_rss_kb(const void *addr)
{
	char line[256];
	unsigned long kb = 0, start, end;
	bool in = false;
	FILE *f = fopen("/proc/self/smaps", "r");

	if (!f || !addr)
		goto out;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%lx-%lx ", &start, &end) == 2)
			in = start == (unsigned long)addr;
		else if (in && sscanf(line, "Rss: %lu kB", &kb) == 1)
			break;
	}
out:
	if (f)
		fclose(f);
	return in ? kb : 0;
}

static unsigned long peak_rss_kb(void)
{
	char line[256];
	unsigned long kb = 0;
	FILE *f = fopen("/proc/self/status", "r");

	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "VmHWM: %lu kB", &kb) == 1)
			break;
	if (f)
		fclose(f);
	return kb;
}

void vm_report_memory(struct vm *vm)
{
	unsigned long peak = peak_rss_kb();
	unsigned long guest = mapping_rss_kb(vm->ram_low) + mapping_rss_kb(vm->ram_high);

	pr_info("memory: peak RSS %lu KiB, guest RAM resident %lu KiB, iovm's own %lu KiB",
		peak, guest, peak > guest ? peak - guest : 0);
}
