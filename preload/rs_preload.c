// SPDX-License-Identifier: GPL-2.0
/*
 * librdmastream-preload.so: run an unmodified program's TCP sockets over
 * rdmastream (docs/preload.md). Loaded with LD_PRELOAD, usually through
 * preload/rdmastream-run.
 *
 * socket(AF_INET or AF_INET6, SOCK_STREAM, 0 or IPPROTO_TCP) becomes
 * socket(same family, same type, IPPROTO_RDMASTREAM): the IPPROTO route,
 * so addresses, names and SO_DOMAIN stay the program's. On top of that:
 *   - getsockopt(SO_PROTOCOL) answers IPPROTO_TCP;
 *   - SOL_TCP options the module refuses (and IP_TOS, IPV6_TCLASS) are
 *     accepted and remembered per socket, and read back (TCP_INFO: a
 *     zeroed struct tcp_info with the state and byte counts filled);
 *   - RDMASTREAM_RUN_PORTS / RDMASTREAM_RUN_ADDRS choose the sockets: one
 *     whose bind() or connect() target does not match becomes a real TCP
 *     socket again (dup3 over the same descriptor, flags and options kept).
 *
 * A socket is recognised as ours by the kernel's SO_PROTOCOL, not by a
 * table, so sockets inherited across exec() or made by accept() and dup()
 * are handled too. The per-socket table (options to read back or replay)
 * is keyed by descriptor and checked against the socket's inode, so a
 * recycled descriptor never sees a stale entry.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <linux/rdmastream.h>
#include <linux/tcp.h>

/* (glibc's netinet/tcp.h has these, but clashes with linux/tcp.h) */
#ifndef SOL_TCP
#define SOL_TCP			IPPROTO_TCP
#endif
#ifndef SOL_IP
#define SOL_IP			IPPROTO_IP
#endif
#ifndef SOL_IPV6
#define SOL_IPV6		IPPROTO_IPV6
#endif

#define RS_LOG_PREFIX	"rdmastream-run: "
#define RS_MAX_OPTS	32	/* options remembered per socket */
#define RS_OPT_MAX	64	/* bytes of one option's value */
#define RS_MAX_NETS	32	/* entries of RDMASTREAM_RUN_ADDRS */
#define RS_MAX_PORTS	32	/* ranges of RDMASTREAM_RUN_PORTS */

#define RS_TCP_STATE_CLOSE	7	/* TCP_CLOSE of the kernel */
#define RS_CA_NAME_MAX		16	/* TCP_CA_NAME_MAX */

struct rs_opt {
	int level, name;
	socklen_t len;
	unsigned char val[RS_OPT_MAX];
};

/* What we know of one descriptor; valid while ino matches the socket's. */
struct rs_fd {
	ino_t ino;
	bool ours;		/* converted by us, decision pending */
	bool pending;		/* filters set, bind/connect not seen yet */
	int domain, type;
	struct sockaddr_storage bound;	/* bind() address, for a swap */
	socklen_t bound_len;
	int nopts;
	struct rs_opt opts[RS_MAX_OPTS];
};

struct rs_net {
	int family;
	unsigned char addr[16];
	int bits;
};

static struct {
	pthread_once_t once;
	pthread_mutex_t lock;
	int ipproto;		/* 0: module absent, convert nothing */
	bool verbose;
	int nnets, nports;
	struct rs_net nets[RS_MAX_NETS];
	unsigned short ports[RS_MAX_PORTS][2];
	struct rs_fd **fds;
	int nfds;
	int (*socket)(int, int, int);
	int (*bind)(int, const struct sockaddr *, socklen_t);
	int (*connect)(int, const struct sockaddr *, socklen_t);
	int (*listen)(int, int);
	int (*setsockopt)(int, int, int, const void *, socklen_t);
	int (*getsockopt)(int, int, int, void *, socklen_t *);
} rs = {
	.once = PTHREAD_ONCE_INIT,
	.lock = PTHREAD_MUTEX_INITIALIZER,
};

