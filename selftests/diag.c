// SPDX-License-Identifier: GPL-2.0
/*
 * Diagnostics: the sock_diag dump of the family, rsstat's listing and
 * counters, checked against what the same sockets say of themselves
 * (getsockopt(RDMASTREAM_INFO), getsockname, getpeername, SIOCINQ,
 * SIOCOUTQ, SO_COOKIE, fstat). docs/diag.md.
 *
 * Every test makes sockets of both routes (AF_RDMASTREAM and the IPPROTO
 * route's AF_INET), whatever RS_FAMILY says; RS_FAMILY picks the route of
 * the connected pair. rsstat is build/tools/rsstat (RS_RSSTAT overrides).
 */
#define _GNU_SOURCE
#include <sched.h>
#include <sys/stat.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>

#include "rs_common.h"

#define TCP_ESTABLISHED	1
#define TCP_CLOSE	7
#define TCP_LISTEN	10

#define MAX_ENTS	512

struct ent {
	struct rdmastream_diag_msg m;
	struct sockaddr_storage local, peer;
	int local_len, peer_len;	/* 0: attribute absent */
	bool has_info;
	struct rdmastream_info info;
};

static struct ent ents[MAX_ENTS];

static int diag_family(void)
{
	int fam = AF_RDMASTREAM;
	FILE *f = fopen("/sys/module/rdmastream/parameters/family", "r");

	if (f) {
		if (fscanf(f, "%d", &fam) != 1)
			fam = AF_RDMASTREAM;
		fclose(f);
	}
	return fam;
}

static void parse_one(struct nlmsghdr *h, struct ent *e)
{
	int rem = h->nlmsg_len - NLMSG_LENGTH(sizeof(e->m));
	struct nlattr *a;
	int len;

	memset(e, 0, sizeof(*e));
	memcpy(&e->m, NLMSG_DATA(h), sizeof(e->m));
	a = (void *)((char *)NLMSG_DATA(h) + NLMSG_ALIGN(sizeof(e->m)));
	while (rem >= (int)sizeof(*a) && a->nla_len >= sizeof(*a) &&
	       a->nla_len <= rem) {
		len = a->nla_len - NLA_HDRLEN;
		switch (a->nla_type) {
		case RDMASTREAM_DIAG_LOCAL:
			e->local_len = len;
			memcpy(&e->local, a + 1, len < 128 ? len : 128);
			break;
		case RDMASTREAM_DIAG_PEER:
			e->peer_len = len;
			memcpy(&e->peer, a + 1, len < 128 ? len : 128);
			break;
		case RDMASTREAM_DIAG_INFO:
			e->has_info = len == sizeof(e->info);
			memcpy(&e->info, a + 1,
			       len < (int)sizeof(e->info) ? len :
			       (int)sizeof(e->info));
			break;
		}
		rem -= NLA_ALIGN(a->nla_len);
		a = (void *)((char *)a + NLA_ALIGN(a->nla_len));
	}
}

/*
 * Send one request of plen payload bytes (flags as given) and read the
 * answer: the number of sockets listed into ents, or -errno of an error.
 */
static int diag_raw(const void *payload, int plen, int flags)
{
	static char buf[1 << 16];
	char req[NLMSG_SPACE(256)] = { 0 };
	struct nlmsghdr *h = (void *)req;
	int fd, n = 0, ret = -EPROTO;
	ssize_t len;

	h->nlmsg_len = NLMSG_LENGTH(plen);
	h->nlmsg_type = SOCK_DIAG_BY_FAMILY;
	h->nlmsg_flags = flags;
	h->nlmsg_seq = 7;
	memcpy(NLMSG_DATA(h), payload, plen);
	fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
	if (fd < 0)
		return -errno;
	if (send(fd, req, h->nlmsg_len, 0) < 0) {
		ret = -errno;
		goto out;
	}
	for (;;) {
		len = recv(fd, buf, sizeof(buf), 0);
		if (len < 0) {
			ret = -errno;
			goto out;
		}
		for (h = (void *)buf; NLMSG_OK(h, len); h = NLMSG_NEXT(h, len)) {
			if (h->nlmsg_type == NLMSG_DONE) {
				ret = n;
				goto out;
			}
			if (h->nlmsg_type == NLMSG_ERROR) {
				ret = ((struct nlmsgerr *)NLMSG_DATA(h))->error;
				goto out;
			}
			if (h->nlmsg_type != SOCK_DIAG_BY_FAMILY ||
			    h->nlmsg_seq != 7 ||
			    h->nlmsg_len < NLMSG_LENGTH(sizeof(ents[0].m)))
				goto out;
			if (n < MAX_ENTS)
				parse_one(h, &ents[n]);
			n++;
		}
	}
out:
	close(fd);
	return ret;
}

