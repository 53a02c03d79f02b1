// SPDX-License-Identifier: GPL-2.0
/*
 * rsbench - latency, throughput and connection-rate benchmark for stream
 * sockets: AF_RDMASTREAM, TCP (also rsockets through LD_PRELOAD) and AF_SMC.
 *
 * Only plain socket calls are used, so the same binary measures every
 * transport the same way.
 *
 *	rsbench -s [-f FAMILY] [-a ADDR] [-p PORT] [-n COUNT]
 *	rsbench -c ADDR [-f FAMILY] [-p PORT] -m lat|bw|conn|eval [options]
 *
 * Wire protocol (all integers big endian):
 *
 *   conn: client sends the single byte 'C', the server answers 'c' and
 *         closes; the client waits for that close, then closes as well.
 *
 *   lat/bw: client sends a 24 byte header
 *	u8 mode ('L' or 'B'), u8 version, u16 arg, u32 magic,
 *	u32 size, u32 flags, u64 count
 *        where arg is, for lat, the SO_BUSY_POLL us of both ends and,
 *        for bw, the client's socket timeout in seconds, which the server
 *        takes for the connection (0: its own)
 *
 *   lat: the client sends "size" bytes, the server echoes them back, until
 *        the client closes at a message boundary.
 *
 *   bw:  the client streams chunks of exactly "size" bytes. The first byte
 *        of each chunk is RSB_CHUNK_DATA, or RSB_CHUNK_LAST in the final
 *        chunk. With RSB_F_VERIFY every other byte at stream offset o is
 *        pat[o % RSB_PAT_PERIOD]. After the final chunk the server sends a
 *        64 byte reply with its byte count, receive window and CPU time:
 *	u32 magic, u32 status, u64 bytes, u64 t_first, u64 t_last,
 *	u64 thread cpu us, u64 first bad offset, u32 extension length, u32 0
 *        and then that many bytes of extension. With RSB_F_SYS (the client
 *        sets it on one connection of a run) the extension is
 *        RSB_SYS_EXT_LEN bytes of u64 fields (enum rsb_sys_field): the
 *        server host's system-wide CPU time over the receive window.
 *
 *   eval: the header carries u16 "receivers" at offset 2 and the byte
 *        budget (0: timed) in "count"; a 16 byte extension follows:
 *	u32 policy, u32 direct threshold (RSB_EV_UNSET: leave alone), u64 0.
 *        The server applies policy and threshold to the accepted socket,
 *        starts that many threads, each looping on a blocking recv() of
 *        "size" bytes into its own buffer, and answers 16 bytes:
 *	u32 magic, u32 status (0, or the errno of a failed setsockopt),
 *	u32 policy in effect, u32 threshold in effect (RSB_EV_UNSET: unknown).
 *        The client then writes "size"-byte chunks from max(1, receivers/2)
 *        threads (the outstanding sends of MacArthur and Russell) and
 *        shuts down its sending side. At end of stream the server answers
 *        with RSB_EV_REPLY_LEN bytes: u32 magic, u32 status, u32 count of
 *        u64 fields, u32 0, then the fields (enum rsb_ev_field).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <linux/rdmastream.h>

#ifndef AF_SMC
#define AF_SMC			43
#endif
#define SMCPROTO_SMC		0	/* SMC over IPv4 */
#define SMCPROTO_SMC6		1	/* SMC over IPv6 */
#ifndef IPPROTO_SMC
#define IPPROTO_SMC		256	/* AF_INET/AF_INET6 SMC socket, 6.11+ */
#endif

#define RSB_DEFAULT_PORT	"18515"
#define RSB_MAGIC		0x52534231u	/* "RSB1" */
#define RSB_VERSION		1
#define RSB_HDR_LEN		24
#define RSB_REPLY_LEN		64
#define RSB_MODE_LAT		'L'
#define RSB_MODE_BW		'B'
#define RSB_MODE_CONN		'C'
#define RSB_MODE_EVAL		'E'
#define RSB_MODE_IDLE		'I'
#define RSB_MODE_QUEUE		'Q'
#define RSB_CONN_ACK		'c'
#define RSB_F_VERIFY		(1u << 0)
#define RSB_F_SYS		(1u << 1)	/* bw: system-wide CPU, please */
#define RSB_SYS_EXT_LEN		64
#define RSB_CHUNK_DATA		0x00
#define RSB_CHUNK_LAST		0xee
#define RSB_PAT_PERIOD		251
#define RSB_MAX_SIZE		(64u << 20)
#define RSB_MAX_CONNS		1024
#define RSB_RX_BUF		(128u << 10)
#define RSB_EV_EXT_LEN		16
#define RSB_EV_READY_LEN	16
#define RSB_EV_NFIELDS		32
#define RSB_EV_REPLY_LEN	(16 + 8 * RSB_EV_NFIELDS)
#define RSB_EV_UNSET		0xffffffffu
#define RSB_MAX_RECVS		64
#define RSB_Q_REPLY_LEN		16
#define RSB_Q_QUIET_MS		1000	/* queue: stuck after this long */
#define RSB_Q_MAX		(64ull << 20)	/* queue: stop there */
#define RSB_LOADED_MAX		(1u << 20)	/* bw -Y: samples kept */
#define PF_KTHREAD_FLAG		0x00200000u	/* PF_KTHREAD in /proc/PID/stat */

#define NSEC_PER_SEC		1000000000ull
#define GIB			(1024.0 * 1024.0 * 1024.0)

enum rsb_family { FAM_RDMASTREAM, FAM_TCP, FAM_SMC, FAM_SMC_IPPROTO };

static struct {
	enum rsb_family fam;
	const char *fam_name;
	int rs_domain;			/* AF_RDMASTREAM, or -F override */
	const char *label;
	int server;
	int client;
	const char *addr;
	const char *port;
	int mode;
	uint64_t size;
	uint64_t iters;
	double seconds;
	uint64_t total;
	int conns;
	long count;
	long warmup;			/* -1: automatic */
	int timeout;
	int deadline;
	int csv;
	int csv_header;
	int verbose;
	int verify;
	int policy;			/* RDMASTREAM_POLICY_*, -1: leave alone */
	long threshold;			/* RDMASTREAM_DIRECT_THRESHOLD, -1: same */
	size_t rxbuf;			/* lat: recv() buffer, 0: the message */
	int recvs;			/* eval: outstanding receives */
	int busy;			/* lat: SO_BUSY_POLL us, 0: not set */
	int loaded;			/* bw: -Y, a 64 B ping-pong alongside */
	uint32_t hold_ms;		/* queue: the server reads after this */
	int bufsz;			/* -W: SO_SNDBUF and SO_RCVBUF, 0: auto */
} opt = {
	.fam = FAM_RDMASTREAM,
	.fam_name = "rdmastream",
	.rs_domain = AF_RDMASTREAM,
	.port = RSB_DEFAULT_PORT,
	.mode = RSB_MODE_LAT,
	.size = 64,
	.iters = 10000,
	.conns = 1,
	.warmup = -1,
	.timeout = 30,
	.policy = -1,
	.threshold = -1,
	.recvs = 1,
	.hold_ms = 8000,
};

static const char *prog = "rsbench";

/* ---------------------------------------------------------------------- */
/* helpers                                                                */

static void errmsg(const char *fmt, ...)
	__attribute__((format(printf, 1, 2)));

static void errmsg(const char *fmt, ...)
{
	char line[512];
	va_list ap;
	int n;

	n = snprintf(line, sizeof(line), "%s: ", prog);
	va_start(ap, fmt);
	vsnprintf(line + n, sizeof(line) - n, fmt, ap);
	va_end(ap);
	/* one write per message so lines from threads do not interleave */
	fprintf(stderr, "%s\n", line);
}

static void __attribute__((noreturn, format(printf, 1, 2)))
die(const char *fmt, ...)
{
	char line[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	errmsg("%s", line);
	exit(1);
}

static const char *io_strerror(int err)
{
	if (err == EAGAIN || err == EWOULDBLOCK)
		return "timed out (no progress within SO_RCVTIMEO/SO_SNDTIMEO)";
	return strerror(err);
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * NSEC_PER_SEC + ts.tv_nsec;
}

static uint64_t cpu_us(int who)
{
	struct rusage ru;

	if (getrusage(who, &ru))
		return 0;
	return (uint64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000 +
	       ru.ru_utime.tv_usec + ru.ru_stime.tv_usec;
}

static void rusage_us(uint64_t *user, uint64_t *sys)
{
	struct rusage ru;

	*user = *sys = 0;
	if (getrusage(RUSAGE_SELF, &ru))
		return;
	*user = (uint64_t)ru.ru_utime.tv_sec * 1000000 + ru.ru_utime.tv_usec;
	*sys = (uint64_t)ru.ru_stime.tv_sec * 1000000 + ru.ru_stime.tv_usec;
}

/*
 * System-wide CPU time from /proc: rxe and the module do much of their
 * work in softirq context and in kernel threads, which getrusage() of the
 * benchmark process does not see (or sees only when the softirq happened
 * to run on top of it). Counted in clock ticks:
 *   busy     all non-idle time of all CPUs (user nice system irq softirq
 *            steal of the "cpu" line of /proc/stat)
 *   softirq  the softirq column of that line, wherever it ran
 *   kthread  utime + stime of kernel threads other than ksoftirqd/N
 *            (whose time is softirq time already): workqueues, rxe ...
 * A kernel thread that exits during the window loses its share.
 */
struct kt_ent {
	int pid;
	uint64_t start;			/* starttime: tells reused pids apart */
	uint64_t ticks;
};

struct sys_snap {
	int ok;
	uint64_t busy, softirq;
	struct kt_ent *kt;
	size_t nkt;
};

struct sys_delta {
	int ok;
	uint64_t busy_us, softirq_us, kthread_us;
};

static int read_proc_stat(uint64_t *busy, uint64_t *softirq)
{
	unsigned long long v[8] = { 0 };
	FILE *f = fopen("/proc/stat", "r");
	int n;

	if (!f)
		return -1;
	n = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0],
		   &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7]);
	fclose(f);
	if (n < 7)
		return -1;
	/* user nice system [idle iowait] irq softirq steal */
	*busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7];
	*softirq = v[6];
	return 0;
}

static int cmp_kt(const void *a, const void *b)
{
	const struct kt_ent *x = a, *y = b;

	return x->pid < y->pid ? -1 : x->pid > y->pid;
}

/* kernel threads except ksoftirqd, sorted by pid */
static int scan_kthreads(struct kt_ent **out, size_t *nout)
{
	struct kt_ent *v = NULL;
	size_t n = 0, cap = 0;
	struct dirent *de;
	DIR *d;

	d = opendir("/proc");
	if (!d)
		return -1;
	while ((de = readdir(d))) {
		char path[64], buf[1024], *rp, *s, *end;
		unsigned long long f[23] = { 0 };
		int pid, k, fd;
		ssize_t len;

		if (de->d_name[0] < '1' || de->d_name[0] > '9')
			continue;
		pid = atoi(de->d_name);
		snprintf(path, sizeof(path), "/proc/%d/stat", pid);
		fd = open(path, O_RDONLY);
		if (fd < 0)
			continue;
		len = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		if (len <= 0)
			continue;
		buf[len] = 0;
		rp = strrchr(buf, ')');
		s = strchr(buf, '(');
		if (!rp || !s || rp[1] != ' ')
			continue;
		if (!strncmp(s + 1, "ksoftirqd/", 10))
			continue;
		/* fields from 3 (state, a letter) on, separated by spaces */
		s = rp + 2;
		for (k = 3; k <= 22 && *s; k++) {
			if (k == 3) {
				s++;
			} else {
				f[k] = strtoull(s, &end, 10);
				if (end == s)
					break;
				s = end;
			}
			while (*s == ' ')
				s++;
		}
		if (k <= 22 || !(f[9] & PF_KTHREAD_FLAG))
			continue;
		if (n == cap) {
			struct kt_ent *nv;

			cap = cap ? 2 * cap : 256;
			nv = realloc(v, cap * sizeof(*v));
			if (!nv) {
				free(v);
				closedir(d);
				return -1;
			}
			v = nv;
		}
		v[n].pid = pid;
		v[n].start = f[22];
		v[n].ticks = f[14] + f[15];
		n++;
	}
	closedir(d);
	qsort(v, n, sizeof(*v), cmp_kt);
	*out = v;
	*nout = n;
	return 0;
}

static void sys_begin(struct sys_snap *s)
{
	memset(s, 0, sizeof(*s));
	if (read_proc_stat(&s->busy, &s->softirq) ||
	    scan_kthreads(&s->kt, &s->nkt))
		return;
	s->ok = 1;
}

static void sys_end(struct sys_snap *s, struct sys_delta *d)
{
	uint64_t busy, softirq, kt = 0;
	struct kt_ent *v = NULL;
	size_t n = 0, i;
	double us_per_tick = 1e6 / sysconf(_SC_CLK_TCK);

	memset(d, 0, sizeof(*d));
	if (s->ok && !read_proc_stat(&busy, &softirq) &&
	    !scan_kthreads(&v, &n)) {
		for (i = 0; i < n; i++) {
			struct kt_ent *o = bsearch(&v[i], s->kt, s->nkt,
						   sizeof(*o), cmp_kt);

			if (!o || o->start != v[i].start)
				kt += v[i].ticks;	/* started since */
			else if (v[i].ticks > o->ticks)
				kt += v[i].ticks - o->ticks;
		}
		d->ok = 1;
		d->busy_us = (busy - s->busy) * us_per_tick;
		d->softirq_us = (softirq - s->softirq) * us_per_tick;
		d->kthread_us = kt * us_per_tick;
	}
	free(v);
	free(s->kt);
	s->kt = NULL;
}

static void put_u16(uint8_t *p, uint16_t v)
{
	p[0] = v >> 8;
	p[1] = v;
}

static void put_u32(uint8_t *p, uint32_t v)
{
	put_u16(p, v >> 16);
	put_u16(p + 2, v);
}

static void put_u64(uint8_t *p, uint64_t v)
{
	put_u32(p, v >> 32);
	put_u32(p + 4, v);
}

static uint16_t get_u16(const uint8_t *p)
{
	return (uint16_t)p[0] << 8 | p[1];
}

static uint32_t get_u32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	       (uint32_t)p[2] << 8 | p[3];
}

