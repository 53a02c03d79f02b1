/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Helpers shared by the rdmastream selftests.
 *
 * By default the tests exercise AF_RDMASTREAM sockets on the address in
 * RS_ADDR. With RS_FAMILY=tcp the very same tests run against the kernel's
 * TCP (AF_INET, IPPROTO_TCP; AF_INET6 where a test uses sockaddr_in6) on
 * RS_ADDR or 127.0.0.1, which is how the expectations are validated.
 *
 * Environment:
 *   RS_FAMILY   "tcp" to validate against TCP ("mptcp": against MPTCP),
 *               "inet": rdmastream through the IPPROTO route
 *               (socket(AF_INET or AF_INET6, SOCK_STREAM,
 *               IPPROTO_RDMASTREAM)), anything else: rdmastream through
 *               AF_RDMASTREAM
 *   RS_IPPROTO  protocol number of the IPPROTO route (default: the
 *               module's ipproto parameter, else IPPROTO_RDMASTREAM)
 *   RS_AF       family number of rdmastream.ko if it was loaded with
 *               family=N (default AF_RDMASTREAM)
 *   RS_ADDR     local IPv4 address of the RDMA netdev
 *   RS_PEER     address of the other host (defaults to RS_ADDR)
 *   RS_ADDR6    IPv6 address to use for the native IPv6 tests
 *   RS_HOST     1 or 2 (two-host tests)
 *   RS_NETDEV, RS_RDMADEV, RS_MODULE, RS_OUT: see run-tests
 */
#ifndef RS_COMMON_H
#define RS_COMMON_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <arpa/inet.h>
#include <dirent.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <linux/rdmastream.h>

#include "kselftest_harness.h"

#ifndef SIOCINQ
#define SIOCINQ		FIONREAD
#endif
#ifndef SIOCOUTQ
#define SIOCOUTQ	TIOCOUTQ
#endif

#define RS_KIB		1024UL
#define RS_MIB		(1024UL * 1024UL)

/* Unused addresses inside 198.18.0.0/15 for the "nobody there" cases. */
#define RS_NOHOST_ADDR	"198.18.0.77"	/* on the subnet, no such host */
#define RS_NOHOST_ALT	"198.18.0.78"
#define RS_NOROUTE_ADDR	"198.19.255.77"	/* off the subnet, no route */

struct rs_config {
	bool tcp;		/* RS_FAMILY=tcp */
	bool ip;		/* sockets of AF_INET/AF_INET6: tcp or inet */
	int family;		/* domain for socket() */
	int protocol;		/* protocol for socket() */
	struct in_addr addr;	/* RS_ADDR */
	struct in_addr peer;	/* RS_PEER */
	int host;		/* RS_HOST */
	const char *netdev;	/* RS_NETDEV */
	const char *rdmadev;	/* RS_RDMADEV */
	const char *module;	/* RS_MODULE */
	const char *out;	/* RS_OUT */
};

static struct rs_config rs;

static inline unsigned long rs_env_ulong(const char *name, unsigned long def)
{
	const char *v = getenv(name);
	char *end;
	unsigned long n;

	if (!v || !*v)
		return def;
	errno = 0;
	n = strtoul(v, &end, 0);
	if (errno || *end) {
		fprintf(stderr, "# ignoring bad %s=%s\n", name, v);
		return def;
	}
	return n;
}

static inline const char *rs_env_str(const char *name, const char *def)
{
	const char *v = getenv(name);

	return v && *v ? v : def;
}

static inline void rs_parse_addr(const char *name, const char *s,
				 struct in_addr *a)
{
	if (inet_pton(AF_INET, s, a) != 1)
		ksft_exit_fail_msg("%s=%s is not an IPv4 address\n", name, s);
}

/* The IPPROTO route's number: RS_IPPROTO, else the module's. */
static inline int rs_ipproto(void)
{
	int proto = IPPROTO_RDMASTREAM;
	FILE *f;

	f = fopen("/sys/module/rdmastream/parameters/ipproto", "r");
	if (f) {
		if (fscanf(f, "%d", &proto) != 1)
			proto = IPPROTO_RDMASTREAM;
		fclose(f);
	}
	return rs_env_ulong("RS_IPPROTO", proto);
}

/*
 * Read the environment before the harness starts. When the family cannot
 * be used at all, the whole binary is reported as skipped.
 */
static void __attribute__((constructor)) rs_config_init(void)
{
	const char *fam = rs_env_str("RS_FAMILY", "rdmastream");
	const char *addr;
	int fd;

	/* mptcp: a second TCP-compatible implementation to check against */
	rs.tcp = !strcmp(fam, "tcp") || !strcmp(fam, "mptcp");
	rs.ip = rs.tcp || !strcmp(fam, "inet");
	rs.family = rs.ip ? AF_INET : (int)rs_env_ulong("RS_AF",
							AF_RDMASTREAM);
	rs.protocol = rs.tcp ? IPPROTO_TCP : 0;
	if (!strcmp(fam, "mptcp"))
		rs.protocol = 262;	/* IPPROTO_MPTCP */
	if (rs.ip && !rs.tcp)
		rs.protocol = rs_ipproto();
	rs.host = rs_env_ulong("RS_HOST", 1);
	rs.netdev = rs_env_str("RS_NETDEV", NULL);
	rs.rdmadev = rs_env_str("RS_RDMADEV", "rxe0");
	rs.module = rs_env_str("RS_MODULE", NULL);
	rs.out = rs_env_str("RS_OUT", NULL);

	/* Tests must not die of SIGPIPE unless they ask for it. */
	signal(SIGPIPE, SIG_IGN);

	addr = rs_env_str("RS_ADDR", rs.tcp ? "127.0.0.1" : NULL);
	if (!addr) {
		ksft_print_header();
		ksft_exit_skip("RS_ADDR is not set (or use RS_FAMILY=tcp)\n");
	}
	rs_parse_addr("RS_ADDR", addr, &rs.addr);
	rs_parse_addr("RS_PEER", rs_env_str("RS_PEER", addr), &rs.peer);

	fd = socket(rs.family, SOCK_STREAM, rs.protocol);
	if (fd < 0) {
		ksft_print_header();
		ksft_exit_skip("socket(%d, SOCK_STREAM, %d): %s%s\n",
			       rs.family, rs.protocol, strerror(errno),
			       rs.tcp ? "" : " (is rdmastream.ko loaded?)");
	}
	close(fd);
}

/* Informational line in the TAP output (stderr is unbuffered). */
#define rs_info(fmt, ...) fprintf(stderr, "# " fmt "\n", ##__VA_ARGS__)

/* ---- time ---- */

static inline double rs_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static inline void rs_msleep(unsigned int ms)
{
	struct timespec ts = {
		.tv_sec = ms / 1000,
		.tv_nsec = (ms % 1000) * 1000000L,
	};

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

/*
 * Safety net for helper processes that outlive the harness: the harness
 * kills a test's process group on timeout, but not when it is killed
 * itself (e.g. by the runner's wall-clock limit).
 */
static inline void rs_watchdog(unsigned int secs)
{
	alarm(secs);
}

static void rs_on_alarm(int sig)
{
	(void)sig;
}

/*
 * Make a blocking call of this (single threaded) test fail with EINTR if
 * it is still blocked after secs, so that an ignored timeout fails the
 * test cleanly instead of hanging it. rs_interrupt_cancel() undoes it.
 */
static inline void rs_interrupt_after(unsigned int secs)
{
	struct sigaction sa = { .sa_handler = rs_on_alarm };	/* no restart */

	sigaction(SIGALRM, &sa, NULL);
	alarm(secs);
}

static inline void rs_interrupt_cancel(void)
{
	alarm(0);
	signal(SIGALRM, SIG_DFL);
	rs_watchdog(120);
}

/* A /proc/meminfo field in kB (field with its colon), or -1. */
static inline long long rs_meminfo(const char *field)
{
	char line[256];
	long long v = -1;
	FILE *f;

	f = fopen("/proc/meminfo", "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, field, strlen(field)))
			v = strtoll(line + strlen(field), NULL, 10);
	fclose(f);
	return v;
}

/* The number a sysfs or proc file starts with, or -1. */
static inline long long rs_read_ll(const char *path)
{
	long long v = -1;
	FILE *f = fopen(path, "r");

	if (!f)
		return -1;
	if (fscanf(f, "%lld", &v) != 1)
		v = -1;
	fclose(f);
	return v;
}

/*
 * Live sockets of the module, orphans included, or -1: the "sockets"
 * column of /proc/net/protocols, summed over its protos (RDMASTREAM for
 * AF_RDMASTREAM, RDMASTREAM-IP and RDMASTREAM-IPv6 for the IPPROTO route).
 */
static inline long rs_proto_sockets(void)
{
	char line[512], name[64];
	long active = -1, size, n;
	FILE *f;

	f = fopen("/proc/net/protocols", "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "%63s %ld %ld", name, &size, &n) == 3 &&
		    (!strcmp(name, "RDMASTREAM") ||
		     !strncmp(name, "RDMASTREAM-", 11)))
			active = (active < 0 ? 0 : active) + n;
	fclose(f);
	return active;
}

/* ---- addresses ---- */

static inline socklen_t rs_sin(struct sockaddr_in *sin, struct in_addr a,
			       unsigned short port)
{
	memset(sin, 0, sizeof(*sin));
	sin->sin_family = AF_INET;
	sin->sin_addr = a;
	sin->sin_port = htons(port);
	return sizeof(*sin);
}

static inline struct in_addr rs_inaddr(const char *s)
{
	struct in_addr a;

	inet_pton(AF_INET, s, &a);
	return a;
}

/* An address in 198.18.0.0/15 that no host on the subnet answers for. */
static inline struct in_addr rs_nohost_addr(void)
{
	struct in_addr a = rs_inaddr(RS_NOHOST_ADDR);

	if (a.s_addr == rs.addr.s_addr || a.s_addr == rs.peer.s_addr)
		a = rs_inaddr(RS_NOHOST_ALT);
	return a;
}

static inline bool rs_sin_eq(const struct sockaddr_in *a,
			     const struct sockaddr_in *b)
{
	return a->sin_family == b->sin_family &&
	       a->sin_port == b->sin_port &&
	       a->sin_addr.s_addr == b->sin_addr.s_addr;
}

static inline const char *rs_ntop(const void *sa, char *buf, size_t len)
{
	const struct sockaddr_in6 *s6 = sa;
	const struct sockaddr_in *s4 = sa;
	char a[INET6_ADDRSTRLEN] = "?";

	if (s4->sin_family == AF_INET) {
		inet_ntop(AF_INET, &s4->sin_addr, a, sizeof(a));
		snprintf(buf, len, "%s:%u", a, ntohs(s4->sin_port));
	} else if (s6->sin6_family == AF_INET6) {
		inet_ntop(AF_INET6, &s6->sin6_addr, a, sizeof(a));
		snprintf(buf, len, "[%s]:%u", a, ntohs(s6->sin6_port));
	} else {
		snprintf(buf, len, "family %d", s4->sin_family);
	}
	return buf;
}

/* ---- sockets ---- */

/*
 * RS_FALLBACK=N (run-tests' fb:NAME): every socket made here gets
 * RDMASTREAM_FALLBACK N (2: TCP forced, docs/fallback.md).
 */
static inline int rs_fallback_env(int fd)
{
	const char *v = getenv("RS_FALLBACK");
	int mode;

	if (fd >= 0 && v && *v && !rs.tcp) {
		mode = atoi(v);
		setsockopt(fd, SOL_RDMASTREAM, RDMASTREAM_FALLBACK, &mode,
			   sizeof(mode));
	}
	return fd;
}

static inline int rs_socket(int flags)
{
	return rs_fallback_env(socket(rs.family, SOCK_STREAM | flags,
				      rs.protocol));
}

/* A socket to be used with struct sockaddr_in6 addresses. */
static inline int rs_socket6(int flags)
{
	return rs_fallback_env(socket(rs.ip ? AF_INET6 : rs.family,
				      SOCK_STREAM | flags, rs.protocol));
}

static inline int rs_setint(int fd, int level, int opt, int val)
{
	return setsockopt(fd, level, opt, &val, sizeof(val));
}

static inline int rs_getint(int fd, int level, int opt)
{
	socklen_t len = sizeof(int);
	int val = -1;

	if (getsockopt(fd, level, opt, &val, &len))
		return -1;
	return val;
}

static inline int rs_sock_error(int fd)
{
	return rs_getint(fd, SOL_SOCKET, SO_ERROR);
}

static inline int rs_set_nonblock(int fd, bool on)
{
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0)
		return -1;
	fl = on ? fl | O_NONBLOCK : fl & ~O_NONBLOCK;
	return fcntl(fd, F_SETFL, fl);
}

static inline int rs_set_timeo(int fd, int opt, unsigned int ms)
{
	struct timeval tv = {
		.tv_sec = ms / 1000,
		.tv_usec = (ms % 1000) * 1000,
	};

	return setsockopt(fd, SOL_SOCKET, opt, &tv, sizeof(tv));
}

/* A bound RS_ADDR:port socket, no listen. */
static inline int rs_bound(struct __test_metadata *_metadata,
			   unsigned short port, struct sockaddr_in *sin)
{
	socklen_t len = sizeof(*sin);
	int fd;

	fd = rs_socket(0);
	ASSERT_GE(fd, 0) TH_LOG("socket: %s", strerror(errno));
	rs_sin(sin, rs.addr, port);
	ASSERT_EQ(0, bind(fd, (struct sockaddr *)sin, sizeof(*sin)))
		TH_LOG("bind: %s", strerror(errno));
	ASSERT_EQ(0, getsockname(fd, (struct sockaddr *)sin, &len));
	return fd;
}

/*
 * Listening socket on RS_ADDR with an ephemeral port; the bound address
 * is returned in *sin. bufsz, when non-zero, sets SO_SNDBUF/SO_RCVBUF
 * before listen() so the accepted sockets inherit them.
 */
static inline int rs_listener_opts(struct __test_metadata *_metadata,
				   struct sockaddr_in *sin, int backlog, int bufsz)
{
	socklen_t len = sizeof(*sin);
	int fd;

	fd = rs_socket(0);
	ASSERT_GE(fd, 0) TH_LOG("socket: %s", strerror(errno));
	if (bufsz) {
		ASSERT_EQ(0, rs_setint(fd, SOL_SOCKET, SO_SNDBUF, bufsz));
		ASSERT_EQ(0, rs_setint(fd, SOL_SOCKET, SO_RCVBUF, bufsz));
	}
	rs_sin(sin, rs.addr, 0);
	ASSERT_EQ(0, bind(fd, (struct sockaddr *)sin, sizeof(*sin)))
		TH_LOG("bind: %s", strerror(errno));
	ASSERT_EQ(0, listen(fd, backlog))
		TH_LOG("listen: %s", strerror(errno));
	ASSERT_EQ(0, getsockname(fd, (struct sockaddr *)sin, &len));
	ASSERT_NE(0, sin->sin_port);
	return fd;
}

static inline int rs_listener(struct __test_metadata *_metadata,
			      struct sockaddr_in *sin)
{
	return rs_listener_opts(_metadata, sin, 16, 0);
}

static inline int rs_connect_opts(struct __test_metadata *_metadata,
				  const struct sockaddr_in *sin, int bufsz)
{
	int fd;

	fd = rs_socket(0);
	ASSERT_GE(fd, 0) TH_LOG("socket: %s", strerror(errno));
	if (bufsz) {
		ASSERT_EQ(0, rs_setint(fd, SOL_SOCKET, SO_SNDBUF, bufsz));
		ASSERT_EQ(0, rs_setint(fd, SOL_SOCKET, SO_RCVBUF, bufsz));
	}
	ASSERT_EQ(0, connect(fd, (const struct sockaddr *)sin, sizeof(*sin)))
		TH_LOG("connect: %s", strerror(errno));
	return fd;
}

static inline int rs_connect(struct __test_metadata *_metadata,
			     const struct sockaddr_in *sin)
{
	return rs_connect_opts(_metadata, sin, 0);
}

static inline int rs_accept(struct __test_metadata *_metadata, int lfd)
{
	int fd;

	fd = accept(lfd, NULL, NULL);
	ASSERT_GE(fd, 0) TH_LOG("accept: %s", strerror(errno));
	return fd;
}

/* A connected pair over RS_ADDR: *cfd is the client, *sfd the server. */
static inline void rs_pair_opts(struct __test_metadata *_metadata, int *cfd,
				int *sfd, int bufsz)
{
	struct sockaddr_in sin;
	int lfd;

	lfd = rs_listener_opts(_metadata, &sin, 4, bufsz);
	*cfd = rs_connect_opts(_metadata, &sin, bufsz);
	*sfd = rs_accept(_metadata, lfd);
	close(lfd);
}

static inline void rs_pair(struct __test_metadata *_metadata, int *cfd,
			   int *sfd)
{
	rs_pair_opts(_metadata, cfd, sfd, 0);
}

/* ---- I/O ---- */

/* poll() one fd: revents, 0 on timeout, -1 on error. */
static inline int rs_poll(int fd, short events, int timeout_ms)
{
	struct pollfd pfd = { .fd = fd, .events = events };
	int ret;

	do {
		ret = poll(&pfd, 1, timeout_ms);
	} while (ret < 0 && errno == EINTR);
	return ret > 0 ? pfd.revents : ret;
}

/* Send all of buf; returns len, or -1 with errno (bytes sent are lost). */
static inline ssize_t rs_send_all(int fd, const void *buf, size_t len,
				  int flags)
{
	const char *p = buf;
	size_t done = 0;
	ssize_t n;

	while (done < len) {
		n = send(fd, p + done, len - done, flags);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		done += n;
	}
	return done;
}

/* Receive until len bytes or EOF; returns bytes read or -1 with errno. */
static inline ssize_t rs_recv_all(int fd, void *buf, size_t len, int flags)
{
	char *p = buf;
	size_t done = 0;
	ssize_t n;

	while (done < len) {
		n = recv(fd, p + done, len - done, flags);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		if (!n)
			break;
		done += n;
	}
	return done;
}

/*
 * Wait until at least n bytes are queued for reading; returns how many are
 * (at most n when SIOCINQ is missing and MSG_PEEK has to do instead).
 */
static inline int rs_wait_inq(int fd, int n, int timeout_ms)
{
	double end = rs_now() + timeout_ms / 1000.0;
	char *buf = NULL;
	int inq = 0;
	ssize_t r;

	for (;;) {
		if (!buf && ioctl(fd, SIOCINQ, &inq)) {
			buf = malloc(n);
			if (!buf)
				return -1;
		}
		if (buf) {
			r = recv(fd, buf, n, MSG_PEEK | MSG_DONTWAIT);
			inq = r > 0 ? r : 0;
		}
		if (inq >= n || rs_now() > end)
			break;
		rs_msleep(2);
	}
	free(buf);
	return inq;
}

/* ---- data pattern ---- */

static inline uint64_t rs_mix64(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ULL;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

/* Pattern key of a stream: (connection, direction, test salt). */
static inline uint64_t rs_key(unsigned int conn, unsigned int dir,
			      unsigned int salt)
{
	return rs_mix64(((uint64_t)salt << 40) | ((uint64_t)conn << 8) | dir);
}

static inline uint8_t rs_pat_byte(uint64_t key, uint64_t off)
{
	return rs_mix64(key + (off >> 3)) >> ((off & 7) * 8);
}

/* Fill buf with the bytes at stream offsets off..off+len of stream key. */
static inline void rs_pat_fill(void *buf, size_t len, uint64_t key,
			       uint64_t off)
{
	unsigned char *p = buf;
	uint64_t w;

	while (len && (off & 7)) {
		*p++ = rs_pat_byte(key, off++);
		len--;
	}
	while (len >= 8) {
		w = htole64(rs_mix64(key + (off >> 3)));
		memcpy(p, &w, 8);
		p += 8;
		off += 8;
		len -= 8;
	}
	while (len--)
		*p++ = rs_pat_byte(key, off++);
}

/* Returns len when buf matches the pattern, else the first bad index. */
static inline size_t rs_pat_check(const void *buf, size_t len, uint64_t key,
				  uint64_t off)
{
	const unsigned char *p = buf;
	size_t i = 0;
	uint64_t w;

	while (i < len && ((off + i) & 7)) {
		if (p[i] != rs_pat_byte(key, off + i))
			return i;
		i++;
	}
	while (len - i >= 8) {
		w = htole64(rs_mix64(key + ((off + i) >> 3)));
		if (memcmp(p + i, &w, 8))
			break;
		i += 8;
	}
	for (; i < len; i++)
		if (p[i] != rs_pat_byte(key, off + i))
			return i;
	return len;
}

/*
 * Where the wrong bytes a receiver got came from, for its report: how
 * long the wrong run is (up to 16 right bytes in a row), and the stream
 * offset whose bytes its first 8 are, if they are this stream's at any
 * offset up to near (stale or misplaced data).
 */
static inline void rs_pat_explain(const void *buf, size_t len, uint64_t key,
				  uint64_t off, uint64_t near)
{
	const unsigned char *p = buf;
	uint64_t k, src = ~0ULL, w[2];
	size_t run, good = 0;
	int sh;

	for (run = 0; run < len && good < 16; run++)
		good = p[run] == rs_pat_byte(key, off + run) ? good + 1 : 0;
	run -= good;
	for (k = 0; len >= 8 && k <= near / 8 && src == ~0ULL; k++) {
		w[0] = htole64(rs_mix64(key + k));
		w[1] = htole64(rs_mix64(key + k + 1));
		for (sh = 0; sh < 8; sh++) {
			if (!memcmp((unsigned char *)w + sh, p, 8)) {
				src = k * 8 + sh;
				break;
			}
		}
	}
	rs_info("mismatch at stream offset %llu: %zu bytes wrong, starting %02x %02x %02x %02x %02x %02x %02x %02x: %s %llu",
		(unsigned long long)off, run, p[0], len > 1 ? p[1] : 0,
		len > 2 ? p[2] : 0, len > 3 ? p[3] : 0, len > 4 ? p[4] : 0,
		len > 5 ? p[5] : 0, len > 6 ? p[6] : 0, len > 7 ? p[7] : 0,
		src == ~0ULL ? "this stream has them nowhere up to" :
		"this stream's bytes at offset",
		(unsigned long long)(src == ~0ULL ? near : src));
}

/*
 * Send with MSG_DONTWAIT until the socket stays full, i.e. both the local
 * send queue and the peer's receive buffer are exhausted. Returns the
 * number of bytes queued; the data is rs_pat_fill() pattern with key.
 */
static inline ssize_t rs_fill_pipe(int fd, uint64_t key)
{
	static char buf[64 * 1024];
	size_t total = 0;
	int idle = 0;
	ssize_t n;

	while (idle < 3) {
		rs_pat_fill(buf, sizeof(buf), key, total);
		n = send(fd, buf, sizeof(buf), MSG_DONTWAIT);
		if (n > 0) {
			total += n;
			idle = 0;
			continue;
		}
		if (n < 0 && errno != EAGAIN)
			return -1;
		/* Let in-flight data land in the peer, then try again. */
		idle++;
		rs_msleep(50);
	}
	return total;
}

/* ---- streaming threads ---- */

/* Small, fast, per-thread PRNG. */
static inline uint64_t rs_rand(uint64_t *state)
{
	*state = rs_mix64(*state);
	return *state;
}

/* Random I/O size in [1, max], biased to small sizes half the time. */
static inline size_t rs_rand_size(uint64_t *state, size_t max)
{
	uint64_t r = rs_rand(state);
	size_t lim = max;

	if (r & 1)
		lim = 1 + (r >> 8) % (max < 4096 ? max : 4096);
	return 1 + (rs_rand(state) % lim);
}

struct rs_xfer {
	/* parameters */
	int fd;
	uint64_t total;		/* bytes to move */
	uint64_t key;		/* pattern of the stream */
	size_t chunk;		/* largest single I/O */
	bool random;		/* random I/O sizes and calls */
	uint64_t seed;
	int flags;		/* extra send/recv flags */
	bool expect_eof;	/* receiver: then read EOF */
	bool shut_wr;		/* sender: shutdown(SHUT_WR) when done */
	bool close_fd;		/* sender: close() when done */
	/* results */
	uint64_t done;
	int err;		/* errno of a failed call, or 0 */
	bool short_eof;		/* receiver: EOF before total */
	bool bad_eof;		/* receiver: data after total */
	bool mismatch;
	uint64_t bad_off;
	double secs;
	pthread_t thr;
};

static inline void *rs_sender(void *arg)
{
	struct rs_xfer *x = arg;
	uint64_t st = x->seed ?: x->key;
	struct iovec iov[8];
	double t0 = rs_now();
	char *buf;
	size_t n, i, part;
	ssize_t ret;
	int how;

	buf = malloc(x->chunk);
	if (!buf) {
		x->err = ENOMEM;
		return NULL;
	}
	while (x->done < x->total) {
		n = x->random ? rs_rand_size(&st, x->chunk) : x->chunk;
		if (n > x->total - x->done)
			n = x->total - x->done;
		rs_pat_fill(buf, n, x->key, x->done);
		how = x->random ? rs_rand(&st) % 4 : 0;
		if (how == 1) {
			ret = write(x->fd, buf, n);
		} else if (how == 2) {
			/* writev with up to 8 random pieces */
			size_t left = n, off = 0;

			for (i = 0; i < 8 && left; i++) {
				part = i == 7 ? left : rs_rand(&st) % left + 1;
				iov[i].iov_base = buf + off;
				iov[i].iov_len = part;
				off += part;
				left -= part;
			}
			ret = writev(x->fd, iov, i);
		} else {
			ret = send(x->fd, buf, n, x->flags);
		}
		if (ret < 0) {
			if (errno == EINTR)
				continue;
			x->err = errno;
			break;
		}
		x->done += ret;
	}
	x->secs = rs_now() - t0;
	free(buf);
	if (!x->err && x->shut_wr && shutdown(x->fd, SHUT_WR))
		x->err = errno;
	if (x->close_fd)
		close(x->fd);
	return NULL;
}

static inline void *rs_receiver(void *arg)
{
	struct rs_xfer *x = arg;
	uint64_t st = (x->seed ?: x->key) ^ 0x5555;
	double t0 = rs_now();
	struct iovec iov[4];
	size_t n, bad, i, part;
	int how, flags;
	ssize_t ret;
	char *buf;

	buf = malloc(x->chunk);
	if (!buf) {
		x->err = ENOMEM;
		return NULL;
	}
	while (x->done < x->total) {
		n = x->random ? rs_rand_size(&st, x->chunk) : x->chunk;
		if (n > x->total - x->done)
			n = x->total - x->done;
		how = x->random ? rs_rand(&st) % 8 : 0;
		flags = x->flags;
		if (how == 1) {
			ret = read(x->fd, buf, n);
		} else if (how == 2) {
			size_t left = n, off = 0;

			for (i = 0; i < 4 && left; i++) {
				part = i == 3 ? left : rs_rand(&st) % left + 1;
				iov[i].iov_base = buf + off;
				iov[i].iov_len = part;
				off += part;
				left -= part;
			}
			ret = readv(x->fd, iov, i);
		} else {
			if (how >= 6)
				flags |= MSG_WAITALL;
			ret = recv(x->fd, buf, n, flags);
		}
		if (ret < 0) {
			if (errno == EINTR)
				continue;
			x->err = errno;
			break;
		}
		if (!ret) {
			x->short_eof = true;
			break;
		}
		bad = rs_pat_check(buf, ret, x->key, x->done);
		if (bad != (size_t)ret) {
			x->mismatch = true;
			x->bad_off = x->done + bad;
			rs_info("fd %d: %s of %zu bytes at stream offset %llu returned %zd",
				x->fd, how == 1 ? "read" : how == 2 ? "readv" :
				flags & MSG_WAITALL ? "recv(MSG_WAITALL)" :
				"recv", n, (unsigned long long)x->done, ret);
			rs_pat_explain(buf + bad, ret - bad, x->key, x->bad_off,
				       x->done + ret + (1 << 20));
			break;
		}
		x->done += ret;
	}
	x->secs = rs_now() - t0;
	if (!x->err && !x->short_eof && !x->mismatch && x->expect_eof) {
		ret = recv(x->fd, buf, 1, 0);
		if (ret < 0)
			x->err = errno;
		else if (ret > 0)
			x->bad_eof = true;
	}
	free(buf);
	return NULL;
}

static inline int rs_xfer_start(struct rs_xfer *x, void *(*fn)(void *))
{
	return pthread_create(&x->thr, NULL, fn, x);
}


/* One line of a socket's RDMASTREAM_INFO, for reports of a stalled test. */
static inline void rs_info_dump(const char *what, int fd)
{
	struct rdmastream_info i;
	socklen_t len = sizeof(i);

	memset(&i, 0, sizeof(i));
	if (rs.tcp || getsockopt(fd, SOL_RDMASTREAM, RDMASTREAM_INFO, &i,
				 &len))
		return;
	rs_info("%s fd %d: state %u flags %#x credits %u sent %llu acked %llu rcvd %llu read %llu phase tx %u rx %u adv sent %llu filled %llu dead %llu cancelled %llu rcvd %llu used %llu stale %llu zc %llu stalls win %llu cred %llu probes %llu kicks %llu errors %llu",
		what, fd, i.rsi_state, i.rsi_flags, i.rsi_credits,
		(unsigned long long)i.rsi_bytes_sent,
		(unsigned long long)i.rsi_bytes_acked,
		(unsigned long long)i.rsi_bytes_received,
		(unsigned long long)i.rsi_bytes_read,
		i.rsi_tx_phase, i.rsi_rx_phase,
		(unsigned long long)i.rsi_adverts_sent,
		(unsigned long long)i.rsi_adverts_filled,
		(unsigned long long)i.rsi_adverts_dead,
		(unsigned long long)i.rsi_adverts_cancelled,
		(unsigned long long)i.rsi_adverts_received,
		(unsigned long long)i.rsi_adverts_used,
		(unsigned long long)i.rsi_adverts_stale,
		(unsigned long long)i.rsi_zcopy_sends,
		(unsigned long long)i.rsi_window_stalls,
		(unsigned long long)i.rsi_credit_stalls,
		(unsigned long long)i.rsi_probes,
		(unsigned long long)i.rsi_sq_kicks,
		(unsigned long long)i.rsi_errors);
	rs_info("%s fd %d: rings rx %u tx %u peer %u direct bytes sent %llu received %llu adverts skipped %llu",
		what, fd, i.rsi_rx_ring, i.rsi_tx_ring, i.rsi_peer_ring,
		(unsigned long long)i.rsi_direct_bytes_sent,
		(unsigned long long)i.rsi_direct_bytes_received,
		(unsigned long long)i.rsi_adverts_skipped);
}

/*
 * Where every thread of this process is in the kernel (root only): what
 * a stall report needs to tell a lost wake-up from a wait that cannot end.
 */
static inline void rs_stacks_dump(void)
{
	char path[300], line[256];
	struct dirent *e;
	DIR *d;
	FILE *f;

	d = opendir("/proc/self/task");
	if (!d)
		return;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/stack",
			 e->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;
		rs_info("thread %s:", e->d_name);
		while (fgets(line, sizeof(line), f))
			rs_info("  %.*s", (int)strcspn(line, "\n"), line);
		fclose(f);
	}
	closedir(d);
}

/*
 * Join n transfers; if none of them moves a byte for stall_secs, print
 * where each stands, its socket's RDMASTREAM_INFO and every thread's
 * kernel stack once, so a hang that the harness's timeout ends leaves a
 * diagnosis in the log. A receiver that got wrong data has every socket's
 * RDMASTREAM_INFO printed (rings, direct bytes, ADVERTs: which path
 * carried the bad bytes) and shuts the others' sockets down, so that the
 * test ends and reports it.
 */
static inline void rs_xfer_join_watch(struct rs_xfer *x, int n,
				      unsigned int stall_secs)
{
	uint64_t sum, last = ~0ULL;
	double since = rs_now();
	bool told = false, busy, joined[16] = { };
	int i, j, ended = 0;	/* 1: wrong data came; 2: the rest shut down */

	for (;;) {
		busy = false;
		sum = 0;
		for (i = 0; i < n; i++) {
			sum += __atomic_load_n(&x[i].done, __ATOMIC_RELAXED);
			if (i >= 16)
				pthread_join(x[i].thr, NULL);
			else if (!joined[i])
				joined[i] = !pthread_tryjoin_np(x[i].thr, NULL);
			busy |= i < 16 && !joined[i];
			if (i < 16 && joined[i] && x[i].mismatch && !ended)
				ended = 1;
		}
		/*
		 * Wrong data ends the test: the other transfers may be
		 * waiting on the reader that stopped (a full window), so
		 * end them now rather than at the test's time limit.
		 */
		for (i = 0; i < n && ended == 1; i++) {
			for (j = 0; j < i && x[j].fd != x[i].fd; j++)
				;
			if (j == i)	/* each socket once */
				rs_info_dump("mismatch", x[i].fd);
		}
		for (i = 0; i < n && i < 16 && ended == 1 && busy; i++)
			if (!joined[i])
				shutdown(x[i].fd, SHUT_RDWR);
		ended += ended == 1;
		if (!busy) {
			/* RS_XFER_INFO=1: where each ended, for tuning */
			for (i = 0; i < n && getenv("RS_XFER_INFO"); i++)
				rs_info_dump("done", x[i].fd);
			break;
		}
		if (sum != last) {
			last = sum;
			since = rs_now();
		} else if (!told && rs_now() - since > stall_secs) {
			told = true;
			for (i = 0; i < n; i++) {
				rs_info("stalled %u s: xfer %d fd %d %llu of %llu bytes%s, err %d%s",
					stall_secs, i, x[i].fd,
					(unsigned long long)x[i].done,
					(unsigned long long)x[i].total,
					i < 16 && joined[i] ? " (ended)" : "",
					x[i].err, x[i].mismatch ? ", mismatch" :
					"");
				rs_info_dump("stalled", x[i].fd);
			}
			rs_stacks_dump();
		}
		rs_msleep(100);
	}
}

/* Join one transfer; a stall of 30 s is reported as above. */
static inline void rs_xfer_join(struct rs_xfer *x)
{
	rs_xfer_join_watch(x, 1, 30);
}

/* Assert that a finished rs_xfer moved all its bytes intact. */
#define RS_XFER_OK(x, what) do {					\
	EXPECT_EQ(0, (x)->err)						\
		TH_LOG("%s: %s after %llu bytes", what,			\
		       strerror((x)->err),				\
		       (unsigned long long)(x)->done);			\
	EXPECT_FALSE((x)->mismatch)					\
		TH_LOG("%s: data mismatch at offset %llu", what,	\
		       (unsigned long long)(x)->bad_off);		\
	EXPECT_FALSE((x)->short_eof)					\
		TH_LOG("%s: EOF after %llu of %llu bytes", what,	\
		       (unsigned long long)(x)->done,			\
		       (unsigned long long)(x)->total);			\
	EXPECT_FALSE((x)->bad_eof)					\
		TH_LOG("%s: more data after the end", what);		\
	ASSERT_EQ((x)->total, (x)->done);				\
} while (0)

/* ---- misc ---- */

/* Skip the current test when running against TCP. */
#define RS_SKIP_TCP(why) do {						\
	if (rs.tcp)							\
		SKIP(return, "not applicable to TCP: %s", why);		\
} while (0)