static int diag_dump(unsigned int states, unsigned int show)
{
	struct rdmastream_diag_req r = {
		.sdiag_family = diag_family(),
		.rdiag_states = states,
		.rdiag_show = show,
	};

	return diag_raw(&r, sizeof(r), NLM_F_REQUEST | NLM_F_DUMP);
}

static unsigned int ino_of(int fd)
{
	struct stat st;

	if (fstat(fd, &st))
		return 0;
	return st.st_ino;
}

static struct ent *find(int n, unsigned int ino)
{
	int i;

	for (i = 0; i < n && i < MAX_ENTS; i++)
		if (ino && ents[i].m.rdiag_inode == ino)
			return &ents[i];
	return NULL;
}

static int sock_int(int fd, int level, int opt)
{
	return rs_getint(fd, level, opt);
}

/* Wait until the sender's queue is empty: SIOCOUTQ is stable then. */
static void drain_outq(int fd)
{
	int q = -1, i;

	for (i = 0; i < 500; i++) {
		if (!ioctl(fd, SIOCOUTQ, &q) && !q)
			return;
		rs_msleep(10);
	}
}

/* The listed socket against what the socket itself says. */
static void check_ent(struct __test_metadata *_metadata, int fd,
		      const struct ent *e, bool connected)
{
	struct sockaddr_storage ss;
	struct rdmastream_info info;
	socklen_t len = sizeof(info);
	uint32_t cookie[2];
	int q;

	ASSERT_NE(NULL, e) TH_LOG("inode %u not listed", ino_of(fd));
	EXPECT_EQ(sock_int(fd, SOL_SOCKET, SO_DOMAIN), e->m.rdiag_family);
	EXPECT_EQ(sock_int(fd, SOL_SOCKET, SO_PROTOCOL), e->m.rdiag_protocol);
	EXPECT_EQ(getuid(), e->m.rdiag_uid);
	len = sizeof(cookie);
	ASSERT_EQ(0, getsockopt(fd, SOL_SOCKET, SO_COOKIE, cookie, &len));
	EXPECT_EQ(0, memcmp(cookie, e->m.rdiag_cookie, sizeof(cookie)));

	len = sizeof(ss);
	ASSERT_EQ(0, getsockname(fd, (struct sockaddr *)&ss, &len));
	ASSERT_EQ((int)len, e->local_len);
	EXPECT_EQ(0, memcmp(&ss, &e->local, len));
	len = sizeof(ss);
	if (connected) {
		ASSERT_EQ(0, getpeername(fd, (struct sockaddr *)&ss, &len));
		ASSERT_EQ((int)len, e->peer_len);
		EXPECT_EQ(0, memcmp(&ss, &e->peer, len));
		ASSERT_EQ(0, ioctl(fd, SIOCINQ, &q));
		EXPECT_EQ(q, (int)e->m.rdiag_rqueue);
		ASSERT_EQ(0, ioctl(fd, SIOCOUTQ, &q));
		EXPECT_EQ(q, (int)e->m.rdiag_wqueue);
	} else {
		EXPECT_EQ(0, e->peer_len);
	}

	ASSERT_TRUE(e->has_info);
	len = sizeof(info);
	ASSERT_EQ(0, getsockopt(fd, SOL_RDMASTREAM, RDMASTREAM_INFO, &info,
				&len));
	EXPECT_EQ(info.rsi_state, e->m.rdiag_state);
	EXPECT_EQ(info.rsi_state, e->info.rsi_state);
	EXPECT_EQ(info.rsi_flags, e->info.rsi_flags);
	EXPECT_EQ(info.rsi_rx_ring, e->info.rsi_rx_ring);
	EXPECT_EQ(info.rsi_tx_ring, e->info.rsi_tx_ring);
	EXPECT_EQ(info.rsi_peer_ring, e->info.rsi_peer_ring);
	EXPECT_EQ(info.rsi_max_inline, e->info.rsi_max_inline);
	EXPECT_EQ(info.rsi_bytes_sent, e->info.rsi_bytes_sent);
	EXPECT_EQ(info.rsi_bytes_acked, e->info.rsi_bytes_acked);
	EXPECT_EQ(info.rsi_bytes_received, e->info.rsi_bytes_received);
	EXPECT_EQ(info.rsi_bytes_read, e->info.rsi_bytes_read);
	EXPECT_EQ(info.rsi_policy, e->info.rsi_policy);
	EXPECT_EQ(info.rsi_direct_threshold, e->info.rsi_direct_threshold);
	EXPECT_EQ(info.rsi_direct_bytes_sent, e->info.rsi_direct_bytes_sent);
	EXPECT_EQ(info.rsi_indirect_bytes_sent,
		  e->info.rsi_indirect_bytes_sent);
	EXPECT_EQ(info.rsi_indirect_bytes_received,
		  e->info.rsi_indirect_bytes_received);
	EXPECT_EQ(info.rsi_adverts_sent, e->info.rsi_adverts_sent);
}