static uint64_t get_u64(const uint8_t *p)
{
	return (uint64_t)get_u32(p) << 32 | get_u32(p + 4);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* nearest-rank percentile of a sorted array, in microseconds */
static double pct_us(const uint64_t *v, uint64_t n, double p)
{
	uint64_t rank = (uint64_t)((p / 100.0) * n + 0.999999);

	if (rank < 1)
		rank = 1;
	if (rank > n)
		rank = n;
	return v[rank - 1] / 1000.0;
}

static uint8_t *make_pattern(size_t len)
{
	uint8_t *pat = malloc(len + RSB_PAT_PERIOD);
	size_t i;

	if (!pat)
		die("out of memory");
	for (i = 0; i < len + RSB_PAT_PERIOD; i++)
		pat[i] = (i % RSB_PAT_PERIOD) * 7 + 1;
	return pat;
}

/* ---------------------------------------------------------------------- */
/* I/O with short-read/short-write loops                                  */


/* Returns 0 or -1 with errno. */
static int write_full(int fd, const void *buf, size_t len)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n = send(fd, (const char *)buf + done, len - done, 0);

		if (n > 0) {
			done += n;
			continue;
		}
		if (n == 0) {
			errno = EIO;
			return -1;
		}
		if (errno == EINTR)
			continue;
		return -1;
	}
	return 0;
}

/* read exactly len bytes; describe any failure as "what" */
/*
 * Read one len-byte message with recv()s offering cap bytes (at least
 * len), as an application reading into a large buffer does; only in
 * ping-pong, where nothing follows the message until it is answered.
 */
static ssize_t read_msg(int fd, void *buf, size_t len, size_t cap)
{
	size_t done = 0;

	if (cap < len)
		cap = len;
	while (done < len) {
		ssize_t n = recv(fd, (char *)buf + done, cap - done, 0);

		if (n > 0) {
			done += n;
			continue;
		}
		if (n == 0)
			break;
		if (errno == EINTR)
			continue;
		return -1;
	}
	return done;
}

/* Returns the number of bytes read (< len only at EOF) or -1 with errno. */
static ssize_t read_full(int fd, void *buf, size_t len)
{
	return read_msg(fd, buf, len, len);
}

static int read_exact(int fd, void *buf, size_t len, const char *what)
{
	ssize_t n = read_full(fd, buf, len);

	if (n < 0) {
		errmsg("recv %s: %s", what, io_strerror(errno));
		return -1;
	}
	if ((size_t)n < len) {
		errmsg("recv %s: peer closed the connection (%zd of %zu bytes)",
		       what, n, len);
		return -1;
	}
	return 0;
}

static int write_exact(int fd, const void *buf, size_t len, const char *what)
{
	if (write_full(fd, buf, len)) {
		errmsg("send %s: %s", what, io_strerror(errno));
		return -1;
	}
	return 0;
}

/* ---------------------------------------------------------------------- */
/* sockets                                                                */

static int resolve(const char *host, const char *port, int passive,
		   struct sockaddr_storage *ss, socklen_t *len)
{
	struct addrinfo hints = {
		.ai_family = AF_UNSPEC,
		.ai_socktype = SOCK_STREAM,
		.ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0),
	};
	struct addrinfo *res;
	int err;

	err = getaddrinfo(host, port, &hints, &res);
	if (err) {
		errmsg("cannot resolve %s port %s: %s", host ? host : "*",
		       port, gai_strerror(err));
		return -1;
	}
	memcpy(ss, res->ai_addr, res->ai_addrlen);
	*len = res->ai_addrlen;
	freeaddrinfo(res);
	return 0;
}

static const char *addr_str(const struct sockaddr_storage *ss, char *buf,
			    size_t len)
{
	char host[INET6_ADDRSTRLEN] = "?";
	int port = 0;

	if (ss->ss_family == AF_INET) {
		const struct sockaddr_in *sin = (const void *)ss;

		inet_ntop(AF_INET, &sin->sin_addr, host, sizeof(host));
		port = ntohs(sin->sin_port);
	} else if (ss->ss_family == AF_INET6) {
		const struct sockaddr_in6 *sin6 = (const void *)ss;

		inet_ntop(AF_INET6, &sin6->sin6_addr, host, sizeof(host));
		port = ntohs(sin6->sin6_port);
	}
	snprintf(buf, len, ss->ss_family == AF_INET6 ? "[%s]:%d" : "%s:%d",
		 host, port);
	return buf;
}

static int open_socket(int sa_family)
{
	int domain, proto = 0, fd;
	const char *dname;

	switch (opt.fam) {
	case FAM_RDMASTREAM:
		domain = opt.rs_domain;
		dname = "AF_RDMASTREAM";
		break;
	case FAM_SMC:
		domain = AF_SMC;
		proto = sa_family == AF_INET6 ? SMCPROTO_SMC6 : SMCPROTO_SMC;
		dname = "AF_SMC";
		break;
	case FAM_SMC_IPPROTO:
		/* the same SMC socket, reached through the inet family */
		domain = sa_family;
		proto = IPPROTO_SMC;
		dname = sa_family == AF_INET6 ? "AF_INET6" : "AF_INET";
		break;
	default:
		domain = sa_family;
		dname = sa_family == AF_INET6 ? "AF_INET6" : "AF_INET";
		break;
	}

	fd = socket(domain, SOCK_STREAM, proto);
	if (fd >= 0)
		return fd;

	if (errno == EAFNOSUPPORT && opt.fam == FAM_RDMASTREAM)
		errmsg("socket(AF_RDMASTREAM=%d, SOCK_STREAM, 0): %s: is the rdmastream module loaded? (modprobe rdmastream / insmod rdmastream.ko)",
		       domain, strerror(errno));
	else if (errno == EAFNOSUPPORT && opt.fam == FAM_SMC)
		errmsg("socket(AF_SMC=%d, SOCK_STREAM, %d): %s: is the smc module loaded? (modprobe smc)",
		       domain, proto, strerror(errno));
	else if (errno == EPROTONOSUPPORT && opt.fam == FAM_SMC_IPPROTO)
		errmsg("socket(%s=%d, SOCK_STREAM, IPPROTO_SMC=%d): %s: the kernel has no IPPROTO_SMC (6.11+) or the smc module is not loaded (modprobe smc)",
		       dname, domain, proto, strerror(errno));
	else
		errmsg("socket(%s=%d, SOCK_STREAM, %d): %s", dname, domain,
		       proto, strerror(errno));
	return -1;
}

static void set_timeouts_s(int fd, int secs)
{
	static int warned;
	struct timeval tv = { .tv_sec = secs };

	if (!secs)
		return;
	if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) ||
	    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv))) {
		if (!__atomic_exchange_n(&warned, 1, __ATOMIC_RELAXED))
			errmsg("warning: SO_RCVTIMEO/SO_SNDTIMEO: %s (relying on the overall -A deadline)",
			       strerror(errno));
	}
}

static void set_timeouts(int fd)
{
	set_timeouts_s(fd, opt.timeout);
}

static void set_nodelay(int fd)
{
	int one = 1;

	/* only TCP knows TCP_NODELAY; SMC passes it to its TCP socket */
	if (opt.fam != FAM_RDMASTREAM)
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

/* SO_BUSY_POLL: spin this long in a receive before sleeping */
static int set_busy(int fd, int usec, const char *who)
{
	if (!usec)
		return 0;
	if (setsockopt(fd, SOL_SOCKET, SO_BUSY_POLL, &usec, sizeof(usec))) {
		errmsg("%s: setsockopt(SO_BUSY_POLL, %d): %s", who, usec,
		       strerror(errno));
		return -1;
	}
	return 0;
}

/* -W: fixed socket buffers (no autotuning); listeners pass them on */
static int set_bufs(int fd, const char *who)
{
	if (!opt.bufsz)
		return 0;
	if (setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &opt.bufsz,
		       sizeof(opt.bufsz)) ||
	    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &opt.bufsz,
		       sizeof(opt.bufsz))) {
		errmsg("%s: setsockopt(SO_SNDBUF/SO_RCVBUF, %d): %s", who,
		       opt.bufsz, strerror(errno));
		return -1;
	}
	return 0;
}

static const char *policy_name(long p)
{
	switch (p) {
	case RDMASTREAM_POLICY_DYNAMIC:
		return "dynamic";
	case RDMASTREAM_POLICY_DIRECT_ONLY:
		return "direct";
	case RDMASTREAM_POLICY_INDIRECT_ONLY:
		return "indirect";
	case -1:
		return "default";
	}
	return "unknown";
}

static int parse_policy(const char *s)
{
	if (!strcmp(s, "dynamic"))
		return RDMASTREAM_POLICY_DYNAMIC;
	if (!strcmp(s, "direct") || !strcmp(s, "direct-only") ||
	    !strcmp(s, "direct_only"))
		return RDMASTREAM_POLICY_DIRECT_ONLY;
	if (!strcmp(s, "indirect") || !strcmp(s, "indirect-only") ||
	    !strcmp(s, "indirect_only"))
		return RDMASTREAM_POLICY_INDIRECT_ONLY;
	return -1;
}

/*
 * RDMASTREAM_POLICY and RDMASTREAM_DIRECT_THRESHOLD (-1: leave alone).
 * Other families have no such options: nothing to do. Returns 0 or an
 * errno; a policy that was asked for and cannot be set is an error, since
 * the results would be labelled with a policy that was not in effect.
 */
static int apply_rs_opts(int fd, long policy, long threshold, const char *who)
{
	int v;

	if (opt.fam != FAM_RDMASTREAM)
		return 0;
	if (policy >= 0) {
		v = policy;
		if (setsockopt(fd, SOL_RDMASTREAM, RDMASTREAM_POLICY, &v,
			       sizeof(v))) {
			int e = errno;

			errmsg("%s: setsockopt(SOL_RDMASTREAM, RDMASTREAM_POLICY, %s): %s%s",
			       who, policy_name(policy), strerror(e),
			       e == ENOPROTOOPT ?
			       " (the loaded module has no transfer policies)" : "");
			return e;
		}
	}
	if (threshold >= 0) {
		v = threshold;
		if (setsockopt(fd, SOL_RDMASTREAM, RDMASTREAM_DIRECT_THRESHOLD,
			       &v, sizeof(v))) {
			int e = errno;

			errmsg("%s: setsockopt(SOL_RDMASTREAM, RDMASTREAM_DIRECT_THRESHOLD, %d): %s",
			       who, v, strerror(e));
			return e;
		}
	}
	return 0;
}

/* RDMASTREAM_INFO, remembering how much of it the module filled in */
struct rsb_info {
	int ok;
	socklen_t len;
	struct rdmastream_info i;
};

#define RSI_HAS(inf, f)	((inf)->ok && (inf)->len >= \
			 offsetof(struct rdmastream_info, f) + sizeof((inf)->i.f))
#define RSI_DELTA(a, b, f)	((uint64_t)((b)->i.f - (a)->i.f))

static void get_info(int fd, struct rsb_info *inf)
{
	memset(inf, 0, sizeof(*inf));
	if (opt.fam != FAM_RDMASTREAM)
		return;
	inf->len = sizeof(inf->i);
	if (getsockopt(fd, SOL_RDMASTREAM, RDMASTREAM_INFO, &inf->i,
		       &inf->len)) {
		errmsg("getsockopt(RDMASTREAM_INFO): %s", strerror(errno));
		inf->len = 0;
		return;
	}
	inf->ok = 1;
}

static int client_connect(const struct sockaddr_storage *ss, socklen_t len)
{
	char abuf[80];
	int fd;

	fd = open_socket(ss->ss_family);
	if (fd < 0)
		return -1;
	set_timeouts(fd);
	set_nodelay(fd);
	if (set_bufs(fd, "client") ||
	    apply_rs_opts(fd, opt.policy, opt.threshold, "client")) {
		close(fd);
		return -1;
	}
	while (connect(fd, (const struct sockaddr *)ss, len)) {
		if (errno == EINTR)
			continue;
		errmsg("connect to %s (%s): %s", addr_str(ss, abuf, sizeof(abuf)),
		       opt.fam_name, errno == EINPROGRESS ?
		       "timed out (SO_SNDTIMEO)" : strerror(errno));
		close(fd);
		return -1;
	}
	return fd;
}

static void dump_rs_info(int fd, const char *who)
{
	struct rdmastream_info i;
	socklen_t len = sizeof(i);

	if (opt.fam != FAM_RDMASTREAM || !opt.verbose)
		return;
	memset(&i, 0, sizeof(i));
	if (getsockopt(fd, SOL_RDMASTREAM, RDMASTREAM_INFO, &i, &len)) {
		errmsg("%s: getsockopt(RDMASTREAM_INFO): %s", who,
		       strerror(errno));
		return;
	}
	errmsg("%s: state %u flags %#x rx_ring %u tx_ring %u peer_ring %u credits %u max_inline %u sent %llu acked %llu received %llu read %llu writes %llu inline %llu ctrl_tx %llu ctrl_rx %llu win_stalls %llu credit_stalls %llu completions %llu",
	       who, i.rsi_state, i.rsi_flags, i.rsi_rx_ring, i.rsi_tx_ring,
	       i.rsi_peer_ring, i.rsi_credits, i.rsi_max_inline,
	       (unsigned long long)i.rsi_bytes_sent,
	       (unsigned long long)i.rsi_bytes_acked,
	       (unsigned long long)i.rsi_bytes_received,
	       (unsigned long long)i.rsi_bytes_read,
	       (unsigned long long)i.rsi_writes,
	       (unsigned long long)i.rsi_inline_writes,
	       (unsigned long long)i.rsi_ctrl_sent,
	       (unsigned long long)i.rsi_ctrl_received,
	       (unsigned long long)i.rsi_window_stalls,
	       (unsigned long long)i.rsi_credit_stalls,
	       (unsigned long long)i.rsi_completions);
}

/* ---------------------------------------------------------------------- */
/* server                                                                 */

struct srv_conn {
	int fd;
	struct sockaddr_storage peer;
};

static pthread_mutex_t srv_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t srv_cond = PTHREAD_COND_INITIALIZER;
static int srv_active;
static int srv_failures;

static int srv_lat(int fd, const char *peer, uint32_t size)
{
	uint64_t n = 0;
	uint8_t *buf;
	int ret = -1;

	buf = malloc(size > opt.rxbuf ? size : opt.rxbuf);
	if (!buf) {
		errmsg("%s: out of memory", peer);
		return -1;
	}
	for (;;) {
		ssize_t r = read_msg(fd, buf, size, opt.rxbuf);

		if (r == 0) {
			ret = 0;		/* client done */
			break;
		}
		if (r < 0) {
			errmsg("%s: lat: recv after %llu messages: %s", peer,
			       (unsigned long long)n, io_strerror(errno));
			break;
		}
		if ((size_t)r < size) {
			errmsg("%s: lat: peer closed in the middle of message %llu (%zd of %u bytes)",
			       peer, (unsigned long long)n, r, size);
			break;
		}
		if (write_full(fd, buf, size)) {
			errmsg("%s: lat: send of message %llu: %s", peer,
			       (unsigned long long)n, io_strerror(errno));
			break;
		}
		n++;
	}
	if (!ret && opt.verbose)
		errmsg("%s: lat %u B: echoed %llu messages", peer, size,
		       (unsigned long long)n);
	free(buf);
	return ret;
}

/*
 * queue: read nothing for the hold the client asked for, so that its
 * writes pile up in the transport, then drain to the end of the stream,
 * checking every byte against the pattern, and answer with the count.
 */
