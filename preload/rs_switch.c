// SPDX-License-Identifier: GPL-2.0
/*
 * rdmastream-switch: run a program with the BPF switch (rs_switch.bpf.c)
 * turning its TCP sockets into IPPROTO_RDMASTREAM ones, in the kernel.
 * rdmastream-run uses it where the kernel has the update_socket_protocol
 * hook (6.6 and later); docs/preload.md.
 *
 *   rdmastream-switch [-v] [--or-exec] [--preload LIB] [--] PROGRAM [ARGS...]
 *   rdmastream-switch [-v] --probe
 *
 * The program runs in a cgroup of its own, rdmastream-run.<pid>, made
 * below this process's cgroup (cgroup v2); the switch changes the sockets
 * of that cgroup's tasks only, so everything the program starts is
 * switched and nothing else on the machine is. rdmastream-switch waits
 * until the program and everything it started have exited (the switch
 * lives exactly as long), removes the cgroup and exits with the
 * program's status (128 + N if signal N ended it). SIGTERM, SIGHUP,
 * SIGUSR1, SIGUSR2, and SIGINT and SIGQUIT sent by kill() are passed on
 * to the program (the terminal's reach it by themselves); one that came
 * during setup waits for the program; one ignored at the start (nohup)
 * stays ignored. A SIGKILL of rdmastream-switch detaches the program in
 * the kernel, but leaves the (empty) cgroup behind.
 *
 * --probe checks that the switch can be set up here and exits 0 or 1.
 * --or-exec runs PROGRAM without the switch when it cannot be (e.g. an
 * older kernel); otherwise that is an error, exit status 125. -v says
 * which happened, why, and at the end how many sockets were switched.
 * --preload LIB puts LIB first in the program's LD_PRELOAD (not ours).
 *
 * A socket of the route stays open here while the switch is on, so the
 * module cannot be unloaded (or reloaded with another ipproto) under the
 * program. io_uring's IORING_OP_SOCKET does not pass the hook.
 *
 * Needs: root (CAP_BPF, CAP_PERFMON, CAP_SYS_ADMIN for the cgroup), cgroup
 * v2 mounted, the rdmastream module (loaded here on demand) with its
 * IPPROTO route on (ipproto parameter not 0), and a kernel whose hook
 * takes BPF programs (6.6+, CONFIG_MPTCP: net/mptcp/bpf.c registers it).
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
	/* a socket of the route: the module cannot be unloaded under us */
	int pinfd;
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

/*
 * The first line of file path that pick() takes: pick() copies what it
 * wants of the line into buf (len bytes) and returns true. 0, or -1.
 */
static int rs_scan(const char *path, char *buf, size_t len,
		   bool (*pick)(char *line, char *buf, size_t len))
{
	char line[2 * PATH_MAX];
	int found = -1;
	FILE *f;

	f = fopen(path, "r");
	if (!f)
		return -1;
	while (found && fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = '\0';
		if (pick(line, buf, len))
			found = 0;
	}
	fclose(f);
	return found;
}

/* a cgroup2 line of mountinfo: the whole hierarchy, a path without escapes */
static bool rs_pick_cgroup2(char *line, char *buf, size_t len)
{
	char root[PATH_MAX], mnt[PATH_MAX];

	return strstr(line, " - cgroup2 ") &&
	       sscanf(line, "%*s %*s %*s %4095s %4095s", root, mnt) == 2 &&
	       !strcmp(root, "/") && !strchr(mnt, '\\') &&
	       (size_t)snprintf(buf, len, "%s", mnt) < len;
}

/* the v2 line of /proc/self/cgroup: "0::/a/b" */
static bool rs_pick_self(char *line, char *buf, size_t len)
{
	return !strncmp(line, "0::", 3) &&
	       (size_t)snprintf(buf, len, "%s", line + 3) < len;
}

