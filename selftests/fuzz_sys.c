// SPDX-License-Identifier: GPL-2.0
/*
 * A seeded, time-bounded syscall fuzzer for the socket family.
 *
 * Several threads share a pool of descriptors and issue random sequences
 * of socket, bind, listen, connect, accept4, send/recv (msg, mmsg, plain,
 * vectored) with random flags and iovec shapes, set/getsockopt with random
 * levels, names and lengths, shutdown, ioctl, poll, epoll, dup, dup2, fork
 * and close. A vocabulary of what the TCP fallback forwards to its kernel
 * TCP socket (every TCP_* option of 6.1, the IP, IPv6, socket and TLS
 * options that matter to TCP, with meaningful values; socket, device and
 * route ioctls) goes mostly to sockets connected over the fallback, which
 * the fuzzer makes itself (fallback forced, to its own listeners or to
 * kernel TCP ones), and the sequence that once panicked the host (fallback
 * 2, connect, TCP_ULP "mptcp", send) runs now and then as it was.
 * One more thread mixes in module-level events at a low rate:
 * `rdma link delete` + `add` of RS_RDMADEV, and module unload attempts,
 * which must fail while a socket exists.
 *
 * Every blocking call is bounded: most sockets get SO_RCVTIMEO and
 * SO_SNDTIMEO, and each call runs under a per-thread timer that signals
 * the thread (no SA_RESTART) until the call returns. A thread still in
 * one call after RS_FUZZ_HANG seconds is a finding: its call and the
 * kernel stacks of all threads (/proc/self/task/<tid>/stack) are printed.
 *
 * Afterwards everything is closed, and the second test checks that the
 * module's counts (mem_used, orphans, live sockets) and the RDMA resources
 * of RS_RDMADEV return to their values before the run, that the module
 * unloads, and reloads from RS_MODULE with its parameters.
 *
 *   fuzz_sys [-s SEED] [-t SECONDS] [-j THREADS] [-E]
 *
 * -E: no module-level events. Knobs (the options override them):
 * RS_FUZZ_SEED (default: from the clock; printed first), RS_FUZZ_SECS (30),
 * RS_FUZZ_THREADS (3), RS_FUZZ_EVENTS (1), RS_FUZZ_EVENT_SEC (8: mean
 * seconds between module-level events), RS_FUZZ_HANG (60 s),
 * RS_FUZZ_SETTLE (60 s), RS_MODULE_PARAMS (as in module.c), RS_FUZZ_VERBOSE
 * (0; 1: print every vocabulary call), RS_FUZZ_ULPSEQ (1: the weight of
 * the panic sequence among the calls; 0: none), RS_FALLBACK (2: every
 * socket with TCP fallback forced).
 *
 * A seed replays the same sequence of calls in each thread; with -j 1 and
 * -E the whole run is one sequence (the kernel's answers may still differ
 * with timing). See docs/fuzzing.md.
 */
#include "rs_common.h"

#include <dirent.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <net/if_arp.h>
#include <net/route.h>
#include <linux/filter.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/sendfile.h>
#include <sys/syscall.h>

#define FZ_SLOTS	32
#define FZ_PORTS	8
#define FZ_DUP_BASE	700	/* slot i's dup2 target is FZ_DUP_BASE + i */
#define FZ_MAX_THREADS	16
#define FZ_CHILDREN	64
#define FZ_BUF		(256 * 1024)
#define FZ_IOV_MAX	1100	/* beyond UIO_MAXIOV on purpose */
#define FZ_FB		8	/* recent sockets connected over the fallback */

enum fz_op {
	OP_SOCKET, OP_BIND, OP_LISTEN, OP_CONNECT, OP_ACCEPT, OP_SENDMSG,
	OP_RECVMSG, OP_SEND, OP_RECV, OP_WRITEV, OP_READV, OP_SENDMMSG,
	OP_RECVMMSG, OP_SENDFILE, OP_SETSOCKOPT, OP_GETSOCKOPT, OP_GETNAME,
	OP_SHUTDOWN, OP_IOCTL, OP_FCNTL, OP_POLL, OP_EPOLL, OP_DUP, OP_DUP2,
	OP_FORK, OP_CLOSE, OP_MMAP, OP_PAIR, OP_VSET, OP_VGET, OP_VIOCTL,
	OP_FBPAIR, OP_ULPSEQ, OP_LINK, OP_UNLOAD, OP_N
};

static const char * const fz_op_name[OP_N] = {
	"socket", "bind", "listen", "connect", "accept4", "sendmsg",
	"recvmsg", "send", "recv", "writev", "readv", "sendmmsg",
	"recvmmsg", "sendfile", "setsockopt", "getsockopt", "getname",
	"shutdown", "ioctl", "fcntl", "poll", "epoll", "dup", "dup2",
	"fork", "close", "mmap-flip", "pair", "v-setsockopt",
	"v-getsockopt", "v-ioctl", "fb-pair", "ulp-seq", "rdma-link",
	"unload",
};

/* relative weights of the worker's calls (ulp-seq: RS_FUZZ_ULPSEQ) */
static unsigned int fz_weight[OP_N] = {
	[OP_SOCKET] = 10, [OP_BIND] = 8, [OP_LISTEN] = 6, [OP_CONNECT] = 10,
	[OP_ACCEPT] = 8, [OP_SENDMSG] = 8, [OP_RECVMSG] = 8, [OP_SEND] = 6,
	[OP_RECV] = 6, [OP_WRITEV] = 3, [OP_READV] = 3, [OP_SENDMMSG] = 2,
	[OP_RECVMMSG] = 2, [OP_SENDFILE] = 1, [OP_SETSOCKOPT] = 8,
	[OP_GETSOCKOPT] = 6, [OP_GETNAME] = 3, [OP_SHUTDOWN] = 3,
	[OP_IOCTL] = 3, [OP_FCNTL] = 2, [OP_POLL] = 3, [OP_EPOLL] = 4,
	[OP_DUP] = 2, [OP_DUP2] = 2, [OP_FORK] = 1, [OP_CLOSE] = 10,
	[OP_MMAP] = 1, [OP_PAIR] = 3, [OP_VSET] = 10, [OP_VGET] = 6,
	[OP_VIOCTL] = 4, [OP_FBPAIR] = 4, [OP_ULPSEQ] = 1,
};

struct fz_count {
	unsigned long calls, ok;
};

struct fz_thread {
	int idx;
	uint64_t rng;
	pthread_t thr;
	pid_t tid;
	int epfd;
	/* the call in progress, for the hang watchdog (atomic accesses) */
	int op;
	long long since_ms;	/* 0: not in a call */
	timer_t timer;
	bool timer_ok;
	bool done;		/* returned from its loop (atomic accesses) */
	struct fz_count cnt[OP_N];
	unsigned long vcalls, vfb;	/* vocabulary calls, on fallback */
	/* private buffers */
	char *buf;
	struct iovec iov[FZ_IOV_MAX];
	struct mmsghdr mm[8];
};

static struct {
	uint64_t seed;
	unsigned int secs, nthreads, hang, settle, event_sec;
	bool events;
	bool selfcheck;		/* RS_FUZZ_SELFCHECK: a hang on purpose */
	bool stop;		/* atomic accesses: fz_flag(), fz_get() */
	bool relinked;		/* RS_RDMADEV was re-added under traffic */
	bool hung;		/* a finding was reported */
	bool verbose;		/* RS_FUZZ_VERBOSE: every vocabulary call */
	double end;
	int slot[FZ_SLOTS];
	int fb[FZ_FB];		/* fds recently connected over TCP fallback */
	unsigned short port[FZ_PORTS];
	struct in_addr addr;
	bool have6;
	struct sockaddr_in6 addr6;	/* a native IPv6 address of RS_NETDEV */
	char *shared;		/* buffers shared by all threads */
	char *flip;		/* remapped under the others' calls */
	char *ro;		/* read-only */
	long pagesz;
	pthread_mutex_t lock;
	pid_t child[FZ_CHILDREN];
	double child_t[FZ_CHILDREN];
	struct fz_thread t[FZ_MAX_THREADS + 1];	/* workers, then events */
	int memfd;
} fz = { .lock = PTHREAD_MUTEX_INITIALIZER };

/* The baseline of the settle test, taken before any test runs. */
struct fz_counts {
	long long mem_used, orphans;
	long socks;
	long res[5];
	bool res_ok;
};
static struct fz_counts fz_base;
static char fz_params[1024];

static void fz_flag(bool *b)
{
	__atomic_store_n(b, true, __ATOMIC_RELAXED);
}

static bool fz_get(bool *b)
{
	return __atomic_load_n(b, __ATOMIC_RELAXED);
}

static long long fz_ms(void)
{
	return rs_now() * 1000;
}