static int srv_queue(int fd, const char *peer, uint32_t hold_ms)
{
	struct timespec ts = {
		.tv_sec = hold_ms / 1000,
		.tv_nsec = (hold_ms % 1000) * 1000000L,
	};
	uint64_t got = 0, bad = UINT64_MAX;
	uint8_t reply[RSB_Q_REPLY_LEN], *buf, *pat;
	int ret = -1;

	buf = malloc(RSB_RX_BUF);
	pat = make_pattern(RSB_RX_BUF);
	if (!buf) {
		errmsg("%s: out of memory", peer);
		free(pat);
		return -1;
	}
	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
	for (;;) {
		ssize_t n = recv(fd, buf, RSB_RX_BUF, 0);

		if (n == 0)
			break;
		if (n < 0) {
			if (errno == EINTR)
				continue;
			errmsg("%s: queue: recv after %llu bytes: %s", peer,
			       (unsigned long long)got, io_strerror(errno));
			goto out;
		}
		if (bad == UINT64_MAX &&
		    memcmp(buf, pat + got % RSB_PAT_PERIOD, n)) {
			ssize_t i = 0;

			while (buf[i] == pat[(got + i) % RSB_PAT_PERIOD])
				i++;
			bad = got + i;
		}
		got += n;
	}
	put_u32(reply, RSB_MAGIC);
	put_u32(reply + 4, bad != UINT64_MAX);
	put_u64(reply + 8, got);
	if (write_exact(fd, reply, sizeof(reply), "queue reply"))
		goto out;
	if (bad != UINT64_MAX)
		errmsg("%s: queue: stream differs from what was sent at offset %llu",
		       peer, (unsigned long long)bad);
	else
		ret = 0;
out:
	free(pat);
	free(buf);
	return ret;
}

/* bw reply extension with RSB_F_SYS: u64 each */
enum rsb_sys_field {
	SYS_OK,			/* 1: the next three are valid */
	SYS_SOFTIRQ_US,
	SYS_KTHREAD_US,
	SYS_BUSY_US,
	SYS_PROC_US,		/* getrusage(RUSAGE_SELF) user + system */
	SYS_COUNT
};

static int srv_bw(int fd, const char *peer, uint32_t size, uint32_t flags)
{
	size_t bufsz = size > RSB_RX_BUF ? size : RSB_RX_BUF;
	int verify = flags & RSB_F_VERIFY, want_sys = flags & RSB_F_SYS;
	uint64_t off = 0, t0, t1, cpu0, cpu1, bad_off = 0, p0 = 0, p1 = 0;
	uint8_t reply[RSB_REPLY_LEN + RSB_SYS_EXT_LEN];
	int in_last = 0, done = 0, bad = 0, ret = -1, k;
	uint32_t status = 0;
	uint8_t *buf, *pat = NULL;
	struct sys_snap snap;
	struct sys_delta sd;

	memset(&snap, 0, sizeof(snap));
	memset(&sd, 0, sizeof(sd));
	buf = malloc(bufsz);
	if (!buf) {
		errmsg("%s: out of memory", peer);
		return -1;
	}
	if (verify)
		pat = make_pattern(bufsz);

	if (want_sys) {
		sys_begin(&snap);
		p0 = cpu_us(RUSAGE_SELF);
	}
	cpu0 = cpu_us(RUSAGE_THREAD);
	t0 = now_ns();
	while (!done) {
		ssize_t n = recv(fd, buf, bufsz, 0);
		size_t i = 0;

		if (n < 0) {
			if (errno == EINTR)
				continue;
			errmsg("%s: bw: recv after %llu bytes: %s", peer,
			       (unsigned long long)off, io_strerror(errno));
			goto out;
		}
		if (n == 0) {
			errmsg("%s: bw: peer closed after %llu bytes without sending the final chunk",
			       peer, (unsigned long long)off);
			goto out;
		}
		while (i < (size_t)n) {
			uint64_t pos = off % size;
			size_t seg;

			if (pos == 0) {
				uint8_t c = buf[i];

				if (in_last || (c != RSB_CHUNK_DATA &&
						c != RSB_CHUNK_LAST)) {
					errmsg("%s: bw: stream corrupted: chunk marker %#x at offset %llu%s",
					       peer, c, (unsigned long long)off,
					       in_last ? " after the final chunk" : "");
					status = 2;
					done = 1;
					break;
				}
				in_last = c == RSB_CHUNK_LAST;
				i++;
				off++;
				continue;
			}
			seg = n - i;
			if (seg > size - pos)
				seg = size - pos;
			if (verify && !bad &&
			    memcmp(buf + i, pat + off % RSB_PAT_PERIOD, seg)) {
				size_t k;

				for (k = 0; k < seg; k++)
					if (buf[i + k] !=
					    pat[(off + k) % RSB_PAT_PERIOD])
						break;
				bad = 1;
				bad_off = off + k;
			}
			i += seg;
			off += seg;
		}
		if (in_last && off % size == 0)
			done = 1;
	}
	t1 = now_ns();
	cpu1 = cpu_us(RUSAGE_THREAD);
	if (want_sys) {
		p1 = cpu_us(RUSAGE_SELF);
		sys_end(&snap, &sd);
	}

	if (bad) {
		errmsg("%s: bw: data verification FAILED: first bad byte at stream offset %llu",
		       peer, (unsigned long long)bad_off);
		status = status ? status : 1;
	}

	memset(reply, 0, sizeof(reply));
	put_u32(reply, RSB_MAGIC);
	put_u32(reply + 4, status);
	put_u64(reply + 8, off);
	put_u64(reply + 16, t0);
	put_u64(reply + 24, t1);
	put_u64(reply + 32, cpu1 - cpu0);
	put_u64(reply + 40, bad_off);
	if (want_sys) {
		uint64_t f[SYS_COUNT] = {
			[SYS_OK] = sd.ok,
			[SYS_SOFTIRQ_US] = sd.softirq_us,
			[SYS_KTHREAD_US] = sd.kthread_us,
			[SYS_BUSY_US] = sd.busy_us,
			[SYS_PROC_US] = p1 - p0,
		};

		put_u32(reply + 48, RSB_SYS_EXT_LEN);
		for (k = 0; k < SYS_COUNT; k++)
			put_u64(reply + RSB_REPLY_LEN + 8 * k, f[k]);
	}
	if (write_exact(fd, reply, RSB_REPLY_LEN +
			(want_sys ? RSB_SYS_EXT_LEN : 0), "bw reply"))
		goto out;
	dump_rs_info(fd, peer);
	if (opt.verbose && !status)
		errmsg("%s: bw %u B: %llu bytes in %.3f s = %.1f MB/s, cpu %.3f s",
		       peer, size, (unsigned long long)off, (t1 - t0) / 1e9,
		       off / ((t1 - t0) / 1e3), (cpu1 - cpu0) / 1e6);
	/* wait for the client to close so that it has read the reply */
	read_full(fd, buf, 1);
	ret = status ? -1 : 0;
out:
	free(snap.kt);
	free(pat);
	free(buf);
	return ret;
}

/* fields of the eval reply, u64 each */
enum rsb_ev_field {
	EV_BYTES,		/* bytes received */
	EV_WIN_NS,		/* "ready" sent .. last byte received */
	EV_FIRST_NS,		/* "ready" sent .. first byte received */
	EV_EOF_NS,		/* "ready" sent .. every receiver done */
	EV_USER_US,		/* getrusage(RUSAGE_SELF), over .. EOF */
	EV_SYS_US,
	EV_SYS_OK,		/* 1: the three system-wide values are valid */
	EV_SOFTIRQ_US,
	EV_KTHREAD_US,
	EV_BUSY_US,
	EV_INFO,		/* 1: RDMASTREAM_INFO, 3: with direct counters */
	EV_POLICY,		/* in effect, or RSB_EV_UNSET */
	EV_DIRECT_RX,		/* the rest: RDMASTREAM_INFO deltas */
	EV_INDIRECT_RX,
	EV_ADV_SENT,
	EV_ADV_FILLED,
	EV_ADV_DEAD,
	EV_ADV_CANCELLED,
	EV_RX_SWITCHES,
	EV_CALLS,		/* recv() calls that returned data */
	EV_NUDGED,		/* receivers woken by a signal after EOF */
	EV_COUNT
};

struct ev_rx {
	int fd;
	int idx;
	size_t size;
	pthread_t th;
	pthread_barrier_t *start;
	uint64_t bytes, calls, t_first, t_last;
	int err;
	int eof;
	int nudged;
	int done;
};

static pthread_mutex_t ev_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t ev_cond = PTHREAD_COND_INITIALIZER;

static void ev_mark_done(struct ev_rx *r)
{
	pthread_mutex_lock(&ev_lock);
	r->done = 1;
	pthread_cond_broadcast(&ev_cond);
	pthread_mutex_unlock(&ev_lock);
}

/* one outstanding receive: blocking recv()s of "size" bytes, one by one */
static void *ev_rx_thread(void *arg)
{
	struct ev_rx *r = arg;
	uint8_t *buf = malloc(r->size);

	if (buf)
		memset(buf, 0, r->size);	/* fault the pages in now */
	pthread_barrier_wait(r->start);
	if (!buf) {
		r->err = ENOMEM;
		ev_mark_done(r);
		return NULL;
	}
	for (;;) {
		ssize_t n = recv(r->fd, buf, r->size, 0);
		uint64_t t;

		if (n > 0) {
			t = now_ns();
			if (!r->t_first)
				r->t_first = t;
			r->t_last = t;
			r->bytes += n;
			r->calls++;
			continue;
		}
		if (n == 0) {
			r->eof = 1;
			break;
		}
		if (errno == EINTR) {
			if (__atomic_load_n(&r->nudged, __ATOMIC_ACQUIRE))
				break;
			continue;
		}
		r->err = errno;
		break;
	}
	free(buf);
	ev_mark_done(r);
	return NULL;
}

static void on_nudge(int sig)
{
	(void)sig;
}

static int srv_eval(int fd, const char *peer, const uint8_t *hdr)
{
	uint32_t size = get_u32(hdr + 8), nrx = hdr[2] << 8 | hdr[3];
	uint32_t policy, threshold, status = 0;
	uint8_t ext[RSB_EV_EXT_LEN], ready[RSB_EV_READY_LEN];
	uint8_t reply[RSB_EV_REPLY_LEN];
	uint64_t f[RSB_EV_NFIELDS] = { 0 };
	uint64_t t0, t_end, t_first = 0, t_last = 0, u0, s0, u1, s1, deadline;
	struct rsb_info i0, i1;
	struct sys_snap snap;
	struct sys_delta sd;
	pthread_barrier_t start;
	struct ev_rx *rx;
	long pol, thr;
	uint32_t k;
	int ret = -1, err, all, eof_seen;

	if (read_exact(fd, ext, sizeof(ext), "eval request"))
		return -1;
	if (nrx < 1 || nrx > RSB_MAX_RECVS) {
		errmsg("%s: eval: bad number of receivers %u", peer, nrx);
		return -1;
	}
	policy = get_u32(ext);
	threshold = get_u32(ext + 4);
	/* the client's choice, else this server's own -d/-X */
	pol = policy != RSB_EV_UNSET ? (long)policy : opt.policy;
	thr = threshold != RSB_EV_UNSET ? (long)threshold : opt.threshold;
	status = apply_rs_opts(fd, pol, thr, peer);

	get_info(fd, &i0);
	memset(ready, 0, sizeof(ready));
	put_u32(ready, RSB_MAGIC);
	put_u32(ready + 4, status);
	put_u32(ready + 8, RSI_HAS(&i0, rsi_policy) ? i0.i.rsi_policy :
			   RSB_EV_UNSET);
	put_u32(ready + 12, RSI_HAS(&i0, rsi_direct_threshold) ?
			    i0.i.rsi_direct_threshold : RSB_EV_UNSET);
	if (status) {
		write_exact(fd, ready, sizeof(ready), "eval ready");
		return -1;
	}

	rx = calloc(nrx, sizeof(*rx));
	if (!rx) {
		errmsg("%s: out of memory", peer);
		return -1;
	}
	pthread_barrier_init(&start, NULL, nrx + 1);
	for (k = 0; k < nrx; k++) {
		rx[k].fd = fd;
		rx[k].idx = k;
		rx[k].size = size;
		rx[k].start = &start;
		err = pthread_create(&rx[k].th, NULL, ev_rx_thread, &rx[k]);
		if (err) {
			/* cannot happen at these numbers; do not limp on */
			die("%s: pthread_create: %s", peer, strerror(err));
		}
	}
	pthread_barrier_wait(&start);
	/* let the receivers reach recv() before the client starts */
	usleep(20000);

	sys_begin(&snap);
	rusage_us(&u0, &s0);
	t0 = now_ns();
	if (write_exact(fd, ready, sizeof(ready), "eval ready"))
		status = EIO;

	/*
	 * Wait for every receiver. All of them should see end of stream
	 * together; if some do not within a few seconds of the first, wake
	 * them with a signal (and say so: that is worth a look).
	 */
	deadline = 0;
	pthread_mutex_lock(&ev_lock);
	for (;;) {
		struct timespec ts;

		all = 1;
		eof_seen = 0;
		for (k = 0; k < nrx; k++) {
			if (!rx[k].done)
				all = 0;
			else if (rx[k].eof || rx[k].err)
				eof_seen = 1;
		}
		if (all)
			break;
		if ((eof_seen || status) && !deadline)
			deadline = now_ns() + 3 * NSEC_PER_SEC;
		if (deadline && now_ns() >= deadline) {
			for (k = 0; k < nrx; k++) {
				if (rx[k].done)
					continue;
				__atomic_store_n(&rx[k].nudged, 1,
						 __ATOMIC_RELEASE);
				pthread_kill(rx[k].th, SIGUSR1);
			}
		}
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 100 * 1000000;
		if (ts.tv_nsec >= (long)NSEC_PER_SEC) {
			ts.tv_sec++;
			ts.tv_nsec -= NSEC_PER_SEC;
		}
		pthread_cond_timedwait(&ev_cond, &ev_lock, &ts);
	}
	pthread_mutex_unlock(&ev_lock);
	for (k = 0; k < nrx; k++)
		pthread_join(rx[k].th, NULL);
	t_end = now_ns();
	rusage_us(&u1, &s1);
	sys_end(&snap, &sd);
	get_info(fd, &i1);
	pthread_barrier_destroy(&start);

	for (k = 0; k < nrx; k++) {
		struct ev_rx *r = &rx[k];

		f[EV_BYTES] += r->bytes;
		f[EV_CALLS] += r->calls;
		if (r->t_first && (!t_first || r->t_first < t_first))
			t_first = r->t_first;
		if (r->t_last > t_last)
			t_last = r->t_last;
		if (r->nudged && !r->eof && !r->err)
			f[EV_NUDGED]++;
		if (r->err && !status) {
			errmsg("%s: eval: receiver %u: recv after %llu bytes: %s",
			       peer, k, (unsigned long long)r->bytes,
			       io_strerror(r->err));
			status = r->err;
		}
	}
	if (f[EV_NUDGED])
		errmsg("%s: eval: %llu of %u blocked receivers did not see end of stream within 3 s of the first; woken by a signal",
		       peer, (unsigned long long)f[EV_NUDGED], nrx);
	f[EV_WIN_NS] = t_last > t0 ? t_last - t0 : 0;
	f[EV_FIRST_NS] = t_first > t0 ? t_first - t0 : 0;
	f[EV_EOF_NS] = t_end - t0;
	f[EV_USER_US] = u1 - u0;
	f[EV_SYS_US] = s1 - s0;
	f[EV_SYS_OK] = sd.ok;
	f[EV_SOFTIRQ_US] = sd.softirq_us;
	f[EV_KTHREAD_US] = sd.kthread_us;
	f[EV_BUSY_US] = sd.busy_us;
	f[EV_POLICY] = RSB_EV_UNSET;
	if (i0.ok && i1.ok)
		f[EV_INFO] = 1;
	if (RSI_HAS(&i0, rsi_rx_phase_switches) &&
	    RSI_HAS(&i1, rsi_rx_phase_switches)) {
		f[EV_INFO] |= 2;
		f[EV_POLICY] = i1.i.rsi_policy;
		f[EV_DIRECT_RX] = RSI_DELTA(&i0, &i1, rsi_direct_bytes_received);
		f[EV_INDIRECT_RX] = RSI_DELTA(&i0, &i1,
					      rsi_indirect_bytes_received);
		f[EV_ADV_SENT] = RSI_DELTA(&i0, &i1, rsi_adverts_sent);
		f[EV_ADV_FILLED] = RSI_DELTA(&i0, &i1, rsi_adverts_filled);
		f[EV_ADV_DEAD] = RSI_DELTA(&i0, &i1, rsi_adverts_dead);
		f[EV_ADV_CANCELLED] = RSI_DELTA(&i0, &i1,
						rsi_adverts_cancelled);
		f[EV_RX_SWITCHES] = RSI_DELTA(&i0, &i1, rsi_rx_phase_switches);
	}

	memset(reply, 0, sizeof(reply));
	put_u32(reply, RSB_MAGIC);
	put_u32(reply + 4, status);
	put_u32(reply + 8, EV_COUNT);
	for (k = 0; k < EV_COUNT; k++)
		put_u64(reply + 16 + 8 * k, f[k]);
	if (write_exact(fd, reply, sizeof(reply), "eval reply"))
		goto out;
	dump_rs_info(fd, peer);
	if (opt.verbose)
		errmsg("%s: eval %s %u B x%u receivers: %llu bytes in %.3f s, cpu %.3f s",
		       peer, policy_name(pol), size, nrx,
		       (unsigned long long)f[EV_BYTES], f[EV_WIN_NS] / 1e9,
		       (f[EV_USER_US] + f[EV_SYS_US]) / 1e6);
	/* wait for the client to close so that it has read the reply */
	read_full(fd, reply, 1);
	ret = status ? -1 : 0;
out:
	free(rx);
	return ret;
}