/* A socket of the other route than RS_FAMILY's, or AF_INET6's. */
static int route_socket(int family)
{
	int proto = family == AF_INET || family == AF_INET6 ? rs_ipproto() : 0;

	return socket(family, SOCK_STREAM, proto);
}

static int route_listener(struct __test_metadata *_metadata, int family)
{
	struct sockaddr_in6 s6 = { .sin6_family = AF_INET6 };
	struct sockaddr_in sin;
	int fd = route_socket(family);

	ASSERT_GE(fd, 0) TH_LOG("socket(%d): %s", family, strerror(errno));
	if (family == AF_INET6) {
		/* v4-mapped: the test network has only IPv4 for sure */
		s6.sin6_addr.s6_addr[10] = 0xff;
		s6.sin6_addr.s6_addr[11] = 0xff;
		memcpy(&s6.sin6_addr.s6_addr[12], &rs.addr, 4);
		ASSERT_EQ(0, bind(fd, (struct sockaddr *)&s6, sizeof(s6)))
			TH_LOG("bind6: %s", strerror(errno));
	} else {
		rs_sin(&sin, rs.addr, 0);
		ASSERT_EQ(0, bind(fd, (struct sockaddr *)&sin, sizeof(sin)))
			TH_LOG("bind: %s", strerror(errno));
	}
	ASSERT_EQ(0, listen(fd, 7));
	return fd;
}

static int rdma_family(void)
{
	return (int)rs_env_ulong("RS_AF", diag_family());
}

FIXTURE(diag) {
	int lfd, cfd, sfd;		/* RS_FAMILY's route */
	int rl, il, i6l;		/* listeners of each route */
	struct sockaddr_in sin;
};

FIXTURE_SETUP(diag)
{
	char buf[3000];

	rs_watchdog(120);
	self->lfd = rs_listener(_metadata, &self->sin);
	self->cfd = rs_connect(_metadata, &self->sin);
	self->sfd = rs_accept(_metadata, self->lfd);
	self->rl = route_listener(_metadata, rdma_family());
	self->il = route_listener(_metadata, AF_INET);
	self->i6l = route_listener(_metadata, AF_INET6);
	/* some bytes read, some left unread: non-zero Recv-Q */
	memset(buf, 'x', sizeof(buf));
	ASSERT_EQ((ssize_t)sizeof(buf), rs_send_all(self->cfd, buf,
						    sizeof(buf), 0));
	ASSERT_EQ(1000, rs_recv_all(self->sfd, buf, 1000, 0));
	ASSERT_EQ(2000, rs_wait_inq(self->sfd, 2000, 5000));
	drain_outq(self->cfd);
}