/* Forced TCP fallback (run-tests' fb:NAME): the sockets run over TCP. */
static inline bool rs_fb_forced(void)
{
	const char *v = getenv("RS_FALLBACK");

	return !rs.tcp && v && atoi(v) == 2;
}

/* Not under forced TCP fallback: about RDMA itself (rings, counters). */
#define RS_SKIP_FB(why) do {						\
	if (rs_fb_forced())						\
		SKIP(return, "over TCP (RS_FALLBACK=2): %s", why);	\
} while (0)

static inline bool rs_have_cmd(const char *cmd)
{
	char buf[256];

	snprintf(buf, sizeof(buf), "command -v %s >/dev/null 2>&1", cmd);
	return system(buf) == 0;
}

/* Is the running kernel older than maj.min? */
static inline bool rs_kernel_before(int maj, int min)
{
	struct utsname u;
	int a = 0, b = 0;

	if (uname(&u) || sscanf(u.release, "%d.%d", &a, &b) != 2)
		return false;
	return a < maj || (a == maj && b < min);
}

/*
 * Is RS_RDMADEV Soft-RoCE on a kernel older than maj.min? For the
 * expectations that rdma_rxe's own fixed bugs change (docs/kernels.md):
 * a real HCA, or a newer rxe, behaves as the IB spec says.
 */