static void fz_log(struct fz_thread *t, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* ---- random ---- */

static uint64_t fz_r(struct fz_thread *t)
{
	return rs_rand(&t->rng);
}

static unsigned int fz_below(struct fz_thread *t, unsigned int n)
{
	return n ? fz_r(t) % n : 0;
}

static bool fz_chance(struct fz_thread *t, unsigned int percent)
{
	return fz_below(t, 100) < percent;
}

/* A line on stderr (unbuffered: the console keeps it if the kernel dies). */
static void fz_log(struct fz_thread *t, const char *fmt, ...)
{
	char line[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	fprintf(stderr, "# fuzz_sys t%d: %s\n", t->idx, line);
}

/* Values options are likely to care about: policies, sizes, bounds. */
static int fz_int(struct fz_thread *t)
{
	static const int v[] = { 0, 1, 2, 3, 4, -1, 255, 256, 4096, 32767,
				 32768, 65536, 1 << 20, INT_MAX, INT_MIN };

	switch (fz_below(t, 3)) {
	case 0:
		return v[fz_below(t, ARRAY_SIZE(v))];
	case 1:
		return fz_below(t, 70000);
	default:
		return fz_r(t);
	}
}

/* ---- bounding each call ---- */

static void fz_on_signal(int sig)
{
	(void)sig;
}

/* Signal this thread every 50 ms from ms on, until fz_end() is called. */
static void fz_begin(struct fz_thread *t, int op, unsigned int ms)
{
	struct itimerspec its = {
		.it_value = { ms / 1000, (ms % 1000) * 1000000L },
		.it_interval = { 0, 50 * 1000000L },
	};

	__atomic_store_n(&t->op, op, __ATOMIC_RELAXED);
	t->cnt[op].calls++;
	__atomic_store_n(&t->since_ms, fz_ms(), __ATOMIC_RELAXED);
	if (t->timer_ok)
		timer_settime(t->timer, 0, &its, NULL);
}

static long fz_end(struct fz_thread *t, long ret)
{
	static const struct itimerspec off;
	int err = errno;

	if (t->timer_ok)
		timer_settime(t->timer, 0, &off, NULL);
	__atomic_store_n(&t->since_ms, 0, __ATOMIC_RELAXED);
	if (ret >= 0)
		t->cnt[t->op].ok++;
	errno = err;
	return ret;
}

static void fz_timer_init(struct fz_thread *t)
{
	struct sigevent sev = {
		.sigev_notify = SIGEV_THREAD_ID,
		.sigev_signo = SIGUSR1,
	};

	t->tid = syscall(SYS_gettid);
	sev._sigev_un._tid = t->tid;
	t->timer_ok = !timer_create(CLOCK_MONOTONIC, &sev, &t->timer);
}

/* A call's bound: usually short, sometimes long enough to really wait. */
static unsigned int fz_bound(struct fz_thread *t)
{
	switch (fz_below(t, 4)) {
	case 0:
		return 1 + fz_below(t, 20);
	case 1:
		return 800 + fz_below(t, 1500);
	default:
		return 50 + fz_below(t, 200);
	}
}

/* ---- the descriptor pool ---- */

/*
 * A descriptor for a call: fb_percent of the time one of those recently
 * connected over the TCP fallback (whatever the number holds by now),
 * else any slot's, sometimes -1 or one never opened.
 */
static int fz_pick_fb(struct fz_thread *t, unsigned int fb_percent)
{
	int fd;

	if (fz_chance(t, fb_percent)) {
		fd = __atomic_load_n(&fz.fb[fz_below(t, FZ_FB)],
				     __ATOMIC_RELAXED);
		if (fd >= 0)
			return fd;
	}
	fd = __atomic_load_n(&fz.slot[fz_below(t, FZ_SLOTS)],
			     __ATOMIC_RELAXED);
	if (fd < 0 && fz_chance(t, 10))
		return fz_chance(t, 50) ? -1 : 1000 + (int)fz_below(t, 24);
	return fd;
}

static int fz_pick(struct fz_thread *t)
{
	return fz_pick_fb(t, 15);
}

/* fd was just connected over the TCP fallback. */
static void fz_note_fb(int fd)
{
	static unsigned int next;

	__atomic_store_n(&fz.fb[__atomic_fetch_add(&next, 1, __ATOMIC_RELAXED) %
				FZ_FB], fd, __ATOMIC_RELAXED);
}

/* Put fd in a random slot; an fd that was there is closed. */
static void fz_put(struct fz_thread *t, int fd)
{
	int i = fz_below(t, FZ_SLOTS);
	int old = __atomic_exchange_n(&fz.slot[i], fd, __ATOMIC_ACQ_REL);

	if (old >= 0 && old != fd)
		close(old);
}

static void fz_close_all(void)
{
	int i, old;

	for (i = 0; i < FZ_SLOTS; i++) {
		old = __atomic_exchange_n(&fz.slot[i], -1, __ATOMIC_ACQ_REL);
		if (old >= 0)
			close(old);
	}
}

/* ---- addresses ---- */

static socklen_t fz_addr(struct fz_thread *t, struct sockaddr_storage *ss,
			 bool for_connect)
{
	struct sockaddr_in *sin = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;
	unsigned short port = 0;
	unsigned int k = fz_below(t, 100);

	memset(ss, 0, sizeof(*ss));
	if (for_connect || fz_chance(t, 30))
		port = fz.port[fz_below(t, FZ_PORTS)];
	if (!port || fz_chance(t, 10))
		port = for_connect ? 40000 + fz_below(t, 20000) : 0;
	if (k < 50) {
		rs_sin(sin, fz.addr, port);
		if (fz_chance(t, 5))
			sin->sin_addr.s_addr = htonl(INADDR_ANY);
		else if (fz_chance(t, 3))
			sin->sin_addr = rs_nohost_addr();
		else if (fz_chance(t, 3))
			sin->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		return k < 47 ? sizeof(*sin) : fz_below(t, sizeof(*sin));
	}
	if (k < 85) {
		s6->sin6_family = AF_INET6;
		s6->sin6_port = htons(port);
		if (fz.have6 && fz_chance(t, 40)) {
			s6->sin6_addr = fz.addr6.sin6_addr;
			s6->sin6_scope_id = fz.addr6.sin6_scope_id;
		} else if (fz_chance(t, 8)) {
			s6->sin6_addr = in6addr_any;
		} else if (fz_chance(t, 4)) {
			s6->sin6_addr = in6addr_loopback;
		} else {
			s6->sin6_addr.s6_addr[10] = 0xff;
			s6->sin6_addr.s6_addr[11] = 0xff;
			memcpy(&s6->sin6_addr.s6_addr[12], &fz.addr, 4);
		}
		if (fz_chance(t, 3))
			s6->sin6_scope_id = fz_r(t);
		return k < 82 ? sizeof(*s6) : 24 + fz_below(t, 4);
	}
	/* garbage: wrong family, AF_UNSPEC, random bytes, odd lengths */
	switch (fz_below(t, 4)) {
	case 0:
		ss->ss_family = AF_UNSPEC;
		break;
	case 1:
		ss->ss_family = fz_below(t, 50);
		break;
	default:
		for (k = 0; k < sizeof(*ss); k++)
			((unsigned char *)ss)[k] = fz_r(t);
	}
	return fz_below(t, sizeof(*ss) + 8);
}

static void fz_note_port(int fd)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	unsigned short port;
	static unsigned int next;

	if (getsockname(fd, (struct sockaddr *)&ss, &len))
		return;
	port = ss.ss_family == AF_INET6 ?
	       ntohs(((struct sockaddr_in6 *)&ss)->sin6_port) :
	       ntohs(((struct sockaddr_in *)&ss)->sin_port);
	if (port)
		fz.port[__atomic_fetch_add(&next, 1, __ATOMIC_RELAXED) %
			FZ_PORTS] = port;
}

/*
 * The address of a pair's listener: RS_ADDR, IPv4-mapped, or RS_NETDEV's
 * own IPv6 one; port 0.
 */
static socklen_t fz_pair_addr(struct fz_thread *t, struct sockaddr_storage *ss,
			      bool *v6)
{
	struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;
	unsigned int k = fz_below(t, 10);

	*v6 = k >= 7;
	if (!*v6)
		return rs_sin((struct sockaddr_in *)ss, fz.addr, 0);
	if (k == 9 && fz.have6) {
		*s6 = fz.addr6;
		s6->sin6_port = 0;
		return sizeof(*s6);
	}
	memset(ss, 0, sizeof(*ss));
	s6->sin6_family = AF_INET6;
	s6->sin6_addr.s6_addr[10] = 0xff;
	s6->sin6_addr.s6_addr[11] = 0xff;
	memcpy(&s6->sin6_addr.s6_addr[12], &fz.addr, 4);
	return sizeof(*s6);
}

/* ---- memory for the I/O calls ---- */

static void *fz_ptr(struct fz_thread *t, size_t *len)
{
	size_t max = *len;

	switch (fz_below(t, 20)) {
	case 0:
		return NULL;
	case 1:
		return (void *)(uintptr_t)(fz_r(t) | 0xffff800000000000ULL);
	case 2:
		return fz.ro + fz_below(t, fz.pagesz);
	case 3:
		/* pages another thread remaps */
		*len = fz_below(t, FZ_BUF);
		return fz.flip;
	case 4:
	case 5:
	case 6:
		*len = fz_below(t, FZ_BUF / 2);
		return fz.shared + fz_below(t, FZ_BUF / 2);
	default:
		*len = fz_below(t, max + 1);
		return t->buf + fz_below(t, FZ_BUF - *len + 1);
	}
}

/* An iovec array of a random shape in t->iov; returns the count. */
static int fz_iov(struct fz_thread *t, size_t *total)
{
	int n, i;
	size_t len;

	switch (fz_below(t, 10)) {
	case 0:
		n = 0;
		break;
	case 1:
		n = fz_below(t, FZ_IOV_MAX) + 1;
		break;
	case 2:
		n = 1024;
		break;
	default:
		n = 1 + fz_below(t, 8);
	}
	*total = 0;
	for (i = 0; i < n; i++) {
		len = fz_chance(t, 90) ? 1 + fz_below(t, 8192) : 0;
		if (fz_chance(t, 20))
			len = 1 + fz_below(t, 65536);
		t->iov[i].iov_base = fz_ptr(t, &len);
		if (fz_chance(t, 2))
			len = fz_chance(t, 50) ? SIZE_MAX / 2 : 1ULL << 40;
		t->iov[i].iov_len = len;
		*total += len;
	}
	return n;
}

static int fz_msg_flags(struct fz_thread *t, bool rx)
{
	static const int common[] = {
		MSG_DONTWAIT, MSG_OOB, MSG_NOSIGNAL, MSG_CMSG_CLOEXEC,
	};
	static const int tx[] = { MSG_MORE, MSG_EOR, MSG_CONFIRM,
				  MSG_ZEROCOPY, MSG_FASTOPEN };
	static const int rxf[] = { MSG_PEEK, MSG_WAITALL, MSG_TRUNC,
				   MSG_ERRQUEUE, MSG_WAITFORONE };
	int f = 0;
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE(common); i++)
		if (fz_chance(t, i ? 8 : 40))
			f |= common[i];
	for (i = 0; i < 5; i++)
		if (fz_chance(t, 10))
			f |= rx ? rxf[i] : tx[i];
	if (fz_chance(t, 5))
		f |= 1 << fz_below(t, 31);
	return f;
}

static void fz_msghdr(struct fz_thread *t, struct msghdr *m,
		      struct sockaddr_storage *name, char *ctl, size_t *total)
{
	unsigned int i;

	memset(m, 0, sizeof(*m));
	m->msg_iov = t->iov;
	m->msg_iovlen = fz_iov(t, total);
	if (fz_chance(t, 2))
		m->msg_iov = fz_chance(t, 50) ? NULL : (void *)fz.ro;
	if (fz_chance(t, 10)) {
		m->msg_name = name;
		m->msg_namelen = fz_addr(t, name, true);
	}
	if (fz_chance(t, 10)) {
		for (i = 0; i < 64; i++)
			ctl[i] = fz_r(t);
		if (fz_chance(t, 50)) {
			struct cmsghdr *c = (struct cmsghdr *)ctl;

			c->cmsg_len = CMSG_LEN(fz_below(t, 24));
			c->cmsg_level = fz_chance(t, 50) ? SOL_SOCKET :
					fz_below(t, 300);
			c->cmsg_type = fz_below(t, 70);
		}
		m->msg_control = fz_chance(t, 10) ? (void *)fz.ro : ctl;
		m->msg_controllen = fz_below(t, 65);
	}
}

/* ---- the calls ---- */

static int fz_new_socket(struct fz_thread *t)
{
	int type = SOCK_STREAM, proto = rs.protocol, domain = rs.family, fd;
	bool v6 = fz_chance(t, 40);

	if (rs.tcp)
		domain = v6 ? AF_INET6 : AF_INET;
	if (fz_chance(t, 5))
		type = fz_chance(t, 50) ? SOCK_DGRAM : fz_below(t, 12);
	if (fz_chance(t, 5))
		proto = fz_chance(t, 50) ? IPPROTO_TCP : fz_below(t, 300);
	if (fz_chance(t, 30))
		type |= SOCK_NONBLOCK;
	if (fz_chance(t, 95))
		type |= SOCK_CLOEXEC;
	fz_begin(t, OP_SOCKET, 1000);
	fd = fz_end(t, socket(domain, type, proto));
	if (fd < 0)
		return -1;
	rs_fallback_env(fd);
	if (fz_chance(t, 20))	/* TCP fallback: 2 forced, or another mode */
		rs_setint(fd, SOL_RDMASTREAM, RDMASTREAM_FALLBACK,
			  fz_chance(t, 80) ? 2 : fz_int(t));
	if (fz_chance(t, 90)) {
		rs_set_timeo(fd, SO_RCVTIMEO, 1 + fz_below(t, 400));
		rs_set_timeo(fd, SO_SNDTIMEO, 1 + fz_below(t, 400));
	}
	if (fz_chance(t, 10))
		rs_setint(fd, SOL_SOCKET, fz_chance(t, 50) ? SO_RCVBUF :
			  SO_SNDBUF, fz_below(t, 1 << 20));
	fz_put(t, fd);
	return fd;
}

static void fz_bind(struct fz_thread *t, int fd)
{
	struct sockaddr_storage ss;
	socklen_t len = fz_addr(t, &ss, false);
	void *p = &ss;

	if (fz_chance(t, 3))
		p = fz_chance(t, 50) ? NULL : (void *)8;
	fz_begin(t, OP_BIND, fz_bound(t));
	fz_end(t, bind(fd, p, len));
}

static void fz_listen(struct fz_thread *t, int fd)
{
	int backlog;

	switch (fz_below(t, 5)) {
	case 0:
		backlog = -(int)fz_below(t, 10);
		break;
	case 1:
		backlog = INT_MAX - fz_below(t, 2);
		break;
	default:
		backlog = fz_below(t, 64);
	}
	fz_begin(t, OP_LISTEN, fz_bound(t));
	if (!fz_end(t, listen(fd, backlog)))
		fz_note_port(fd);
}

static void fz_connect(struct fz_thread *t, int fd)
{
	struct sockaddr_storage ss;
	socklen_t len = fz_addr(t, &ss, true);

	if (fz_chance(t, 10)) {
		/* its own address: TCP's simultaneous open with itself */
		len = sizeof(ss);
		getsockname(fd, (struct sockaddr *)&ss, &len);
	}
	if (fz_chance(t, 30))
		rs_set_nonblock(fd, fz_chance(t, 70));
	fz_begin(t, OP_CONNECT, fz_bound(t));
	fz_end(t, connect(fd, fz_chance(t, 2) ? NULL : (void *)&ss, len));
}

static void fz_accept(struct fz_thread *t, int fd)
{
	struct sockaddr_storage ss;
	socklen_t len = fz_below(t, sizeof(ss) + 1);
	int flags = 0, nfd;
	void *name = &ss;
	socklen_t *lenp = &len;

	if (fz_chance(t, 40))
		flags |= SOCK_NONBLOCK;
	if (fz_chance(t, 80))
		flags |= SOCK_CLOEXEC;
	if (fz_chance(t, 3))
		flags |= 1 << fz_below(t, 31);
	if (fz_chance(t, 20))
		name = NULL, lenp = NULL;
	else if (fz_chance(t, 4))
		lenp = (void *)fz.ro;
	fz_begin(t, OP_ACCEPT, fz_bound(t));
	nfd = fz_end(t, accept4(fd, name, lenp, flags));
	if (nfd >= 0) {
		if (fz_chance(t, 80))
			rs_set_timeo(nfd, SO_RCVTIMEO, 1 + fz_below(t, 400));
		fz_put(t, nfd);
	}
}

/* A result longer than what was asked for is a finding. */
static void fz_check_len(struct fz_thread *t, ssize_t ret, size_t total,
			 int flags)
{
	if (ret > 0 && (size_t)ret > total && !(flags & MSG_TRUNC)) {
		fprintf(stderr, "# FINDING: %s returned %zd for %zu bytes\n",
			fz_op_name[t->op], ret, total);
		fz_flag(&fz.hung);
	}
}

static void fz_sendmsg(struct fz_thread *t, int fd, bool rx)
{
	struct sockaddr_storage name;
	char ctl[72];
	struct msghdr m;
	size_t total;
	int flags = fz_msg_flags(t, rx);
	ssize_t ret;

	fz_msghdr(t, &m, &name, ctl, &total);
	fz_begin(t, rx ? OP_RECVMSG : OP_SENDMSG, fz_bound(t));
	ret = rx ? recvmsg(fd, fz_chance(t, 1) ? NULL : &m, flags) :
		   sendmsg(fd, &m, flags);
	fz_end(t, ret);
	fz_check_len(t, ret, total, flags);
}

static void fz_sendrecv(struct fz_thread *t, int fd, bool rx)
{
	size_t len = fz_chance(t, 20) ? FZ_BUF : 1 + fz_below(t, 16384);
	int flags = fz_msg_flags(t, rx);
	void *p = fz_ptr(t, &len);
	ssize_t ret;

	if (fz_chance(t, 2))
		len = SIZE_MAX >> fz_below(t, 40);
	fz_begin(t, rx ? OP_RECV : OP_SEND, fz_bound(t));
	ret = rx ? recv(fd, p, len, flags) : send(fd, p, len, flags);
	fz_end(t, ret);
	fz_check_len(t, ret, len, flags);
}

static void fz_rwv(struct fz_thread *t, int fd, bool rx)
{
	size_t total;
	int n = fz_iov(t, &total);
	ssize_t ret;

	fz_begin(t, rx ? OP_READV : OP_WRITEV, fz_bound(t));
	ret = rx ? readv(fd, t->iov, n) : writev(fd, t->iov, n);
	fz_end(t, ret);
	fz_check_len(t, ret, total, 0);
}