FIXTURE_TEARDOWN(diag)
{
	close(self->cfd);
	close(self->sfd);
	close(self->lfd);
	close(self->rl);
	close(self->il);
	close(self->i6l);
}

/* Every socket of both routes, each as it says it is. */
TEST_F(diag, lists_both_routes)
{
	int n = diag_dump(~0U, RDMASTREAM_DIAG_SHOW_INFO);
	struct ent *e;

	ASSERT_GE(n, 6) TH_LOG("dump: %d %s", n, n < 0 ? strerror(-n) : "");
	ASSERT_LE(n, MAX_ENTS);
	check_ent(_metadata, self->lfd, find(n, ino_of(self->lfd)), false);
	check_ent(_metadata, self->rl, find(n, ino_of(self->rl)), false);
	check_ent(_metadata, self->il, find(n, ino_of(self->il)), false);
	check_ent(_metadata, self->i6l, find(n, ino_of(self->i6l)), false);
	check_ent(_metadata, self->cfd, find(n, ino_of(self->cfd)), true);
	check_ent(_metadata, self->sfd, find(n, ino_of(self->sfd)), true);
	e = find(n, ino_of(self->sfd));
	EXPECT_EQ(2000, e->m.rdiag_rqueue);
	EXPECT_EQ(TCP_ESTABLISHED, e->m.rdiag_state);
	EXPECT_EQ(3000, e->info.rsi_bytes_received);
	e = find(n, ino_of(self->il));
	EXPECT_EQ(AF_INET, e->m.rdiag_family);
	EXPECT_EQ(rs_ipproto(), e->m.rdiag_protocol);
	EXPECT_EQ(TCP_LISTEN, e->m.rdiag_state);
	EXPECT_EQ(7, e->m.rdiag_wqueue);	/* backlog, as ss shows */
	e = find(n, ino_of(self->i6l));
	EXPECT_EQ(AF_INET6, e->m.rdiag_family);
	e = find(n, ino_of(self->rl));
	EXPECT_EQ(rdma_family(), e->m.rdiag_family);
	EXPECT_EQ(0, e->m.rdiag_protocol);
	/* without SHOW_INFO, no info attribute */
	n = diag_dump(~0U, 0);
	ASSERT_GE(n, 6);
	EXPECT_FALSE(find(n, ino_of(self->cfd))->has_info);
}

static const char *rsstat_path(void)
{
	static char path[PATH_MAX];
	char *slash;
	ssize_t n;

	if (getenv("RS_RSSTAT"))
		return getenv("RS_RSSTAT");
	/* build/selftests/diag -> build/tools/rsstat */
	n = readlink("/proc/self/exe", path, sizeof(path) - 32);
	if (n < 0)
		return "rsstat";
	path[n] = 0;
	slash = strrchr(path, '/');
	*slash = 0;
	strcat(path, "/../tools/rsstat");
	return path;
}

/* rsstat's line (and -i line) of the socket of inode ino, or "" */
static void rsstat_lines(const char *args, unsigned int ino, char *line,
			 char *info, size_t len)
{
	char cmd[PATH_MAX + 64], buf[4096], key[32];
	bool next = false;
	FILE *p;

	line[0] = info[0] = 0;
	snprintf(key, sizeof(key), " ino:%u", ino);
	snprintf(cmd, sizeof(cmd), "%s %s", rsstat_path(), args);
	p = popen(cmd, "r");
	if (!p)
		return;
	while (fgets(buf, sizeof(buf), p)) {
		if (next) {
			snprintf(info, len, "%s", buf);
			next = false;
		}
		if (strstr(buf, key) && !strstr(buf, " ino:0") &&
		    strstr(buf, key)[strlen(key)] == '\n') {
			snprintf(line, len, "%s", buf);
			next = true;
		}
	}
	pclose(p);
}

