// SPDX-License-Identifier: GPL-2.0
/*
 * rdmastream-switch: run a program with the BPF switch (rs_switch.bpf.c)
 * turning its TCP sockets into IPPROTO_RDMASTREAM ones, in the kernel.
 * rdmastream-run uses it where the kernel has the update_socket_protocol
 * hook (6.6 and later); docs/preload.md.
 *
 *   rdmastream-switch [-v] [--or-exec] [--] PROGRAM [ARGS...]
 *   rdmastream-switch [-v] --probe
 *
 * The program runs in a cgroup of its own, rdmastream-run.<pid>, made
 * below this process's cgroup (cgroup v2); the switch changes the sockets
 * of that cgroup's tasks only, so everything the program starts is
 * switched and nothing else on the machine is. rdmastream-switch waits
 * until the program and everything it started have exited (the switch
 * lives exactly as long), removes the cgroup and exits with the
 * program's status (128 + N if signal N ended it). SIGTERM, SIGHUP,
 * SIGUSR1 and SIGUSR2 are passed on to the program; SIGINT and SIGQUIT
 * reach it from the terminal and are ignored here.
 *
 * --probe checks that the switch can be set up here and exits 0 or 1.
 * --or-exec runs PROGRAM without the switch when it cannot be (e.g. an
 * older kernel); otherwise that is an error, exit status 125. -v says
 * which happened, why, and at the end how many sockets were switched.
 *
 * Needs: root (CAP_BPF, CAP_PERFMON, CAP_SYS_ADMIN for the cgroup), cgroup
 * v2 mounted, the rdmastream module (loaded here on demand) with its
 * IPPROTO route on (ipproto parameter not 0).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <netinet/in.h>

#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>

#include <linux/rdmastream.h>

#define RS_NAME		"rdmastream-switch"
#define RS_EXIT_SETUP	125	/* as env(1): the tool itself failed */
#define RS_HOOK		"update_socket_protocol"
#define RS_IPPROTO_PARAM "/sys/module/rdmastream/parameters/ipproto"

/* the object file of rs_switch.bpf.c (rs_switch_obj.S) */
extern const char rs_switch_obj[], rs_switch_obj_end[];

static int rs_verbose;
static volatile pid_t rs_child;
static volatile sig_atomic_t rs_pending;	/* a signal for the cgroup */

struct rs_switch {
	struct bpf_object *obj;
	struct bpf_link *link;
	int cgfd;			/* our cgroup's directory */
	char cgpath[PATH_MAX];
};

