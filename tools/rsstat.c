// SPDX-License-Identifier: GPL-2.0
/*
 * rsstat: list rdmastream sockets the way ss -ti lists TCP's, through the
 * module's sock_diag handler, and print the module's counters the way
 * nstat prints TCP's (/proc/net/rdmastream_stat). docs/diag.md.
 *
 *   rsstat [-a|-l] [-i] [-p] [-n] [-F family]    sockets
 *   rsstat -s                                    counters
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <linux/rdmastream.h>

#define TCP_ESTABLISHED	1
#define TCP_CLOSE	7
#define TCP_LISTEN	10

static const char *const state_names[] = {
	"UNKNOWN", "ESTAB", "SYN-SENT", "SYN-RECV", "FIN-WAIT-1",
	"FIN-WAIT-2", "TIME-WAIT", "UNCONN", "CLOSE-WAIT", "LAST-ACK",
	"LISTEN", "CLOSING",
};

static const char *const policy_names[] = {
	"dynamic", "direct-only", "indirect-only",
};

static int opt_info, opt_proc, opt_numeric;
static int family = AF_RDMASTREAM;

/* One owner of an inode, found in /proc/<pid>/fd. */
struct owner {
	unsigned int ino;
	int pid, fd;
	char comm[32];
};

static struct owner *owners;
static size_t nowners;

static void owner_add(unsigned int ino, int pid, int fd, const char *comm)
{
	struct owner *o;

	o = realloc(owners, (nowners + 1) * sizeof(*owners));
	if (!o)
		return;
	owners = o;
	o += nowners++;
	o->ino = ino;
	o->pid = pid;
	o->fd = fd;
	snprintf(o->comm, sizeof(o->comm), "%s", comm);
}

static void read_comm(int pid, char *comm, size_t len)
{
	char path[64];
	FILE *f;

	snprintf(comm, len, "?");
	snprintf(path, sizeof(path), "/proc/%d/comm", pid);
	f = fopen(path, "r");
	if (!f)
		return;
	if (fgets(comm, len, f))
		comm[strcspn(comm, "\n")] = 0;
	fclose(f);
}

/* As ss -p: every socket:[ino] link under /proc/<pid>/fd. */
static void scan_owners(void)
{
	struct dirent *p, *d;
	char path[PATH_MAX], link[64], comm[32];
	DIR *proc, *fds;
	unsigned int ino;
	ssize_t n;

	proc = opendir("/proc");
	if (!proc)
		return;
	while ((p = readdir(proc))) {
		if (!isdigit((unsigned char)p->d_name[0]))
			continue;
		snprintf(path, sizeof(path), "/proc/%s/fd", p->d_name);
		fds = opendir(path);
		if (!fds)
			continue;
		comm[0] = 0;
		while ((d = readdir(fds))) {
			snprintf(path, sizeof(path), "/proc/%s/fd/%s",
				 p->d_name, d->d_name);
			n = readlink(path, link, sizeof(link) - 1);
			if (n <= 0)
				continue;
			link[n] = 0;
			if (sscanf(link, "socket:[%u]", &ino) != 1)
				continue;
			if (!comm[0])
				read_comm(atoi(p->d_name), comm, sizeof(comm));
			owner_add(ino, atoi(p->d_name), atoi(d->d_name), comm);
		}
		closedir(fds);
	}
	closedir(proc);
}

static void fmt_addr(const struct nlattr *a, char *buf, size_t len)
{
	const struct sockaddr *sa = (const void *)(a + 1);
	socklen_t salen = a->nla_len - NLA_HDRLEN;
	char host[NI_MAXHOST], serv[NI_MAXSERV];
	int flags = NI_NUMERICHOST | (opt_numeric ? NI_NUMERICSERV : 0);

	if (getnameinfo(sa, salen, host, sizeof(host), serv, sizeof(serv),
			flags)) {
		snprintf(buf, len, "?");
		return;
	}
	if (sa->sa_family == AF_INET6)
		snprintf(buf, len, "[%s]:%s", host, serv);
	else
		snprintf(buf, len, "%s:%s", host, serv);
	if (sa->sa_family == AF_INET6 &&
	    !strcmp(host, "::") && !strcmp(serv, "0"))
		snprintf(buf, len, "*:*");
	else if (sa->sa_family == AF_INET &&
		 !strcmp(host, "0.0.0.0") && !strcmp(serv, "0"))
		snprintf(buf, len, "*:*");
}

static const char *family_name(const struct rdmastream_diag_msg *r)
{
	if (r->rdiag_family == AF_INET)
		return "inet";
	if (r->rdiag_family == AF_INET6)
		return "inet6";
	return "rdma";
}