static void fz_mmsg(struct fz_thread *t, int fd, bool rx)
{
	unsigned int n = fz_below(t, 9), i;
	int flags = fz_msg_flags(t, rx);
	struct timespec ts = { 0, 1000000L * fz_below(t, 100) };
	size_t len;

	for (i = 0; i < n; i++) {
		memset(&t->mm[i], 0, sizeof(t->mm[i]));
		len = 1 + fz_below(t, 4096);
		t->iov[i].iov_base = fz_ptr(t, &len);
		t->iov[i].iov_len = len;
		t->mm[i].msg_hdr.msg_iov = &t->iov[i];
		t->mm[i].msg_hdr.msg_iovlen = 1;
	}
	fz_begin(t, rx ? OP_RECVMMSG : OP_SENDMMSG, fz_bound(t));
	if (rx)
		fz_end(t, recvmmsg(fd, t->mm, n, flags,
				   fz_chance(t, 50) ? &ts : NULL));
	else
		fz_end(t, sendmmsg(fd, t->mm, n, flags));
}

static void fz_sendfile(struct fz_thread *t, int fd)
{
	off_t off = fz_below(t, 2 * FZ_BUF);

	fz_begin(t, OP_SENDFILE, fz_bound(t));
	fz_end(t, sendfile(fd, fz.memfd, fz_chance(t, 50) ? &off : NULL,
			   fz_below(t, 3 * FZ_BUF)));
}

static int fz_level(struct fz_thread *t)
{
	static const int lv[] = { SOL_SOCKET, SOL_TCP, SOL_RDMASTREAM,
				  SOL_IP, SOL_IPV6 };
	unsigned int k = fz_below(t, 12);

	if (k < 3)
		return SOL_SOCKET;
	if (k < 6)
		return SOL_RDMASTREAM;
	if (k < 8)
		return SOL_TCP;
	if (k < 10)
		return lv[fz_below(t, ARRAY_SIZE(lv))];
	return fz_chance(t, 50) ? (int)fz_r(t) : (int)fz_below(t, 300);
}

static int fz_optname(struct fz_thread *t, int level)
{
	if (fz_chance(t, 10))
		return fz_chance(t, 50) ? (int)fz_r(t) : -(int)fz_below(t, 3);
	if (level == SOL_RDMASTREAM)
		return fz_below(t, 6);
	return fz_below(t, level == SOL_SOCKET ? 80 : 45);
}

static void fz_sockopt(struct fz_thread *t, int fd, bool get)
{
	int level = fz_level(t), name = fz_optname(t, level);
	unsigned int k = fz_below(t, 10);
	socklen_t len;
	void *p = t->buf;
	socklen_t *lenp = &len;
	unsigned int i;

	if (k < 5)
		len = sizeof(int);
	else if (k < 7)
		len = fz_below(t, 5);
	else if (k < 9)
		len = fz_below(t, 512);
	else
		len = fz_chance(t, 50) ? 1U << 30 : (socklen_t)-1;
	for (i = 0; i < 64; i++)
		t->buf[i] = fz_r(t);
	if (fz_chance(t, 40))	/* a plausible int */
		*(int *)t->buf = fz_int(t);
	if (fz_chance(t, 5))
		p = fz_chance(t, 50) ? NULL : (void *)fz.ro;
	if (get && fz_chance(t, 4))
		lenp = fz_chance(t, 50) ? NULL : (void *)fz.ro;
	fz_begin(t, get ? OP_GETSOCKOPT : OP_SETSOCKOPT, fz_bound(t));
	if (get) {
		socklen_t asked = len;

		if (!fz_end(t, getsockopt(fd, level, name, p, lenp)) &&
		    lenp == &len && len > asked && len > 4) {
			fprintf(stderr, "# FINDING: getsockopt(%d, %d) length %u > %u\n",
				level, name, len, asked);
			fz_flag(&fz.hung);
		}
	} else {
		fz_end(t, setsockopt(fd, level, name, p, len));
	}
}

/* ---- the options and ioctls that reach the fallback's TCP socket ---- */

#ifndef SOL_TLS
#define SOL_TLS		282
#endif
#ifndef SIOCOUTQNSD
#define SIOCOUTQNSD	0x894B
#endif
#ifndef IPV6_FLOWINFO		/* <linux/in6.h>'s, not glibc's */
#define IPV6_FLOWINFO		11
#define IPV6_FLOWLABEL_MGR	32
#define IPV6_FLOWINFO_SEND	33
#endif
#define FZ_SIOCGSTAMP	0x8906	/* SIOCGSTAMP_OLD */
#define FZ_SIOCGSTAMPNS	0x8907	/* SIOCGSTAMPNS_OLD */

/* Linux 6.1's uapi layouts (glibc's are older or missing) */
struct fz_md5sig {
	struct sockaddr_storage addr;
	uint8_t flags, prefixlen;
	uint16_t keylen;
	int ifindex;
	uint8_t key[80];
};

struct fz_zc {			/* struct tcp_zerocopy_receive */
	uint64_t address;
	uint32_t length, recv_skip_hint, inq;
	int32_t err;
	uint64_t copybuf_address;
	int32_t copybuf_len;
	uint32_t flags;
	uint64_t msg_control, msg_controllen;
	uint32_t msg_flags, reserved;
};

struct fz_tls {			/* struct tls12_crypto_info_aes_gcm_128 */
	uint16_t version, cipher;
	uint8_t iv[8], key[16], salt[4], rec_seq[8];
};

/* How a value of an option is made */
enum fz_kind {
	V_INT, V_BOOL, V_ULP, V_CC, V_REPAIR, V_RQUEUE, V_ROPTS, V_RWIN,
	V_MD5, V_TFOKEY, V_ZC, V_OUT, V_IPOPTS, V_LINGER, V_FILTER, V_BPFFD,
	V_TXTIME, V_DEV, V_TLS, V_FORM, V_BYTES,
};

struct fz_opt {
	int level, name;
	unsigned char kind, weight;
	bool notable;		/* printed when a set succeeds */
	const char *id;
};

#define O(l, n, k)	{ l, n, k, 1, false, #n }
#define OW(l, n, k, w)	{ l, n, k, w, true, #n }

/* Every TCP_* of 6.1's <linux/tcp.h>, the IP, IPv6, socket and TLS ones */
static const struct fz_opt fz_opts[] = {
	O(SOL_TCP, TCP_NODELAY, V_BOOL), O(SOL_TCP, TCP_MAXSEG, V_INT),
	O(SOL_TCP, TCP_CORK, V_BOOL), O(SOL_TCP, TCP_KEEPIDLE, V_INT),
	O(SOL_TCP, TCP_KEEPINTVL, V_INT), O(SOL_TCP, TCP_KEEPCNT, V_INT),
	O(SOL_TCP, TCP_SYNCNT, V_INT), O(SOL_TCP, TCP_LINGER2, V_INT),
	O(SOL_TCP, TCP_DEFER_ACCEPT, V_INT),
	O(SOL_TCP, TCP_WINDOW_CLAMP, V_INT), O(SOL_TCP, TCP_INFO, V_OUT),
	O(SOL_TCP, TCP_QUICKACK, V_BOOL),
	{ SOL_TCP, TCP_CONGESTION, V_CC, 2, false, "TCP_CONGESTION" },
	OW(SOL_TCP, TCP_MD5SIG, V_MD5, 2),
	O(SOL_TCP, TCP_COOKIE_TRANSACTIONS, V_BYTES),
	O(SOL_TCP, TCP_THIN_LINEAR_TIMEOUTS, V_BOOL),
	O(SOL_TCP, TCP_THIN_DUPACK, V_BOOL),
	O(SOL_TCP, TCP_USER_TIMEOUT, V_INT),
	OW(SOL_TCP, TCP_REPAIR, V_REPAIR, 3),
	OW(SOL_TCP, TCP_REPAIR_QUEUE, V_RQUEUE, 2),
	OW(SOL_TCP, TCP_QUEUE_SEQ, V_INT, 1),
	OW(SOL_TCP, TCP_REPAIR_OPTIONS, V_ROPTS, 2),
	O(SOL_TCP, TCP_FASTOPEN, V_INT), O(SOL_TCP, TCP_TIMESTAMP, V_INT),
	O(SOL_TCP, TCP_NOTSENT_LOWAT, V_INT), O(SOL_TCP, TCP_CC_INFO, V_OUT),
	O(SOL_TCP, TCP_SAVE_SYN, V_BOOL), O(SOL_TCP, TCP_SAVED_SYN, V_OUT),
	OW(SOL_TCP, TCP_REPAIR_WINDOW, V_RWIN, 2),
	O(SOL_TCP, TCP_FASTOPEN_CONNECT, V_BOOL),
	OW(SOL_TCP, TCP_ULP, V_ULP, 6),
	OW(SOL_TCP, TCP_MD5SIG_EXT, V_MD5, 2),
	OW(SOL_TCP, TCP_FASTOPEN_KEY, V_TFOKEY, 1),
	O(SOL_TCP, TCP_FASTOPEN_NO_COOKIE, V_BOOL),
	{ SOL_TCP, TCP_ZEROCOPY_RECEIVE, V_ZC, 3, false, "TCP_ZEROCOPY_RECEIVE" },
	O(SOL_TCP, TCP_INQ, V_BOOL), O(SOL_TCP, TCP_TX_DELAY, V_INT),

	O(SOL_IP, IP_TOS, V_INT), O(SOL_IP, IP_TTL, V_INT),
	O(SOL_IP, IP_HDRINCL, V_BOOL), OW(SOL_IP, IP_OPTIONS, V_IPOPTS, 2),
	O(SOL_IP, IP_ROUTER_ALERT, V_BOOL), O(SOL_IP, IP_RECVOPTS, V_BOOL),
	O(SOL_IP, IP_RETOPTS, V_BOOL), O(SOL_IP, IP_PKTINFO, V_BOOL),
	O(SOL_IP, IP_PKTOPTIONS, V_OUT), O(SOL_IP, IP_MTU_DISCOVER, V_INT),
	O(SOL_IP, IP_RECVERR, V_BOOL), O(SOL_IP, IP_RECVTTL, V_BOOL),
	O(SOL_IP, IP_RECVTOS, V_BOOL), O(SOL_IP, IP_MTU, V_OUT),
	O(SOL_IP, IP_FREEBIND, V_BOOL), O(SOL_IP, IP_IPSEC_POLICY, V_BYTES),
	O(SOL_IP, IP_XFRM_POLICY, V_BYTES), O(SOL_IP, IP_PASSSEC, V_BOOL),
	OW(SOL_IP, IP_TRANSPARENT, V_BOOL, 1),
	O(SOL_IP, IP_RECVORIGDSTADDR, V_BOOL), O(SOL_IP, IP_MINTTL, V_INT),
	O(SOL_IP, IP_NODEFRAG, V_BOOL), O(SOL_IP, IP_CHECKSUM, V_BOOL),
	O(SOL_IP, IP_BIND_ADDRESS_NO_PORT, V_BOOL),
	O(SOL_IP, IP_RECVFRAGSIZE, V_BOOL),
	O(SOL_IP, IP_RECVERR_RFC4884, V_BOOL),
	O(SOL_IP, IP_MULTICAST_IF, V_BYTES), O(SOL_IP, IP_MULTICAST_TTL, V_INT),
	O(SOL_IP, IP_MULTICAST_LOOP, V_BOOL),
	O(SOL_IP, IP_ADD_MEMBERSHIP, V_BYTES), O(SOL_IP, IP_UNICAST_IF, V_INT),

	OW(SOL_IPV6, IPV6_ADDRFORM, V_FORM, 4),
	O(SOL_IPV6, IPV6_2292PKTINFO, V_BOOL),
	O(SOL_IPV6, IPV6_2292PKTOPTIONS, V_BYTES),
	O(SOL_IPV6, IPV6_UNICAST_HOPS, V_INT),
	O(SOL_IPV6, IPV6_MULTICAST_IF, V_INT),
	O(SOL_IPV6, IPV6_MULTICAST_HOPS, V_INT),
	O(SOL_IPV6, IPV6_V6ONLY, V_BOOL), O(SOL_IPV6, IPV6_RECVERR, V_BOOL),
	O(SOL_IPV6, IPV6_MTU_DISCOVER, V_INT), O(SOL_IPV6, IPV6_MTU, V_INT),
	O(SOL_IPV6, IPV6_RECVPKTINFO, V_BOOL),
	O(SOL_IPV6, IPV6_PKTINFO, V_BYTES), O(SOL_IPV6, IPV6_HOPOPTS, V_BYTES),
	O(SOL_IPV6, IPV6_RTHDR, V_BYTES), O(SOL_IPV6, IPV6_DSTOPTS, V_BYTES),
	O(SOL_IPV6, IPV6_RTHDRDSTOPTS, V_BYTES),
	O(SOL_IPV6, IPV6_TCLASS, V_INT), O(SOL_IPV6, IPV6_RECVTCLASS, V_BOOL),
	O(SOL_IPV6, IPV6_FLOWINFO, V_BOOL),
	O(SOL_IPV6, IPV6_FLOWLABEL_MGR, V_BYTES),
	O(SOL_IPV6, IPV6_FLOWINFO_SEND, V_BOOL),
	O(SOL_IPV6, IPV6_AUTOFLOWLABEL, V_BOOL),
	O(SOL_IPV6, IPV6_ADDR_PREFERENCES, V_INT),
	O(SOL_IPV6, IPV6_MINHOPCOUNT, V_INT),
	O(SOL_IPV6, IPV6_TRANSPARENT, V_BOOL),
	O(SOL_IPV6, IPV6_FREEBIND, V_BOOL), O(SOL_IPV6, IPV6_UNICAST_IF, V_INT),
	O(SOL_IPV6, IPV6_RECVFRAGSIZE, V_BOOL),
	O(SOL_IPV6, IPV6_DONTFRAG, V_BOOL),
	O(SOL_IPV6, IPV6_IPSEC_POLICY, V_BYTES),
	O(SOL_IPV6, IPV6_XFRM_POLICY, V_BYTES),
	O(SOL_IPV6, IPV6_HDRINCL, V_BOOL),
	O(SOL_IPV6, IPV6_JOIN_GROUP, V_BYTES),

	O(SOL_SOCKET, SO_ZEROCOPY, V_BOOL), O(SOL_SOCKET, SO_TXTIME, V_TXTIME),
	OW(SOL_SOCKET, SO_ATTACH_FILTER, V_FILTER, 1),
	O(SOL_SOCKET, SO_DETACH_FILTER, V_INT),
	O(SOL_SOCKET, SO_LOCK_FILTER, V_BOOL),
	O(SOL_SOCKET, SO_ATTACH_BPF, V_BPFFD),
	OW(SOL_SOCKET, SO_ATTACH_REUSEPORT_CBPF, V_FILTER, 1),
	O(SOL_SOCKET, SO_ATTACH_REUSEPORT_EBPF, V_BPFFD),
	O(SOL_SOCKET, SO_DETACH_REUSEPORT_BPF, V_INT),
	O(SOL_SOCKET, SO_BINDTODEVICE, V_DEV),
	O(SOL_SOCKET, SO_BINDTOIFINDEX, V_INT), O(SOL_SOCKET, SO_MARK, V_INT),
	O(SOL_SOCKET, SO_PRIORITY, V_INT),
	O(SOL_SOCKET, SO_INCOMING_CPU, V_INT),
	O(SOL_SOCKET, SO_BUSY_POLL, V_INT),
	O(SOL_SOCKET, SO_PREFER_BUSY_POLL, V_BOOL),
	O(SOL_SOCKET, SO_BUSY_POLL_BUDGET, V_INT),
	O(SOL_SOCKET, SO_LINGER, V_LINGER), O(SOL_SOCKET, SO_KEEPALIVE, V_BOOL),
	O(SOL_SOCKET, SO_REUSEADDR, V_BOOL), O(SOL_SOCKET, SO_REUSEPORT, V_BOOL),
	O(SOL_SOCKET, SO_RCVLOWAT, V_INT), O(SOL_SOCKET, SO_SNDBUF, V_INT),
	O(SOL_SOCKET, SO_RCVBUF, V_INT), O(SOL_SOCKET, SO_SNDBUFFORCE, V_INT),
	O(SOL_SOCKET, SO_RCVBUFFORCE, V_INT),
	O(SOL_SOCKET, SO_OOBINLINE, V_BOOL), O(SOL_SOCKET, SO_DONTROUTE, V_BOOL),
	O(SOL_SOCKET, SO_TIMESTAMPING, V_INT),
	O(SOL_SOCKET, SO_TIMESTAMP, V_BOOL),
	O(SOL_SOCKET, SO_MAX_PACING_RATE, V_INT),
	O(SOL_SOCKET, SO_CNX_ADVICE, V_INT), O(SOL_SOCKET, SO_TXREHASH, V_INT),
	O(SOL_SOCKET, SO_RESERVE_MEM, V_INT), O(SOL_SOCKET, SO_BUF_LOCK, V_INT),
	O(SOL_SOCKET, SO_RCVMARK, V_BOOL), O(SOL_SOCKET, SO_ERROR, V_OUT),
	O(SOL_SOCKET, SO_PEERCRED, V_OUT), O(SOL_SOCKET, SO_COOKIE, V_OUT),
	O(SOL_SOCKET, SO_MEMINFO, V_OUT),
	O(SOL_SOCKET, SO_INCOMING_NAPI_ID, V_OUT),
	O(SOL_SOCKET, SO_NETNS_COOKIE, V_OUT),

	OW(SOL_TLS, 1 /* TLS_TX */, V_TLS, 2),
	OW(SOL_TLS, 2 /* TLS_RX */, V_TLS, 2),
	O(SOL_TLS, 3 /* TLS_TX_ZEROCOPY_RO */, V_BOOL),
	O(SOL_TLS, 4 /* TLS_RX_EXPECT_NO_PAD */, V_BOOL),
};

