// SPDX-License-Identifier: GPL-2.0
/*
 * smcctl - configure and inspect SMC (AF_SMC, net/smc) through its generic
 * netlink families, without smc-tools or libnl (Debian 12 ships neither
 * smc-tools nor a libmnl-dev that this would need).
 *
 *   smcctl info                         SMC_NETLINK_GET_SYS_INFO
 *   smcctl pnet add NAME [eth DEV] [ib DEV [port N]]
 *   smcctl pnet show | flush | del NAME  family SMC_PNETID
 *   smcctl ueid add EID | del EID | flush | show
 *   smcctl seid show
 *   smcctl dev                          SMC-R devices (ports, pnetids)
 *   smcctl lgr                          SMC-R link groups and their links
 *   smcctl stats                        SMC-R/SMC-D connection statistics
 *   smcctl fback                        fallback counts and reason codes
 *
 * stats and fback print "key value" lines (stable, for scripts); the rest
 * is meant for people.  Exit status: 0 ok, 1 error (message on stderr),
 * 2 usage.  Written against include/uapi/linux/smc.h and net/smc/ of 6.1.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>
#include <linux/genetlink.h>
#include <linux/netlink.h>
#include <linux/smc.h>
#include <net/if.h>

#define ARRAY_SIZE(a)		(sizeof(a) / sizeof((a)[0]))
#define SMC_MAX_PNETID_LEN	16	/* net/smc/smc_pnet.h */
#define MAX_ATTR		32
#define BUF_SIZE		(64 * 1024)

static const char *prog = "smcctl";