/* Over TCP (docs/fallback.md): " fallback:<why>" */
static void print_fallback(const struct rdmastream_info *i)
{
	static const char * const why[] = {
		[RDMASTREAM_FB_FORCED] = "forced",
		[RDMASTREAM_FB_NO_DEVICE] = "no_device",
		[RDMASTREAM_FB_REJECTED] = "rejected",
		[RDMASTREAM_FB_TIMEOUT] = "timeout",
		[RDMASTREAM_FB_ACCEPTED] = "accepted",
	};

	if (!(i->rsi_flags & RDMASTREAM_INFO_F_FALLBACK))
		return;
	if (i->rsi_fallback < sizeof(why) / sizeof(why[0]) &&
	    why[i->rsi_fallback])
		printf(" fallback:%s", why[i->rsi_fallback]);
	else
		printf(" fallback:%u", i->rsi_fallback);
}
static void print_info(const struct rdmastream_info *i)
{
	const char *pol = i->rsi_policy < 3 ?
			  policy_names[i->rsi_policy] : "?";

	printf("\t %s rx_ring:%u tx_ring:%u peer_ring:%u credits:%u max_inline:%u",
	       pol, i->rsi_rx_ring, i->rsi_tx_ring, i->rsi_peer_ring,
	       i->rsi_credits, i->rsi_max_inline);
	printf(" bytes_sent:%llu bytes_acked:%llu bytes_received:%llu bytes_read:%llu",
	       (unsigned long long)i->rsi_bytes_sent,
	       (unsigned long long)i->rsi_bytes_acked,
	       (unsigned long long)i->rsi_bytes_received,
	       (unsigned long long)i->rsi_bytes_read);
	printf(" direct_sent:%llu indirect_sent:%llu direct_received:%llu indirect_received:%llu",
	       (unsigned long long)i->rsi_direct_bytes_sent,
	       (unsigned long long)i->rsi_indirect_bytes_sent,
	       (unsigned long long)i->rsi_direct_bytes_received,
	       (unsigned long long)i->rsi_indirect_bytes_received);
	printf(" adverts_sent:%llu adverts_filled:%llu adverts_received:%llu adverts_used:%llu",
	       (unsigned long long)i->rsi_adverts_sent,
	       (unsigned long long)i->rsi_adverts_filled,
	       (unsigned long long)i->rsi_adverts_received,
	       (unsigned long long)i->rsi_adverts_used);
	printf(" writes:%llu ctrl_sent:%llu ctrl_received:%llu window_stalls:%llu credit_stalls:%llu errors:%llu",
	       (unsigned long long)i->rsi_writes,
	       (unsigned long long)i->rsi_ctrl_sent,
	       (unsigned long long)i->rsi_ctrl_received,
	       (unsigned long long)i->rsi_window_stalls,
	       (unsigned long long)i->rsi_credit_stalls,
	       (unsigned long long)i->rsi_errors);
	printf(" spin_hits:%llu spin_misses:%llu spin_est_us:%u",
	       (unsigned long long)i->rsi_spin_hits,
	       (unsigned long long)i->rsi_spin_misses, i->rsi_spin_est_us);
	printf("%s%s%s%s",
	       i->rsi_flags & RDMASTREAM_INFO_F_PEER_READY ? " peer_ready" : "",
	       i->rsi_flags & RDMASTREAM_INFO_F_FIN_SENT ? " fin_sent" : "",
	       i->rsi_flags & RDMASTREAM_INFO_F_FIN_RCVD ? " fin_rcvd" : "",
	       i->rsi_flags & RDMASTREAM_INFO_F_RESET ? " reset" : "");
	print_fallback(i);
}

static void print_sock(const struct nlmsghdr *h)
{
	const struct rdmastream_diag_msg *r = NLMSG_DATA(h);
	const struct nlattr *a, *info = NULL;
	char local[NI_MAXHOST + NI_MAXSERV + 4] = "*:*";
	char peer[NI_MAXHOST + NI_MAXSERV + 4] = "*:*";
	int rem = h->nlmsg_len - NLMSG_LENGTH(sizeof(*r));
	size_t k;

	if (rem < 0)
		return;
	a = (const void *)((const char *)r + NLMSG_ALIGN(sizeof(*r)));
	while (rem >= (int)sizeof(*a) && a->nla_len >= sizeof(*a) &&
	       a->nla_len <= rem) {
		switch (a->nla_type) {
		case RDMASTREAM_DIAG_LOCAL:
			fmt_addr(a, local, sizeof(local));
			break;
		case RDMASTREAM_DIAG_PEER:
			fmt_addr(a, peer, sizeof(peer));
			break;
		case RDMASTREAM_DIAG_INFO:
			info = a;
			break;
		}
		rem -= NLA_ALIGN(a->nla_len);
		a = (const void *)((const char *)a + NLA_ALIGN(a->nla_len));
	}
	printf("%-5s %-10s %-6u %-6u %-40s %-40s", family_name(r),
	       r->rdiag_state < 12 ? state_names[r->rdiag_state] : "?",
	       r->rdiag_rqueue, r->rdiag_wqueue, local, peer);
	if (opt_proc) {
		printf(" uid:%u", r->rdiag_uid);
		for (k = 0; k < nowners; k++)
			if (r->rdiag_inode && owners[k].ino == r->rdiag_inode)
				printf(" users:((\"%s\",pid=%d,fd=%d))",
				       owners[k].comm, owners[k].pid,
				       owners[k].fd);
	}
	if (opt_info)
		printf(" ino:%u", r->rdiag_inode);
	putchar('\n');
	if (opt_info && info &&
	    info->nla_len >= NLA_HDRLEN + sizeof(struct rdmastream_info)) {
		print_info((const void *)(info + 1));
		putchar('\n');
	}
}