#undef O
#undef OW

static const char *fz_level_name(int level)
{
	switch (level) {
	case SOL_TCP:
		return "SOL_TCP";
	case SOL_IP:
		return "SOL_IP";
	case SOL_IPV6:
		return "SOL_IPV6";
	case SOL_SOCKET:
		return "SOL_SOCKET";
	default:
		return "SOL_TLS";
	}
}

/* A name from names (NULL: random bytes) into b; its length. */
static socklen_t fz_name(struct fz_thread *t, char *b, const char * const *names,
			 unsigned int n, char *desc, size_t dlen)
{
	const char *name = names[fz_below(t, n)];
	socklen_t len;
	unsigned int i;

	if (!name) {
		len = 1 + fz_below(t, 20);
		for (i = 0; i < len; i++)
			b[i] = fz_chance(t, 80) ? 'a' + fz_below(t, 26) : fz_r(t);
		snprintf(desc, dlen, "%u random bytes", len);
		return len;
	}
	len = strlen(name);
	memcpy(b, name, len + 1);
	snprintf(desc, dlen, "\"%s\"", name);
	return fz_chance(t, 30) ? len + 1 : len;
}

static socklen_t fz_ulp_cc(struct fz_thread *t, char *b, bool ulp, char *desc,
			   size_t dlen)
{
	static const char * const ulps[] = { "tls", "mptcp", "espintcp",
					     "smc", "", NULL };
	static const char * const ccs[] = { "cubic", "reno", "bbr", "dctcp",
					    "", NULL };

	return ulp ? fz_name(t, b, ulps, ARRAY_SIZE(ulps), desc, dlen) :
		     fz_name(t, b, ccs, ARRAY_SIZE(ccs), desc, dlen);
}

/* TCP_REPAIR_OPTIONS: MSS, window scales, SACK, timestamps, junk */
static socklen_t fz_repair_opts(struct fz_thread *t, char *b, char *desc,
				size_t dlen)
{
	static const uint32_t code[] = { 2, 3, 4, 8 };
	struct tcp_repair_opt *o = (void *)b;
	unsigned int n = 1 + fz_below(t, 4), i;

	for (i = 0; i < n; i++) {
		o[i].opt_code = fz_chance(t, 90) ?
				code[fz_below(t, ARRAY_SIZE(code))] : fz_r(t);
		o[i].opt_val = fz_chance(t, 50) ? fz_below(t, 65536) :
			       fz_below(t, 16) | fz_below(t, 16) << 16;
		if (fz_chance(t, 10))
			o[i].opt_val = fz_r(t);
	}
	snprintf(desc, dlen, "%u repair options, first %u=%u", n,
		 o[0].opt_code, o[0].opt_val);
	return n * sizeof(*o);
}

/* TCP_MD5SIG(_EXT) for the peer (RS_ADDR, mapped or native IPv6) or junk */
static socklen_t fz_md5(struct fz_thread *t, char *b, char *desc, size_t dlen)
{
	static const uint16_t keylen[] = { 0, 1, 16, 80, 81, 0xffff };
	struct fz_md5sig *m = (void *)b;
	struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&m->addr;
	unsigned int i;
	bool v6;

	memset(m, 0, sizeof(*m));
	fz_pair_addr(t, &m->addr, &v6);
	if (fz_chance(t, 5))
		s6->sin6_family = fz_below(t, 12);
	m->flags = fz_chance(t, 50) ? fz_below(t, 4) : 0;
	m->prefixlen = fz_chance(t, 50) ? fz_below(t, 129) : v6 ? 128 : 32;
	m->keylen = fz_chance(t, 70) ? 1 + fz_below(t, 80) :
		    keylen[fz_below(t, ARRAY_SIZE(keylen))];
	m->ifindex = fz_chance(t, 70) ? 0 : (int)fz_below(t, 4);
	for (i = 0; i < sizeof(m->key); i++)
		m->key[i] = fz_r(t);
	snprintf(desc, dlen, "md5 family %u flags %u prefix %u keylen %u ifindex %d",
		 s6->sin6_family, m->flags, m->prefixlen, m->keylen, m->ifindex);
	return sizeof(*m);
}

/* TCP_ZEROCOPY_RECEIVE: a mapping TCP never made, a copy buffer, flags */
static socklen_t fz_zerocopy(struct fz_thread *t, char *b, char *desc,
			     size_t dlen)
{
	static const socklen_t lens[] = { 8, 16, 20, 24, 32, 40, 48, 56 };
	struct fz_zc *z = (void *)b;

	memset(z, 0, sizeof(*z));
	switch (fz_below(t, 3)) {
	case 0:
		z->address = (uintptr_t)fz.flip;
		break;
	case 1:
		z->address = fz_r(t) & ~0xfffULL;
	}
	z->length = fz_chance(t, 50) ? fz_below(t, 16) * fz.pagesz :
		    fz_below(t, FZ_BUF);
	if (fz_chance(t, 60)) {
		z->copybuf_address = (uintptr_t)(t->buf + 8192);
		z->copybuf_len = fz_chance(t, 90) ? (int)fz_below(t, 8192) :
				 (int)fz_r(t);
	}
	z->flags = fz_chance(t, 80) ? fz_below(t, 2) : fz_r(t);
	if (fz_chance(t, 20)) {
		z->msg_control = (uintptr_t)(t->buf + 4096);
		z->msg_controllen = fz_below(t, 256);
	}
	snprintf(desc, dlen, "zc address %#llx length %u copybuf %d flags %#x",
		 (unsigned long long)z->address, z->length, z->copybuf_len,
		 z->flags);
	return fz_chance(t, 70) ? sizeof(*z) : lens[fz_below(t, 8)];
}

/* IP_OPTIONS: NOPs, record route, timestamps, end of list, junk */
static socklen_t fz_ipopts(struct fz_thread *t, char *b, char *desc,
			   size_t dlen)
{
	unsigned char *o = (unsigned char *)b;
	socklen_t len = 4 * fz_below(t, 11), i = 0, n;

	while (i < len) {
		n = len - i;
		switch (fz_below(t, 5)) {
		case 0:		/* record route */
		case 1:		/* timestamp */
			o[i] = fz_chance(t, 50) ? 7 : 68;
			o[i + 1] = n < 40 ? n : 39;
			o[i + 2] = fz_chance(t, 80) ? 4 + (o[i] == 68) :
				   fz_r(t);
			if (n > 3)
				o[i + 3] = fz_chance(t, 50) ? 0 : fz_r(t);
			i = len;
			break;
		case 2:
			o[i++] = 1;	/* NOP */
			break;
		case 3:
			o[i++] = 0;	/* end of list */
			break;
		default:
			o[i++] = fz_r(t);
		}
	}
	snprintf(desc, dlen, "%u bytes of IP options", len);
	return fz_chance(t, 90) ? len : fz_below(t, 44);
}

/* SO_ATTACH_FILTER, SO_ATTACH_REUSEPORT_CBPF: accept all, drop all, junk */
static socklen_t fz_filter(struct fz_thread *t, char *b, char *desc,
			   size_t dlen)
{
	struct sock_fprog *f = (void *)b;
	struct sock_filter *ins = (void *)(b + 256);
	unsigned int n = 1, i;

	ins[0] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K,
					      fz_chance(t, 50) ? 0xffff : 0);
	if (fz_chance(t, 30)) {
		n = 1 + fz_below(t, 8);
		for (i = 0; i < n; i++) {
			ins[i].code = fz_r(t);
			ins[i].jt = fz_below(t, 4);
			ins[i].jf = fz_below(t, 4);
			ins[i].k = fz_chance(t, 50) ? fz_below(t, 64) : fz_r(t);
		}
	}
	f->len = fz_chance(t, 95) ? n : fz_r(t);
	f->filter = fz_chance(t, 95) ? ins : NULL;
	snprintf(desc, dlen, "filter of %u, first code %#x k %#x", f->len,
		 ins[0].code, ins[0].k);
	return sizeof(*f);
}

static socklen_t fz_dev(struct fz_thread *t, char *b, char *desc, size_t dlen)
{
	const char * const names[] = { "lo", rs.netdev ?: "eth0", "fzdummy0",
				       "", NULL };

	return fz_name(t, b, names, ARRAY_SIZE(names), desc, dlen);
}

/* SOL_TLS TLS_TX/TLS_RX: AES-GCM-128 keys, TLS 1.2 or 1.3, or junk */
static socklen_t fz_tls(struct fz_thread *t, char *b, char *desc, size_t dlen)
{
	struct fz_tls *c = (void *)b;
	unsigned int i;

	for (i = 0; i < sizeof(*c); i++)
		b[i] = fz_r(t);
	c->version = fz_chance(t, 90) ? 0x0303 + fz_below(t, 2) : fz_r(t);
	c->cipher = fz_chance(t, 90) ? 51 : 51 + fz_below(t, 8);
	snprintf(desc, dlen, "tls version %#x cipher %u", c->version,
		 c->cipher);
	return fz_chance(t, 90) ? sizeof(*c) : fz_below(t, 64);
}

/* An int of a kind; small ones mostly for the flags and modes. */
static socklen_t fz_vint(struct fz_thread *t, const struct fz_opt *o, char *b,
			 char *desc, size_t dlen)
{
	int *v = (int *)b;

	switch (o->kind) {
	case V_BOOL:
		*v = fz_chance(t, 90) ? (int)fz_below(t, 2) : fz_int(t);
		break;
	case V_REPAIR:	/* TCP_REPAIR_ON, _OFF, _OFF_NO_WP */
		*v = fz_chance(t, 90) ? (int)fz_below(t, 3) - 1 : fz_int(t);
		if (fz_chance(t, 50))
			*v = 1;
		break;
	case V_RQUEUE:	/* TCP_NO_QUEUE, RECV, SEND */
		*v = fz_chance(t, 90) ? (int)fz_below(t, 3) : fz_int(t);
		break;
	case V_FORM:	/* IPV6_ADDRFORM: to AF_INET */
		*v = fz_chance(t, 80) ? AF_INET : fz_chance(t, 50) ?
		     AF_INET6 : fz_int(t);
		break;
	case V_BPFFD:
		*v = fz_chance(t, 50) ? -1 : (int)fz_below(t, 1024);
		break;
	default:
		*v = fz_int(t);
	}
	snprintf(desc, dlen, "%d", *v);
	return sizeof(int);
}