static void die(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", prog);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

/* --- raw generic netlink -------------------------------------------------- */

struct nl {
	int fd;
	uint32_t seq;
	uint16_t family;
	char buf[BUF_SIZE];
};

struct req {
	struct nlmsghdr nlh;
	struct genlmsghdr genl;
	char attrs[512];
};

static void req_init(struct req *r, uint16_t type, uint8_t cmd,
		     uint16_t flags, uint8_t version)
{
	memset(r, 0, sizeof(*r));
	r->nlh.nlmsg_len = NLMSG_LENGTH(GENL_HDRLEN);
	r->nlh.nlmsg_type = type;
	r->nlh.nlmsg_flags = NLM_F_REQUEST | flags;
	r->genl.cmd = cmd;
	r->genl.version = version;
}

static void req_put(struct req *r, uint16_t type, const void *data,
		    size_t len)
{
	struct nlattr *a = (struct nlattr *)((char *)r +
					     NLMSG_ALIGN(r->nlh.nlmsg_len));
	size_t alen = NLA_HDRLEN + len;

	if (NLMSG_ALIGN(r->nlh.nlmsg_len) + NLA_ALIGN(alen) > sizeof(*r))
		die("netlink request too large");
	a->nla_type = type;
	a->nla_len = alen;
	memcpy((char *)a + NLA_HDRLEN, data, len);
	r->nlh.nlmsg_len = NLMSG_ALIGN(r->nlh.nlmsg_len) + NLA_ALIGN(alen);
}

static void req_put_str(struct req *r, uint16_t type, const char *s)
{
	req_put(r, type, s, strlen(s) + 1);
}

static void nl_send(struct nl *nl, struct req *r)
{
	struct sockaddr_nl sa = { .nl_family = AF_NETLINK };

	r->nlh.nlmsg_seq = ++nl->seq;
	if (sendto(nl->fd, r, r->nlh.nlmsg_len, 0, (struct sockaddr *)&sa,
		   sizeof(sa)) < 0)
		die("netlink send: %s", strerror(errno));
}

/* Parse the attributes in [data, data + len) into tb[0..MAX_ATTR]. */
static void parse_attrs(struct nlattr **tb, const void *data, int len)
{
	const struct nlattr *a = data;

	memset(tb, 0, (MAX_ATTR + 1) * sizeof(*tb));
	while (len >= (int)NLA_HDRLEN && a->nla_len >= NLA_HDRLEN &&
	       a->nla_len <= len) {
		uint16_t type = a->nla_type & NLA_TYPE_MASK;

		if (type <= MAX_ATTR)
			tb[type] = (struct nlattr *)a;
		len -= NLA_ALIGN(a->nla_len);
		a = (const struct nlattr *)((const char *)a +
					    NLA_ALIGN(a->nla_len));
	}
}

static void parse_nested(struct nlattr **tb, const struct nlattr *nest)
{
	parse_attrs(tb, (const char *)nest + NLA_HDRLEN,
		    nest->nla_len - NLA_HDRLEN);
}

static const void *nla_data(const struct nlattr *a)
{
	return (const char *)a + NLA_HDRLEN;
}

static uint64_t nla_uint(const struct nlattr *a)
{
	const void *d;
	uint64_t v64;
	uint32_t v32;
	uint16_t v16;

	if (!a)
		return 0;
	d = nla_data(a);
	switch (a->nla_len - NLA_HDRLEN) {
	case 1:
		return *(const uint8_t *)d;
	case 2:
		memcpy(&v16, d, 2);
		return v16;
	case 4:
		memcpy(&v32, d, 4);
		return v32;
	case 8:
		memcpy(&v64, d, 8);
		return v64;
	}
	return 0;
}

static const char *nla_str(const struct nlattr *a)
{
	static char s[4][128];
	static int n;
	char *p = s[n++ % 4];
	int len;

	if (!a)
		return "";
	len = a->nla_len - NLA_HDRLEN;
	if (len >= (int)sizeof(s[0]))
		len = sizeof(s[0]) - 1;
	memcpy(p, nla_data(a), len);
	p[len] = '\0';
	/* EIDs and pnetids are blank padded */
	while (len > 0 && (p[len - 1] == ' ' || p[len - 1] == '\0'))
		p[--len] = '\0';
	return p;
}

typedef void (*msg_cb)(struct nlattr **tb, void *arg);

/*
 * Receive the answers to the request just sent: a dump's messages (each
 * handed to cb with its top-level attributes) up to NLMSG_DONE, or the ack
 * of a do request.  Returns 0 or a negative errno from the kernel.
 */
static int nl_recv(struct nl *nl, msg_cb cb, void *arg)
{
	struct nlattr *tb[MAX_ATTR + 1];

	for (;;) {
		struct nlmsghdr *h;
		ssize_t n;

		n = recv(nl->fd, nl->buf, sizeof(nl->buf), 0);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			die("netlink receive: %s", strerror(errno));
		}
		for (h = (struct nlmsghdr *)nl->buf; NLMSG_OK(h, n);
		     h = NLMSG_NEXT(h, n)) {
			if (h->nlmsg_seq != nl->seq)
				continue;
			if (h->nlmsg_type == NLMSG_DONE)
				return 0;
			if (h->nlmsg_type == NLMSG_ERROR) {
				struct nlmsgerr *e = NLMSG_DATA(h);

				return e->error;
			}
			if (h->nlmsg_len < NLMSG_LENGTH(GENL_HDRLEN))
				continue;
			parse_attrs(tb, (char *)NLMSG_DATA(h) + GENL_HDRLEN,
				    h->nlmsg_len - NLMSG_LENGTH(GENL_HDRLEN));
			if (cb)
				cb(tb, arg);
			if (!(h->nlmsg_flags & NLM_F_MULTI))
				return 0;
		}
	}
}

static void family_cb(struct nlattr **tb, void *arg)
{
	if (tb[CTRL_ATTR_FAMILY_ID])
		*(uint16_t *)arg = nla_uint(tb[CTRL_ATTR_FAMILY_ID]);
}