static int dump(unsigned int states)
{
	struct {
		struct nlmsghdr nlh;
		struct rdmastream_diag_req req;
	} msg = {
		.nlh = {
			.nlmsg_len = sizeof(msg),
			.nlmsg_type = SOCK_DIAG_BY_FAMILY,
			.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP,
			.nlmsg_seq = 1,
		},
		.req = {
			.sdiag_family = family,
			.rdiag_states = states,
			.rdiag_show = opt_info ? RDMASTREAM_DIAG_SHOW_INFO : 0,
		},
	};
	static char buf[65536];
	struct nlmsghdr *h;
	int fd, done = 0;
	ssize_t n;

	fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
	if (fd < 0 || send(fd, &msg, sizeof(msg), 0) < 0) {
		perror("rsstat: netlink");
		return 1;
	}
	printf("%-5s %-10s %-6s %-6s %-40s %-40s%s\n", "Netid", "State",
	       "Recv-Q", "Send-Q", "Local Address:Port", "Peer Address:Port",
	       opt_proc ? " Process" : "");
	while (!done) {
		n = recv(fd, buf, sizeof(buf), 0);
		if (n < 0) {
			perror("rsstat: recv");
			return 1;
		}
		for (h = (void *)buf; NLMSG_OK(h, n); h = NLMSG_NEXT(h, n)) {
			if (h->nlmsg_type == NLMSG_DONE) {
				done = 1;
				break;
			}
			if (h->nlmsg_type == NLMSG_ERROR) {
				struct nlmsgerr *e = NLMSG_DATA(h);

				fprintf(stderr, "rsstat: %s%s\n",
					strerror(-e->error),
					e->error == -ENOENT ?
					" (is rdmastream.ko loaded?)" : "");
				return 1;
			}
			print_sock(h);
		}
	}
	close(fd);
	return 0;
}

/* nstat's format: one counter a line, name and value. */
static int counters(void)
{
	char names[4096], values[4096], *ns, *vs, *n, *v;
	FILE *f = fopen("/proc/net/rdmastream_stat", "r");

	if (!f || !fgets(names, sizeof(names), f) ||
	    !fgets(values, sizeof(values), f)) {
		perror("rsstat: /proc/net/rdmastream_stat");
		return 1;
	}
	fclose(f);
	n = strtok_r(names, " \n", &ns);
	v = strtok_r(values, " \n", &vs);
	for (;;) {
		n = strtok_r(NULL, " \n", &ns);
		v = strtok_r(NULL, " \n", &vs);
		if (!n || !v)
			break;
		printf("RdmaStream%-28s %s\n", n, v);
	}
	return 0;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: rsstat [-a|-l] [-i] [-p] [-n] [-F family]\n"
		"       rsstat -s\n"
		"  -a all sockets   -l listeners only (default: connections)\n"
		"  -i rdmastream_info of each socket   -p owner uid and pid\n"
		"  -n numeric ports -F family number (module's family=)\n"
		"  -s module-wide counters (/proc/net/rdmastream_stat)\n");
	exit(2);
}

int main(int argc, char **argv)
{
	unsigned int states = ~((1U << TCP_LISTEN) | (1U << TCP_CLOSE));
	int c;

	while ((c = getopt(argc, argv, "alipnsF:h")) != -1) {
		switch (c) {
		case 'a':
			states = ~0U;
			break;
		case 'l':
			states = 1U << TCP_LISTEN;
			break;
		case 'i':
			opt_info = 1;
			break;
		case 'p':
			opt_proc = 1;
			break;
		case 'n':
			opt_numeric = 1;
			break;
		case 's':
			return counters();
		case 'F':
			family = atoi(optarg);
			break;
		default:
			usage();
		}
	}
	if (optind != argc)
		usage();
	setvbuf(stdout, NULL, _IOFBF, 1 << 16);
	if (opt_proc)
		scan_owners();
	return dump(states);
}