/* The value of option o into b (an input also for getsockopt); length. */
static socklen_t fz_vval(struct fz_thread *t, const struct fz_opt *o, char *b,
			 char *desc, size_t dlen)
{
	static const socklen_t outs[] = { 4, 8, 20, 104, 232, 256, 512 };
	struct linger *l = (void *)b;
	uint32_t *w = (uint32_t *)b;
	unsigned int i;

	for (i = 0; i < 512; i++)
		b[i] = fz_r(t);
	switch (o->kind) {
	case V_ULP:
	case V_CC:
		return fz_ulp_cc(t, b, o->kind == V_ULP, desc, dlen);
	case V_ROPTS:
		return fz_repair_opts(t, b, desc, dlen);
	case V_RWIN:	/* snd_wl1, snd_wnd, max_window, rcv_wnd, rcv_wup */
		for (i = 1; i < 4 && fz_chance(t, 80); i++)
			w[i] = fz_below(t, 65536) << fz_below(t, 8);
		snprintf(desc, dlen, "window %u %u %u %u %u", w[0], w[1], w[2],
			 w[3], w[4]);
		return fz_chance(t, 90) ? 20 : fz_below(t, 24);
	case V_MD5:
		return fz_md5(t, b, desc, dlen);
	case V_TFOKEY:
		snprintf(desc, dlen, "fastopen key");
		return fz_chance(t, 80) ? 16 * (1 + fz_below(t, 2)) :
		       fz_below(t, 40);
	case V_ZC:
		return fz_zerocopy(t, b, desc, dlen);
	case V_IPOPTS:
		return fz_ipopts(t, b, desc, dlen);
	case V_LINGER:
		l->l_onoff = fz_below(t, 2);
		l->l_linger = fz_chance(t, 80) ? (int)fz_below(t, 3) : fz_int(t);
		snprintf(desc, dlen, "linger %d %d", l->l_onoff, l->l_linger);
		return sizeof(*l);
	case V_FILTER:
		return fz_filter(t, b, desc, dlen);
	case V_TXTIME:	/* struct sock_txtime: clockid, flags */
		w[0] = fz_chance(t, 80) ? (fz_chance(t, 50) ? CLOCK_MONOTONIC :
			11 /* CLOCK_TAI */) : fz_below(t, 16);
		w[1] = fz_below(t, 8);
		snprintf(desc, dlen, "txtime clock %u flags %u", w[0], w[1]);
		return 8;
	case V_DEV:
		return fz_dev(t, b, desc, dlen);
	case V_TLS:
		return fz_tls(t, b, desc, dlen);
	case V_OUT:
	case V_BYTES:
		snprintf(desc, dlen, "bytes");
		return fz_chance(t, 70) ? outs[fz_below(t, ARRAY_SIZE(outs))] :
		       fz_below(t, 600);
	default:
		return fz_vint(t, o, b, desc, dlen);
	}
}

static const struct fz_opt *fz_vpick(struct fz_thread *t)
{
	static unsigned int sum;
	unsigned int i, r;

	if (!sum)
		for (i = 0; i < ARRAY_SIZE(fz_opts); i++)
			sum += fz_opts[i].weight;
	r = fz_below(t, sum);
	for (i = 0; r >= fz_opts[i].weight; i++)
		r -= fz_opts[i].weight;
	return &fz_opts[i];
}

/* Connected over the TCP fallback? (RDMASTREAM_INFO, not a counted call) */
static bool fz_fb_connected(int fd)
{
	struct rdmastream_info info = {};
	socklen_t len = sizeof(info);

	if (rs.tcp || getsockopt(fd, SOL_RDMASTREAM, RDMASTREAM_INFO, &info,
				 &len))
		return false;
	return (info.rsi_flags & RDMASTREAM_INFO_F_FALLBACK) &&
	       info.rsi_state == RDMASTREAM_ESTABLISHED;
}

/*
 * A named option with a meaningful value (or, one time in ten, a wrong
 * length). A set of a notable one that succeeds is printed, every call
 * with RS_FUZZ_VERBOSE=1.
 */
static void fz_vopt(struct fz_thread *t, int fd, bool get)
{
	const struct fz_opt *o = fz_vpick(t);
	char desc[128];
	socklen_t len = fz_vval(t, o, t->buf, desc, sizeof(desc)), asked;
	bool fb;
	int ret;

	if (fz_chance(t, 10))
		len = fz_chance(t, 50) ? fz_below(t, len + 2) : fz_below(t, 1024);
	asked = len;
	fz_begin(t, get ? OP_VGET : OP_VSET, fz_bound(t));
	fb = fz_fb_connected(fd);
	ret = get ? getsockopt(fd, o->level, o->name, t->buf, &len) :
		    setsockopt(fd, o->level, o->name, t->buf, len);
	fz_end(t, ret);
	t->vcalls++;
	t->vfb += fb;
	if (fz.verbose || (!ret && !get && o->notable))
		fz_log(t, "%ssockopt(fd %d%s, %s, %s, %s, len %u) = %d%s%s",
		       get ? "get" : "set", fd, fb ? " over TCP" : "",
		       fz_level_name(o->level), o->id, desc, asked, ret,
		       ret ? " " : "", ret ? strerror(errno) : "");
	if (get && !ret && len > asked && len > 4) {
		fprintf(stderr, "# FINDING: getsockopt(%s, %s) length %u > %u\n",
			fz_level_name(o->level), o->id, len, asked);
		fz_flag(&fz.hung);
	}
}

static void fz_vsetsockopt(struct fz_thread *t, int fd)
{
	fz_vopt(t, fd, false);
}

static void fz_vgetsockopt(struct fz_thread *t, int fd)
{
	fz_vopt(t, fd, true);
}

/* ioctls TCP's (or IPv6's) ioctl and the core's device ioctls answer */
enum fz_arg { A_INT, A_TIME, A_IFCONF, A_IFR, A_IFR_SET, A_RT, A_ARP };

struct fz_ioc {
	unsigned long cmd;
	unsigned char arg;
	const char *id;
};

#define I(c, a)	{ c, a, #c }

static const struct fz_ioc fz_iocs[] = {
	I(SIOCINQ, A_INT), I(SIOCOUTQ, A_INT), I(SIOCOUTQNSD, A_INT),
	I(SIOCATMARK, A_INT), I(FZ_SIOCGSTAMP, A_TIME),
	I(FZ_SIOCGSTAMPNS, A_TIME), I(FIONBIO, A_INT), I(FIOASYNC, A_INT),
	I(SIOCGIFCONF, A_IFCONF), I(SIOCGIFNAME, A_IFR),
	I(SIOCGIFINDEX, A_IFR), I(SIOCGIFFLAGS, A_IFR), I(SIOCGIFADDR, A_IFR),
	I(SIOCGIFNETMASK, A_IFR), I(SIOCGIFBRDADDR, A_IFR),
	I(SIOCGIFMTU, A_IFR), I(SIOCGIFHWADDR, A_IFR), I(SIOCGIFTXQLEN, A_IFR),
	I(SIOCSIFADDR, A_IFR_SET), I(SIOCSIFFLAGS, A_IFR_SET),
	I(SIOCSIFMTU, A_IFR_SET), I(SIOCSIFNETMASK, A_IFR_SET),
	I(SIOCSIFBRDADDR, A_IFR_SET), I(SIOCSIFDSTADDR, A_IFR_SET),
	I(SIOCDIFADDR, A_IFR_SET), I(SIOCSIFHWADDR, A_IFR_SET),
	I(SIOCSIFTXQLEN, A_IFR_SET), I(SIOCSIFNAME, A_IFR_SET),
	I(SIOCADDRT, A_RT), I(SIOCDELRT, A_RT), I(SIOCADDRT, A_RT),
	I(SIOCGARP, A_ARP), I(SIOCSARP, A_ARP), I(SIOCDARP, A_ARP),
};

#undef I

/* A host route to TEST-NET-2 (198.51.100.0/24) or 2001:db8::/32, on lo */
static void fz_route(struct fz_thread *t, char *b, char *desc, size_t dlen)
{
	static const char * const devs[] = { "lo", "fzdummy0", NULL };
	struct rtentry *rt = (void *)b;
	struct in6_rtmsg *r6 = (void *)b;
	struct sockaddr_in *dst = (struct sockaddr_in *)&rt->rt_dst;
	struct sockaddr_in *mask = (struct sockaddr_in *)&rt->rt_genmask;
	unsigned int host = 1 + fz_below(t, 254);
	const char *dev = devs[fz_below(t, ARRAY_SIZE(devs))];

	memset(b, 0, sizeof(*rt) + sizeof(*r6));
	if (fz_chance(t, 30)) {	/* what an IPv6 socket's ioctl reads */
		r6->rtmsg_dst.s6_addr[0] = 0x20;
		r6->rtmsg_dst.s6_addr[1] = 0x01;
		r6->rtmsg_dst.s6_addr[2] = 0x0d;
		r6->rtmsg_dst.s6_addr[3] = 0xb8;
		r6->rtmsg_dst.s6_addr[15] = host;
		r6->rtmsg_dst_len = fz_chance(t, 90) ? 128 : fz_below(t, 129);
		r6->rtmsg_flags = RTF_UP;
		r6->rtmsg_metric = 1;
		r6->rtmsg_ifindex = fz_chance(t, 80) ? 1 : (int)fz_below(t, 4);
		snprintf(desc, dlen, "in6_rtmsg 2001:db8::%x/%u ifindex %d",
			 host, r6->rtmsg_dst_len, r6->rtmsg_ifindex);
		return;
	}
	dst->sin_family = AF_INET;
	dst->sin_addr.s_addr = htonl(0xc6336400 | host);
	mask->sin_family = AF_INET;
	mask->sin_addr.s_addr = htonl(0xffffffff);
	rt->rt_flags = RTF_UP | RTF_HOST;
	rt->rt_metric = fz_below(t, 3);
	rt->rt_dev = (char *)dev;
	snprintf(desc, dlen, "rtentry 198.51.100.%u/32 dev %s", host,
		 dev ?: "none");
}

static void fz_ifname(struct fz_thread *t, char *name, bool set)
{
	unsigned int i;

	if (set || fz_chance(t, 20)) {	/* one that does not exist */
		strcpy(name, "fz");
		for (i = 2; i < 8; i++)
			name[i] = 'a' + fz_below(t, 26);
		name[8] = 0;
		return;
	}
	snprintf(name, IFNAMSIZ, "%s", fz_chance(t, 50) ? "lo" :
		 rs.netdev ?: "eth0");
}

/* The argument of an ioctl into b; set ones only name devices not there. */
static void fz_ioc_arg(struct fz_thread *t, const struct fz_ioc *c, char *b,
		       char *desc, size_t dlen)
{
	struct ifreq *ifr = (void *)b;
	struct ifconf *ifc = (void *)b;
	struct arpreq *arp = (void *)b;
	struct sockaddr_in *sin = (struct sockaddr_in *)&ifr->ifr_addr;
	unsigned int i;

	for (i = 0; i < 512; i++)
		b[i] = fz_r(t);
	switch (c->arg) {
	case A_INT:
		*(int *)b = fz_below(t, 2);
		break;
	case A_IFCONF:
		ifc->ifc_len = fz_chance(t, 50) ? 40 * (int)fz_below(t, 8) :
			       (int)fz_below(t, 1024);
		ifc->ifc_buf = fz_chance(t, 80) ? b + 1024 : NULL;
		break;
	case A_IFR:
	case A_IFR_SET:
		fz_ifname(t, ifr->ifr_name, c->arg == A_IFR_SET);
		if (fz_chance(t, 50)) {
			sin->sin_family = AF_INET;
			sin->sin_addr.s_addr = htonl(0xc6336400 |
						     fz_below(t, 256));
		}
		if (c->cmd == SIOCGIFNAME)
			ifr->ifr_ifindex = fz_below(t, 4);
		if (c->cmd == SIOCSIFNAME)
			strcpy(ifr->ifr_newname, "fzdummy1");
		snprintf(desc, dlen, "ifreq %s", ifr->ifr_name);
		break;
	case A_RT:
		fz_route(t, b, desc, dlen);
		break;
	case A_ARP:
		memset(arp, 0, sizeof(*arp));
		sin = (struct sockaddr_in *)&arp->arp_pa;
		sin->sin_family = AF_INET;
		sin->sin_addr.s_addr = htonl(0xc6336400 | fz_below(t, 256));
		arp->arp_ha.sa_family = ARPHRD_ETHER;
		arp->arp_flags = fz_chance(t, 80) ? ATF_COM | ATF_PERM :
				 fz_r(t);
		fz_ifname(t, arp->arp_dev, fz_chance(t, 70));
		if (fz_chance(t, 20))
			arp->arp_dev[0] = 0;
		snprintf(desc, dlen, "arpreq 198.51.100.%u dev %s",
			 ntohl(sin->sin_addr.s_addr) & 0xff, arp->arp_dev);
		break;
	}
}

static void fz_vioctl(struct fz_thread *t, int fd)
{
	const struct fz_ioc *c = &fz_iocs[fz_below(t, ARRAY_SIZE(fz_iocs))];
	char desc[96] = "";
	void *p = t->buf;
	bool fb;
	int ret;

	fz_ioc_arg(t, c, t->buf, desc, sizeof(desc));
	if (fz_chance(t, 3))
		p = fz_chance(t, 50) ? NULL : (void *)fz.ro;
	fz_begin(t, OP_VIOCTL, fz_bound(t));
	fb = fz_fb_connected(fd);
	ret = ioctl(fd, c->cmd, p);
	fz_end(t, ret);
	t->vcalls++;
	t->vfb += fb;
	if (fz.verbose || (!ret && c->arg >= A_IFR_SET && c->cmd != SIOCGARP))
		fz_log(t, "ioctl(fd %d%s, %s, %s) = %d%s%s", fd,
		       fb ? " over TCP" : "", c->id, desc, ret,
		       ret ? " " : "", ret ? strerror(errno) : "");
}