static void *srv_thread(void *arg)
{
	struct srv_conn *c = arg;
	uint8_t hdr[RSB_HDR_LEN];
	char peer[80];
	uint32_t size, flags;
	int ret = -1;
	ssize_t n;

	addr_str(&c->peer, peer, sizeof(peer));
	set_timeouts(c->fd);
	set_nodelay(c->fd);

	n = read_full(c->fd, hdr, 1);
	if (n <= 0) {
		errmsg("%s: recv request: %s", peer,
		       n < 0 ? io_strerror(errno) : "peer closed the connection");
		goto out;
	}
	if (hdr[0] == RSB_MODE_CONN || hdr[0] == RSB_MODE_IDLE) {
		uint8_t ack = RSB_CONN_ACK;

		if (write_exact(c->fd, &ack, 1, "conn reply"))
			goto out;
		/* idle: hold the connection until the client closes it */
		while (hdr[0] == RSB_MODE_IDLE &&
		       read_full(c->fd, &ack, 1) < 0 && errno == EAGAIN)
			;
		ret = 0;
		goto out;
	}
	if (apply_rs_opts(c->fd, opt.policy, opt.threshold, peer))
		goto out;
	if (hdr[0] != RSB_MODE_LAT && hdr[0] != RSB_MODE_BW &&
	    hdr[0] != RSB_MODE_EVAL && hdr[0] != RSB_MODE_QUEUE) {
		errmsg("%s: unknown request %#x (not an rsbench client?)", peer,
		       hdr[0]);
		goto out;
	}
	if (read_exact(c->fd, hdr + 1, RSB_HDR_LEN - 1, "request header"))
		goto out;
	if (get_u32(hdr + 4) != RSB_MAGIC || hdr[1] != RSB_VERSION) {
		errmsg("%s: bad request header (magic %#x version %u)", peer,
		       get_u32(hdr + 4), hdr[1]);
		goto out;
	}
	size = get_u32(hdr + 8);
	flags = get_u32(hdr + 12);
	if (size < 1 || size > RSB_MAX_SIZE) {
		errmsg("%s: bad message size %u", peer, size);
		goto out;
	}
	if (hdr[0] == RSB_MODE_QUEUE)
		ret = srv_queue(c->fd, peer, get_u64(hdr + 16) > 60000 ?
				60000 : get_u64(hdr + 16));
	else if (hdr[0] == RSB_MODE_LAT &&
		 set_busy(c->fd, get_u16(hdr + 2), peer))
		ret = -1;
	else if (hdr[0] == RSB_MODE_LAT)
		ret = srv_lat(c->fd, peer, size);
	else if (hdr[0] == RSB_MODE_EVAL)
		ret = srv_eval(c->fd, peer, hdr);
	else {
		/* many streams share the link: the client's wait, not ours */
		set_timeouts_s(c->fd, get_u16(hdr + 2));
		ret = srv_bw(c->fd, peer, size, flags);
	}
out:
	close(c->fd);
	free(c);
	pthread_mutex_lock(&srv_lock);
	if (ret)
		srv_failures++;
	srv_active--;
	pthread_cond_broadcast(&srv_cond);
	pthread_mutex_unlock(&srv_lock);
	return NULL;
}

static int run_server(void)
{
	struct sockaddr_storage ss;
	pthread_attr_t attr;
	socklen_t len;
	char abuf[80];
	long accepted = 0;
	int lfd, one = 1;

	if (resolve(opt.addr, opt.port, 1, &ss, &len))
		return 1;
	lfd = open_socket(ss.ss_family);
	if (lfd < 0)
		return 1;
	if (setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) &&
	    opt.verbose)
		errmsg("warning: SO_REUSEADDR: %s", strerror(errno));
	/* accepted sockets get them as well (srv_thread, srv_eval) */
	if (set_bufs(lfd, "listener") ||
	    apply_rs_opts(lfd, opt.policy, opt.threshold, "listener"))
		return 1;
	if (bind(lfd, (struct sockaddr *)&ss, len)) {
		errmsg("bind %s (%s): %s", addr_str(&ss, abuf, sizeof(abuf)),
		       opt.fam_name, strerror(errno));
		return 1;
	}
	if (listen(lfd, 128)) {
		errmsg("listen on %s (%s): %s",
		       addr_str(&ss, abuf, sizeof(abuf)), opt.fam_name,
		       strerror(errno));
		return 1;
	}
	errmsg("server listening on %s (%s)%s",
	       addr_str(&ss, abuf, sizeof(abuf)), opt.fam_name,
	       opt.count ? "" : ", until killed");

	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, 256 << 10);

	while (!opt.count || accepted < opt.count) {
		struct srv_conn *c = calloc(1, sizeof(*c));
		socklen_t plen = sizeof(c->peer);
		pthread_t th;
		int err;

		if (!c)
			die("out of memory");
		c->fd = accept(lfd, (struct sockaddr *)&c->peer, &plen);
		if (c->fd < 0) {
			int e = errno;

			free(c);
			switch (e) {
			case EINTR:
				continue;
			case ECONNABORTED:
			case EPROTO:
			case EPERM:
			case ETIMEDOUT:
			case ECONNRESET:
				errmsg("accept: %s (continuing)", strerror(e));
				continue;
			case EMFILE:
			case ENFILE:
			case ENOBUFS:
			case ENOMEM:
				errmsg("accept: %s (retrying)", strerror(e));
				usleep(100000);
				continue;
			default:
				errmsg("accept on %s (%s): %s",
				       addr_str(&ss, abuf, sizeof(abuf)),
				       opt.fam_name, strerror(e));
				close(lfd);
				return 1;
			}
		}
		accepted++;
		pthread_mutex_lock(&srv_lock);
		srv_active++;
		pthread_mutex_unlock(&srv_lock);
		err = pthread_create(&th, &attr, srv_thread, c);
		if (err) {
			errmsg("pthread_create: %s (dropping connection)",
			       strerror(err));
			close(c->fd);
			free(c);
			pthread_mutex_lock(&srv_lock);
			srv_active--;
			srv_failures++;
			pthread_mutex_unlock(&srv_lock);
		}
	}
	close(lfd);

	pthread_mutex_lock(&srv_lock);
	while (srv_active)
		pthread_cond_wait(&srv_cond, &srv_lock);
	pthread_mutex_unlock(&srv_lock);
	if (srv_failures)
		errmsg("server done: %ld connections, %d failed", accepted,
		       srv_failures);
	else if (opt.verbose)
		errmsg("server done: %ld connections", accepted);
	return srv_failures ? 1 : 0;
}

/* ---------------------------------------------------------------------- */
/* client output                                                          */

static const char *label(void)
{
	return opt.label ? opt.label : opt.fam_name;
}

static void csv(const char *mode, uint64_t size, int conns,
		const char *metric, double value, const char *unit)
{
	char v[64];

	if (!opt.csv)
		return;
	/* integers in full, fractions to 6 significant digits, no exponents */
	if (value == (double)(long long)value && fabs(value) < 1e18)
		snprintf(v, sizeof(v), "%lld", (long long)value);
	else if (fabs(value) < 1e6)
		snprintf(v, sizeof(v), "%.6g", value);
	else
		snprintf(v, sizeof(v), "%.3f", value);
	printf("%s,%s,%llu,%d,%s,%s,%s\n", label(), mode,
	       (unsigned long long)size, conns, metric, v, unit);
}