/* makes <cgroup2 mount><our cgroup>/rdmastream-run.<pid> */
static int rs_cgroup_make(struct rs_switch *sw, char *why, size_t len)
{
	char mnt[PATH_MAX], self[PATH_MAX];

	if (rs_scan("/proc/self/mountinfo", mnt, sizeof(mnt),
		    rs_pick_cgroup2) ||
	    rs_scan("/proc/self/cgroup", self, sizeof(self), rs_pick_self)) {
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
	if (sw->pinfd >= 0)
		close(sw->pinfd);
	sw->pinfd = -1;
	if (sw->cgpath[0] && rmdir(sw->cgpath) && rs_verbose)
		rs_say("cannot remove %s: %s", sw->cgpath, strerror(errno));
	sw->cgpath[0] = '\0';
}

/* the offset of variable name in the object's .rodata, from its BTF */
static long rs_rodata_offset(struct bpf_object *obj, const char *name)
{
	const struct btf_var_secinfo *vs;
	const struct btf_type *t, *v;
	struct btf *btf = bpf_object__btf(obj);
	int id, i;

	id = btf ? btf__find_by_name_kind(btf, ".rodata", BTF_KIND_DATASEC)
		 : -1;
	if (id <= 0)
		return -1;
	t = btf__type_by_id(btf, id);
	vs = btf_var_secinfos(t);
	for (i = 0; i < btf_vlen(t); i++, vs++) {
		v = btf__type_by_id(btf, vs->type);
		if (v && !strcmp(btf__name_by_offset(btf, v->name_off), name))
			return vs->offset;
	}
	return -1;
}

/* sets the const volatile int name of .rodata to val before loading */
static int rs_set_const(struct bpf_object *obj, const char *name, int val)
{
	struct bpf_map *map = bpf_object__find_map_by_name(obj, ".rodata");
	long off = rs_rodata_offset(obj, name);
	const void *cur;
	size_t size;
	char *data;
	int err;

	cur = map ? bpf_map__initial_value(map, &size) : NULL;
	if (!cur || off < 0 || off + sizeof(val) > size)
		return -ENOENT;
	data = malloc(size);
	if (!data)
		return -ENOMEM;
	memcpy(data, cur, size);
	memcpy(data + off, &val, sizeof(val));
	err = bpf_map__set_initial_value(map, data, size);
	free(data);
	return err;
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
	err = rs_set_const(sw->obj, "rs_ipproto", proto);
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
		 " (needs CAP_BPF, CAP_PERFMON: run as root)" :
		 err == -EINVAL ? " (BPF may replace " RS_HOOK
		 " only in kernels with CONFIG_MPTCP)" : "");
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
	/*
	 * Held until the end: the module stays loaded with this number
	 * while the program may make sockets of it.
	 */
	sw->pinfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, proto);
	if (sw->pinfd < 0) {
		snprintf(why, len, "socket(AF_INET, SOCK_STREAM, %d): %s",
			 proto, strerror(errno));
		return -1;
	}
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

/*
 * Signals passed on to the program, or once it has exited, to what is
 * left in its cgroup. ^C and ^\ from the terminal reach the program's
 * process group by themselves, so SIGINT and SIGQUIT are passed on only
 * when sent by kill(). A signal ignored when we started stays ignored.
 */
static const int rs_fwd_sigs[] = {
	SIGTERM, SIGHUP, SIGINT, SIGQUIT, SIGUSR1, SIGUSR2,
};

#define RS_NSIGS	(sizeof(rs_fwd_sigs) / sizeof(rs_fwd_sigs[0]))

static sigset_t rs_old_mask;

static void rs_forward(int sig, siginfo_t *si, void *uc)
{
	int saved = errno;

	(void)uc;
	if ((sig == SIGINT || sig == SIGQUIT) && si->si_code != SI_USER)
		return;
	if (rs_child > 0)
		kill(rs_child, sig);
	else
		rs_pending = sig;
	errno = saved;
}

/* holds the signals back (they wait while there is nobody to pass to) */
static void rs_signals_block(sigset_t *old)
{
	sigset_t set;
	unsigned int i;

	sigemptyset(&set);
	for (i = 0; i < RS_NSIGS; i++)
		sigaddset(&set, rs_fwd_sigs[i]);
	sigprocmask(SIG_BLOCK, &set, old);
}