static void fz_getname(struct fz_thread *t, int fd)
{
	struct sockaddr_storage ss;
	socklen_t len = fz_below(t, sizeof(ss) + 4);
	socklen_t *lenp = fz_chance(t, 5) ? NULL : &len;

	fz_begin(t, OP_GETNAME, 100);
	if (fz_chance(t, 50))
		fz_end(t, getsockname(fd, (void *)&ss, lenp));
	else
		fz_end(t, getpeername(fd, fz_chance(t, 5) ? (void *)fz.ro :
				      (void *)&ss, lenp));
}

static void fz_shutdown(struct fz_thread *t, int fd)
{
	int how = fz_chance(t, 90) ? (int)fz_below(t, 3) : (int)fz_r(t);

	fz_begin(t, OP_SHUTDOWN, fz_bound(t));
	fz_end(t, shutdown(fd, how));
}

static void fz_ioctl(struct fz_thread *t, int fd)
{
	static const unsigned long cmds[] = {
		SIOCINQ, SIOCOUTQ, FIONBIO, SIOCATMARK, FIOASYNC, 0x8906 /* SIOCGSTAMP */,
		TIOCOUTQ, 0x894B /* SIOCOUTQNSD */, FIONREAD,
	};
	unsigned long cmd = fz_chance(t, 90) ?
			    cmds[fz_below(t, ARRAY_SIZE(cmds))] : fz_r(t);
	int v = fz_below(t, 2);
	void *p = fz_chance(t, 10) ? (void *)fz.ro : (void *)&v;

	if (fz_chance(t, 3))
		p = NULL;
	fz_begin(t, OP_IOCTL, fz_bound(t));
	fz_end(t, ioctl(fd, cmd, p));
}

static void fz_fcntl(struct fz_thread *t, int fd)
{
	fz_begin(t, OP_FCNTL, 100);
	switch (fz_below(t, 3)) {
	case 0:
		fz_end(t, rs_set_nonblock(fd, fz_chance(t, 50)));
		break;
	case 1:
		fz_end(t, fcntl(fd, F_SETFL, fz_chance(t, 50) ? O_ASYNC : 0));
		break;
	default:
		fz_end(t, fcntl(fd, F_SETOWN, getpid()));
	}
}

static void fz_poll(struct fz_thread *t, int fd)
{
	struct pollfd p[6];
	unsigned int n = fz_below(t, 7), i;
	(void)fd;	/* the call picks its own descriptors */

	for (i = 0; i < n; i++) {
		p[i].fd = fz_pick(t);
		p[i].events = fz_chance(t, 80) ? POLLIN | POLLOUT | POLLRDHUP |
			      POLLPRI : (short)fz_r(t);
	}
	fz_begin(t, OP_POLL, 2000);
	fz_end(t, poll(p, n, fz_below(t, 50)));
}

static void fz_epoll(struct fz_thread *t, int fd)
{
	struct epoll_event ev[8] = { };
	unsigned int k = fz_below(t, 5);

	ev[0].events = fz_chance(t, 80) ? EPOLLIN | EPOLLOUT | EPOLLRDHUP |
		       (fz_chance(t, 30) ? EPOLLET : 0) |
		       (fz_chance(t, 10) ? EPOLLONESHOT : 0) : (uint32_t)fz_r(t);
	ev[0].data.fd = fd;
	fz_begin(t, OP_EPOLL, 2000);
	if (k < 3)
		fz_end(t, epoll_ctl(t->epfd, k == 0 ? EPOLL_CTL_ADD :
				    k == 1 ? EPOLL_CTL_MOD : EPOLL_CTL_DEL,
				    fd, ev));
	else
		fz_end(t, epoll_wait(t->epfd, ev, 8, fz_below(t, 30)));
}

static void fz_dup(struct fz_thread *t, int fd, bool two)
{
	int i = fz_below(t, FZ_SLOTS), old, nfd;

	if (!two) {
		fz_begin(t, OP_DUP, 100);
		nfd = fz_end(t, fcntl(fd, fz_chance(t, 50) ? F_DUPFD_CLOEXEC :
				      F_DUPFD, 0));
		if (nfd >= 0)
			fz_put(t, nfd);
		return;
	}
	/* dup2 onto the number reserved for slot i, which it then holds */
	old = __atomic_exchange_n(&fz.slot[i], -1, __ATOMIC_ACQ_REL);
	if (old >= 0 && old != FZ_DUP_BASE + i)
		close(old);
	fz_begin(t, OP_DUP2, 100);
	nfd = fz_end(t, dup2(fd, FZ_DUP_BASE + i));
	if (nfd >= 0) {
		old = __atomic_exchange_n(&fz.slot[i], nfd, __ATOMIC_ACQ_REL);
		if (old >= 0 && old != nfd)
			close(old);
	}
}

static void fz_close(struct fz_thread *t, int any)
{
	int i = fz_below(t, FZ_SLOTS);
	int fd = __atomic_exchange_n(&fz.slot[i], -1, __ATOMIC_ACQ_REL);
	struct linger l = { .l_onoff = 1, .l_linger = 0 };
	(void)any;	/* the call picks its own descriptors */

	if (fd < 0)
		return;
	if (fz_chance(t, 10))	/* abortive close */
		setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
	fz_begin(t, OP_CLOSE, fz_bound(t));
	fz_end(t, close(fd));
}

/* The child of a fork: a few calls on the inherited pool, then _exit. */
static void fz_child(struct fz_thread *t)
{
	int i, fd;
	char b[512];

	signal(SIGALRM, SIG_DFL);
	alarm(3);
	for (i = 0; i < 4; i++) {
		fd = fz.slot[fz_below(t, FZ_SLOTS)];
		switch (fz_below(t, 5)) {
		case 0:
			send(fd, b, fz_below(t, sizeof(b)), MSG_DONTWAIT);
			break;
		case 1:
			recv(fd, b, sizeof(b), MSG_DONTWAIT);
			break;
		case 2:
			shutdown(fd, fz_below(t, 3));
			break;
		case 3:
			accept4(fd, NULL, NULL, SOCK_NONBLOCK);
			break;
		default:
			close(fd);
		}
	}
	_exit(0);
}

static void fz_fork(struct fz_thread *t, int fd)
{
	int i;
	pid_t pid;
	(void)fd;	/* the call picks its own descriptors */

	pthread_mutex_lock(&fz.lock);
	for (i = 0; i < FZ_CHILDREN && fz.child[i]; i++)
		;
	if (i == FZ_CHILDREN) {
		pthread_mutex_unlock(&fz.lock);
		return;
	}
	fz_begin(t, OP_FORK, 5000);
	pid = fz_end(t, fork());
	if (!pid)
		fz_child(t);
	if (pid > 0) {
		fz.child[i] = pid;
		fz.child_t[i] = rs_now();
	}
	pthread_mutex_unlock(&fz.lock);
}

/* Pages under the other threads' calls disappear and come back. */
static void fz_flip(struct fz_thread *t, int fd)
{
	size_t len = FZ_BUF;
	(void)fd;	/* the call picks its own descriptors */

	fz_begin(t, OP_MMAP, 5000);
	switch (fz_below(t, 4)) {
	case 0:
		/* new pages in place of the old ones (like munmap + mmap) */
		fz_end(t, mmap(fz.flip, len, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1,
			       0) == MAP_FAILED ? -1 : 0);
		break;
	case 1:
		fz_end(t, mprotect(fz.flip, len, PROT_NONE));
		break;
	case 2:
		fz_end(t, madvise(fz.flip, len, MADV_DONTNEED));
		break;
	default:
		fz_end(t, mprotect(fz.flip, len, PROT_READ |
				   (fz_chance(t, 70) ? PROT_WRITE : 0)));
	}
}

/* A socket of a pair: ours (fallback mode fb, -1: the default) or TCP's. */
static int fz_pair_sock(bool v6, bool tcp, int fb, int flags)
{
	int fd;

	if (tcp)
		return socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM | flags,
			      IPPROTO_TCP);
	fd = rs_fallback_env(socket(rs.ip && v6 ? AF_INET6 : rs.family,
				    SOCK_STREAM | flags, rs.protocol));
	if (fd >= 0 && fb >= 0)
		rs_setint(fd, SOL_RDMASTREAM, RDMASTREAM_FALLBACK, fb);
	return fd;
}

/*
 * A connected pair and its listener, so that the data calls have some:
 * a listener of ours (fallback mode lfb) or kernel TCP's (tcp), a client
 * of ours (mode cfb) connected to it. Over the fallback when a mode says
 * so (or RS_FALLBACK does): then the client is remembered in fz.fb.
 */
static void fz_pair_of(struct fz_thread *t, int op, int lfb, int cfb,
		       bool tcp)
{
	struct sockaddr_storage ss;
	bool v6;
	socklen_t len = fz_pair_addr(t, &ss, &v6);
	int l, c, a = -1;

	fz_begin(t, op, 3000);
	l = fz_pair_sock(v6, tcp, lfb, SOCK_CLOEXEC);
	c = fz_pair_sock(v6, false, cfb, SOCK_CLOEXEC | SOCK_NONBLOCK);
	if (l < 0 || c < 0 || bind(l, (void *)&ss, len) ||
	    listen(l, 1 + fz_below(t, 8)))
		goto out;
	len = sizeof(ss);
	getsockname(l, (void *)&ss, &len);
	fz_note_port(l);
	if (connect(c, (void *)&ss, len) && errno != EINPROGRESS)
		goto out;
	rs_set_timeo(l, SO_RCVTIMEO, 2000);
	a = accept4(l, NULL, NULL, SOCK_CLOEXEC);
	if (a >= 0 && rs_poll(c, POLLOUT, 2000) <= 0)
		a = -1;
out:
	fz_end(t, a);
	if (a >= 0) {
		rs_set_timeo(a, SO_RCVTIMEO, 1 + fz_below(t, 400));
		rs_set_timeo(c, SO_RCVTIMEO, 1 + fz_below(t, 400));
		rs_set_timeo(a, SO_SNDTIMEO, 1 + fz_below(t, 400));
		rs_set_timeo(c, SO_SNDTIMEO, 1 + fz_below(t, 400));
		rs_set_nonblock(c, fz_chance(t, 30));
		if (tcp || cfb == 2 || rs_fb_forced())
			fz_note_fb(c);
		if (!tcp && (lfb == 2 || rs_fb_forced()))
			fz_note_fb(a);
		fz_put(t, a);
	}
	if (c >= 0)
		fz_put(t, c);
	if (l >= 0)
		fz_put(t, l);
}

static void fz_pair(struct fz_thread *t, int fd)
{
	int fb = fz_chance(t, 20) ? 2 : -1;
	(void)fd;	/* the call picks its own descriptors */

	fz_pair_of(t, OP_PAIR, fb, fb, false);
}

/*
 * A connection over the TCP fallback: a client of ours with fallback
 * forced (or, to a TCP listener, sometimes automatic: the RDMA attempt is
 * refused and it falls back) to a listener of ours or to kernel TCP's.
 */
static void fz_fbpair(struct fz_thread *t, int fd)
{
	bool tcp = fz_chance(t, 50);
	int cfb = tcp && fz_chance(t, 30) ? 1 : 2;
	(void)fd;	/* the call picks its own descriptors */

	fz_pair_of(t, OP_FBPAIR, fz_chance(t, 50) ? 2 : 1, cfb, tcp);
}

/*
 * What panicked the host once: a socket with fallback forced, connected to
 * a TCP listener, is given a real ULP through TCP_ULP, and sends.
 */
static void fz_ulpseq(struct fz_thread *t, int fd)
{
	static const char * const ulp[] = { "mptcp", "mptcp", "tls",
					    "espintcp", "smc" };
	const char *name = ulp[fz_below(t, ARRAY_SIZE(ulp))];
	size_t n = 1 + fz_below(t, 4096);
	struct sockaddr_storage ss;
	bool v6;
	socklen_t len = fz_pair_addr(t, &ss, &v6);
	int l, c, a = -1, ret = -1;
	(void)fd;	/* the call picks its own descriptors */

	fz_begin(t, OP_ULPSEQ, 3000);
	l = fz_pair_sock(v6, true, -1, SOCK_CLOEXEC);
	c = fz_pair_sock(v6, false, 2, SOCK_CLOEXEC);
	if (l < 0 || c < 0 || bind(l, (void *)&ss, len) || listen(l, 4))
		goto out;
	len = sizeof(ss);
	getsockname(l, (void *)&ss, &len);
	rs_set_timeo(c, SO_SNDTIMEO, 2000);
	rs_set_timeo(l, SO_RCVTIMEO, 2000);
	if (connect(c, (void *)&ss, len))
		goto out;
	a = accept4(l, NULL, NULL, SOCK_CLOEXEC);
	ret = setsockopt(c, SOL_TCP, TCP_ULP, name, strlen(name));
	if (!ret || fz.verbose)
		fz_log(t, "ulp-seq: fd %d (%s, %s) -> TCP listener port %u, TCP_ULP \"%s\" = %d%s%s, send %zu",
		       c, rs.tcp ? "kernel TCP" : "fallback 2",
		       v6 ? "IPv6" : "IPv4",
		       ntohs(((struct sockaddr_in *)&ss)->sin_port), name, ret,
		       ret ? " " : "", ret ? strerror(errno) : "", n);
	ret = send(c, t->buf, n, MSG_DONTWAIT | MSG_NOSIGNAL);
out:
	fz_end(t, ret);
	if (a >= 0)
		fz_put(t, a);
	if (c >= 0) {
		fz_note_fb(c);
		fz_put(t, c);
	}
	if (l >= 0)
		fz_put(t, l);
}

static void fz_sendmsg_tx(struct fz_thread *t, int fd)
{
	fz_sendmsg(t, fd, false);
}

static void fz_recvmsg(struct fz_thread *t, int fd)
{
	fz_sendmsg(t, fd, true);
}

static void fz_send(struct fz_thread *t, int fd)
{
	fz_sendrecv(t, fd, false);
}

static void fz_recv(struct fz_thread *t, int fd)
{
	fz_sendrecv(t, fd, true);
}

static void fz_writev(struct fz_thread *t, int fd)
{
	fz_rwv(t, fd, false);
}