/* human-readable line: stdout, or stderr when stdout carries CSV */
static void human(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void human(const char *fmt, ...)
{
	FILE *f = opt.csv ? stderr : stdout;
	va_list ap;

	va_start(ap, fmt);
	vfprintf(f, fmt, ap);
	va_end(ap);
	fflush(f);
}

static uint64_t warmup_for(uint64_t iters, uint64_t cap)
{
	uint64_t w;

	if (opt.warmup >= 0)
		return opt.warmup;
	w = iters / 10;
	return w > cap ? cap : w;
}

/* ---------------------------------------------------------------------- */
/* client: latency                                                        */

static int run_lat(const struct sockaddr_storage *ss, socklen_t len)
{
	uint64_t warm = warmup_for(opt.iters, 1000);
	uint64_t total = warm + opt.iters, i, n = 0, t_end = 0, sum = 0;
	size_t size = opt.size, tag = size < 8 ? size : 8;
	const char *mname = opt.busy ? "busy" : "lat";
	uint8_t hdr[RSB_HDR_LEN], *tx, *rx, *pat;
	uint64_t *samples;
	int fd, ret = 1;

	tx = malloc(size);
	rx = malloc(size > opt.rxbuf ? size : opt.rxbuf);
	samples = malloc(opt.iters * sizeof(*samples));
	if (!tx || !rx || !samples)
		die("out of memory");
	pat = make_pattern(size);
	memcpy(tx, pat, size);
	free(pat);

	fd = client_connect(ss, len);
	if (fd < 0)
		goto out_free;
	if (set_busy(fd, opt.busy, "client"))
		goto out;

	memset(hdr, 0, sizeof(hdr));
	hdr[0] = RSB_MODE_LAT;
	hdr[1] = RSB_VERSION;
	put_u16(hdr + 2, opt.busy);	/* the server spins as well */
	put_u32(hdr + 4, RSB_MAGIC);
	put_u32(hdr + 8, size);
	put_u32(hdr + 12, 0);
	put_u64(hdr + 16, total);
	if (write_exact(fd, hdr, sizeof(hdr), "request header"))
		goto out;

	/*
	 * -t caps the warm-up and the measured round trips separately, so
	 * a slow start (rsockets) cannot leave no time for the samples.
	 */
	if (opt.seconds > 0)
		t_end = now_ns() + (uint64_t)(opt.seconds * NSEC_PER_SEC);
	for (i = 0; i < total; i++) {
		uint64_t t0, t1, seq = i;

		if (i < warm && t_end && now_ns() >= t_end) {
			errmsg("lat: warm-up cut short after %llu of %llu round trips (-t %g s)",
			       (unsigned long long)i, (unsigned long long)warm,
			       opt.seconds);
			warm = i;
		}
		if (i == warm && opt.seconds > 0)
			t_end = now_ns() + (uint64_t)(opt.seconds * NSEC_PER_SEC);

		memcpy(tx, &seq, tag);
		t0 = now_ns();
		if (write_full(fd, tx, size)) {
			errmsg("lat: send of message %llu: %s",
			       (unsigned long long)i, io_strerror(errno));
			goto out;
		}
		errno = 0;
		if (read_msg(fd, rx, size, opt.rxbuf) != (ssize_t)size) {
			errmsg("recv lat echo: %s", errno ? io_strerror(errno) :
			       "peer closed the connection");
			goto out;
		}
		t1 = now_ns();
		if (memcmp(tx, rx, size)) {
			errmsg("lat: echo of message %llu differs from what was sent",
			       (unsigned long long)i);
			goto out;
		}
		if (i >= warm) {
			samples[n++] = t1 - t0;
			sum += t1 - t0;
			if (t_end && t1 >= t_end)
				break;
		}
	}
	dump_rs_info(fd, "client");
	if (!n) {
		errmsg("lat: no samples after warm-up (%llu warm-up round trips; raise -t or lower -w)",
		       (unsigned long long)warm);
		goto out;
	}

	qsort(samples, n, sizeof(*samples), cmp_u64);
	human("%s %s %zu B: p50 %.2f us  p99 %.2f us  p99.9 %.2f us  mean %.2f us  (min %.2f max %.2f; round trip, %llu samples after %llu warm-up)\n",
	      label(), mname, size, pct_us(samples, n, 50), pct_us(samples, n, 99),
	      pct_us(samples, n, 99.9), (double)sum / n / 1000.0,
	      samples[0] / 1000.0, samples[n - 1] / 1000.0,
	      (unsigned long long)n, (unsigned long long)warm);
	csv(mname, size, 1, "p50", pct_us(samples, n, 50), "us");
	csv(mname, size, 1, "p99", pct_us(samples, n, 99), "us");
	csv(mname, size, 1, "p99.9", pct_us(samples, n, 99.9), "us");
	csv(mname, size, 1, "mean", (double)sum / n / 1000.0, "us");
	csv(mname, size, 1, "min", samples[0] / 1000.0, "us");
	csv(mname, size, 1, "max", samples[n - 1] / 1000.0, "us");
	csv(mname, size, 1, "samples", n, "count");
	ret = 0;
out:
	close(fd);
out_free:
	free(samples);
	free(rx);
	free(tx);
	return ret;
}

/* ---------------------------------------------------------------------- */
/* client: throughput                                                     */

struct bw_conn {
	int idx;
	int fd;
	pthread_t th;
	uint64_t sent;
	uint64_t t_start, t_end;	/* client clock */
	uint64_t srv_bytes, srv_start, srv_end, srv_cpu_us;
	uint64_t srv_sys[SYS_COUNT];	/* RSB_F_SYS extension, if any */
	int ok;
};

static pthread_barrier_t bw_barrier;
static const uint8_t *bw_pat;
static uint64_t bw_deadline;		/* timed runs: one end for all */
static int bw_streams_ended;		/* -Y: streams past their last write */

/* This stream wrote its last byte (or failed): the full load is over. */
static void bw_stream_end(void)
{
	__atomic_add_fetch(&bw_streams_ended, 1, __ATOMIC_RELEASE);
}

/* chunks per connection for a run of -n bytes, 0 for a timed run */
static uint64_t bw_nchunks(void)
{
	uint64_t per = (opt.total + opt.conns - 1) / opt.conns;

	return opt.total ? (per + opt.size - 1) / opt.size : 0;
}

/*
 * The request of connection c, sent as soon as it is connected: the server
 * then waits with this client's timeout (-T) while the other connections
 * are set up (1000 of them take longer than a 10 s timeout between VMs),
 * not with its own.
 */
static int bw_request(const struct bw_conn *c)
{
	uint8_t hdr[RSB_HDR_LEN];

	memset(hdr, 0, sizeof(hdr));
	hdr[0] = RSB_MODE_BW;
	hdr[1] = RSB_VERSION;
	put_u16(hdr + 2, opt.timeout > 65535 ? 65535 : opt.timeout);
	put_u32(hdr + 4, RSB_MAGIC);
	put_u32(hdr + 8, opt.size);
	/* one connection measures the server host system-wide */
	put_u32(hdr + 12, (opt.verify ? RSB_F_VERIFY : 0) |
		(c->idx == 0 ? RSB_F_SYS : 0));
	put_u64(hdr + 16, bw_nchunks() * opt.size);
	return write_exact(c->fd, hdr, sizeof(hdr), "request header");
}

static void *bw_thread(void *arg)
{
	struct bw_conn *c = arg;
	size_t size = opt.size;
	uint8_t reply[RSB_REPLY_LEN], *buf;
	uint64_t chunks = 0, nchunks = 0, deadline = 0, chunk;
	char what[32];
	uint32_t status;

	snprintf(what, sizeof(what), "conn %d", c->idx);
	buf = calloc(1, size);
	if (!buf) {
		errmsg("%s: out of memory", what);
		bw_stream_end();
		pthread_barrier_wait(&bw_barrier);
		return NULL;
	}
	nchunks = bw_nchunks();

	pthread_barrier_wait(&bw_barrier);

	c->t_start = now_ns();
	if (!opt.total)
		deadline = bw_deadline;

	for (chunk = 0;; chunk++) {
		int last;

		if (opt.total)
			last = chunk + 1 >= nchunks;
		else
			last = now_ns() >= deadline;
		if (opt.verify && size > 1)
			memcpy(buf + 1, bw_pat + (c->sent + 1) % RSB_PAT_PERIOD,
			       size - 1);
		buf[0] = last ? RSB_CHUNK_LAST : RSB_CHUNK_DATA;
		if (write_full(c->fd, buf, size)) {
			errmsg("%s: bw: send after %llu bytes: %s", what,
			       (unsigned long long)c->sent,
			       errno == EPIPE || errno == ECONNRESET ?
			       "connection closed by the server (see its log)" :
			       io_strerror(errno));
			bw_stream_end();
			goto out;
		}
		c->sent += size;
		chunks++;
		if (last)
			break;
	}
	bw_stream_end();
	c->t_end = now_ns();

	if (read_exact(c->fd, reply, sizeof(reply), "bw reply from server"))
		goto out;
	if (get_u32(reply) != RSB_MAGIC) {
		errmsg("%s: bw: bad reply from server", what);
		goto out;
	}
	status = get_u32(reply + 4);
	c->srv_bytes = get_u64(reply + 8);
	c->srv_start = get_u64(reply + 16);
	c->srv_end = get_u64(reply + 24);
	c->srv_cpu_us = get_u64(reply + 32);
	if (get_u32(reply + 48)) {
		uint32_t xlen = get_u32(reply + 48), k;
		uint8_t ext[RSB_SYS_EXT_LEN];

		if (xlen > sizeof(ext)) {
			errmsg("%s: bw: bad reply extension length %u", what,
			       xlen);
			goto out;
		}
		if (read_exact(c->fd, ext, xlen, "bw reply extension"))
			goto out;
		for (k = 0; k < SYS_COUNT && 8 * k + 8 <= xlen; k++)
			c->srv_sys[k] = get_u64(ext + 8 * k);
	}
	if (status == 1) {
		errmsg("%s: bw: server reports data verification FAILED at stream offset %llu",
		       what, (unsigned long long)get_u64(reply + 40));
		goto out;
	}
	if (status) {
		errmsg("%s: bw: server reports a corrupted stream (status %u, see its log)",
		       what, status);
		goto out;
	}
	if (c->srv_bytes != c->sent) {
		errmsg("%s: bw: server received %llu bytes but %llu were sent",
		       what, (unsigned long long)c->srv_bytes,
		       (unsigned long long)c->sent);
		goto out;
	}
	dump_rs_info(c->fd, what);
	c->ok = 1;
out:
	free(buf);
	return NULL;
}

/* bw -Y: a 64 B ping-pong on a connection of its own, during the run */
struct loaded_lat {
	int fd;
	pthread_t th;
	uint64_t *samples;
	uint64_t n;
	int64_t late_ns;	/* it began after the planned end, by this */
	int ok;
};

static int loaded_open(const struct sockaddr_storage *ss, socklen_t len,
		       struct loaded_lat *l)
{
	uint8_t hdr[RSB_HDR_LEN];

	l->samples = malloc(RSB_LOADED_MAX * sizeof(*l->samples));
	if (!l->samples)
		die("out of memory");
	l->fd = client_connect(ss, len);
	if (l->fd < 0)
		return -1;
	memset(hdr, 0, sizeof(hdr));
	hdr[0] = RSB_MODE_LAT;
	hdr[1] = RSB_VERSION;
	put_u32(hdr + 4, RSB_MAGIC);
	put_u32(hdr + 8, 64);
	return write_exact(l->fd, hdr, sizeof(hdr), "request header (-Y)");
}

static void *loaded_thread(void *arg)
{
	struct loaded_lat *l = arg;
	uint8_t tx[64], rx[64];
	uint64_t i, t0;

	memset(tx, 0x5a, sizeof(tx));
	pthread_barrier_wait(&bw_barrier);
	/*
	 * Round trips for as long as every stream still writes (the load the
	 * figure is about), at least one: with a thousand streams on two CPUs
	 * this thread may first run after the planned end, while the streams,
	 * as late to start, still write; it says how late.
	 */
	t0 = now_ns();
	if (t0 >= bw_deadline)
		l->late_ns = (int64_t)(t0 - bw_deadline);
	for (i = 0; i == 0 || !__atomic_load_n(&bw_streams_ended,
						__ATOMIC_ACQUIRE); i++) {
		t0 = now_ns();
		memcpy(tx, &i, sizeof(i));
		if (write_full(l->fd, tx, sizeof(tx))) {
			errmsg("bw -Y: send of round trip %llu: %s",
			       (unsigned long long)i, io_strerror(errno));
			return NULL;
		}
		errno = 0;
		if (read_msg(l->fd, rx, sizeof(rx), sizeof(rx)) != sizeof(rx) ||
		    memcmp(tx, rx, sizeof(tx))) {
			errmsg("bw -Y: echo of round trip %llu: %s",
			       (unsigned long long)i, errno ?
			       io_strerror(errno) : "short or different");
			return NULL;
		}
		if (l->n < RSB_LOADED_MAX)
			l->samples[l->n++] = now_ns() - t0;
	}
	l->ok = 1;
	return NULL;
}

/* the -Y figures, or an error when the probe failed or measured nothing */
static int loaded_report(struct loaded_lat *l)
{
	uint64_t *v = l->samples, n = l->n;

	if (!l->ok || !n) {
		errmsg("bw -Y: %s", l->ok ? "no round trip completed" :
		       "the latency probe failed");
		return -1;
	}
	qsort(v, n, sizeof(*v), cmp_u64);
	human("%s bw -Y: 64 B round trip under load: p50 %.2f us  p99 %.2f us  (%llu samples)",
	      label(), pct_us(v, n, 50), pct_us(v, n, 99),
	      (unsigned long long)n);
	if (l->late_ns)
		human("; the probe began %.0f ms after the planned end",
		      l->late_ns / 1e6);
	human("\n");
	csv("bw", opt.size, opt.conns, "loaded_p50", pct_us(v, n, 50), "us");
	csv("bw", opt.size, opt.conns, "loaded_p99", pct_us(v, n, 99), "us");
	csv("bw", opt.size, opt.conns, "loaded_samples", n, "count");
	if (l->late_ns)
		csv("bw", opt.size, opt.conns, "loaded_late", l->late_ns / 1e6,
		    "ms");
	return 0;
}

static int run_bw(const struct sockaddr_storage *ss, socklen_t len)
{
	uint64_t bytes = 0, srv_cpu = 0, s0 = UINT64_MAX, s1 = 0;
	uint64_t c0 = UINT64_MAX, c1 = 0, cpu0, cpu1, *ssys = NULL;
	struct loaded_lat ll = { .fd = -1 };
	struct bw_conn *conns;
	struct sys_snap snap;
	struct sys_delta sd;
	double rx_s, tx_s, gib, mbps, txmbps, ccpu, scpu, cmin = -1, cmax = 0;
	int i, err, ok = 1, started = 0;

	conns = calloc(opt.conns, sizeof(*conns));
	if (!conns)
		die("out of memory");
	if (opt.verify)
		bw_pat = make_pattern(opt.size);

	for (i = 0; i < opt.conns; i++) {
		conns[i].idx = i;
		conns[i].fd = client_connect(ss, len);
		if (conns[i].fd >= 0 && bw_request(&conns[i])) {
			close(conns[i].fd);
			conns[i].fd = -1;
		}
		if (conns[i].fd < 0) {
			if (i)
				errmsg("bw: connection %d of %d failed", i + 1,
				       opt.conns);
			while (--i >= 0)
				close(conns[i].fd);
			free(conns);
			return 1;
		}
	}

	if (opt.loaded && loaded_open(ss, len, &ll)) {
		for (i = 0; i < opt.conns; i++)
			close(conns[i].fd);
		if (ll.fd >= 0)
			close(ll.fd);
		free(ll.samples);
		free(conns);
		return 1;
	}
	bw_streams_ended = 0;
	pthread_barrier_init(&bw_barrier, NULL, opt.conns + 1 + !!opt.loaded);
	for (i = 0; i < opt.conns; i++) {
		err = pthread_create(&conns[i].th, NULL, bw_thread, &conns[i]);
		if (err)
			die("pthread_create: %s", strerror(err));
		started++;
	}
	if (opt.loaded) {
		err = pthread_create(&ll.th, NULL, loaded_thread, &ll);
		if (err)
			die("pthread_create: %s", strerror(err));
	}
	sys_begin(&snap);
	cpu0 = cpu_us(RUSAGE_SELF);
	bw_deadline = now_ns() + (uint64_t)(opt.seconds * NSEC_PER_SEC);
	pthread_barrier_wait(&bw_barrier);
	for (i = 0; i < started; i++)
		pthread_join(conns[i].th, NULL);
	cpu1 = cpu_us(RUSAGE_SELF);
	if (opt.loaded) {
		pthread_join(ll.th, NULL);
		close(ll.fd);
	}
	sys_end(&snap, &sd);

	for (i = 0; i < opt.conns; i++) {
		struct bw_conn *c = &conns[i];
		double cm;

		close(c->fd);
		if (!c->ok) {
			ok = 0;
			continue;
		}
		bytes += c->srv_bytes;
		srv_cpu += c->srv_cpu_us;
		if (c->srv_sys[SYS_OK])
			ssys = c->srv_sys;
		if (c->srv_start < s0)
			s0 = c->srv_start;
		if (c->srv_end > s1)
			s1 = c->srv_end;
		if (c->t_start < c0)
			c0 = c->t_start;
		if (c->t_end > c1)
			c1 = c->t_end;
		if (c->srv_end > c->srv_start) {
			cm = c->srv_bytes / ((c->srv_end - c->srv_start) / 1e3);
			if (cmin < 0 || cm < cmin)
				cmin = cm;
			if (cm > cmax)
				cmax = cm;
		}
	}
	if (!ok) {
		free(ll.samples);
		free(conns);
		errmsg("bw: %s run failed", opt.fam_name);
		return 1;
	}
	if (s1 <= s0 || c1 <= c0 || !bytes) {
		free(ll.samples);
		free(conns);
		errmsg("bw: nothing measured");
		return 1;
	}

	rx_s = (s1 - s0) / 1e9;
	tx_s = (c1 - c0) / 1e9;
	gib = bytes / GIB;
	mbps = bytes / rx_s / 1e6;
	txmbps = bytes / tx_s / 1e6;
	ccpu = (cpu1 - cpu0) / 1e6 / gib;
	scpu = srv_cpu / 1e6 / gib;

	human("%s bw %llu B x%d: %.1f MB/s (%.3f Gbit/s) at receiver, %llu bytes in %.2f s; sender %.1f MB/s; CPU per GiB: client %.3f s, server %.3f s",
	      label(), (unsigned long long)opt.size, opt.conns, mbps,
	      mbps * 8 / 1000, (unsigned long long)bytes, rx_s, txmbps, ccpu,
	      scpu);
	if (sd.ok)
		human("; client host softirq %.3f s, kthreads %.3f s, busy %.3f s",
		      sd.softirq_us / 1e6 / gib, sd.kthread_us / 1e6 / gib,
		      sd.busy_us / 1e6 / gib);
	if (ssys)
		human("; server host softirq %.3f s, kthreads %.3f s, busy %.3f s",
		      ssys[SYS_SOFTIRQ_US] / 1e6 / gib,
		      ssys[SYS_KTHREAD_US] / 1e6 / gib,
		      ssys[SYS_BUSY_US] / 1e6 / gib);
	if (opt.conns > 1)
		human("; per connection %.1f .. %.1f MB/s", cmin, cmax);
	human("\n");
	csv("bw", opt.size, opt.conns, "throughput", mbps, "MB/s");
	csv("bw", opt.size, opt.conns, "throughput", mbps * 8 / 1000, "Gbit/s");
	csv("bw", opt.size, opt.conns, "tx_throughput", txmbps, "MB/s");
	csv("bw", opt.size, opt.conns, "bytes", bytes, "B");
	csv("bw", opt.size, opt.conns, "duration", rx_s, "s");
	csv("bw", opt.size, opt.conns, "cpu_client", ccpu, "s/GiB");
	csv("bw", opt.size, opt.conns, "cpu_server", scpu, "s/GiB");
	/*
	 * System-wide (/proc) over each end's window: all non-idle time,
	 * softirq (rxe's tasklets, the network stack) and kernel threads
	 * (workqueues). On one host both ends see the same machine.
	 */
	if (sd.ok) {
		csv("bw", opt.size, opt.conns, "sys_softirq_client",
		    sd.softirq_us / 1e6 / gib, "s/GiB");
		csv("bw", opt.size, opt.conns, "sys_kthread_client",
		    sd.kthread_us / 1e6 / gib, "s/GiB");
		csv("bw", opt.size, opt.conns, "sys_busy_client",
		    sd.busy_us / 1e6 / gib, "s/GiB");
	}
	if (ssys) {
		csv("bw", opt.size, opt.conns, "sys_softirq_server",
		    ssys[SYS_SOFTIRQ_US] / 1e6 / gib, "s/GiB");
		csv("bw", opt.size, opt.conns, "sys_kthread_server",
		    ssys[SYS_KTHREAD_US] / 1e6 / gib, "s/GiB");
		csv("bw", opt.size, opt.conns, "sys_busy_server",
		    ssys[SYS_BUSY_US] / 1e6 / gib, "s/GiB");
		csv("bw", opt.size, opt.conns, "cpu_server_proc",
		    ssys[SYS_PROC_US] / 1e6 / gib, "s/GiB");
	}
	if (opt.conns > 1) {
		csv("bw", opt.size, opt.conns, "conn_min", cmin, "MB/s");
		csv("bw", opt.size, opt.conns, "conn_max", cmax, "MB/s");
	}
	ok = !opt.loaded || !loaded_report(&ll);
	free(ll.samples);
	free(conns);
	return !ok;
}

/* ---------------------------------------------------------------------- */
/* client: how much a writer can queue that the peer has not read yet     */

static int queue_end(int fd, uint64_t queued)
{
	uint8_t reply[RSB_Q_REPLY_LEN];
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) ||
	    shutdown(fd, SHUT_WR)) {
		errmsg("queue: ending the stream: %s", strerror(errno));
		return -1;
	}
	if (read_exact(fd, reply, sizeof(reply), "queue reply"))
		return -1;
	if (get_u32(reply) != RSB_MAGIC || get_u32(reply + 4)) {
		errmsg("queue: the server reports a bad stream (see its log)");
		return -1;
	}
	if (get_u64(reply + 8) != queued) {
		errmsg("queue: the server received %llu bytes, %llu were sent",
		       (unsigned long long)get_u64(reply + 8),
		       (unsigned long long)queued);
		return -1;
	}
	return 0;
}