static inline bool rs_rxe_before(int maj, int min)
{
	return !strncmp(rs.rdmadev, "rxe", 3) && rs_kernel_before(maj, min);
}

/* The MRs of RS_RDMADEV from `rdma res show`, or -1. */
static inline long rs_mr_count(void)
{
	char line[1024], dev[64], *p;
	long n = -1;
	FILE *f;

	snprintf(dev, sizeof(dev), " %s: ", rs.rdmadev);
	f = popen("rdma res show 2>/dev/null", "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		if (!strstr(line, dev))
			continue;
		p = strstr(line, " mr ");
		if (p)
			n = strtol(p + 4, NULL, 10);
	}
	pclose(f);
	return n;
}

/* Run a shell command, its output to stderr; returns its exit status. */
static inline int rs_system(const char *fmt, ...)
{
	char cmd[512];
	va_list ap;
	int ret;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	fflush(stdout);
	fflush(stderr);
	fprintf(stderr, "# $ %s\n", cmd);
	ret = system(cmd);
	if (ret == -1 || !WIFEXITED(ret))
		return -1;
	return WEXITSTATUS(ret);
}

/* ---- the module's parameters, the RDMA link, tracing ---- */

/*
 * The RoCE MTU a QP over RS_NETDEV must get: the largest IB MTU (256 to
 * 4096) that fits the netdev's MTU less the RoCE v2 headers and the
 * extensions the kernel reserves room for (96 bytes, iboe_get_mtu()).
 */