static void fz_readv(struct fz_thread *t, int fd)
{
	fz_rwv(t, fd, true);
}

static void fz_sendmmsg(struct fz_thread *t, int fd)
{
	fz_mmsg(t, fd, false);
}

static void fz_recvmmsg(struct fz_thread *t, int fd)
{
	fz_mmsg(t, fd, true);
}

static void fz_setsockopt(struct fz_thread *t, int fd)
{
	fz_sockopt(t, fd, false);
}

static void fz_getsockopt(struct fz_thread *t, int fd)
{
	fz_sockopt(t, fd, true);
}

static void fz_dup1(struct fz_thread *t, int fd)
{
	fz_dup(t, fd, false);
}

static void fz_dup2(struct fz_thread *t, int fd)
{
	fz_dup(t, fd, true);
}

static void fz_socket(struct fz_thread *t, int fd)
{
	(void)fd;
	fz_new_socket(t);
}

static void (* const fz_calls[OP_N])(struct fz_thread *t, int fd) = {
	[OP_SOCKET] = fz_socket, [OP_BIND] = fz_bind,
	[OP_LISTEN] = fz_listen, [OP_CONNECT] = fz_connect,
	[OP_ACCEPT] = fz_accept, [OP_SENDMSG] = fz_sendmsg_tx,
	[OP_RECVMSG] = fz_recvmsg, [OP_SEND] = fz_send, [OP_RECV] = fz_recv,
	[OP_WRITEV] = fz_writev, [OP_READV] = fz_readv,
	[OP_SENDMMSG] = fz_sendmmsg, [OP_RECVMMSG] = fz_recvmmsg,
	[OP_SENDFILE] = fz_sendfile, [OP_SETSOCKOPT] = fz_setsockopt,
	[OP_GETSOCKOPT] = fz_getsockopt, [OP_GETNAME] = fz_getname,
	[OP_SHUTDOWN] = fz_shutdown, [OP_IOCTL] = fz_ioctl,
	[OP_FCNTL] = fz_fcntl, [OP_POLL] = fz_poll, [OP_EPOLL] = fz_epoll,
	[OP_DUP] = fz_dup1, [OP_DUP2] = fz_dup2, [OP_FORK] = fz_fork,
	[OP_CLOSE] = fz_close, [OP_MMAP] = fz_flip, [OP_PAIR] = fz_pair,
	[OP_VSET] = fz_vsetsockopt, [OP_VGET] = fz_vgetsockopt,
	[OP_VIOCTL] = fz_vioctl, [OP_FBPAIR] = fz_fbpair,
	[OP_ULPSEQ] = fz_ulpseq,
};

static void fz_one(struct fz_thread *t)
{
	unsigned int sum = 0, r, op;

	for (op = 0; op < OP_N; op++)
		sum += fz_weight[op];
	r = fz_below(t, sum);
	for (op = 0; r >= fz_weight[op]; op++)
		r -= fz_weight[op];
	/* the vocabulary's calls mostly on sockets over the fallback */
	fz_calls[op](t, op == OP_VSET || op == OP_VGET || op == OP_VIOCTL ?
		     fz_pick_fb(t, 60) : fz_pick(t));
}

static void *fz_worker(void *arg)
{
	struct fz_thread *t = arg;

	fz_timer_init(t);
	t->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (fz.selfcheck && !t->idx) {
		/* the watchdog's own test: a call that does not return */
		fz_begin(t, OP_POLL, 0);
		rs_msleep((fz.hang + 5) * 1000);
		fz_end(t, 0);
	}
	while (!fz_get(&fz.stop) && rs_now() < fz.end)
		fz_one(t);
	close(t->epfd);
	fz_flag(&t->done);
	return NULL;
}

/* ---- module-level events ---- */

static int fz_mod_unload(void)
{
	return syscall(SYS_delete_module, rs_modname(), O_NONBLOCK);
}

static int fz_mod_load(void)
{
	int fd, ret;

	fd = open(rs.module, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ret = syscall(SYS_finit_module, fd, fz_params, 0);
	close(fd);
	return ret;
}

static bool fz_mod_loaded(void)
{
	char path[256];

	snprintf(path, sizeof(path), "/sys/module/%s", rs_modname());
	return !access(path, F_OK);
}

static bool fz_can_events(void)
{
	return !rs.tcp && !geteuid() && rs.netdev && rs_have_cmd("rdma") &&
	       rs_link_exists();
}

static void *fz_events(void *arg)
{
	struct fz_thread *t = arg;
	int anchor, ret;
	double next;

	fz_timer_init(t);
	/* a socket of its own, so that the module is always in use */
	anchor = socket(rs.family, SOCK_STREAM | SOCK_CLOEXEC, rs.protocol);
	next = rs_now() + 1 + fz_below(t, 2 * fz.event_sec);
	while (!fz_get(&fz.stop) && rs_now() < fz.end) {
		if (rs_now() < next) {
			rs_msleep(100);
			continue;
		}
		next = rs_now() + 1 + fz_below(t, 2 * fz.event_sec);
		if (fz_chance(t, 50)) {
			fz_begin(t, OP_UNLOAD, 0);
			ret = fz_end(t, fz_mod_unload());
			if (!ret || (errno != EBUSY && errno != EAGAIN)) {
				fprintf(stderr, "# FINDING: delete_module with sockets open: %s\n",
					ret ? strerror(errno) : "unloaded");
				fz_flag(&fz.hung);
				if (!ret && fz_mod_load())
					fz_flag(&fz.stop);
			}
			continue;
		}
		fz_begin(t, OP_LINK, 0);
		ret = rs_system("rdma link delete %s", rs.rdmadev);
		if (!ret)
			rs_msleep(fz_below(t, 2000));
		ret = rs_link_add() || ret;
		fz_end(t, ret ? -1 : 0);
		fz_flag(&fz.relinked);
		if (!rs_link_exists()) {
			fprintf(stderr, "# FINDING: %s did not come back\n",
				rs.rdmadev);
			fz_flag(&fz.hung);
			fz_flag(&fz.stop);
		}
	}
	if (anchor >= 0)
		close(anchor);
	fz_flag(&t->done);
	return NULL;
}

/* ---- the watchdog ---- */

static void fz_reap(bool all)
{
	int i, st;
	pid_t p;

	pthread_mutex_lock(&fz.lock);
	for (i = 0; i < FZ_CHILDREN; i++) {
		if (!fz.child[i])
			continue;
		p = waitpid(fz.child[i], &st, all ? 0 : WNOHANG);
		if (p == fz.child[i] || (p < 0 && errno == ECHILD)) {
			fz.child[i] = 0;
		} else if (rs_now() - fz.child_t[i] > 10) {
			kill(fz.child[i], SIGKILL);
			if (rs_now() - fz.child_t[i] > fz.hang) {
				fprintf(stderr, "# FINDING: child %d unkillable for %u s\n",
					fz.child[i], fz.hang);
				fz_flag(&fz.hung);
				fz.child[i] = 0;
			}
		}
	}
	pthread_mutex_unlock(&fz.lock);
}

/* A thread in one call beyond the bound is a finding: say where. */
static bool fz_check_hang(void)
{
	unsigned int i, bound;
	long long since;
	int op;

	for (i = 0; i <= fz.nthreads; i++) {
		since = __atomic_load_n(&fz.t[i].since_ms, __ATOMIC_RELAXED);
		op = __atomic_load_n(&fz.t[i].op, __ATOMIC_RELAXED);
		bound = i == fz.nthreads ? 3 * fz.hang : fz.hang;
		if (!since || fz_ms() - since < bound * 1000LL)
			continue;
		fprintf(stderr, "# FINDING: thread %u (tid %d) in %s for %lld s\n",
			i, fz.t[i].tid, fz_op_name[op],
			(fz_ms() - since) / 1000);
		rs_stacks_dump();
		return true;
	}
	return false;
}

static void fz_report(void)
{
	unsigned long calls, ok, total = 0, vcalls = 0, vfb = 0;
	unsigned int op, i;

	for (op = 0; op < OP_N; op++) {
		calls = ok = 0;
		for (i = 0; i <= fz.nthreads; i++) {
			calls += fz.t[i].cnt[op].calls;
			ok += fz.t[i].cnt[op].ok;
		}
		total += calls;
		if (calls)
			rs_info("%-10s %9lu calls %9lu succeeded", fz_op_name[op],
				calls, ok);
	}
	for (i = 0; i < fz.nthreads; i++) {
		vcalls += fz.t[i].vcalls;
		vfb += fz.t[i].vfb;
	}
	rs_info("v- calls on sockets connected over the TCP fallback: %lu of %lu",
		vfb, vcalls);
	rs_info("total %lu calls in %u s, %u threads, seed %llu", total,
		fz.secs, fz.nthreads, (unsigned long long)fz.seed);
}

/* ---- setup ---- */

static void fz_find_addr6(void)
{
	struct ifaddrs *ifa, *i;
	struct sockaddr_in6 *s6;
	const char *env = getenv("RS_ADDR6");

	fz.addr6.sin6_family = AF_INET6;
	if (env && inet_pton(AF_INET6, env, &fz.addr6.sin6_addr) == 1) {
		fz.have6 = true;
		if (IN6_IS_ADDR_LINKLOCAL(&fz.addr6.sin6_addr) && rs.netdev)
			fz.addr6.sin6_scope_id = if_nametoindex(rs.netdev);
		return;
	}
	if (!rs.netdev || getifaddrs(&ifa))
		return;
	for (i = ifa; i; i = i->ifa_next) {
		if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET6 ||
		    strcmp(i->ifa_name, rs.netdev))
			continue;
		s6 = (struct sockaddr_in6 *)i->ifa_addr;
		fz.addr6 = *s6;
		fz.have6 = true;
		if (!IN6_IS_ADDR_LINKLOCAL(&s6->sin6_addr))
			break;
	}
	freeifaddrs(ifa);
}