/*
 * queue: the server reads nothing for opt.hold_ms. Write SIZE-byte
 * chunks without blocking until no write has gone in for RSB_Q_QUIET_MS
 * (or RSB_Q_MAX is queued, or the hold is nearly over: a lower bound
 * then): that is what the transport lets a writer queue before it blocks
 * (TCP's autotuning lets it queue megabytes). Then end the stream; the
 * server drains it, checks every byte and reports the count.
 */
static int run_queue(const struct sockaddr_storage *ss, socklen_t len)
{
	uint64_t queued = 0, t_stop, t_last, now;
	uint8_t hdr[RSB_HDR_LEN], *pat;
	int fd, fl, r, ret = 1, capped = 0;
	struct pollfd pfd;

	pat = make_pattern(opt.size);
	fd = client_connect(ss, len);
	if (fd < 0)
		goto out_free;
	memset(hdr, 0, sizeof(hdr));
	hdr[0] = RSB_MODE_QUEUE;
	hdr[1] = RSB_VERSION;
	put_u32(hdr + 4, RSB_MAGIC);
	put_u32(hdr + 8, opt.size);
	put_u64(hdr + 16, opt.hold_ms);
	if (write_exact(fd, hdr, sizeof(hdr), "request header"))
		goto out;
	fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK)) {
		errmsg("queue: fcntl(O_NONBLOCK): %s", strerror(errno));
		goto out;
	}
	t_last = now_ns();
	t_stop = t_last + (opt.hold_ms - RSB_Q_QUIET_MS - 1000) * 1000000ull;
	for (;;) {
		ssize_t n = send(fd, pat + queued % RSB_PAT_PERIOD, opt.size,
				 MSG_NOSIGNAL);

		now = now_ns();
		if (n > 0) {
			queued += n;
			t_last = now;
			if (queued >= RSB_Q_MAX || now >= t_stop) {
				capped = 1;
				break;
			}
			continue;
		}
		if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK &&
		    errno != EINTR) {
			errmsg("queue: send after %llu bytes: %s",
			       (unsigned long long)queued, io_strerror(errno));
			goto out;
		}
		if (now - t_last >= RSB_Q_QUIET_MS * 1000000ull)
			break;
		pfd.fd = fd;
		pfd.events = POLLOUT;
		r = poll(&pfd, 1, RSB_Q_QUIET_MS - (now - t_last) / 1000000);
		if (r < 0 && errno != EINTR) {
			errmsg("queue: poll: %s", strerror(errno));
			goto out;
		}
	}
	if (queue_end(fd, queued))
		goto out;
	human("%s queue: %.0f KiB written before the writer blocked (%s; nothing read by the peer for %u ms), all received intact\n",
	      label(), queued / 1024.0, capped ? "a lower bound: still going" :
	      "no write for 1 s", opt.hold_ms);
	csv("queue", opt.size, 1, "queued", queued / 1024.0, "KiB");
	csv("queue", opt.size, 1, "capped", capped, "count");
	ret = 0;
out:
	close(fd);
out_free:
	free(pat);
	return ret;
}

/* ---------------------------------------------------------------------- */
/* client: evaluation of the transfer policies (MacArthur and Russell)    */

/*
 * One wide CSV row per run. CPU times in microseconds; "per_mib" divides
 * by the MiB received. snd_* is the client (sending) process, rcv_* the
 * server (receiving) process, each getrusage(RUSAGE_SELF) user + system
 * over its own window. *_sys_softirq/kthread/busy are system-wide
 * (/proc), measured by each end over its window: on one host both ends
 * see the same machine. Counter columns are RDMASTREAM_INFO deltas over
 * the run, empty where the module or the family has none.
 */
static const char ev_header[] =
	"transport,policy,size,recvs,sends,secs,bytes,mbps,tx_mbps,"
	"snd_cpu_us,rcv_cpu_us,snd_cpu_us_per_mib,rcv_cpu_us_per_mib,"
	"snd_user_us,snd_sys_us,rcv_user_us,rcv_sys_us,"
	"snd_sys_softirq_us,snd_sys_kthread_us,snd_sys_busy_us,"
	"rcv_sys_softirq_us,rcv_sys_kthread_us,rcv_sys_busy_us,"
	"sys_softirq_us_per_mib,sys_kthread_us_per_mib,sys_busy_us_per_mib,"
	"direct_pct,direct_bytes_sent,indirect_bytes_sent,"
	"direct_bytes_received,indirect_bytes_received,"
	"adverts_sent,adverts_filled,adverts_dead,adverts_cancelled,"
	"adverts_received,adverts_used,adverts_stale,"
	"tx_phase_switches,rx_phase_switches,zcopy_sends,"
	"tx_policy,rx_policy,rx_threshold,recv_calls,first_byte_ms,status\n";

struct row {
	char buf[2048];
	size_t len;
};