static void expect_field(struct __test_metadata *_metadata, const char *s,
			 const char *name, unsigned long long v)
{
	char want[96];

	snprintf(want, sizeof(want), " %s:%llu ", name, v);
	EXPECT_NE(NULL, strstr(s, want)) TH_LOG("no '%s' in: %s", want, s);
}

/* rsstat -aipn shows what the sockets say of themselves. */
TEST_F(diag, rsstat_matches_info)
{
	char line[4096], info[4096], want[128], addr[96];
	struct rdmastream_info ri;
	socklen_t len = sizeof(ri);
	struct sockaddr_storage ss;

	rsstat_lines("-aipn", ino_of(self->sfd), line, info, sizeof(line));
	ASSERT_NE(0, line[0]) TH_LOG("%s lists no ino:%u", rsstat_path(),
				     ino_of(self->sfd));
	rs_info("%.*s", (int)strcspn(line, "\n"), line);
	rs_info("%.*s", (int)strcspn(info, "\n"), info);
	EXPECT_NE(NULL, strstr(line, " ESTAB "));
	EXPECT_NE(NULL, strstr(line, " 2000 "));	/* Recv-Q */
	len = sizeof(ss);
	ASSERT_EQ(0, getsockname(self->sfd, (struct sockaddr *)&ss, &len));
	rs_ntop(&ss, addr, sizeof(addr));
	EXPECT_NE(NULL, strstr(line, addr)) TH_LOG("no %s", addr);
	len = sizeof(ss);
	ASSERT_EQ(0, getpeername(self->sfd, (struct sockaddr *)&ss, &len));
	rs_ntop(&ss, addr, sizeof(addr));
	EXPECT_NE(NULL, strstr(line, addr)) TH_LOG("no %s", addr);
	snprintf(want, sizeof(want), "pid=%d,fd=%d", getpid(), self->sfd);
	EXPECT_NE(NULL, strstr(line, want)) TH_LOG("no %s", want);
	snprintf(want, sizeof(want), " uid:%u ", getuid());
	EXPECT_NE(NULL, strstr(line, want)) TH_LOG("no %s", want);

	len = sizeof(ri);
	ASSERT_EQ(0, getsockopt(self->sfd, SOL_RDMASTREAM, RDMASTREAM_INFO,
				&ri, &len));
	expect_field(_metadata, info, "rx_ring", ri.rsi_rx_ring);
	expect_field(_metadata, info, "tx_ring", ri.rsi_tx_ring);
	expect_field(_metadata, info, "peer_ring", ri.rsi_peer_ring);
	expect_field(_metadata, info, "bytes_received", ri.rsi_bytes_received);
	expect_field(_metadata, info, "bytes_read", ri.rsi_bytes_read);
	expect_field(_metadata, info, "indirect_received",
		     ri.rsi_indirect_bytes_received);
	expect_field(_metadata, info, "direct_received",
		     ri.rsi_direct_bytes_received);
	expect_field(_metadata, info, "adverts_sent", ri.rsi_adverts_sent);

	/* -l: listeners only; default: no listeners */
	rsstat_lines("-li", ino_of(self->il), line, info, sizeof(line));
	EXPECT_NE(NULL, strstr(line, " LISTEN ")) TH_LOG("%s", line);
	rsstat_lines("-li", ino_of(self->sfd), line, info, sizeof(line));
	EXPECT_EQ(0, line[0]) TH_LOG("-l lists a connection: %s", line);
	rsstat_lines("-i", ino_of(self->il), line, info, sizeof(line));
	EXPECT_EQ(0, line[0]) TH_LOG("default lists a listener: %s", line);
	rsstat_lines("-i", ino_of(self->cfd), line, info, sizeof(line));
	EXPECT_NE(0, line[0]);
}