static void rs_say(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fprintf(stderr, RS_NAME ": ");
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

static int rs_libbpf_print(enum libbpf_print_level level, const char *fmt,
			   va_list ap)
{
	if (rs_verbose < 2 && level != LIBBPF_WARN)
		return 0;
	if (!rs_verbose)
		return 0;
	return vfprintf(stderr, fmt, ap);
}

/* IPPROTO_RDMASTREAM as the module has it: loads the module if need be */
static int rs_module_ipproto(char *why, size_t len)
{
	int tries, proto, fd;
	FILE *f;

	for (tries = 0; tries < 2; tries++) {
		f = fopen(RS_IPPROTO_PARAM, "r");
		if (f) {
			if (fscanf(f, "%d", &proto) != 1)
				proto = 0;
			fclose(f);
			if (proto > 0)
				return proto;
			snprintf(why, len,
				 "the module's IPPROTO route is off (ipproto=0)");
			return -1;
		}
		/* net-pf-2-proto-N-type-1 loads it, as any program's would */
		fd = socket(AF_INET, SOCK_STREAM, IPPROTO_RDMASTREAM);
		if (fd >= 0)
			close(fd);
	}
	snprintf(why, len, "the rdmastream module is not loaded");
	return -1;
}

static bool rs_kernel_has_hook(void)
{
	struct btf *btf = btf__load_vmlinux_btf();
	bool has;

	if (!btf)
		return false;
	has = btf__find_by_name_kind(btf, RS_HOOK, BTF_KIND_FUNC) > 0;
	btf__free(btf);
	return has;
}

/* where cgroup v2 is mounted, from /proc/self/mountinfo */
static int rs_cgroup2_mount(char *buf, size_t len)
{
	char line[4096], mnt[PATH_MAX], *sep;
	int found = -1;
	FILE *f;

	f = fopen("/proc/self/mountinfo", "r");
	if (!f)
		return -1;
	while (found && fgets(line, sizeof(line), f)) {
		sep = strstr(line, " - cgroup2 ");
		if (!sep || sscanf(line, "%*s %*s %*s %*s %4095s", mnt) != 1)
			continue;
		if ((size_t)snprintf(buf, len, "%s", mnt) < len)
			found = 0;
	}
	fclose(f);
	return found;
}

/* this process's cgroup v2 path ("0::/a/b" of /proc/self/cgroup) */
static int rs_cgroup_self(char *buf, size_t len)
{
	char line[PATH_MAX + 8];
	int found = -1;
	FILE *f;

	f = fopen("/proc/self/cgroup", "r");
	if (!f)
		return -1;
	while (found && fgets(line, sizeof(line), f)) {
		if (strncmp(line, "0::", 3))
			continue;
		line[strcspn(line, "\n")] = '\0';
		if ((size_t)snprintf(buf, len, "%s", line + 3) < len)
			found = 0;
	}
	fclose(f);
	return found;
}

/* makes <cgroup2 mount><our cgroup>/rdmastream-run.<pid> */
static int rs_cgroup_make(struct rs_switch *sw, char *why, size_t len)
{
	char mnt[PATH_MAX], self[PATH_MAX];

	if (rs_cgroup2_mount(mnt, sizeof(mnt)) ||
	    rs_cgroup_self(self, sizeof(self))) {
		snprintf(why, len, "no cgroup v2 (mount -t cgroup2 none /sys/fs/cgroup)");
		return -1;
	}
	if ((size_t)snprintf(sw->cgpath, sizeof(sw->cgpath),
			     "%s%s/rdmastream-run.%d", mnt,
			     strcmp(self, "/") ? self : "", getpid()) >=
	    sizeof(sw->cgpath)) {
		snprintf(why, len, "cgroup path too long");
		return -1;
	}
	if (mkdir(sw->cgpath, 0755)) {
		snprintf(why, len, "cannot make cgroup %s: %s", sw->cgpath,
			 strerror(errno));
		sw->cgpath[0] = '\0';
		return -1;
	}
	sw->cgfd = open(sw->cgpath, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (sw->cgfd < 0) {
		snprintf(why, len, "cannot open %s: %s", sw->cgpath,
			 strerror(errno));
		return -1;
	}
	return 0;
}

static void rs_switch_close(struct rs_switch *sw)
{
	bpf_link__destroy(sw->link);
	sw->link = NULL;
	bpf_object__close(sw->obj);
	sw->obj = NULL;
	if (sw->cgfd >= 0)
		close(sw->cgfd);
	sw->cgfd = -1;
	if (sw->cgpath[0] && rmdir(sw->cgpath) && rs_verbose)
		rs_say("cannot remove %s: %s", sw->cgpath, strerror(errno));
	sw->cgpath[0] = '\0';
}

/* loads the program for proto and attaches it for the cgroup sw->cgfd */
static int rs_switch_attach(struct rs_switch *sw, int proto, char *why,
			    size_t len)
{
	LIBBPF_OPTS(bpf_object_open_opts, opts, .object_name = "rs_switch");
	struct bpf_program *prog;
	struct bpf_map *map;
	__u32 slot = 0;
	int err;

	sw->obj = bpf_object__open_mem(rs_switch_obj,
				       rs_switch_obj_end - rs_switch_obj, &opts);
	if (!sw->obj) {
		err = -errno;
		goto fail;
	}
	map = bpf_object__find_map_by_name(sw->obj, ".rodata");
	err = map ? bpf_map__set_initial_value(map, &proto, sizeof(proto))
		  : -ENOENT;
	if (err)
		goto fail;
	err = bpf_object__load(sw->obj);
	if (err)
		goto fail;
	map = bpf_object__find_map_by_name(sw->obj, "rs_cgroup");
	err = map ? bpf_map_update_elem(bpf_map__fd(map), &slot, &sw->cgfd,
					BPF_ANY) : -ENOENT;
	if (err)
		goto fail;
	prog = bpf_object__find_program_by_name(sw->obj, "rs_switch");
	sw->link = prog ? bpf_program__attach(prog) : NULL;
	if (!sw->link) {
		err = prog ? -errno : -ENOENT;
		goto fail;
	}
	return 0;
fail:
	snprintf(why, len, "cannot load or attach the BPF program: %s%s",
		 strerror(-err), err == -EPERM ?
		 " (needs CAP_BPF, CAP_PERFMON: run as root)" : "");
	return -1;
}

/* everything the switch needs, or why it cannot be had here */
static int rs_switch_setup(struct rs_switch *sw, char *why, size_t len)
{
	int proto;

	if (!rs_kernel_has_hook()) {
		snprintf(why, len, "this kernel has no " RS_HOOK
			 " hook for BPF (it came in 6.6)");
		return -1;
	}
	proto = rs_module_ipproto(why, len);
	if (proto < 0)
		return -1;
	if (rs_cgroup_make(sw, why, len) ||
	    rs_switch_attach(sw, proto, why, len)) {
		rs_switch_close(sw);
		return -1;
	}
	if (rs_verbose)
		rs_say("switching TCP sockets of cgroup %s to protocol %d",
		       sw->cgpath, proto);
	return 0;
}

static void rs_forward(int sig)
{
	if (rs_child > 0)
		kill(rs_child, sig);
	else
		rs_pending = sig;
}

/* passes a signal that came after the program's exit to what it left */
static void rs_cgroup_signal(struct rs_switch *sw, int sig)
{
	FILE *f;
	int fd, pid;

	fd = openat(sw->cgfd, "cgroup.procs", O_RDONLY | O_CLOEXEC);
	f = fd >= 0 ? fdopen(fd, "r") : NULL;
	if (!f) {
		if (fd >= 0)
			close(fd);
		return;
	}
	while (fscanf(f, "%d", &pid) == 1)
		kill(pid, sig);
	fclose(f);
}

static void rs_signals(bool child)
{
	static const int fwd[] = { SIGTERM, SIGHUP, SIGUSR1, SIGUSR2 };
	struct sigaction sa = { 0 };
	unsigned int i;

	sa.sa_handler = child ? SIG_DFL : rs_forward;
	sa.sa_flags = SA_RESTART;
	for (i = 0; i < sizeof(fwd) / sizeof(fwd[0]); i++)
		sigaction(fwd[i], &sa, NULL);
	sa.sa_handler = child ? SIG_DFL : SIG_IGN;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGQUIT, &sa, NULL);
}

/* in the child: join the cgroup, then become the program */
static void rs_exec_in(struct rs_switch *sw, char **argv)
{
	char pid[32];
	int fd, n;

	rs_signals(true);
	fd = openat(sw->cgfd, "cgroup.procs", O_WRONLY | O_CLOEXEC);
	n = snprintf(pid, sizeof(pid), "%d\n", getpid());
	if (fd < 0 || write(fd, pid, n) != n) {
		rs_say("cannot join cgroup %s: %s", sw->cgpath, strerror(errno));
		_exit(RS_EXIT_SETUP);
	}
	close(fd);
	execvp(argv[0], argv);
	rs_say("%s: %s", argv[0], strerror(errno));
	_exit(errno == ENOENT ? 127 : 126);
}

/* waits until nothing runs in the cgroup any more */
static void rs_cgroup_drain(struct rs_switch *sw)
{
	char buf[256];
	struct pollfd p;
	ssize_t n;
	int fd;

	fd = openat(sw->cgfd, "cgroup.events", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	for (;;) {
		n = pread(fd, buf, sizeof(buf) - 1, 0);
		if (n <= 0)
			break;
		buf[n] = '\0';
		if (!strstr(buf, "populated 1"))
			break;
		if (rs_pending) {
			rs_cgroup_signal(sw, rs_pending);
			rs_pending = 0;
		}
		/* (a signal between the check and poll waits a second) */
		p = (struct pollfd){ .fd = fd, .events = POLLPRI };
		if (poll(&p, 1, 1000) < 0 && errno != EINTR)
			break;
	}
	close(fd);
}

static __u64 rs_switched(struct rs_switch *sw)
{
	struct bpf_map *map;
	__u32 slot = 0;
	__u64 n = 0;

	map = bpf_object__find_map_by_name(sw->obj, "rs_switched");
	if (map)
		bpf_map_lookup_elem(bpf_map__fd(map), &slot, &n);
	return n;
}

static int rs_run(struct rs_switch *sw, char **argv)
{
	int status, ret;
	pid_t pid;

	pid = fork();
	if (pid < 0) {
		rs_say("fork: %s", strerror(errno));
		return RS_EXIT_SETUP;
	}
	if (!pid)
		rs_exec_in(sw, argv);
	rs_child = pid;
	rs_signals(false);
	while (waitpid(pid, &status, 0) < 0) {
		if (errno != EINTR) {
			rs_say("waitpid: %s", strerror(errno));
			return RS_EXIT_SETUP;
		}
	}
	rs_child = 0;
	rs_cgroup_drain(sw);
	if (WIFSIGNALED(status))
		ret = 128 + WTERMSIG(status);
	else
		ret = WEXITSTATUS(status);
	if (rs_verbose)
		rs_say("%llu sockets switched", (unsigned long long)rs_switched(sw));
	return ret;
}

static void rs_usage(FILE *f)
{
	fprintf(f, "usage: " RS_NAME " [-v] [--or-exec] [--] PROGRAM [ARGS...]\n"
		"       " RS_NAME " [-v] --probe\n");
}

int main(int argc, char **argv)
{
	struct rs_switch sw = { .cgfd = -1 };
	bool probe = false, or_exec = false;
	char why[PATH_MAX + 64];
	int i, ret;

	for (i = 1; i < argc && argv[i][0] == '-'; i++) {
		if (!strcmp(argv[i], "--")) {
			i++;
			break;
		} else if (!strcmp(argv[i], "-v")) {
			rs_verbose++;
		} else if (!strcmp(argv[i], "--probe")) {
			probe = true;
		} else if (!strcmp(argv[i], "--or-exec")) {
			or_exec = true;
		} else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			rs_usage(stdout);
			return 0;
		} else {
			rs_say("unknown option %s", argv[i]);
			rs_usage(stderr);
			return 2;
		}
	}
	if (probe == (i < argc)) {
		rs_usage(stderr);
		return 2;
	}
	libbpf_set_print(rs_libbpf_print);
	if (rs_switch_setup(&sw, why, sizeof(why))) {
		if (rs_verbose || !or_exec)
			rs_say("no BPF switch: %s", why);
		if (probe)
			return 1;
		if (!or_exec)
			return RS_EXIT_SETUP;
		execvp(argv[i], argv + i);
		rs_say("%s: %s", argv[i], strerror(errno));
		return errno == ENOENT ? 127 : 126;
	}
	ret = probe ? 0 : rs_run(&sw, argv + i);
	rs_switch_close(&sw);
	return ret;
}