static void row_add(struct row *r, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void row_add(struct row *r, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (r->len >= sizeof(r->buf))
		return;
	if (r->len)
		r->buf[r->len++] = ',';
	va_start(ap, fmt);
	n = vsnprintf(r->buf + r->len, sizeof(r->buf) - r->len, fmt, ap);
	va_end(ap);
	if (n > 0)
		r->len += n;
}

static void row_u64(struct row *r, int valid, uint64_t v)
{
	if (valid)
		row_add(r, "%llu", (unsigned long long)v);
	else
		row_add(r, "%s", "");
}

static void row_f(struct row *r, int valid, double v)
{
	if (valid)
		row_add(r, "%.6g", v);
	else
		row_add(r, "%s", "");
}

struct ev_tx {
	int fd;
	int idx;
	pthread_t th;
	uint64_t sent;
	uint64_t t_end;
	int err;
};

static pthread_barrier_t ev_barrier;
static uint64_t ev_deadline;		/* timed runs */
static uint64_t ev_chunks;		/* runs of a byte count: chunks to send */
static uint64_t ev_claimed;

/* one outstanding send: "size"-byte writes until time or bytes run out */
static void *ev_tx_thread(void *arg)
{
	struct ev_tx *t = arg;
	size_t size = opt.size;
	uint8_t *buf = malloc(size);

	if (buf)
		memset(buf, 0xa5, size);
	pthread_barrier_wait(&ev_barrier);
	if (!buf) {
		t->err = ENOMEM;
		return NULL;
	}
	for (;;) {
		if (ev_chunks) {
			if (__atomic_fetch_add(&ev_claimed, 1, __ATOMIC_RELAXED) >=
			    ev_chunks)
				break;
		} else if (now_ns() >= ev_deadline) {
			break;
		}
		if (write_full(t->fd, buf, size)) {
			t->err = errno;
			break;
		}
		t->sent += size;
	}
	t->t_end = now_ns();
	free(buf);
	return NULL;
}

static int run_eval(const struct sockaddr_storage *ss, socklen_t len)
{
	uint8_t hdr[RSB_HDR_LEN + RSB_EV_EXT_LEN], ready[RSB_EV_READY_LEN];
	uint8_t reply[RSB_EV_REPLY_LEN];
	uint64_t f[RSB_EV_NFIELDS] = { 0 };
	uint64_t sent = 0, t0, t1 = 0, u0, s0, u1, s1, direct = 0, indirect = 0;
	uint32_t status, nf, rx_policy, rx_thresh, k;
	int nsend = opt.recvs / 2 > 1 ? opt.recvs / 2 : 1;
	int fd, i, err, ret = 1, started = 0, tx_err = 0, have_dir, rx_dir;
	double secs, mib, mbps, txmbps, snd_cpu, rcv_cpu, pct = 0;
	struct rsb_info i0, i1;
	struct sys_snap snap;
	struct sys_delta sd;
	struct ev_tx *tx;
	struct row r = { .len = 0 };

	memset(&snap, 0, sizeof(snap));
	tx = calloc(nsend, sizeof(*tx));
	if (!tx)
		die("out of memory");
	fd = client_connect(ss, len);
	if (fd < 0)
		goto out_free;

	memset(hdr, 0, sizeof(hdr));
	hdr[0] = RSB_MODE_EVAL;
	hdr[1] = RSB_VERSION;
	put_u16(hdr + 2, opt.recvs);
	put_u32(hdr + 4, RSB_MAGIC);
	put_u32(hdr + 8, opt.size);
	put_u64(hdr + 16, opt.total);
	put_u32(hdr + RSB_HDR_LEN, opt.fam == FAM_RDMASTREAM && opt.policy >= 0 ?
		(uint32_t)opt.policy : RSB_EV_UNSET);
	put_u32(hdr + RSB_HDR_LEN + 4,
		opt.fam == FAM_RDMASTREAM && opt.threshold >= 0 ?
		(uint32_t)opt.threshold : RSB_EV_UNSET);
	if (write_exact(fd, hdr, sizeof(hdr), "eval request") ||
	    read_exact(fd, ready, sizeof(ready), "eval ready from server"))
		goto out;
	if (get_u32(ready) != RSB_MAGIC) {
		errmsg("eval: bad answer from server (an old rsbench?)");
		goto out;
	}
	status = get_u32(ready + 4);
	rx_thresh = get_u32(ready + 12);
	if (status) {
		errmsg("eval: the server could not apply policy %s / threshold %ld to its socket: %s",
		       policy_name(opt.policy), opt.threshold, strerror(status));
		goto out;
	}

	get_info(fd, &i0);
	if (opt.total)
		ev_chunks = (opt.total + opt.size - 1) / opt.size;
	pthread_barrier_init(&ev_barrier, NULL, nsend + 1);
	for (i = 0; i < nsend; i++) {
		tx[i].fd = fd;
		tx[i].idx = i;
		err = pthread_create(&tx[i].th, NULL, ev_tx_thread, &tx[i]);
		if (err)
			die("pthread_create: %s", strerror(err));
		started++;
	}
	sys_begin(&snap);
	rusage_us(&u0, &s0);
	t0 = now_ns();
	ev_deadline = t0 + (uint64_t)(opt.seconds * NSEC_PER_SEC);
	pthread_barrier_wait(&ev_barrier);
	for (i = 0; i < started; i++) {
		pthread_join(tx[i].th, NULL);
		sent += tx[i].sent;
		if (tx[i].t_end > t1)
			t1 = tx[i].t_end;
		if (tx[i].err && !tx_err) {
			tx_err = tx[i].err;
			errmsg("eval: sender %d: send after %llu bytes: %s", i,
			       (unsigned long long)tx[i].sent,
			       tx_err == EPIPE || tx_err == ECONNRESET ?
			       "connection closed by the server (see its log)" :
			       io_strerror(tx_err));
		}
	}
	pthread_barrier_destroy(&ev_barrier);
	if (tx_err)
		goto out;

	/* end of stream for every receiver, then the server's figures */
	if (shutdown(fd, SHUT_WR)) {
		errmsg("eval: shutdown(SHUT_WR): %s", strerror(errno));
		goto out;
	}
	if (read_exact(fd, reply, sizeof(reply), "eval reply from server"))
		goto out;
	/* after the reply: all data has been consumed and accounted for */
	rusage_us(&u1, &s1);
	sys_end(&snap, &sd);
	get_info(fd, &i1);

	if (get_u32(reply) != RSB_MAGIC) {
		errmsg("eval: bad reply from server");
		goto out;
	}
	status = get_u32(reply + 4);
	nf = get_u32(reply + 8);
	for (k = 0; k < nf && k < RSB_EV_NFIELDS; k++)
		f[k] = get_u64(reply + 16 + 8 * k);
	if (status) {
		errmsg("eval: server reports a failed receive: %s (see its log)",
		       io_strerror(status));
		goto out;
	}
	if (f[EV_BYTES] != sent) {
		errmsg("eval: server received %llu bytes but %llu were sent",
		       (unsigned long long)f[EV_BYTES],
		       (unsigned long long)sent);
		goto out;
	}
	if (!sent || !f[EV_WIN_NS] || t1 <= t0) {
		errmsg("eval: nothing measured");
		goto out;
	}

	secs = f[EV_WIN_NS] / 1e9;
	mib = sent / (1024.0 * 1024.0);
	mbps = sent / secs / 1e6;
	txmbps = sent / ((t1 - t0) / 1e9) / 1e6;
	snd_cpu = (double)(u1 - u0) + (s1 - s0);
	rcv_cpu = (double)f[EV_USER_US] + f[EV_SYS_US];
	have_dir = RSI_HAS(&i0, rsi_tx_phase_switches) &&
		   RSI_HAS(&i1, rsi_tx_phase_switches);
	rx_dir = (f[EV_INFO] & 2) != 0;
	if (have_dir) {
		direct = RSI_DELTA(&i0, &i1, rsi_direct_bytes_sent);
		indirect = RSI_DELTA(&i0, &i1, rsi_indirect_bytes_sent);
		if (direct + indirect)
			pct = 100.0 * direct / (direct + indirect);
	}
	rx_policy = f[EV_POLICY];

	row_add(&r, "%s", label());
	row_add(&r, "%s", opt.fam == FAM_RDMASTREAM ?
		policy_name(opt.policy) : "n/a");
	row_u64(&r, 1, opt.size);
	row_u64(&r, 1, opt.recvs);
	row_u64(&r, 1, nsend);
	row_f(&r, 1, secs);
	row_u64(&r, 1, sent);
	row_f(&r, 1, mbps);
	row_f(&r, 1, txmbps);
	row_u64(&r, 1, (uint64_t)snd_cpu);
	row_u64(&r, 1, (uint64_t)rcv_cpu);
	row_f(&r, 1, snd_cpu / mib);
	row_f(&r, 1, rcv_cpu / mib);
	row_u64(&r, 1, u1 - u0);
	row_u64(&r, 1, s1 - s0);
	row_u64(&r, 1, f[EV_USER_US]);
	row_u64(&r, 1, f[EV_SYS_US]);
	row_u64(&r, sd.ok, sd.softirq_us);
	row_u64(&r, sd.ok, sd.kthread_us);
	row_u64(&r, sd.ok, sd.busy_us);
	row_u64(&r, f[EV_SYS_OK], f[EV_SOFTIRQ_US]);
	row_u64(&r, f[EV_SYS_OK], f[EV_KTHREAD_US]);
	row_u64(&r, f[EV_SYS_OK], f[EV_BUSY_US]);
	/* per MiB: the receiver's window, which ends when all data is in */
	row_f(&r, f[EV_SYS_OK], f[EV_SOFTIRQ_US] / mib);
	row_f(&r, f[EV_SYS_OK], f[EV_KTHREAD_US] / mib);
	row_f(&r, f[EV_SYS_OK], f[EV_BUSY_US] / mib);
	row_f(&r, have_dir && direct + indirect, pct);
	row_u64(&r, have_dir, direct);
	row_u64(&r, have_dir, indirect);
	row_u64(&r, rx_dir, f[EV_DIRECT_RX]);
	row_u64(&r, rx_dir, f[EV_INDIRECT_RX]);
	row_u64(&r, rx_dir, f[EV_ADV_SENT]);
	row_u64(&r, rx_dir, f[EV_ADV_FILLED]);
	row_u64(&r, rx_dir, f[EV_ADV_DEAD]);
	row_u64(&r, rx_dir, f[EV_ADV_CANCELLED]);
	row_u64(&r, have_dir, RSI_DELTA(&i0, &i1, rsi_adverts_received));
	row_u64(&r, have_dir, RSI_DELTA(&i0, &i1, rsi_adverts_used));
	row_u64(&r, have_dir, RSI_DELTA(&i0, &i1, rsi_adverts_stale));
	row_u64(&r, have_dir, RSI_DELTA(&i0, &i1, rsi_tx_phase_switches));
	row_u64(&r, rx_dir, f[EV_RX_SWITCHES]);
	row_u64(&r, have_dir, RSI_DELTA(&i0, &i1, rsi_zcopy_sends));
	row_add(&r, "%s", have_dir ? policy_name(i1.i.rsi_policy) : "");
	row_add(&r, "%s", rx_dir && rx_policy != RSB_EV_UNSET ?
		policy_name(rx_policy) : "");
	row_u64(&r, rx_thresh != RSB_EV_UNSET, rx_thresh);
	row_u64(&r, 1, f[EV_CALLS]);
	row_f(&r, 1, f[EV_FIRST_NS] / 1e6);
	row_add(&r, "%s", f[EV_NUDGED] ? "ok-nudged" : "ok");
	if (opt.csv)
		printf("%.*s\n", (int)r.len, r.buf);

	human("%s eval %s %llu B, %d recvs / %d sends: %.2f MB/s (%.1f MB in %.2f s); process CPU us/MiB: sender %.0f, receiver %.0f",
	      label(), opt.fam == FAM_RDMASTREAM ? policy_name(opt.policy) :
	      "-", (unsigned long long)opt.size, opt.recvs, nsend, mbps,
	      sent / 1e6, secs, snd_cpu / mib, rcv_cpu / mib);
	if (f[EV_SYS_OK])
		human("; system-wide us/MiB (receiver's window): softirq %.0f, kthreads %.0f, all busy %.0f",
		      f[EV_SOFTIRQ_US] / mib, f[EV_KTHREAD_US] / mib,
		      f[EV_BUSY_US] / mib);
	if (have_dir)
		human("; direct %.1f%% of bytes sent; adverts received %llu used %llu stale %llu",
		      pct, (unsigned long long)RSI_DELTA(&i0, &i1,
							 rsi_adverts_received),
		      (unsigned long long)RSI_DELTA(&i0, &i1, rsi_adverts_used),
		      (unsigned long long)RSI_DELTA(&i0, &i1,
						    rsi_adverts_stale));
	if (rx_dir)
		human("; receiver adverts sent %llu filled %llu dead %llu cancelled %llu",
		      (unsigned long long)f[EV_ADV_SENT],
		      (unsigned long long)f[EV_ADV_FILLED],
		      (unsigned long long)f[EV_ADV_DEAD],
		      (unsigned long long)f[EV_ADV_CANCELLED]);
	human("\n");
	dump_rs_info(fd, "client");
	ret = 0;
out:
	free(snap.kt);
	close(fd);
out_free:
	free(tx);
	return ret;
}

/* ---------------------------------------------------------------------- */
/* client: connection rate                                                */

static int one_conn(const struct sockaddr_storage *ss, socklen_t len,
		    uint64_t i)
{
	uint8_t b = RSB_MODE_CONN;
	ssize_t n;
	int fd;

	fd = client_connect(ss, len);
	if (fd < 0)
		return -1;
	if (write_exact(fd, &b, 1, "conn request") ||
	    read_exact(fd, &b, 1, "conn reply"))
		goto err;
	if (b != RSB_CONN_ACK) {
		errmsg("conn %llu: bad reply %#x", (unsigned long long)i, b);
		goto err;
	}
	/* let the server close first, so TIME_WAIT stays on its side */
	n = read_full(fd, &b, 1);
	if (n != 0) {
		errmsg("conn %llu: %s", (unsigned long long)i, n < 0 ?
		       io_strerror(errno) : "unexpected data from server");
		goto err;
	}
	if (close(fd)) {
		errmsg("conn %llu: close: %s", (unsigned long long)i,
		       strerror(errno));
		return -1;
	}
	return 0;
err:
	close(fd);
	return -1;
}

static int run_conn(const struct sockaddr_storage *ss, socklen_t len)
{
	uint64_t warm = warmup_for(opt.iters, 10), i, n = 0, t0, t1, t_end = 0;
	uint64_t start = 0, *samples;
	double secs;

	samples = malloc(opt.iters * sizeof(*samples));
	if (!samples)
		die("out of memory");
	for (i = 0; i < warm; i++)
		if (one_conn(ss, len, i))
			return 1;

	if (opt.seconds > 0)
		t_end = now_ns() + (uint64_t)(opt.seconds * NSEC_PER_SEC);
	start = now_ns();
	for (i = 0; i < opt.iters; i++) {
		t0 = now_ns();
		if (one_conn(ss, len, warm + i)) {
			free(samples);
			return 1;
		}
		t1 = now_ns();
		samples[n++] = t1 - t0;
		if (t_end && t1 >= t_end)
			break;
	}
	secs = (now_ns() - start) / 1e9;
	qsort(samples, n, sizeof(*samples), cmp_u64);

	human("%s conn: %.1f conn/s  (%llu connections in %.3f s; per connection p50 %.1f us, p99 %.1f us; %llu warm-up)\n",
	      label(), n / secs, (unsigned long long)n, secs,
	      pct_us(samples, n, 50), pct_us(samples, n, 99),
	      (unsigned long long)warm);
	csv("conn", 1, 1, "rate", n / secs, "conn/s");
	csv("conn", 1, 1, "conn_p50", pct_us(samples, n, 50), "us");
	csv("conn", 1, 1, "conn_p99", pct_us(samples, n, 99), "us");
	csv("conn", 1, 1, "connections", n, "count");
	free(samples);
	return 0;
}

/* ---------------------------------------------------------------------- */
/* client: memory of idle connections                                     */

/* A /proc/meminfo field in KiB, or -1. */
static long long meminfo_kib(const char *field)
{
	char line[256];
	size_t n = strlen(field);
	long long v = -1;
	FILE *f = fopen("/proc/meminfo", "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, field, n) && line[n] == ':') {
			v = strtoll(line + n + 1, NULL, 10);
			break;
		}
	fclose(f);
	return v;
}

/* rdmastream's ring bytes reserved on this host (module parameter), or -1. */
static long long rs_ring_bytes(void)
{
	long long v = -1;
	FILE *f = fopen("/sys/module/rdmastream/parameters/mem_used", "r");

	if (!f)
		return -1;
	if (fscanf(f, "%lld", &v) != 1)
		v = -1;
	fclose(f);
	return v;
}

/*
 * -P connections, each established and used for a 1-byte exchange, then
 * held idle for a second: how much memory (MemAvailable, this host: both
 * ends when the server runs here too) and, for rdmastream, how many ring
 * bytes each costs.
 */
/*
 * Kernel memory that a connection's objects take besides the rings: slab
 * (kmalloc'd QP state, MR page lists, sockets) plus vmalloc (rdma_rxe's
 * send and receive queues), from /proc/meminfo. Unlike MemAvailable it
 * does not move with the page cache. The rings (vmap of single pages)
 * are in neither; rs_ring_bytes() counts them.
 */
static long long kmem_kib(void)
{
	long long slab = meminfo_kib("Slab"), vm = meminfo_kib("VmallocUsed");

	return slab < 0 || vm < 0 ? -1 : slab + vm;
}

static int run_idle(const struct sockaddr_storage *ss, socklen_t len)
{
	long long m0, m1, r0, r1, k0, k1;
	int *fds, i, n = 0, ret = 1;
	uint8_t b;

	fds = calloc(opt.conns, sizeof(*fds));
	if (!fds)
		die("out of memory");
	sleep(1);
	m0 = meminfo_kib("MemAvailable");
	k0 = kmem_kib();
	r0 = rs_ring_bytes();
	for (n = 0; n < opt.conns; n++) {
		b = RSB_MODE_IDLE;
		fds[n] = client_connect(ss, len);
		if (fds[n] < 0)
			goto out;
		if (write_exact(fds[n], &b, 1, "idle request") ||
		    read_exact(fds[n], &b, 1, "idle reply")) {
			close(fds[n]);
			goto out;
		}
		if (b != RSB_CONN_ACK) {
			errmsg("idle %d: bad reply %#x", n, b);
			close(fds[n]);
			goto out;
		}
	}
	sleep(1);
	m1 = meminfo_kib("MemAvailable");
	k1 = kmem_kib();
	r1 = rs_ring_bytes();
	if (m0 < 0 || m1 < 0) {
		errmsg("idle: no MemAvailable in /proc/meminfo");
		goto out;
	}
	human("%s idle: %d connections: %.1f KiB each (MemAvailable %lld -> %lld KiB)",
	      label(), n, (double)(m0 - m1) / n, m0, m1);
	if (opt.fam == FAM_RDMASTREAM && r0 >= 0 && r1 >= 0)
		human(", rings %.1f KiB each", (r1 - r0) / 1024.0 / n);
	if (k0 >= 0 && k1 >= 0)
		human(", slab+vmalloc %.1f KiB each", (double)(k1 - k0) / n);
	human("\n");
	csv("idle", 1, n, "mem_per_conn", (double)(m0 - m1) / n, "KiB");
	if (opt.fam == FAM_RDMASTREAM && r0 >= 0 && r1 >= 0)
		csv("idle", 1, n, "rings_per_conn", (r1 - r0) / 1024.0 / n,
		    "KiB");
	if (k0 >= 0 && k1 >= 0)
		csv("idle", 1, n, "kmem_per_conn", (double)(k1 - k0) / n,
		    "KiB");
	ret = 0;
out:
	for (i = 0; i < n; i++)
		close(fds[i]);
	free(fds);
	return ret;
}

/* ---------------------------------------------------------------------- */
/* main                                                                   */

static void on_alarm(int sig)
{
	static const char msg[] = ": overall deadline (-A) exceeded, aborting\n";
	ssize_t r;

	(void)sig;
	r = write(2, prog, strlen(prog));
	r = write(2, msg, sizeof(msg) - 1);
	(void)r;
	_exit(3);
}

static void __attribute__((noreturn)) usage(int code)
{
	if (code) {
		fprintf(stderr, "usage: %s -s ... | -c ADDR ...  (%s -h for help)\n",
			prog, prog);
		exit(code);
	}
	fprintf(stdout,
"usage: %s -s [-a ADDR] [-p PORT] [-n COUNT] [-f FAMILY] [-A SECS] [-v]\n"
"       %s -c ADDR [-p PORT] [-f FAMILY] -m lat  [-S SIZE] [-i ITERS] [-w N] [-t SECS]\n"
"       %s -c ADDR [-p PORT] [-f FAMILY] -m bw   [-S SIZE] (-t SECS | -b BYTES) [-P N] [-V]\n"
"       %s -c ADDR [-p PORT] [-f FAMILY] -m conn [-i N] [-w N] [-t SECS]\n"
"       %s -c ADDR [-p PORT] [-f FAMILY] -m eval [-S SIZE] [-R N] (-t SECS | -b BYTES)\n"
"       %s -c ADDR [-p PORT] [-f FAMILY] -m idle [-P N]\n"
"       %s -c ADDR [-p PORT] [-f FAMILY] -m queue [-S SIZE] [-t SECS]\n"
"                  [-d POLICY] [-X BYTES]\n"
"\n"
"  -f FAMILY   rdmastream (default), tcp, smc (AF_SMC, SMCPROTO_SMC[6]) or\n"
"              smc-ipproto (AF_INET[6], IPPROTO_SMC: kernels 6.11+)\n"
"  -F NUM      socket family number for rdmastream (default %d)\n"
"  -s          server: serve any client mode, forever or for -n COUNT connections\n"
"  -a ADDR     server bind address (default 0.0.0.0)\n"
"  -c ADDR     client: connect to ADDR\n"
"  -p PORT     port (default %s)\n"
"  -m MODE     lat: ping-pong of SIZE bytes, round trip percentiles\n"
"              bw: stream SIZE-byte writes, throughput measured at the receiver\n"
"              (the sum over -P connections); CPU per GiB of each process and\n"
"              system-wide on each host (softirq, kernel threads, all busy)\n"
"              conn: connect + 1 byte exchange + close, per second\n"
"              eval: policy evaluation (MacArthur-Russell): -R receiver threads\n"
"              each loop on a blocking recv(SIZE) on the server's one socket,\n"
"              max(1, R/2) client threads write SIZE-byte chunks; throughput,\n"
"              CPU per MiB on both ends (process, and system-wide softirq and\n"
"              kernel threads from /proc), percent of bytes sent direct\n"
"              idle: -P connections established, 1 byte each way, held idle\n"
"              1 s: MemAvailable per connection on this host (both ends when\n"
"              the server runs here), and rdmastream's ring bytes (mem_used)\n"
"              queue: the server reads nothing for -t SECS (default 8); the\n"
"              client writes SIZE-byte chunks without blocking until no write\n"
"              has gone in for 1 s: the bytes a writer can queue unread\n"
"              before it blocks; then the server checks every byte\n"
"  -S SIZE     message/write size, suffix k/m (default 64; bw default 64k)\n"
"  -i N        lat iterations (default 10000) / conn connections (default 1000)\n"
"  -w N        warm-up iterations (default iters/10, at most 1000 lat / 10 conn)\n"
"  -t SECS     bw duration (default 5); lat/conn: stop early after SECS\n"
"              (the warm-up has SECS of its own)\n"
"  -b BYTES    bw: send BYTES in total (split over -P connections) instead of -t\n"
"  -P N        bw: N parallel connections (default 1); idle: N connections\n"
"  -V          bw: verify every byte on the server (costs CPU)\n"
"  -R N        eval: outstanding receives = receiver threads (1 .. %d, default 1)\n"
"  -d POLICY   rdmastream: RDMASTREAM_POLICY dynamic, direct(-only) or\n"
"              indirect(-only) on the socket; a server sets it on its listening\n"
"              and accepted sockets, an eval client asks the server for it too\n"
"              (ignored for other families; failing to set it is an error)\n"
"  -X BYTES    rdmastream: RDMASTREAM_DIRECT_THRESHOLD, the same way as -d\n"
"  -B USEC    lat: SO_BUSY_POLL USEC on both ends (CSV mode \"busy\")\n"
"  -Y          bw (timed): also a 64 B ping-pong on a connection of its own\n"
"              during the run: round trip p50/p99 under that load\n"
"  -W BYTES    SO_SNDBUF and SO_RCVBUF on every socket (a server: on its\n"
"              listener, which passes them on), as a program that sets its\n"
"              buffers would (no autotuning)\n"
"  -L BYTES    lat: read messages with recv()s of BYTES (a large buffer, as\n"
"              many applications use), on the side given it\n"
"  -T SECS     per-call socket timeout, SO_RCVTIMEO/SO_SNDTIMEO (default 30, 0 off)\n"
"  -A SECS     overall deadline, exit 3 when exceeded (client default: automatic)\n"
"  -o FMT      text (default) or csv: CSV rows on stdout, text line on stderr\n"
"  -H          print the CSV header row first\n"
"  -l LABEL    transport name in the output (default: FAMILY)\n"
"  -v          verbose (server: per-connection lines; RDMASTREAM_INFO dumps)\n"
"\n"
"CSV columns: transport,mode,size,conns,metric,value,unit. MB/s = 10^6 bytes/s.\n"
"  -m eval prints one row per run instead; -H shows its columns.\n"
"Exit status: 0 ok, 1 error, 2 usage, 3 deadline exceeded.\n",
		prog, prog, prog, prog, prog, prog, prog, AF_RDMASTREAM, RSB_DEFAULT_PORT,
		RSB_MAX_RECVS);
	exit(code);
}

static uint64_t parse_size(const char *s, const char *what)
{
	unsigned long long v;
	char *end;

	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno || end == s || *s == '-')
		goto bad;
	switch (*end) {
	case 'k': case 'K':
		v <<= 10, end++;
		break;
	case 'm': case 'M':
		v <<= 20, end++;
		break;
	case 'g': case 'G':
		v <<= 30, end++;
		break;
	}
	if (*end == 'i' || *end == 'B')
		end++;
	if (*end == 'B')
		end++;
	if (*end)
		goto bad;
	return v;
bad:
	errmsg("invalid %s: %s", what, s);
	usage(2);
}