/* in the parent, once rs_child is set: pass them on from now */
static void rs_signals_forward(void)
{
	struct sigaction sa = { 0 }, old;
	unsigned int i;

	sa.sa_sigaction = rs_forward;
	sa.sa_flags = SA_SIGINFO | SA_RESTART;
	for (i = 0; i < RS_NSIGS; i++) {
		if (!sigaction(rs_fwd_sigs[i], NULL, &old) &&
		    old.sa_handler != SIG_IGN)
			sigaction(rs_fwd_sigs[i], &sa, NULL);
	}
	sigprocmask(SIG_SETMASK, &rs_old_mask, NULL);
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

/* LD_PRELOAD=lib before what is there already (rdmastream-run's preload) */
static void rs_add_preload(const char *lib)
{
	const char *old = getenv("LD_PRELOAD");
	char *v;

	if (!lib)
		return;
	if (!old || !*old) {
		setenv("LD_PRELOAD", lib, 1);
		return;
	}
	if (asprintf(&v, "%s %s", lib, old) < 0)
		return;
	setenv("LD_PRELOAD", v, 1);
	free(v);
}

/* becomes the program, as it was asked for: signal mask, preload */
static void rs_exec(char **argv, const char *preload)
{
	sigprocmask(SIG_SETMASK, &rs_old_mask, NULL);
	rs_add_preload(preload);
	execvp(argv[0], argv);
	rs_say("%s: %s", argv[0], strerror(errno));
	_exit(errno == ENOENT ? 127 : 126);
}

/* in the child: join the cgroup, then become the program */
static void rs_exec_in(struct rs_switch *sw, char **argv, const char *preload)
{
	char pid[32];
	int fd, n;

	fd = openat(sw->cgfd, "cgroup.procs", O_WRONLY | O_CLOEXEC);
	n = snprintf(pid, sizeof(pid), "%d\n", getpid());
	if (fd < 0 || write(fd, pid, n) != n) {
		rs_say("cannot join cgroup %s: %s", sw->cgpath, strerror(errno));
		_exit(RS_EXIT_SETUP);
	}
	close(fd);
	rs_exec(argv, preload);
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

static int rs_run(struct rs_switch *sw, char **argv, const char *preload)
{
	siginfo_t si;
	sigset_t held;
	int status;
	pid_t pid;

	pid = fork();
	if (pid < 0) {
		rs_say("fork: %s", strerror(errno));
		return RS_EXIT_SETUP;
	}
	if (!pid)
		rs_exec_in(sw, argv, preload);
	rs_child = pid;
	rs_signals_forward();
	/* wait without reaping: until then its pid cannot be reused */
	while (waitid(P_PID, pid, &si, WEXITED | WNOWAIT) < 0) {
		if (errno != EINTR) {
			rs_say("waitid: %s", strerror(errno));
			return RS_EXIT_SETUP;
		}
	}
	rs_signals_block(&held);
	rs_child = 0;
	waitpid(pid, &status, 0);
	sigprocmask(SIG_SETMASK, &held, NULL);
	rs_cgroup_drain(sw);
	if (rs_verbose)
		rs_say("%llu sockets switched", (unsigned long long)rs_switched(sw));
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return WEXITSTATUS(status);
}

static void rs_usage(FILE *f)
{
	fprintf(f, "usage: " RS_NAME " [-v] [--or-exec] [--preload LIB] [--] PROGRAM [ARGS...]\n"
		"       " RS_NAME " [-v] --probe\n");
}

int main(int argc, char **argv)
{
	struct rs_switch sw = { .cgfd = -1, .pinfd = -1 };
	bool probe = false, or_exec = false;
	const char *preload = NULL;
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
		} else if (!strcmp(argv[i], "--preload") && i + 1 < argc) {
			preload = argv[++i];
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
	/* a signal during setup waits for the program, then reaches it */
	rs_signals_block(&rs_old_mask);
	if (rs_switch_setup(&sw, why, sizeof(why))) {
		if (rs_verbose || !or_exec)
			rs_say("no BPF switch: %s", why);
		if (probe)
			return 1;
		if (!or_exec)
			return RS_EXIT_SETUP;
		rs_exec(argv + i, preload);
	}
	ret = probe ? 0 : rs_run(&sw, argv + i, preload);
	rs_switch_close(&sw);
	return ret;
}