/* The state mask: exactly the sockets in the states asked for. */
TEST_F(diag, state_filter)
{
	int n, i;

	n = diag_dump(1U << TCP_LISTEN, 0);
	ASSERT_GE(n, 4);
	for (i = 0; i < n && i < MAX_ENTS; i++)
		EXPECT_EQ(TCP_LISTEN, ents[i].m.rdiag_state);
	EXPECT_NE(NULL, find(n, ino_of(self->il)));
	EXPECT_EQ(NULL, find(n, ino_of(self->cfd)));

	n = diag_dump(1U << TCP_ESTABLISHED, 0);
	ASSERT_GE(n, 2);
	for (i = 0; i < n && i < MAX_ENTS; i++)
		EXPECT_EQ(TCP_ESTABLISHED, ents[i].m.rdiag_state);
	EXPECT_NE(NULL, find(n, ino_of(self->cfd)));
	EXPECT_NE(NULL, find(n, ino_of(self->sfd)));
	EXPECT_EQ(NULL, find(n, ino_of(self->lfd)));

	EXPECT_EQ(0, diag_dump(0, 0));
	EXPECT_EQ(0, diag_dump(1U << 11, 0));	/* TCP_CLOSING: none */
}

/* The number of sockets listed, once it is want (10 s at most). */
static int wait_count(int want)
{
	int n = -1, i;

	for (i = 0; i < 500; i++) {
		n = diag_dump(~0U, 0);
		if (n == want)
			break;
		rs_msleep(20);
	}
	return n;
}

/* Closed sockets leave the list; the number of sockets comes back. */
TEST_F(diag, closed_disappears)
{
	unsigned int lino = ino_of(self->il), cino = ino_of(self->cfd);
	unsigned int sino = ino_of(self->sfd);
	int before, n, fd;

	before = diag_dump(~0U, 0);
	ASSERT_GE(before, 6);
	fd = route_socket(AF_INET);
	ASSERT_GE(fd, 0);
	n = diag_dump(~0U, 0);
	ASSERT_NE(NULL, find(n, ino_of(fd)));
	EXPECT_EQ(TCP_CLOSE, find(n, ino_of(fd))->m.rdiag_state);
	close(fd);
	EXPECT_EQ(before, wait_count(before));

	close(self->il);
	self->il = -1;
	n = wait_count(before - 1);
	EXPECT_EQ(before - 1, n);
	EXPECT_EQ(NULL, find(n, lino));
	/* a closed connection may linger as an orphan, then goes */
	close(self->cfd);
	close(self->sfd);
	self->cfd = self->sfd = -1;
	n = wait_count(before - 3);
	EXPECT_EQ(before - 3, n);
	EXPECT_EQ(NULL, find(n, cino));
	EXPECT_EQ(NULL, find(n, sino));
}

/* Malformed requests are refused; the handler works on afterwards. */
TEST_F(diag, malformed)
{
	struct rdmastream_diag_req r = {
		.sdiag_family = diag_family(),
		.rdiag_states = ~0U,
	};
	unsigned char junk[256];
	int i, n, ret;

	/* short: the family header only, then one byte short */
	EXPECT_EQ(-EINVAL, diag_raw(&r, 2, NLM_F_REQUEST | NLM_F_DUMP));
	EXPECT_EQ(-EINVAL, diag_raw(&r, sizeof(r) - 1,
				    NLM_F_REQUEST | NLM_F_DUMP));
	r.sdiag_protocol = 6;
	EXPECT_EQ(-EINVAL, diag_raw(&r, sizeof(r), NLM_F_REQUEST | NLM_F_DUMP));
	r.sdiag_protocol = 0;
	r.rdiag_pad = 1;
	EXPECT_EQ(-EINVAL, diag_raw(&r, sizeof(r), NLM_F_REQUEST | NLM_F_DUMP));
	r.rdiag_pad = 0;
	r.rdiag_show = 0x80;
	EXPECT_EQ(-EINVAL, diag_raw(&r, sizeof(r), NLM_F_REQUEST | NLM_F_DUMP));
	r.rdiag_show = 0;
	/* no dump flag: a "get one" this handler does not do */
	EXPECT_EQ(-EOPNOTSUPP, diag_raw(&r, sizeof(r), NLM_F_REQUEST));
	/* longer than the struct is fine (room to grow) */
	memset(junk, 0, sizeof(junk));
	memcpy(junk, &r, sizeof(r));
	EXPECT_GE(diag_raw(junk, sizeof(junk), NLM_F_REQUEST | NLM_F_DUMP), 6);

	/* random requests: an error or a dump, never anything else */
	srandom(1234);
	for (i = 0; i < 300; i++) {
		for (n = 0; n < (int)sizeof(junk); n++)
			junk[n] = random();
		junk[0] = diag_family();
		n = random() % sizeof(junk);
		ret = diag_raw(junk, n < 2 ? 2 : n,
			       NLM_F_REQUEST | (random() & 1 ? NLM_F_DUMP : 0));
		EXPECT_TRUE(ret >= 0 || ret == -EINVAL || ret == -EOPNOTSUPP)
			TH_LOG("random request %d: %d", i, ret);
	}
	n = diag_dump(~0U, RDMASTREAM_DIAG_SHOW_INFO);
	ASSERT_GE(n, 6);
	check_ent(_metadata, self->sfd, find(n, ino_of(self->sfd)), true);
}