static inline unsigned int rs_roce_mtu(void)
{
	char path[256];
	long long mtu;
	unsigned int m = 256;

	snprintf(path, sizeof(path), "/sys/class/net/%s/mtu",
		 rs.netdev ? rs.netdev : "eth0");
	mtu = rs_read_ll(path);
	while (m < 4096 && 2 * m <= mtu - 96)
		m *= 2;
	return m;
}

/* 4.096 us << exp in us, as RDMASTREAM_INFO reports an ack timeout */
static inline unsigned int rs_ack_exp_us(long long exp)
{
	return (unsigned int)((4096ULL << exp) / 1000) + 1;
}

/*
 * The ack timeout the module must have chosen for a connection whose
 * RDMASTREAM_INFO says it found round trip srtt/rttvar cached for its
 * peer (docs/lossy-links.md "Recovery time"): the smallest 4.096 us << n
 * that covers SRTT + 4 RTTVAR, n from floor to 20; first for a peer with
 * nothing cached (srtt 0), at least floor.
 */
static inline unsigned int rs_ack_want_us(unsigned int srtt,
					  unsigned int rttvar, long long floor,
					  long long first)
{
	unsigned long long want = srtt + 4ULL * rttvar;
	long long n = floor;

	if (!srtt)
		return rs_ack_exp_us(first > floor ? first : floor);
	while (n < 20 && rs_ack_exp_us(n) < want)
		n++;
	return rs_ack_exp_us(n);
}