static void fz_setup(void)
{
	struct sigaction sa = { .sa_handler = fz_on_signal };	/* no restart */
	struct rlimit rl;
	unsigned int i;
	char *p;

	sigaction(SIGUSR1, &sa, NULL);
	signal(SIGIO, SIG_IGN);		/* O_ASYNC sockets, F_SETOWN */
	/* the fds must stay below the dup2 targets */
	if (!getrlimit(RLIMIT_NOFILE, &rl) && rl.rlim_max >= 1024) {
		rl.rlim_cur = 1024;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	fz.pagesz = sysconf(_SC_PAGESIZE);
	fz.addr = rs.addr;
	fz_find_addr6();
	for (i = 0; i < FZ_SLOTS; i++)
		fz.slot[i] = -1;
	for (i = 0; i < FZ_FB; i++)
		fz.fb[i] = -1;
	/* shared, remapped and read-only areas in one reservation */
	p = mmap(NULL, 3 * FZ_BUF, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		ksft_exit_fail_msg("mmap: %s\n", strerror(errno));
	fz.shared = p;
	fz.flip = p + FZ_BUF;
	fz.ro = p + 2 * FZ_BUF;
	memset(p, 0x5a, 3 * FZ_BUF);
	mprotect(fz.ro, FZ_BUF, PROT_READ);
	fz.memfd = memfd_create("fuzz_sys", MFD_CLOEXEC);
	if (fz.memfd >= 0 && ftruncate(fz.memfd, 2 * FZ_BUF))
		rs_info("ftruncate: %s", strerror(errno));
	for (i = 0; i <= fz.nthreads; i++) {
		fz.t[i].idx = i;
		fz.t[i].rng = rs_mix64(fz.seed + 0x1000 * (i + 1));
		fz.t[i].buf = malloc(FZ_BUF);
		if (!fz.t[i].buf)
			ksft_exit_fail_msg("out of memory\n");
		memset(fz.t[i].buf, i, FZ_BUF);
	}
}

/*
 * Whether all calls returned: joins, or reports the threads that hang,
 * and those that ended without leaving their loop: an oops in a system
 * call kills the thread, which a join cannot tell from a return.
 */
static bool fz_join(void)
{
	struct timespec ts;
	unsigned int i;
	bool ok = true;

	for (i = 0; i <= fz.nthreads; i++) {
		if (i == fz.nthreads && !fz.events)
			continue;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += 3 * fz.hang;
		if (pthread_timedjoin_np(fz.t[i].thr, NULL, &ts)) {
			fprintf(stderr, "# FINDING: thread %u does not return from %s\n",
				i, fz_op_name[__atomic_load_n(&fz.t[i].op,
						       __ATOMIC_RELAXED)]);
			rs_stacks_dump();
			ok = false;
		} else if (!fz_get(&fz.t[i].done)) {
			fprintf(stderr, "# FINDING: thread %u died in %s (killed in the kernel? see its log)\n",
				i, fz_op_name[__atomic_load_n(&fz.t[i].op,
						       __ATOMIC_RELAXED)]);
			ok = false;
		}
	}
	return ok;
}

/*
 * One connection of the family after the fuzzing: data goes through, and
 * over RDMA, not the TCP fallback (rsi_fallback), unless it is forced.
 * Returns whether it ran over RDMA.
 */
static bool fz_pair_works(struct __test_metadata *_metadata)
{
	struct rdmastream_info info = {};
	socklen_t len = sizeof(info);
	char ok[2];
	int c, s;

	rs_pair(_metadata, &c, &s);
	EXPECT_EQ(2, send(c, "ok", 2, 0));
	EXPECT_EQ(2, rs_recv_all(s, ok, 2, 0));
	EXPECT_EQ(0, memcmp(ok, "ok", 2));
	if (!rs.tcp && getsockopt(c, SOL_RDMASTREAM, RDMASTREAM_INFO, &info,
				  &len))
		info.rsi_fallback = ~0U;
	close(c);
	close(s);
	return rs.tcp || rs_fb_forced() ||
	       info.rsi_fallback == RDMASTREAM_FB_NONE;
}

/*
 * rdma_rxe on 6.1 can leave QP1 deaf for good when its device is re-added
 * while connects race it (docs/kernels.md, Loose ends): every later
 * rdma_cm handshake on the machine times out and falls back to TCP. The
 * fuzzer's own link event is what races it, so it says so and re-adds
 * the device once more, in quiet, for the tests that follow.
 */
static void fz_link_quiet(struct __test_metadata *_metadata)
{
	rs_info("no rdma_cm handshake completes after %s was re-added under traffic (rdma_rxe's QP1, docs/kernels.md): re-adding it in quiet",
		rs.rdmadev);
	ASSERT_EQ(0, rs_system("rdma link delete %s", rs.rdmadev));
	rs_msleep(1000);
	ASSERT_EQ(0, rs_link_add()) TH_LOG("%s did not come back", rs.rdmadev);
}

/* The CM's state, for the log's tail (selftests/cm-digest). */
static void fz_cm_digest(const char *why)
{
	rs_system("%s/selftests/cm-digest %s, seed %llu",
		  getenv("RS_REPO") ?: ".", why, (unsigned long long)fz.seed);
}

TEST(syscalls)
{
	unsigned int i;
	bool hang = false;

	fz_setup();
	if (fz.events && !fz_can_events()) {
		rs_info("no module-level events (needs root, RS_NETDEV, rdma and %s)",
			rs.rdmadev);
		fz.events = false;
	}
	rs_info("seed %llu, %u s, %u threads, events %s, IPv6 %s",
		(unsigned long long)fz.seed, fz.secs, fz.nthreads,
		fz.events ? "on" : "off", fz.have6 ? "native and mapped" :
		"mapped only");
	fz.end = rs_now() + fz.secs;
	for (i = 0; i < fz.nthreads; i++)
		ASSERT_EQ(0, pthread_create(&fz.t[i].thr, NULL, fz_worker,
					    &fz.t[i]));
	if (fz.events)
		ASSERT_EQ(0, pthread_create(&fz.t[i].thr, NULL, fz_events,
					    &fz.t[i]));
	while (rs_now() < fz.end && !fz_get(&fz.stop)) {
		rs_msleep(200);
		fz_reap(false);
		if (!hang && fz_check_hang()) {
			hang = true;
			fz_flag(&fz.hung);
			fz_flag(&fz.stop);
		}
	}
	fz_flag(&fz.stop);
	EXPECT_TRUE(fz_join())
		TH_LOG("a call does not return, or a thread died: see above");
	fz_reap(true);
	fz_close_all();
	fz_report();
	EXPECT_FALSE(fz_get(&fz.hung)) TH_LOG("findings above (seed %llu)",
				     (unsigned long long)fz.seed);
	/* and the family still works, over RDMA */
	if (!fz_get(&fz.hung) && !fz_pair_works(_metadata)) {
		/* only a device re-added under traffic explains it */
		if (!fz_get(&fz.relinked))
			fz_cm_digest("deaf CM after fuzz_sys");
		ASSERT_TRUE(fz_get(&fz.relinked))
			TH_LOG("a connection fell back to TCP after the fuzzing");
		fz_link_quiet(_metadata);
		if (!fz_pair_works(_metadata)) {
			fz_cm_digest("deaf CM after a quiet re-add");
			EXPECT_TRUE(false)
				TH_LOG("no RDMA connection on a device re-added in quiet");
		}
	}
}

/* ---- regressions of what the fuzzer found ---- */

struct fz_race {
	int lfd;
	bool stop;
	unsigned long relistens;
};

static void *fz_relisten(void *arg)
{
	struct fz_race *r = arg;

	while (!fz_get(&r->stop))
		if (!listen(r->lfd, 8))
			r->relistens++;
	return NULL;
}

/* A connection queued on lfd and never accepted; -1 if none. */
static int fz_queue_child(int lfd)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	int c;

	if (getsockname(lfd, (void *)&ss, &len))
		return -1;
	c = rs_socket(SOCK_CLOEXEC);
	if (c < 0)
		return -1;
	rs_set_timeo(c, SO_SNDTIMEO, 3000);
	if (connect(c, (void *)&ss, len)) {
		close(c);
		return -1;
	}
	return c;
}

/*
 * shutdown(SHUT_RD) of a listener unlocks the socket while it drops its
 * cm id; a listen() from another thread got in there and listened again,
 * then the shutdown cleared rs->listener, so that close() took the socket
 * for a never-connected one and never freed the children queued on it
 * (their sockets and ring memory leaked; found by the fuzzer, seed
 * 22177891418166 on the debug kernel). Every socket must be freed.
 */
TEST(listen_vs_shutdown)
{
	unsigned int secs = rs_env_ulong("RS_FUZZ_RACE_SECS", 8), n = 0;
	struct sockaddr_in sin;
	struct fz_race r = { };
	long socks0 = rs_proto_sockets(), socks = -1;
	long long mem0 = rs_param_get("mem_used"), mem = -1;
	pthread_t thr;
	double end;
	int c1, c2;

	rs_watchdog(secs + 120);
	end = rs_now() + secs;
	while (rs_now() < end) {
		r.lfd = rs_listener_opts(_metadata, &sin, 8, 0);
		r.stop = false;
		c1 = fz_queue_child(r.lfd);
		ASSERT_EQ(0, pthread_create(&thr, NULL, fz_relisten, &r));
		shutdown(r.lfd, SHUT_RD);
		/* queued on the listen() that raced with the shutdown */
		c2 = fz_queue_child(r.lfd);
		fz_flag(&r.stop);
		pthread_join(thr, NULL);
		close(r.lfd);
		if (c1 >= 0)
			close(c1);
		if (c2 >= 0)
			close(c2);
		n++;
	}
	rs_info("%u rounds, %lu listen() calls succeeded beside them", n,
		r.relistens);
	if (rs.tcp)
		return;
	end = rs_now() + 30;
	do {
		socks = rs_proto_sockets();
		mem = rs_param_get("mem_used");
		if (socks <= socks0 && mem <= mem0)
			break;
		rs_msleep(200);
	} while (rs_now() < end);
	EXPECT_LE(socks, socks0) TH_LOG("sockets: %ld before, %ld after",
					socks0, socks);
	EXPECT_LE(mem, mem0) TH_LOG("mem_used: %lld before, %lld after",
				    mem0, mem);
}

/* ---- afterwards: the counts return, the module unloads ---- */

static void fz_res(long res[5], bool *ok)
{
	static const char * const names[5] = { "pd", "cq", "qp", "cm_id",
						"mr" };
	char line[1024], dev[64], *p;
	unsigned int i;
	FILE *f;

	*ok = false;
	for (i = 0; i < 5; i++)
		res[i] = -1;
	snprintf(dev, sizeof(dev), " %s: ", rs.rdmadev);
	f = popen("rdma res show 2>/dev/null", "r");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		if (!strstr(line, dev))
			continue;
		*ok = true;
		for (i = 0; i < 5; i++) {
			char key[16];

			snprintf(key, sizeof(key), " %s ", names[i]);
			p = strstr(line, key);
			if (p)
				res[i] = strtol(p + strlen(key), NULL, 10);
		}
	}
	pclose(f);
}

static void fz_counts(struct fz_counts *c)
{
	c->mem_used = rs_param_get("mem_used");
	c->orphans = rs_param_get("orphans");
	c->socks = rs_proto_sockets();
	fz_res(c->res, &c->res_ok);
}

static void fz_counts_str(const struct fz_counts *c, char *buf, size_t len)
{
	snprintf(buf, len, "mem_used %lld orphans %lld sockets %ld pd %ld cq %ld qp %ld cm_id %ld mr %ld",
		 c->mem_used, c->orphans, c->socks, c->res[0], c->res[1],
		 c->res[2], c->res[3], c->res[4]);
}

/*
 * Back at the baseline: fewer sockets, orphans or bytes than before is
 * fine (an earlier test's orphan may have ended meanwhile). The CQs are
 * not compared: the connections take theirs from the device's shared CQ
 * pool (ib_cq_pool_get), which keeps them until the device goes away, so
 * their number depends on how many connections were open at once and on
 * whether RS_RDMADEV was re-added, not on leaks.
 */
static bool fz_counts_eq(const struct fz_counts *a, const struct fz_counts *b)
{
	return b->mem_used <= a->mem_used && b->orphans <= a->orphans &&
	       b->socks <= a->socks &&
	       (!a->res_ok || (a->res[0] == b->res[0] &&
			       a->res[2] == b->res[2] &&
			       a->res[3] == b->res[3] &&
			       a->res[4] == b->res[4]));
}

TEST(settle_unload)
{
	struct fz_counts now;
	char a[256], b[256];
	double end;
	int ret;

	if (rs.tcp)
		SKIP(return, "not applicable to TCP: module counts and unload");
	ASSERT_EQ(0, geteuid()) TH_LOG("needs root");
	ASSERT_TRUE(rs.module && !access(rs.module, R_OK))
		TH_LOG("RS_MODULE is not readable: cannot reload");
	end = rs_now() + fz.settle;
	do {
		fz_counts(&now);
		if (fz_counts_eq(&fz_base, &now))
			break;
		rs_msleep(500);
	} while (rs_now() < end);
	fz_counts_str(&fz_base, a, sizeof(a));
	fz_counts_str(&now, b, sizeof(b));
	rs_info("before: %s", a);
	rs_info("after:  %s", b);
	EXPECT_TRUE(fz_counts_eq(&fz_base, &now))
		TH_LOG("not back to the baseline within %u s", fz.settle);

	end = rs_now() + fz.settle;
	while ((ret = fz_mod_unload()) && rs_now() < end &&
	       (errno == EBUSY || errno == EAGAIN))
		rs_msleep(200);
	ASSERT_EQ(0, ret) TH_LOG("delete_module: %s", strerror(errno));
	ASSERT_FALSE(fz_mod_loaded());
	ASSERT_EQ(0, fz_mod_load()) TH_LOG("finit_module %s (%s): %s",
					   rs.module, fz_params,
					   strerror(errno));
	ASSERT_TRUE(rs_link_exists() || !rs_link_add());
	{
		int c, s;
		char x[2];

		rs_pair(_metadata, &c, &s);
		ASSERT_EQ(2, send(c, "ok", 2, 0));
		ASSERT_EQ(2, rs_recv_all(s, x, 2, 0));
		close(c);
		close(s);
	}
}

/* "a=1 b=x" from /sys/module/NAME/parameters, or RS_MODULE_PARAMS. */
static void fz_mod_params(void)
{
	const char *env = getenv("RS_MODULE_PARAMS");
	char dir[256], path[512], val[256];
	struct dirent *de;
	size_t off = 0;
	FILE *f;
	DIR *d;

	if (env) {
		snprintf(fz_params, sizeof(fz_params), "%s", env);
		return;
	}
	snprintf(dir, sizeof(dir), "/sys/module/%s/parameters", rs_modname());
	d = opendir(dir);
	if (!d)
		return;
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;
		if (fgets(val, sizeof(val), f)) {
			val[strcspn(val, "\n")] = 0;
			if (strcmp(val, "(null)") && off < sizeof(fz_params))
				off += snprintf(fz_params + off,
						sizeof(fz_params) - off,
						strchr(val, ' ') ?
						"%s%s=\"%s\"" : "%s%s=%s",
						off ? " " : "", de->d_name,
						val);
		}
		fclose(f);
	}
	closedir(d);
}

int main(int argc, char **argv)
{
	struct timespec ts;
	int c;

	clock_gettime(CLOCK_REALTIME, &ts);
	fz.seed = rs_env_ulong("RS_FUZZ_SEED",
			       rs_mix64(ts.tv_sec * 1000000000ULL + ts.tv_nsec +
					getpid()) & 0xffffffffffffULL);
	fz.secs = rs_env_ulong("RS_FUZZ_SECS", 30);
	fz.nthreads = rs_env_ulong("RS_FUZZ_THREADS", 3);
	fz.events = rs_env_ulong("RS_FUZZ_EVENTS", 1);
	fz.event_sec = rs_env_ulong("RS_FUZZ_EVENT_SEC", 8) ?: 1;
	fz.hang = rs_env_ulong("RS_FUZZ_HANG", 60);
	fz.settle = rs_env_ulong("RS_FUZZ_SETTLE", 60);
	fz.selfcheck = rs_env_ulong("RS_FUZZ_SELFCHECK", 0);
	fz.verbose = rs_env_ulong("RS_FUZZ_VERBOSE", 0);
	fz_weight[OP_ULPSEQ] = rs_env_ulong("RS_FUZZ_ULPSEQ", 1);
	while ((c = getopt(argc, argv, "s:t:j:Eh")) != -1) {
		switch (c) {
		case 's':
			fz.seed = strtoull(optarg, NULL, 0);
			break;
		case 't':
			fz.secs = strtoul(optarg, NULL, 0);
			break;
		case 'j':
			fz.nthreads = strtoul(optarg, NULL, 0);
			break;
		case 'E':
			fz.events = false;
			break;
		default:
			fprintf(stderr, "usage: %s [-s SEED] [-t SECONDS] [-j THREADS] [-E]\n",
				argv[0]);
			return c == 'h' ? 0 : 2;
		}
	}
	if (!fz.nthreads || fz.nthreads > FZ_MAX_THREADS)
		fz.nthreads = fz.nthreads ? FZ_MAX_THREADS : 1;
	/* the seed first, so that a run that dies can be replayed */
	printf("# fuzz_sys: seed %llu (replay: -s %llu or RS_FUZZ_SEED=%llu)\n",
	       (unsigned long long)fz.seed, (unsigned long long)fz.seed,
	       (unsigned long long)fz.seed);
	fflush(stdout);
	/* the harness's bound: the run, the join and the check of hangs */
	_syscalls_object.timeout = fz.secs + 4 * fz.hang + 120;
	_settle_unload_object.timeout = 2 * fz.settle + 120;
	_listen_vs_shutdown_object.timeout =
		rs_env_ulong("RS_FUZZ_RACE_SECS", 8) + 90;
	if (!rs.tcp) {
		fz_mod_params();
		fz_counts(&fz_base);
	}
	return test_harness_run(1, argv);
}