static double parse_secs(const char *s, const char *what)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || *end || v < 0 || v > 1e7) {
		errmsg("invalid %s: %s", what, s);
		usage(2);
	}
	return v;
}

int main(int argc, char **argv)
{
	struct sockaddr_storage ss;
	struct sigaction sa;
	struct rlimit rl;
	int size_set = 0, iters_set = 0, c, ret;
	socklen_t len;
	uint64_t v;

	while ((c = getopt(argc, argv, "sc:a:p:f:F:m:S:i:w:t:b:P:n:VT:A:o:Hl:vhd:R:X:L:B:YW:")) != -1) {
		switch (c) {
		case 's':
			opt.server = 1;
			break;
		case 'c':
			opt.client = 1;
			opt.addr = optarg;
			break;
		case 'a':
			opt.addr = optarg;
			break;
		case 'p':
			opt.port = optarg;
			break;
		case 'f':
			if (!strcmp(optarg, "rdmastream"))
				opt.fam = FAM_RDMASTREAM;
			else if (!strcmp(optarg, "tcp"))
				opt.fam = FAM_TCP;
			else if (!strcmp(optarg, "smc"))
				opt.fam = FAM_SMC;
			else if (!strcmp(optarg, "smc-ipproto"))
				opt.fam = FAM_SMC_IPPROTO;
			else {
				errmsg("unknown family %s", optarg);
				usage(2);
			}
			opt.fam_name = optarg;
			break;
		case 'F':
			v = parse_size(optarg, "family number");
			if (v < 1 || v > 255) {
				errmsg("invalid family number %s", optarg);
				usage(2);
			}
			opt.rs_domain = v;
			break;
		case 'm':
			if (!strcmp(optarg, "lat"))
				opt.mode = RSB_MODE_LAT;
			else if (!strcmp(optarg, "bw"))
				opt.mode = RSB_MODE_BW;
			else if (!strcmp(optarg, "conn"))
				opt.mode = RSB_MODE_CONN;
			else if (!strcmp(optarg, "eval"))
				opt.mode = RSB_MODE_EVAL;
			else if (!strcmp(optarg, "idle"))
				opt.mode = RSB_MODE_IDLE;
			else if (!strcmp(optarg, "queue"))
				opt.mode = RSB_MODE_QUEUE;
			else {
				errmsg("unknown mode %s", optarg);
				usage(2);
			}
			break;
		case 'L':
			opt.rxbuf = parse_size(optarg, "recv buffer");
			break;
		case 'B':
			v = parse_size(optarg, "busy-poll time");
			if (v < 1 || v > 65535) {
				errmsg("-B must be 1 .. 65535 us");
				usage(2);
			}
			opt.busy = v;
			break;
		case 'Y':
			opt.loaded = 1;
			break;
		case 'W':
			v = parse_size(optarg, "buffer size");
			if (v < 1 || v > INT_MAX / 2) {
				errmsg("-W must be 1 .. %d bytes", INT_MAX / 2);
				usage(2);
			}
			opt.bufsz = v;
			break;
		case 'S':
			opt.size = parse_size(optarg, "size");
			size_set = 1;
			break;
		case 'i':
			opt.iters = parse_size(optarg, "iterations");
			iters_set = 1;
			break;
		case 'w':
			opt.warmup = parse_size(optarg, "warm-up");
			break;
		case 't':
			opt.seconds = parse_secs(optarg, "seconds");
			break;
		case 'b':
			opt.total = parse_size(optarg, "byte count");
			break;
		case 'P':
			v = parse_size(optarg, "connection count");
			opt.conns = v > RSB_MAX_CONNS ? RSB_MAX_CONNS + 1 : v;
			break;
		case 'n':
			opt.count = parse_size(optarg, "connection count");
			break;
		case 'V':
			opt.verify = 1;
			break;
		case 'T':
			opt.timeout = parse_secs(optarg, "timeout");
			break;
		case 'A':
			opt.deadline = parse_secs(optarg, "deadline");
			break;
		case 'o':
			if (!strcmp(optarg, "csv"))
				opt.csv = 1;
			else if (!strcmp(optarg, "text"))
				opt.csv = 0;
			else {
				errmsg("unknown output format %s", optarg);
				usage(2);
			}
			break;
		case 'H':
			opt.csv_header = 1;
			break;
		case 'l':
			opt.label = optarg;
			break;
		case 'v':
			opt.verbose = 1;
			break;
		case 'd':
			opt.policy = parse_policy(optarg);
			if (opt.policy < 0) {
				errmsg("unknown policy %s (dynamic, direct or indirect)",
				       optarg);
				usage(2);
			}
			break;
		case 'R':
			v = parse_size(optarg, "number of receives");
			opt.recvs = v > RSB_MAX_RECVS ? RSB_MAX_RECVS + 1 : v;
			break;
		case 'X':
			v = parse_size(optarg, "direct threshold");
			if (v > INT_MAX) {
				errmsg("direct threshold too large");
				usage(2);
			}
			opt.threshold = v;
			break;
		case 'h':
			usage(0);
		default:
			usage(2);
		}
	}
	if (optind != argc) {
		errmsg("unexpected argument %s", argv[optind]);
		usage(2);
	}
	if (opt.server == opt.client) {
		errmsg("need exactly one of -s (server) or -c ADDR (client)");
		usage(2);
	}
	if (opt.server && !opt.addr)
		opt.addr = "0.0.0.0";

	if ((opt.mode == RSB_MODE_BW || opt.mode == RSB_MODE_EVAL ||
	     opt.mode == RSB_MODE_QUEUE) && !size_set)
		opt.size = 64 << 10;
	if (opt.mode == RSB_MODE_CONN && !iters_set)
		opt.iters = 1000;
	if ((opt.mode == RSB_MODE_BW || opt.mode == RSB_MODE_EVAL) &&
	    !opt.total && opt.seconds <= 0)
		opt.seconds = 5;
	if (opt.recvs < 1 || opt.recvs > RSB_MAX_RECVS) {
		errmsg("-R must be 1 .. %d", RSB_MAX_RECVS);
		usage(2);
	}
	if (opt.recvs > 1 && opt.mode != RSB_MODE_EVAL) {
		errmsg("-R only applies to -m eval");
		usage(2);
	}
	if (opt.busy && opt.mode != RSB_MODE_LAT) {
		errmsg("-B only applies to -m lat");
		usage(2);
	}
	if (opt.loaded && (opt.mode != RSB_MODE_BW || opt.total)) {
		errmsg("-Y only applies to a timed -m bw (-t, not -b)");
		usage(2);
	}
	if (opt.mode == RSB_MODE_QUEUE) {
		if (opt.seconds > 0)
			opt.hold_ms = opt.seconds * 1000;
		if (opt.hold_ms < 4000 || opt.hold_ms > 60000) {
			errmsg("-m queue: -t must be 4 .. 60 s");
			usage(2);
		}
	}
	if (opt.mode == RSB_MODE_EVAL && opt.verify) {
		errmsg("-V does not apply to -m eval (concurrent writers interleave)");
		usage(2);
	}
	if (opt.fam != FAM_RDMASTREAM &&
	    (opt.policy >= 0 || opt.threshold >= 0))
		errmsg("note: -d/-X apply to rdmastream only; not set for %s",
		       opt.fam_name);
	if (opt.size < 1 || opt.size > RSB_MAX_SIZE) {
		errmsg("size must be 1 .. %u bytes", RSB_MAX_SIZE);
		usage(2);
	}
	if (opt.conns < 1 || opt.conns > RSB_MAX_CONNS) {
		errmsg("-P must be 1 .. %d", RSB_MAX_CONNS);
		usage(2);
	}
	if (opt.conns > 1 && opt.mode != RSB_MODE_BW &&
	    opt.mode != RSB_MODE_IDLE) {
		errmsg("-P only applies to -m bw and -m idle");
		usage(2);
	}
	if (opt.iters < 1 || opt.iters > 100000000) {
		errmsg("-i must be 1 .. 100000000");
		usage(2);
	}

	/* -P 128 (and its server): a few descriptors per connection */
	if (!getrlimit(RLIMIT_NOFILE, &rl) && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	signal(SIGPIPE, SIG_IGN);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_alarm;
	sigaction(SIGALRM, &sa, NULL);
	if (!opt.server && !opt.deadline) {
		/* automatic: generous, but never hang forever */
		if ((opt.mode == RSB_MODE_BW || opt.mode == RSB_MODE_EVAL) &&
		    !opt.total)
			opt.deadline = opt.seconds + 2 * opt.timeout + 30;
		else if (opt.seconds > 0)
			opt.deadline = opt.seconds + 2 * opt.timeout + 30;
		else
			opt.deadline = 600;
	}
	if (opt.deadline)
		alarm(opt.deadline);
	/* eval server: wakes receivers stuck after end of stream */
	sa.sa_handler = on_nudge;
	sigaction(SIGUSR1, &sa, NULL);

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (opt.server)
		return run_server();

	if (resolve(opt.addr, opt.port, 0, &ss, &len))
		return 1;
	if (opt.csv && opt.csv_header)
		fputs(opt.mode == RSB_MODE_EVAL ? ev_header :
		      "transport,mode,size,conns,metric,value,unit\n", stdout);
	switch (opt.mode) {
	case RSB_MODE_LAT:
		ret = run_lat(&ss, len);
		break;
	case RSB_MODE_BW:
		ret = run_bw(&ss, len);
		break;
	case RSB_MODE_EVAL:
		ret = run_eval(&ss, len);
		break;
	case RSB_MODE_IDLE:
		ret = run_idle(&ss, len);
		break;
	case RSB_MODE_QUEUE:
		ret = run_queue(&ss, len);
		break;
	default:
		ret = run_conn(&ss, len);
		break;
	}
	return ret;
}