static inline const char *rs_modname(void)
{
	return rs_env_str("RS_MODNAME", "rdmastream");
}

/* Write val to the module parameter name; 0, or the write's errno. */
static inline int rs_param_write(const char *name, const char *val)
{
	char path[256];
	int fd, err = 0;

	snprintf(path, sizeof(path), "/sys/module/%s/parameters/%s",
		 rs_modname(), name);
	fd = open(path, O_WRONLY);
	if (fd < 0)
		return errno;
	if (write(fd, val, strlen(val)) < 0)
		err = errno;
	close(fd);
	return err;
}

/* A numeric module parameter, or -1 if the module does not have it. */
static inline long long rs_param_get(const char *name)
{
	char path[256];

	snprintf(path, sizeof(path), "/sys/module/%s/parameters/%s",
		 rs_modname(), name);
	return rs_read_ll(path);
}

/* Set a numeric module parameter; 0 or -1. */
static inline int rs_param_set(const char *name, long long v)
{
	char val[32];

	snprintf(val, sizeof(val), "%lld\n", v);
	return rs_param_write(name, val) ? -1 : 0;
}

static inline bool rs_link_active(void)
{
	char cmd[256];

	snprintf(cmd, sizeof(cmd),
		 "rdma link show %s/1 2>/dev/null | grep -q 'state ACTIVE'",
		 rs.rdmadev);
	return !system(cmd);
}