static void nl_open(struct nl *nl, const char *family)
{
	struct sockaddr_nl sa = { .nl_family = AF_NETLINK };
	struct timeval tv = { .tv_sec = 10 };
	struct req r;
	int rc;

	nl->fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_GENERIC);
	if (nl->fd < 0)
		die("socket(NETLINK_GENERIC): %s", strerror(errno));
	if (bind(nl->fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		die("bind netlink: %s", strerror(errno));
	/* never hang on a kernel that does not answer */
	setsockopt(nl->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	nl->seq = 0;
	nl->family = 0;

	req_init(&r, GENL_ID_CTRL, CTRL_CMD_GETFAMILY, 0, 1);
	req_put_str(&r, CTRL_ATTR_FAMILY_NAME, family);
	nl_send(nl, &r);
	rc = nl_recv(nl, family_cb, &nl->family);
	if (rc == -ENOENT || (!rc && !nl->family))
		die("generic netlink family %s not found (modprobe smc)",
		    family);
	if (rc)
		die("resolving family %s: %s", family, strerror(-rc));
}

/* A do request with attributes already in r; returns 0 or -errno. */
static int nl_do(struct nl *nl, struct req *r)
{
	nl_send(nl, r);
	return nl_recv(nl, NULL, NULL);
}

static void nl_dump(struct nl *nl, uint8_t cmd, uint8_t version, msg_cb cb,
		    void *arg)
{
	struct req r;
	int rc;

	req_init(&r, nl->family, cmd, NLM_F_DUMP, version);
	nl_send(nl, &r);
	rc = nl_recv(nl, cb, arg);
	if (rc)
		die("dump (command %u): %s", cmd, strerror(-rc));
}

/* --- names ------------------------------------------------------------------ */

static const struct {
	uint32_t code;
	const char *name;
	const char *text;
} decl_reasons[] = {	/* net/smc/smc_clc.h */
	{ 0x01010000, "MEM", "insufficient memory resources" },
	{ 0x02010000, "TIMEOUT_CL", "timeout waiting for QP confirm link" },
	{ 0x02020000, "TIMEOUT_AL", "timeout waiting for QP add link" },
	{ 0x03000000, "CNFERR", "configuration error" },
	{ 0x03010000, "PEERNOSMC", "peer did not indicate SMC" },
	{ 0x03020000, "IPSEC", "IPsec usage" },
	{ 0x03030000, "NOSMCDEV", "no SMC device found (R or D)" },
	{ 0x03030001, "NOSMCDDEV", "no SMC-D device found" },
	{ 0x03030002, "NOSMCRDEV", "no SMC-R device found" },
	{ 0x03030003, "NOISM2SUPP", "hardware has no ISMv2 support" },
	{ 0x03030004, "NOV2EXT", "peer sent no CLC v2 extension" },
	{ 0x03030005, "NOV2DEXT", "peer sent no CLC SMC-Dv2 extension" },
	{ 0x03030006, "NOSEID", "peer sent no SEID" },
	{ 0x03030007, "NOSMCD2DEV", "no SMC-Dv2 device found" },
	{ 0x03030008, "NOUEID", "peer sent no UEID" },
	{ 0x03040000, "MODEUNSUPP", "SMC modes do not match (R or D)" },
	{ 0x03050000, "RMBE_EC", "peer has eyecatcher in RMBE" },
	{ 0x03060000, "OPTUNSUPP", "fastopen sockopt not supported" },
	{ 0x03070000, "DIFFPREFIX", "IP prefix / subnet mismatch" },
	{ 0x03080000, "GETVLANERR", "error getting VLAN id of IP device" },
	{ 0x03090000, "ISMVLANERR", "error registering VLAN id on ISM dev" },
	{ 0x030a0000, "NOACTLINK", "no active SMC-R link in link group" },
	{ 0x030b0000, "NOSRVLINK", "SMC-R link from server not found" },
	{ 0x030c0000, "VERSMISMAT", "SMC version mismatch" },
	{ 0x030d0000, "MAX_DMB", "SMC-D DMB limit exceeded" },
	{ 0x030e0000, "NOROUTE", "SMC-Rv2 connection: no route to peer" },
	{ 0x030f0000, "NOINDIRECT", "SMC-Rv2 connection: indirect mismatch" },
	{ 0x04000000, "SYNCERR", "synchronization error" },
	{ 0x05000000, "PEERDECL", "peer declined during handshake" },
	{ 0x09990000, "INTERR", "internal error" },
	{ 0x09990001, "ERR_RTOK", "rtoken handling failed" },
	{ 0x09990002, "ERR_RDYLNK", "ib ready link failed" },
	{ 0x09990003, "ERR_REGBUF", "registering RDMA buffers failed" },
};

static const char *decl_name(uint32_t code, const char **text)
{
	size_t i;

	for (i = 0; i < ARRAY_SIZE(decl_reasons); i++) {
		if (decl_reasons[i].code == code) {
			if (text)
				*text = decl_reasons[i].text;
			return decl_reasons[i].name;
		}
	}
	if (text)
		*text = "unknown reason";
	return "UNKNOWN";
}

static const char *link_state(uint32_t s)
{
	static const char * const names[] = {	/* enum smc_link_state */
		"UNUSED", "INACTIVE", "ACTIVATING", "ACTIVE",
	};

	return s < ARRAY_SIZE(names) ? names[s] : "?";
}

static const char *lgr_type(uint32_t t)
{
	static const char * const names[] = {	/* enum smc_lgr_type */
		"NONE", "SINGLE", "SYMMETRIC", "ASYMMETRIC_PEER",
		"ASYMMETRIC_LOCAL",
	};

	return t < ARRAY_SIZE(names) ? names[t] : "?";
}

static const char *ifname(uint32_t idx, char *buf)
{
	if (!idx)
		snprintf(buf, IF_NAMESIZE, "none");
	else if (!if_indextoname(idx, buf))
		snprintf(buf, IF_NAMESIZE, "%u", idx);
	return buf;
}

/* --- info, seid --------------------------------------------------------------- */

static void info_cb(struct nlattr **top, void *arg)
{
	struct nlattr *tb[MAX_ATTR + 1];

	(void)arg;
	if (!top[SMC_GEN_SYS_INFO])
		return;
	parse_nested(tb, top[SMC_GEN_SYS_INFO]);
	printf("smc version %lu release %lu, SMC-Rv2 %s, ISMv2 %s, host '%s'",
	       (unsigned long)nla_uint(tb[SMC_NLA_SYS_VER]),
	       (unsigned long)nla_uint(tb[SMC_NLA_SYS_REL]),
	       nla_uint(tb[SMC_NLA_SYS_IS_SMCR_V2]) ? "yes" : "no",
	       nla_uint(tb[SMC_NLA_SYS_IS_ISM_V2]) ? "yes" : "no",
	       nla_str(tb[SMC_NLA_SYS_LOCAL_HOST]));
	if (tb[SMC_NLA_SYS_SEID])
		printf(", SEID '%s'", nla_str(tb[SMC_NLA_SYS_SEID]));
	printf("\n");
}

static void seid_cb(struct nlattr **tb, void *arg)
{
	(void)arg;
	printf("seid '%s' %s\n", nla_str(tb[SMC_NLA_SEID_ENTRY]),
	       nla_uint(tb[SMC_NLA_SEID_ENABLED]) ? "enabled" : "disabled");
}

/* --- pnet table ------------------------------------------------------------- */

static void pnet_cb(struct nlattr **tb, void *arg)
{
	int *n = arg;

	(*n)++;
	printf("pnetid %-16s eth %-10s ib %s",
	       nla_str(tb[SMC_PNETID_NAME]), nla_str(tb[SMC_PNETID_ETHNAME]),
	       nla_str(tb[SMC_PNETID_IBNAME]));
	if (nla_uint(tb[SMC_PNETID_IBPORT]) != 0xff)
		printf(" port %lu",
		       (unsigned long)nla_uint(tb[SMC_PNETID_IBPORT]));
	printf("\n");
}

static int cmd_pnet(int argc, char **argv)
{
	struct req r;
	struct nl *nl;
	int rc, n = 0;

	if (argc < 1)
		return 2;
	nl = malloc(sizeof(*nl));
	if (!nl)
		die("out of memory");
	nl_open(nl, SMCR_GENL_FAMILY_NAME);

	if (!strcmp(argv[0], "show")) {
		nl_dump(nl, SMC_PNETID_GET, SMCR_GENL_FAMILY_VERSION, pnet_cb,
			&n);
		if (!n)
			printf("pnet table empty\n");
		return 0;
	}
	if (!strcmp(argv[0], "flush")) {
		req_init(&r, nl->family, SMC_PNETID_FLUSH, NLM_F_ACK,
			 SMCR_GENL_FAMILY_VERSION);
		rc = nl_do(nl, &r);
		if (rc)
			die("pnet flush: %s", strerror(-rc));
		return 0;
	}
	if (!strcmp(argv[0], "del") && argc == 2) {
		req_init(&r, nl->family, SMC_PNETID_DEL, NLM_F_ACK,
			 SMCR_GENL_FAMILY_VERSION);
		req_put_str(&r, SMC_PNETID_NAME, argv[1]);
		rc = nl_do(nl, &r);
		if (rc)
			die("pnet del %s: %s", argv[1], strerror(-rc));
		return 0;
	}
	if (!strcmp(argv[0], "add") && argc >= 2) {
		int i;

		if (strlen(argv[1]) > SMC_MAX_PNETID_LEN)
			die("pnetid %s: at most %d characters", argv[1],
			    SMC_MAX_PNETID_LEN);
		req_init(&r, nl->family, SMC_PNETID_ADD, NLM_F_ACK,
			 SMCR_GENL_FAMILY_VERSION);
		req_put_str(&r, SMC_PNETID_NAME, argv[1]);
		for (i = 2; i + 1 < argc; i += 2) {
			if (!strcmp(argv[i], "eth")) {
				req_put_str(&r, SMC_PNETID_ETHNAME,
					    argv[i + 1]);
			} else if (!strcmp(argv[i], "ib")) {
				req_put_str(&r, SMC_PNETID_IBNAME,
					    argv[i + 1]);
			} else if (!strcmp(argv[i], "port")) {
				uint8_t port = atoi(argv[i + 1]);

				req_put(&r, SMC_PNETID_IBPORT, &port, 1);
			} else {
				return 2;
			}
		}
		if (i != argc)
			return 2;
		rc = nl_do(nl, &r);
		/* -EEXIST: every given device already had a pnetid */
		if (rc)
			die("pnet add %s: %s", argv[1], strerror(-rc));
		return 0;
	}
	return 2;
}

/* --- user EIDs ---------------------------------------------------------------- */

static void ueid_cb(struct nlattr **tb, void *arg)
{
	int *n = arg;

	(*n)++;
	printf("ueid '%s'\n", nla_str(tb[SMC_NLA_EID_TABLE_ENTRY]));
}

static int cmd_ueid(struct nl *nl, int argc, char **argv)
{
	char eid[SMC_MAX_EID_LEN + 1];
	struct req r;
	int rc, n = 0;
	uint8_t cmd;

	if (argc < 1)
		return 2;
	if (!strcmp(argv[0], "show")) {
		nl_dump(nl, SMC_NETLINK_DUMP_UEID, SMC_GENL_FAMILY_VERSION,
			ueid_cb, &n);
		if (!n)
			printf("ueid table empty\n");
		return 0;
	}
	if (!strcmp(argv[0], "flush")) {
		req_init(&r, nl->family, SMC_NETLINK_FLUSH_UEID, NLM_F_ACK,
			 SMC_GENL_FAMILY_VERSION);
		rc = nl_do(nl, &r);
		if (rc)
			die("ueid flush: %s", strerror(-rc));
		return 0;
	}
	if (argc != 2)
		return 2;
	if (!strcmp(argv[0], "add"))
		cmd = SMC_NETLINK_ADD_UEID;
	else if (!strcmp(argv[0], "del"))
		cmd = SMC_NETLINK_REMOVE_UEID;
	else
		return 2;
	/*
	 * The kernel wants exactly SMC_MAX_EID_LEN blank-padded characters
	 * plus a NUL (smc_nl_add_ueid()), upper case letters, digits, '.' and
	 * '-' (smc_clc_ueid_valid()).
	 */
	if (strlen(argv[1]) > SMC_MAX_EID_LEN)
		die("EID %s: at most %d characters", argv[1], SMC_MAX_EID_LEN);
	memset(eid, ' ', SMC_MAX_EID_LEN);
	memcpy(eid, argv[1], strlen(argv[1]));
	eid[SMC_MAX_EID_LEN] = '\0';
	req_init(&r, nl->family, cmd, NLM_F_ACK, SMC_GENL_FAMILY_VERSION);
	req_put(&r, SMC_NLA_EID_TABLE_ENTRY, eid, sizeof(eid));
	rc = nl_do(nl, &r);
	/* removing the last UEID enables the SEID: -EAGAIN means success */
	if (rc && !(cmd == SMC_NETLINK_REMOVE_UEID && rc == -EAGAIN))
		die("ueid %s %s: %s", argv[0], argv[1], strerror(-rc));
	return 0;
}

/* --- devices, link groups, links ------------------------------------------------- */

static void dev_cb(struct nlattr **top, void *arg)
{
	struct nlattr *tb[MAX_ATTR + 1], *pt[MAX_ATTR + 1];
	char ifn[IF_NAMESIZE];
	int *n = arg, p;

	if (!top[SMC_GEN_DEV_SMCR])
		return;
	(*n)++;
	parse_nested(tb, top[SMC_GEN_DEV_SMCR]);
	printf("smc-r dev %s%s\n", nla_str(tb[SMC_NLA_DEV_IB_NAME]),
	       nla_uint(tb[SMC_NLA_DEV_IS_CRIT]) ? " (critical)" : "");
	for (p = 0; p < 2; p++) {
		if (!tb[SMC_NLA_DEV_PORT + p])
			continue;
		parse_nested(pt, tb[SMC_NLA_DEV_PORT + p]);
		printf("  port %d: %s, pnetid '%s'%s, netdev %s, links %lu\n",
		       p + 1,
		       nla_uint(pt[SMC_NLA_DEV_PORT_STATE]) ? "active" :
		       "inactive", nla_str(pt[SMC_NLA_DEV_PORT_PNETID]),
		       nla_uint(pt[SMC_NLA_DEV_PORT_PNET_USR]) ?
		       " (user defined)" : "",
		       ifname(nla_uint(pt[SMC_NLA_DEV_PORT_NETDEV]), ifn),
		       (unsigned long)nla_uint(pt[SMC_NLA_DEV_PORT_LNK_CNT]));
	}
}

static void lgr_cb(struct nlattr **top, void *arg)
{
	struct nlattr *tb[MAX_ATTR + 1], *v2[MAX_ATTR + 1];
	int *n = arg;

	if (!top[SMC_GEN_LGR_SMCR])
		return;
	(*n)++;
	parse_nested(tb, top[SMC_GEN_LGR_SMCR]);
	printf("lgr %08lx role %s type %s conns %lu pnetid '%s' vlan %lu",
	       (unsigned long)nla_uint(tb[SMC_NLA_LGR_R_ID]),
	       nla_uint(tb[SMC_NLA_LGR_R_ROLE]) ? "server" : "client",
	       lgr_type(nla_uint(tb[SMC_NLA_LGR_R_TYPE])),
	       (unsigned long)nla_uint(tb[SMC_NLA_LGR_R_CONNS_NUM]),
	       nla_str(tb[SMC_NLA_LGR_R_PNETID]),
	       (unsigned long)nla_uint(tb[SMC_NLA_LGR_R_VLAN_ID]));
	if (tb[SMC_NLA_LGR_R_V2_COMMON]) {
		parse_nested(v2, tb[SMC_NLA_LGR_R_V2_COMMON]);
		printf(" v%lu peer '%s' eid '%s'",
		       (unsigned long)nla_uint(v2[SMC_NLA_LGR_V2_VER]),
		       nla_str(v2[SMC_NLA_LGR_V2_PEER_HOST]),
		       nla_str(v2[SMC_NLA_LGR_V2_NEG_EID]));
	} else {
		printf(" v1");
	}
	if (tb[SMC_NLA_LGR_R_V2]) {
		parse_nested(v2, tb[SMC_NLA_LGR_R_V2]);
		printf(" %s", nla_uint(v2[SMC_NLA_LGR_R_V2_DIRECT]) ?
		       "direct" : "via gateway");
	}
	printf("\n");
}

static void link_cb(struct nlattr **top, void *arg)
{
	struct nlattr *tb[MAX_ATTR + 1];
	char ifn[IF_NAMESIZE];
	int *n = arg;

	if (!top[SMC_GEN_LINK_SMCR])
		return;
	(*n)++;
	parse_nested(tb, top[SMC_GEN_LINK_SMCR]);
	printf("  link %lu state %s conns %lu dev %s/%lu netdev %s\n",
	       (unsigned long)nla_uint(tb[SMC_NLA_LINK_ID]),
	       link_state(nla_uint(tb[SMC_NLA_LINK_STATE])),
	       (unsigned long)nla_uint(tb[SMC_NLA_LINK_CONN_CNT]),
	       nla_str(tb[SMC_NLA_LINK_IB_DEV]),
	       (unsigned long)nla_uint(tb[SMC_NLA_LINK_IB_PORT]),
	       ifname(nla_uint(tb[SMC_NLA_LINK_NET_DEV]), ifn));
	printf("    gid %s peer %s\n", nla_str(tb[SMC_NLA_LINK_GID]),
	       nla_str(tb[SMC_NLA_LINK_PEER_GID]));
}

/* GET_LINK_SMCR dumps each link group followed by its links */
static void lgr_link_cb(struct nlattr **top, void *arg)
{
	int *n = arg;

	if (top[SMC_GEN_LGR_SMCR])
		lgr_cb(top, &n[0]);
	else
		link_cb(top, &n[1]);
}

/* --- statistics ----------------------------------------------------------------- */

static void stats_tech(const char *pfx, struct nlattr *nest)
{
	static const struct {
		int attr;
		const char *name;
	} keys[] = {
		{ SMC_NLA_STATS_T_CLNT_V1_SUCC, "clnt_v1_succ" },
		{ SMC_NLA_STATS_T_CLNT_V2_SUCC, "clnt_v2_succ" },
		{ SMC_NLA_STATS_T_SRV_V1_SUCC, "srv_v1_succ" },
		{ SMC_NLA_STATS_T_SRV_V2_SUCC, "srv_v2_succ" },
		{ SMC_NLA_STATS_T_RX_BYTES, "rx_bytes" },
		{ SMC_NLA_STATS_T_TX_BYTES, "tx_bytes" },
		{ SMC_NLA_STATS_T_RX_CNT, "rx_cnt" },
		{ SMC_NLA_STATS_T_TX_CNT, "tx_cnt" },
	};
	struct nlattr *tb[MAX_ATTR + 1];
	size_t i;

	if (!nest)
		return;
	parse_nested(tb, nest);
	for (i = 0; i < ARRAY_SIZE(keys); i++)
		printf("%s.%s %llu\n", pfx, keys[i].name,
		       (unsigned long long)nla_uint(tb[keys[i].attr]));
}

static void stats_cb(struct nlattr **top, void *arg)
{
	struct nlattr *tb[MAX_ATTR + 1];

	(void)arg;
	if (!top[SMC_GEN_STATS])
		return;
	parse_nested(tb, top[SMC_GEN_STATS]);
	stats_tech("smcr", tb[SMC_NLA_STATS_SMCR_TECH]);
	stats_tech("smcd", tb[SMC_NLA_STATS_SMCD_TECH]);
	printf("clnt_hshake_err %llu\nsrv_hshake_err %llu\n",
	       (unsigned long long)nla_uint(tb[SMC_NLA_STATS_CLNT_HS_ERR_CNT]),
	       (unsigned long long)nla_uint(tb[SMC_NLA_STATS_SRV_HS_ERR_CNT]));
}

struct fback {
	unsigned long long srv, clnt;
	int have_cnt, n;
};

static void fback_cb(struct nlattr **top, void *arg)
{
	struct nlattr *tb[MAX_ATTR + 1];
	struct fback *f = arg;
	const char *text, *name;
	uint32_t code;

	if (!top[SMC_GEN_FBACK_STATS])
		return;
	parse_nested(tb, top[SMC_GEN_FBACK_STATS]);
	if (tb[SMC_NLA_FBACK_STATS_SRV_CNT]) {
		f->srv = nla_uint(tb[SMC_NLA_FBACK_STATS_SRV_CNT]);
		f->clnt = nla_uint(tb[SMC_NLA_FBACK_STATS_CLNT_CNT]);
		f->have_cnt = 1;
	}
	if (!tb[SMC_NLA_FBACK_STATS_RSN_CODE])
		return;
	f->n++;
	code = nla_uint(tb[SMC_NLA_FBACK_STATS_RSN_CODE]);
	name = decl_name(code, &text);
	printf("fback.%s 0x%08x %s %lu  # %s\n",
	       nla_uint(tb[SMC_NLA_FBACK_STATS_TYPE]) ? "srv" : "clnt",
	       code, name,
	       (unsigned long)nla_uint(tb[SMC_NLA_FBACK_STATS_RSN_CNT]), text);
}

/* --- main ----------------------------------------------------------------------- */

static void help(int rc)
{
	fprintf(rc ? stderr : stdout,
		"usage: %s info | dev | lgr | stats | fback | seid show\n"
		"       %s pnet add NAME [eth NETDEV] [ib IBDEV [port N]]\n"
		"       %s pnet show | flush | del NAME\n"
		"       %s ueid add EID | del EID | flush | show\n",
		prog, prog, prog, prog);
	exit(rc);
}

int main(int argc, char **argv)
{
	struct nl *nl;
	int rc = 0, n[2] = { 0, 0 };

	if (argc < 2)
		help(2);
	if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))
		help(0);
	if (!strcmp(argv[1], "pnet")) {
		rc = cmd_pnet(argc - 2, argv + 2);
		if (rc == 2)
			help(2);
		return rc;
	}

	nl = malloc(sizeof(*nl));
	if (!nl)
		die("out of memory");
	nl_open(nl, SMC_GENL_FAMILY_NAME);

	if (!strcmp(argv[1], "info")) {
		nl_dump(nl, SMC_NETLINK_GET_SYS_INFO, SMC_GENL_FAMILY_VERSION,
			info_cb, NULL);
	} else if (!strcmp(argv[1], "seid")) {
		nl_dump(nl, SMC_NETLINK_DUMP_SEID, SMC_GENL_FAMILY_VERSION,
			seid_cb, NULL);
	} else if (!strcmp(argv[1], "ueid")) {
		rc = cmd_ueid(nl, argc - 2, argv + 2);
	} else if (!strcmp(argv[1], "dev")) {
		nl_dump(nl, SMC_NETLINK_GET_DEV_SMCR, SMC_GENL_FAMILY_VERSION,
			dev_cb, n);
		if (!n[0])
			printf("no SMC-R device\n");
	} else if (!strcmp(argv[1], "lgr")) {
		nl_dump(nl, SMC_NETLINK_GET_LINK_SMCR, SMC_GENL_FAMILY_VERSION,
			lgr_link_cb, n);
		if (!n[0])
			printf("no SMC-R link group\n");
	} else if (!strcmp(argv[1], "stats")) {
		nl_dump(nl, SMC_NETLINK_GET_STATS, SMC_GENL_FAMILY_VERSION,
			stats_cb, NULL);
	} else if (!strcmp(argv[1], "fback")) {
		struct fback f = { 0 };

		nl_dump(nl, SMC_NETLINK_GET_FBACK_STATS,
			SMC_GENL_FAMILY_VERSION, fback_cb, &f);
		/* the totals come with the first reason only */
		printf("fback.srv_cnt %llu\nfback.clnt_cnt %llu\n",
		       f.srv, f.clnt);
	} else {
		help(2);
	}
	if (rc == 2)
		help(2);
	return rc;
}