/*
 * A socket of another network namespace is not listed here, and its
 * namespace lists it (and not ours).
 */
TEST_F(diag, other_netns)
{
	int tochild[2], toparent[2], st, n;
	unsigned int ino = 0;
	char c = 0;
	pid_t pid;

	ASSERT_EQ(0, pipe(tochild));
	ASSERT_EQ(0, pipe(toparent));
	pid = fork();
	ASSERT_GE(pid, 0);
	/*
	 * The child's exit status says what failed: 10 unshare, 11 socket,
	 * 12 its own netns's dump is not exactly its two sockets, 13 no
	 * counters file there, 14-15 the pipes.
	 */
	if (!pid) {
		int fd, fd2;

		close(toparent[0]);
		close(tochild[1]);
		if (unshare(CLONE_NEWNET))
			_exit(10);
		fd = route_socket(rdma_family());
		fd2 = route_socket(AF_INET);
		if (fd < 0 || fd2 < 0)
			_exit(11);
		ino = ino_of(fd);
		n = diag_dump(~0U, 0);
		if (n != 2 || !find(n, ino) || !find(n, ino_of(fd2)))
			_exit(12);
		if (access("/proc/net/rdmastream_stat", R_OK))
			_exit(13);
		if (write(toparent[1], &ino, sizeof(ino)) != sizeof(ino))
			_exit(14);
		if (read(tochild[0], &c, 1) != 1)
			_exit(15);
		_exit(0);
	}
	/* the child's ends only: its exit is EOF here */
	close(toparent[1]);
	close(tochild[0]);
	if (read(toparent[0], &ino, sizeof(ino)) != sizeof(ino)) {
		waitpid(pid, &st, 0);
		ASSERT_TRUE(false) TH_LOG("the child failed: status %#x", st);
	}
	n = diag_dump(~0U, 0);
	ASSERT_GE(n, 6);
	EXPECT_EQ(NULL, find(n, ino)) TH_LOG("inode %u of another netns", ino);
	ASSERT_EQ(1, write(tochild[1], &c, 1));
	ASSERT_EQ(pid, waitpid(pid, &st, 0));
	EXPECT_TRUE(WIFEXITED(st) && !WEXITSTATUS(st))
		TH_LOG("child status %#x", st);
}

#define NSTAT	16

/* /proc/net/rdmastream_stat as name=value pairs; how many. */
static int stat_read(char names[NSTAT][40], unsigned long long *vals)
{
	char l1[1024], l2[1024], *s1, *s2, *a, *b;
	FILE *f = fopen("/proc/net/rdmastream_stat", "r");
	int n = 0;

	if (!f)
		return -1;
	if (!fgets(l1, sizeof(l1), f) || !fgets(l2, sizeof(l2), f)) {
		fclose(f);
		return -1;
	}
	fclose(f);
	a = strtok_r(l1, " \n", &s1);
	b = strtok_r(l2, " \n", &s2);
	if (!a || !b || strcmp(a, "RdmaStream:") || strcmp(b, a))
		return -1;
	while (n < NSTAT && (a = strtok_r(NULL, " \n", &s1)) &&
	       (b = strtok_r(NULL, " \n", &s2))) {
		snprintf(names[n], 40, "%s", a);
		vals[n++] = strtoull(b, NULL, 10);
	}
	return n;
}