static inline bool rs_link_exists(void)
{
	char path[256];

	snprintf(path, sizeof(path), "/sys/class/infiniband/%s", rs.rdmadev);
	return !access(path, F_OK);
}

/* (Re)create RS_RDMADEV on RS_NETDEV and wait until it is ACTIVE. */
static inline int rs_link_add(void)
{
	int i;

	if (!rs_link_exists() &&
	    rs_system("rdma link add %s type rxe netdev %s", rs.rdmadev,
		      rs.netdev))
		return -1;
	for (i = 0; i < 200; i++) {
		if (rs_link_active())
			return 0;
		rs_msleep(100);
	}
	return -1;
}

/* Where tracefs is (mounted there if it was not); NULL if nowhere. */
static inline const char *rs_tracefs(void)
{
	static const char * const dirs[] = {
		"/sys/kernel/tracing", "/sys/kernel/debug/tracing",
	};
	char path[128];
	unsigned int i;

	for (i = 0; i < 2; i++) {
		snprintf(path, sizeof(path), "%s/events", dirs[i]);
		if (!access(path, F_OK))
			return dirs[i];
	}
	if (!mount("tracefs", dirs[0], "tracefs", 0, NULL))
		return dirs[0];
	return NULL;
}

/* Write val to a tracefs file (relative to rs_tracefs()); 0 or -1. */
static inline int rs_trace_write(const char *file, const char *val)
{
	const char *dir = rs_tracefs();
	char path[256];
	int fd, ret;

	if (!dir)
		return -1;
	snprintf(path, sizeof(path), "%s/%s", dir, file);
	fd = open(path, O_WRONLY | O_TRUNC);
	if (fd < 0)
		return -1;
	ret = write(fd, val, strlen(val)) == (ssize_t)strlen(val) ? 0 : -1;
	close(fd);
	return ret;
}

/* Send n bytes of pattern key at stream offset off; all of it or fail. */
static inline void rs_send_pat(struct __test_metadata *_metadata, int fd,
			       size_t n, uint64_t key, uint64_t off)
{
	char *buf = malloc(n);

	ASSERT_NE(NULL, buf);
	rs_pat_fill(buf, n, key, off);
	ASSERT_EQ((ssize_t)n, rs_send_all(fd, buf, n, 0))
		TH_LOG("send: %s", strerror(errno));
	free(buf);
}

/* Receive exactly n bytes and check them against pattern key at off. */
static inline void rs_recv_pat(struct __test_metadata *_metadata, int fd,
			       size_t n, uint64_t key, uint64_t off)
{
	char *buf = malloc(n);
	size_t bad;

	ASSERT_NE(NULL, buf);
	ASSERT_EQ((ssize_t)n, rs_recv_all(fd, buf, n, 0))
		TH_LOG("recv: %s", strerror(errno));
	bad = rs_pat_check(buf, n, key, off);
	free(buf);
	ASSERT_EQ(n, bad) TH_LOG("mismatch at stream offset %llu",
				 (unsigned long long)(off + bad));
}

#endif /* RS_COMMON_H */