static void rs_log(const char *fmt, ...)
{
	va_list ap;

	if (!rs.verbose)
		return;
	va_start(ap, fmt);
	fputs(RS_LOG_PREFIX, stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

/* ---- configuration ---- */

static int rs_read_int(const char *path, int def)
{
	FILE *f = fopen(path, "re");
	int v = def;

	if (!f)
		return def;
	if (fscanf(f, "%d", &v) != 1)
		v = def;
	fclose(f);
	return v;
}

static void rs_parse_ports(const char *s)
{
	char *copy = strdup(s), *tok, *save = NULL;
	unsigned long lo, hi;
	char *end;

	for (tok = strtok_r(copy, ", ", &save); tok && rs.nports < RS_MAX_PORTS;
	     tok = strtok_r(NULL, ", ", &save)) {
		lo = strtoul(tok, &end, 10);
		hi = lo;
		if (*end == '-')
			hi = strtoul(end + 1, &end, 10);
		if (*end || lo > hi || hi > 65535) {
			fprintf(stderr, RS_LOG_PREFIX
				"RDMASTREAM_RUN_PORTS: ignoring '%s'\n", tok);
			continue;
		}
		rs.ports[rs.nports][0] = lo;
		rs.ports[rs.nports++][1] = hi;
	}
	free(copy);
}

static bool rs_parse_net(char *tok, struct rs_net *n)
{
	char *slash = strchr(tok, '/');
	int max;

	if (slash)
		*slash = '\0';
	if (inet_pton(AF_INET, tok, n->addr) == 1)
		n->family = AF_INET, max = 32;
	else if (inet_pton(AF_INET6, tok, n->addr) == 1)
		n->family = AF_INET6, max = 128;
	else
		return false;
	n->bits = slash ? atoi(slash + 1) : max;
	return n->bits >= 0 && n->bits <= max;
}

static void rs_parse_addrs(const char *s)
{
	char *copy = strdup(s), *tok, *save = NULL;

	for (tok = strtok_r(copy, ", ", &save); tok && rs.nnets < RS_MAX_NETS;
	     tok = strtok_r(NULL, ", ", &save)) {
		if (rs_parse_net(tok, &rs.nets[rs.nnets]))
			rs.nnets++;
		else
			fprintf(stderr, RS_LOG_PREFIX
				"RDMASTREAM_RUN_ADDRS: ignoring '%s'\n", tok);
	}
	free(copy);
}

/* fork() while another thread holds the lock: the child gets it free */
static void rs_atfork_lock(void)
{
	pthread_mutex_lock(&rs.lock);
}

static void rs_atfork_unlock(void)
{
	pthread_mutex_unlock(&rs.lock);
}

static void rs_init(void)
{
	const char *v;

	rs.socket = dlsym(RTLD_NEXT, "socket");
	rs.bind = dlsym(RTLD_NEXT, "bind");
	rs.connect = dlsym(RTLD_NEXT, "connect");
	rs.listen = dlsym(RTLD_NEXT, "listen");
	rs.setsockopt = dlsym(RTLD_NEXT, "setsockopt");
	rs.getsockopt = dlsym(RTLD_NEXT, "getsockopt");
	v = getenv("RDMASTREAM_RUN_VERBOSE");
	rs.verbose = v && *v && strcmp(v, "0");
	rs.ipproto = rs_read_int("/sys/module/rdmastream/parameters/ipproto",
				 0);
	v = getenv("RDMASTREAM_RUN_PORTS");
	if (v && *v)
		rs_parse_ports(v);
	v = getenv("RDMASTREAM_RUN_ADDRS");
	if (v && *v)
		rs_parse_addrs(v);
	if (rs.ipproto <= 0)
		rs_log("rdmastream module not loaded: sockets stay TCP");
	pthread_atfork(rs_atfork_lock, rs_atfork_unlock, rs_atfork_unlock);
}

static void rs_ready(void)
{
	pthread_once(&rs.once, rs_init);
}

/* Are sockets chosen by RDMASTREAM_RUN_PORTS / _ADDRS? */
static bool rs_selecting(void)
{
	return rs.ipproto > 0 && (rs.nnets || rs.nports);
}

/* ---- selection ---- */

static bool rs_net_has(const struct rs_net *n, int family,
		       const unsigned char *a)
{
	int full = n->bits / 8, rest = n->bits % 8;

	if (n->family != family || memcmp(n->addr, a, full))
		return false;
	return !rest || !((n->addr[full] ^ a[full]) & (0xff << (8 - rest)));
}

static bool rs_addr_match(const struct sockaddr *sa)
{
	static const unsigned char v4mapped[12] = {
		0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
	const struct sockaddr_in6 *s6 = (const void *)sa;
	const struct sockaddr_in *s4 = (const void *)sa;
	const unsigned char *a;
	int family = sa->sa_family, i;

	if (!rs.nnets)
		return true;
	if (family == AF_INET) {
		a = (const void *)&s4->sin_addr;
		if (s4->sin_addr.s_addr == htonl(INADDR_ANY))
			return true;
	} else {
		a = s6->sin6_addr.s6_addr;
		if (IN6_IS_ADDR_UNSPECIFIED(&s6->sin6_addr))
			return true;
		if (!memcmp(a, v4mapped, sizeof(v4mapped)))
			family = AF_INET, a += 12;
	}
	for (i = 0; i < rs.nnets; i++)
		if (rs_net_has(&rs.nets[i], family, a))
			return true;
	return false;
}

static bool rs_port_match(unsigned short port)
{
	int i;

	if (!rs.nports)
		return true;
	for (i = 0; i < rs.nports; i++)
		if (port >= rs.ports[i][0] && port <= rs.ports[i][1])
			return true;
	return false;
}

static unsigned short rs_port_of(const struct sockaddr *sa)
{
	return ntohs(((const struct sockaddr_in *)sa)->sin_port);
}

static bool rs_ip_addr(const struct sockaddr *sa, socklen_t len)
{
	return sa && ((sa->sa_family == AF_INET &&
		       len >= sizeof(struct sockaddr_in)) ||
		      (sa->sa_family == AF_INET6 &&
		       len >= sizeof(struct sockaddr_in6)));
}

/* ---- the table ---- */

static ino_t rs_ino(int fd)
{
	struct stat st;

	if (fstat(fd, &st) || !S_ISSOCK(st.st_mode))
		return 0;
	return st.st_ino;
}

/* The entry of fd, made if create; call with rs.lock held. */
static struct rs_fd *rs_fd_get(int fd, bool create)
{
	ino_t ino = rs_ino(fd);
	struct rs_fd *e;

	if (fd < 0 || !ino)
		return NULL;
	if (fd >= rs.nfds) {
		int n = fd + 64;
		struct rs_fd **t;

		if (!create)
			return NULL;
		t = realloc(rs.fds, n * sizeof(*t));
		if (!t)
			return NULL;
		memset(t + rs.nfds, 0, (n - rs.nfds) * sizeof(*t));
		rs.fds = t;
		rs.nfds = n;
	}
	e = rs.fds[fd];
	if (e && e->ino != ino) {
		free(e);
		e = rs.fds[fd] = NULL;
	}
	if (!e && create) {
		e = calloc(1, sizeof(*e));
		if (e)
			e->ino = ino;
		rs.fds[fd] = e;
	}
	return e;
}

static struct rs_opt *rs_opt_find(struct rs_fd *e, int level, int name)
{
	int i;

	for (i = 0; i < e->nopts; i++)
		if (e->opts[i].level == level && e->opts[i].name == name)
			return &e->opts[i];
	return NULL;
}

static void rs_opt_save(struct rs_fd *e, int level, int name,
			const void *val, socklen_t len)
{
	struct rs_opt *o = rs_opt_find(e, level, name);

	if (!o && e->nopts < RS_MAX_OPTS)
		o = &e->opts[e->nopts++];
	if (!o)
		return;
	o->level = level;
	o->name = name;
	o->len = len < RS_OPT_MAX ? len : RS_OPT_MAX;
	memcpy(o->val, val, o->len);
}

/* Is fd a socket of the IPPROTO route (ours, whoever made it)? */
static bool rs_is_ours(int fd)
{
	socklen_t len = sizeof(int);
	int proto = 0;

	return rs.ipproto > 0 &&
	       !rs.getsockopt(fd, SOL_SOCKET, SO_PROTOCOL, &proto, &len) &&
	       proto == rs.ipproto;
}

/* ---- back to TCP ---- */

/*
 * Replace fd by a real TCP socket of the same family and type: the
 * options set so far and the bind() address are replayed, O_NONBLOCK and
 * FD_CLOEXEC kept. Call with rs.lock held; e is fd's entry.
 */
static int rs_swap_to_tcp(int fd, struct rs_fd *e)
{
	int fl = fcntl(fd, F_GETFL), fdfl = fcntl(fd, F_GETFD);
	int nfd, i, err;

	nfd = rs.socket(e->domain, e->type, IPPROTO_TCP);
	if (nfd < 0)
		return -1;
	for (i = 0; i < e->nopts; i++)
		rs.setsockopt(nfd, e->opts[i].level, e->opts[i].name,
			      e->opts[i].val, e->opts[i].len);
	if (e->bound_len &&
	    rs.bind(nfd, (struct sockaddr *)&e->bound, e->bound_len))
		goto fail;
	if (fl >= 0)
		fcntl(nfd, F_SETFL, fl);
	if (dup3(nfd, fd, fdfl > 0 && (fdfl & FD_CLOEXEC) ? O_CLOEXEC : 0) < 0)
		goto fail;
	close(nfd);
	e->ino = rs_ino(fd);
	e->ours = false;
	e->pending = false;
	rs_log("fd %d: no match, now a TCP socket", fd);
	return 0;
fail:
	err = errno;
	close(nfd);
	errno = err;
	return -1;
}

/* ---- the wrapped calls ---- */

static bool rs_wanted(int domain, int type, int protocol)
{
	int base = type & ~(SOCK_NONBLOCK | SOCK_CLOEXEC);

	return rs.ipproto > 0 && (domain == AF_INET || domain == AF_INET6) &&
	       base == SOCK_STREAM &&
	       (protocol == 0 || protocol == IPPROTO_TCP);
}

int socket(int domain, int type, int protocol)
{
	struct rs_fd *e;
	int fd;

	rs_ready();
	if (!rs_wanted(domain, type, protocol))
		return rs.socket(domain, type, protocol);
	fd = rs.socket(domain, type, rs.ipproto);
	if (fd < 0) {
		rs_log("socket(%d, %d, %d): %s; using TCP", domain, type,
		       rs.ipproto, strerror(errno));
		return rs.socket(domain, type, protocol);
	}
	rs_log("fd %d: %s stream socket over rdmastream (protocol %d)", fd,
	       domain == AF_INET ? "AF_INET" : "AF_INET6", rs.ipproto);
	if (!rs_selecting())
		return fd;
	pthread_mutex_lock(&rs.lock);
	e = rs_fd_get(fd, true);
	if (e) {
		/* a fresh socket: forget what the number held before */
		memset(e, 0, sizeof(*e));
		e->ino = rs_ino(fd);
		e->ours = true;
		e->pending = true;
		e->domain = domain;
		e->type = type;
	}
	pthread_mutex_unlock(&rs.lock);
	return fd;
}

/*
 * bind(): a non-zero port decides now; port 0 (a client naming its
 * source, or an ephemeral listener) leaves the decision to connect() or
 * listen(), unless the address alone already rules the socket out.
 */
int bind(int fd, const struct sockaddr *sa, socklen_t len)
{
	struct rs_fd *e;
	bool match;

	rs_ready();
	if (!rs_selecting())
		return rs.bind(fd, sa, len);
	pthread_mutex_lock(&rs.lock);
	e = rs_fd_get(fd, false);
	if (e && e->ours && e->pending && rs_ip_addr(sa, len)) {
		match = rs_addr_match(sa) && (!rs_port_of(sa) ||
					      rs_port_match(rs_port_of(sa)));
		if (!match && rs_swap_to_tcp(fd, e)) {
			pthread_mutex_unlock(&rs.lock);
			return -1;
		}
		if (match && rs_port_of(sa))
			e->pending = false;
		if (e->pending && len <= sizeof(e->bound)) {
			memcpy(&e->bound, sa, len);
			e->bound_len = len;
		}
	}
	pthread_mutex_unlock(&rs.lock);
	return rs.bind(fd, sa, len);
}

int connect(int fd, const struct sockaddr *sa, socklen_t len)
{
	struct rs_fd *e;

	rs_ready();
	if (!rs_selecting())
		return rs.connect(fd, sa, len);
	pthread_mutex_lock(&rs.lock);
	e = rs_fd_get(fd, false);
	if (e && e->ours && e->pending && rs_ip_addr(sa, len)) {
		if (rs_addr_match(sa) && rs_port_match(rs_port_of(sa))) {
			e->pending = false;
		} else if (rs_swap_to_tcp(fd, e)) {
			pthread_mutex_unlock(&rs.lock);
			return -1;
		}
	}
	pthread_mutex_unlock(&rs.lock);
	return rs.connect(fd, sa, len);
}

/*
 * listen() of a socket still undecided: with a port list, an ephemeral
 * (or unbound) listener matches none of it and goes back to TCP.
 */
int listen(int fd, int backlog)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	struct rs_fd *e;

	rs_ready();
	if (!rs_selecting())
		return rs.listen(fd, backlog);
	pthread_mutex_lock(&rs.lock);
	e = rs_fd_get(fd, false);
	if (e && e->ours && e->pending) {
		if (!getsockname(fd, (struct sockaddr *)&ss, &len) &&
		    rs_ip_addr((struct sockaddr *)&ss, len) &&
		    rs_port_match(rs_port_of((struct sockaddr *)&ss)))
			e->pending = false;
		else if (rs_swap_to_tcp(fd, e)) {
			pthread_mutex_unlock(&rs.lock);
			return -1;
		}
	}
	pthread_mutex_unlock(&rs.lock);
	return rs.listen(fd, backlog);
}

/*
 * The options faked on our sockets, with the value getsockopt() gives
 * before any setsockopt(): TCP's defaults (tcp(7), Linux 6.1).
 */
static const struct {
	int level, name, def;
	int min, max;		/* else EINVAL, as TCP (tcp(7), 6.1) */
} rs_fakes[] = {
	{ SOL_TCP, TCP_MAXSEG, 536, 0, 65535 },	/* TCP_MSS_DEFAULT */
	{ SOL_TCP, TCP_CORK, 0, INT_MIN, INT_MAX },
	{ SOL_TCP, TCP_KEEPIDLE, 7200, 1, 32767 },
	{ SOL_TCP, TCP_KEEPINTVL, 75, 1, 32767 },
	{ SOL_TCP, TCP_KEEPCNT, 9, 1, 127 },
	{ SOL_TCP, TCP_SYNCNT, 6, 1, 127 },
	{ SOL_TCP, TCP_LINGER2, 60, INT_MIN, INT_MAX },
	{ SOL_TCP, TCP_DEFER_ACCEPT, 0, INT_MIN, INT_MAX },
	{ SOL_TCP, TCP_WINDOW_CLAMP, 0, INT_MIN, INT_MAX },
	{ SOL_TCP, TCP_QUICKACK, 1, INT_MIN, INT_MAX },
	{ SOL_TCP, TCP_USER_TIMEOUT, 0, 0, INT_MAX },
	{ SOL_TCP, TCP_THIN_LINEAR_TIMEOUTS, 0, 0, 1 },
	{ SOL_TCP, TCP_NOTSENT_LOWAT, 0, INT_MIN, INT_MAX },
	{ SOL_TCP, TCP_FASTOPEN, 0, 0, INT_MAX },
	{ SOL_TCP, TCP_FASTOPEN_CONNECT, 0, 0, 1 },
	{ SOL_IP, IP_TOS, 0, INT_MIN, INT_MAX },
	{ SOL_IPV6, IPV6_TCLASS, 0, -1, 255 },
};

static int rs_fake_index(int level, int name)
{
	unsigned int i;

	for (i = 0; i < sizeof(rs_fakes) / sizeof(rs_fakes[0]); i++)
		if (rs_fakes[i].level == level && rs_fakes[i].name == name)
			return i;
	return -1;
}

static bool rs_is_fake(int level, int name)
{
	return rs_fake_index(level, name) >= 0 ||
	       (level == SOL_TCP && name == TCP_CONGESTION);
}

/* TCP_CONGESTION: TCP refuses (ENOENT) an algorithm it does not have. */
static bool rs_cc_known(const char *name, size_t len)
{
	char line[512], *tok, *save = NULL;
	FILE *f;
	bool ok = false;

	f = fopen("/proc/sys/net/ipv4/tcp_available_congestion_control", "re");
	if (!f)
		return true;
	if (fgets(line, sizeof(line), f))
		for (tok = strtok_r(line, " \n", &save); tok && !ok;
		     tok = strtok_r(NULL, " \n", &save))
			ok = strlen(tok) == len && !memcmp(tok, name, len);
	fclose(f);
	return ok;
}

static int rs_fake_set(int fd, int level, int name, const void *val,
		       socklen_t len)
{
	struct rs_fd *e;

	char cc[RS_CA_NAME_MAX] = "";

	if (level == SOL_TCP && name == TCP_CONGESTION) {
		len = strnlen(val, len);
		if (!len || len >= RS_CA_NAME_MAX || !rs_cc_known(val, len)) {
			errno = ENOENT;
			return -1;
		}
		memcpy(cc, val, len);
		val = cc;
		len = RS_CA_NAME_MAX;
	} else {
		int i = rs_fake_index(level, name), v;

		if (len < sizeof(int)) {
			errno = EINVAL;
			return -1;
		}
		memcpy(&v, val, sizeof(v));
		if (v < rs_fakes[i].min || v > rs_fakes[i].max) {
			errno = EINVAL;
			return -1;
		}
	}
	pthread_mutex_lock(&rs.lock);
	e = rs_fd_get(fd, true);
	if (e)
		rs_opt_save(e, level, name, val, len);
	pthread_mutex_unlock(&rs.lock);
	return 0;
}

int setsockopt(int fd, int level, int name, const void *val, socklen_t len)
{
	struct rs_fd *e;
	int ret, err;

	rs_ready();
	ret = rs.setsockopt(fd, level, name, val, len);
	err = errno;
	if (ret && err == ENOPROTOOPT && rs_is_fake(level, name) &&
	    rs_is_ours(fd))
		return rs_fake_set(fd, level, name, val, len);
	if (!ret && rs_selecting()) {
		/* remember it for a swap back to TCP */
		pthread_mutex_lock(&rs.lock);
		e = rs_fd_get(fd, false);
		if (e && e->ours && e->pending)
			rs_opt_save(e, level, name, val, len);
		pthread_mutex_unlock(&rs.lock);
	}
	errno = err;
	return ret;
}

static void rs_put(void *out, socklen_t *outlen, const void *val,
		   socklen_t len)
{
	if (*outlen > len)
		*outlen = len;
	memcpy(out, val, *outlen);
}

/* TCP_INFO: zeroes but for the state and what RDMASTREAM_INFO counts. */
static void rs_fake_tcp_info(int fd, struct tcp_info *ti, int mss)
{
	struct rdmastream_info ri;
	socklen_t len = sizeof(ri);

	memset(ti, 0, sizeof(*ti));
	ti->tcpi_state = RS_TCP_STATE_CLOSE;
	if (rs.getsockopt(fd, SOL_RDMASTREAM, RDMASTREAM_INFO, &ri, &len) ||
	    len < offsetof(struct rdmastream_info, rsi_writes))
		return;
	ti->tcpi_state = ri.rsi_state;
	ti->tcpi_snd_mss = mss;
	ti->tcpi_rcv_mss = mss;
	ti->tcpi_bytes_sent = ri.rsi_bytes_sent;
	ti->tcpi_bytes_acked = ri.rsi_bytes_acked;
	ti->tcpi_bytes_received = ri.rsi_bytes_received;
}

/* The system's default algorithm, as a new TCP socket has it. */
static void rs_cc_default(char *cc, size_t size)
{
	FILE *f = fopen("/proc/sys/net/ipv4/tcp_congestion_control", "re");

	memset(cc, 0, size);
	if (!f || fscanf(f, "%15s", cc) != 1)
		strcpy(cc, "cubic");
	if (f)
		fclose(f);
}

static int rs_fake_get(int fd, int level, int name, void *val,
		       socklen_t *len)
{
	struct rs_opt *o, copy = { .len = 0 };
	struct tcp_info ti;
	struct rs_fd *e;
	int mss = rs_fakes[rs_fake_index(SOL_TCP, TCP_MAXSEG)].def;
	int def;

	pthread_mutex_lock(&rs.lock);
	e = rs_fd_get(fd, false);
	o = e ? rs_opt_find(e, level, name) : NULL;
	if (o)
		copy = *o;
	o = e ? rs_opt_find(e, SOL_TCP, TCP_MAXSEG) : NULL;
	if (o && o->len >= sizeof(int))
		memcpy(&mss, o->val, sizeof(mss));
	pthread_mutex_unlock(&rs.lock);

	if (level == SOL_TCP && name == TCP_INFO) {
		rs_fake_tcp_info(fd, &ti, mss);
		rs_put(val, len, &ti, sizeof(ti));
		return 0;
	}
	if (level == SOL_TCP && name == TCP_CONGESTION) {
		if (!copy.len)
			rs_cc_default((char *)copy.val, RS_CA_NAME_MAX);
		rs_put(val, len, copy.val, RS_CA_NAME_MAX);
		return 0;
	}
	def = rs_fakes[rs_fake_index(level, name)].def;
	if (copy.len)
		memcpy(&def, copy.val, sizeof(def));
	rs_put(val, len, &def, sizeof(def));
	return 0;
}

int getsockopt(int fd, int level, int name, void *val, socklen_t *len)
{
	int ret, err;

	rs_ready();
	ret = rs.getsockopt(fd, level, name, val, len);
	err = errno;
	if (!ret && level == SOL_SOCKET && name == SO_PROTOCOL &&
	    rs.ipproto > 0 && len && *len >= sizeof(int) &&
	    *(int *)val == rs.ipproto) {
		*(int *)val = IPPROTO_TCP;
		return 0;
	}
	if (ret && err == ENOPROTOOPT && val && len &&
	    (rs_is_fake(level, name) ||
	     (level == SOL_TCP && name == TCP_INFO)) && rs_is_ours(fd))
		return rs_fake_get(fd, level, name, val, len);
	errno = err;
	return ret;
}