static unsigned long long stat_get(char names[NSTAT][40],
				   unsigned long long *vals, int n,
				   const char *name)
{
	int i;

	for (i = 0; i < n; i++)
		if (!strcmp(names[i], name))
			return vals[i];
	return ~0ULL;
}

/* The counters move with what happens, and rsstat -s shows them. */
TEST_F(diag, counters)
{
	char names[NSTAT][40], names2[NSTAT][40], buf[1 << 16], cmd[PATH_MAX];
	unsigned long long v[NSTAT], w[NSTAT], sent, sent2, dumped = 0;
	struct sockaddr_in sin;
	int n, n2, fd, cfd, sfd, i;
	bool seen = false;
	FILE *p;

	n = stat_read(names, v);
	ASSERT_GE(n, 9) TH_LOG("/proc/net/rdmastream_stat: %s",
			       strerror(errno));
	rs_pair(_metadata, &cfd, &sfd);
	memset(buf, 'y', sizeof(buf));
	ASSERT_EQ((ssize_t)sizeof(buf), rs_send_all(cfd, buf, sizeof(buf), 0));
	ASSERT_EQ((ssize_t)sizeof(buf), rs_recv_all(sfd, buf, sizeof(buf),
						    MSG_WAITALL));
	/* a refused connect: nothing listens on a bound, closed port */
	fd = rs_bound(_metadata, 0, &sin);
	close(fd);
	fd = rs_socket(0);
	ASSERT_GE(fd, 0);
	EXPECT_NE(0, connect(fd, (struct sockaddr *)&sin, sizeof(sin)));
	close(fd);

	n2 = stat_read(names2, w);
	ASSERT_EQ(n, n2);
	EXPECT_EQ(stat_get(names, v, n, "ActiveOpens") + 2,
		  stat_get(names2, w, n2, "ActiveOpens"));
	EXPECT_EQ(stat_get(names, v, n, "PassiveOpens") + 1,
		  stat_get(names2, w, n2, "PassiveOpens"));
	EXPECT_EQ(stat_get(names, v, n, "AttemptFails") + 1,
		  stat_get(names2, w, n2, "AttemptFails"));
	sent = stat_get(names, v, n, "DirectBytesSent") +
	       stat_get(names, v, n, "IndirectBytesSent");
	sent2 = stat_get(names2, w, n2, "DirectBytesSent") +
		stat_get(names2, w, n2, "IndirectBytesSent");
	EXPECT_EQ(sent + sizeof(buf), sent2);
	EXPECT_EQ(stat_get(names, v, n, "CurrEstab") + 2,
		  stat_get(names2, w, n2, "CurrEstab"));
	/*
	 * the refused connect's socket leaves both lists, not at the same
	 * instant (its teardown is a work item): equal once it is gone
	 */
	for (i = 0; i < 50; i++) {
		n2 = stat_read(names2, w);
		dumped = diag_dump(~0U, 0);
		if (dumped == stat_get(names2, w, n2, "Sockets"))
			break;
		rs_msleep(100);
	}
	EXPECT_EQ(dumped, stat_get(names2, w, n2, "Sockets"));
	close(cfd);
	close(sfd);
	/* a socket's bytes stay counted once it is gone */
	rs_msleep(200);
	n2 = stat_read(names2, w);
	EXPECT_LE(sent + sizeof(buf), stat_get(names2, w, n2,
					       "DirectBytesSent") +
		  stat_get(names2, w, n2, "IndirectBytesSent"));

	snprintf(cmd, sizeof(cmd), "%s -s", rsstat_path());
	p = popen(cmd, "r");
	ASSERT_NE(NULL, p);
	while (fgets(buf, sizeof(buf), p))
		if (!strncmp(buf, "RdmaStreamPassiveOpens ", 23))
			seen = true;
	EXPECT_EQ(0, pclose(p));
	EXPECT_TRUE(seen);
}

TEST_HARNESS_MAIN
