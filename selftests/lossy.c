// SPDX-License-Identifier: GPL-2.0
/*
 * Lossy and distant links between two hosts (run-tests wire, both hosts at
 * once, like wire.c). Every case moves a verified stream both ways at once
 * over one connection while netem shapes BOTH hosts' egress on RS_NETDEV
 * (RoCE v2 is UDP on that NIC, so rxe's packets go through netem), once
 * over AF_RDMASTREAM and once over kernel TCP on the same link (the _tcp
 * variants) for comparison:
 *
 *   loss1, loss5      1 % / 5 % random loss
 *   reorder           10 ms delay, 25 % of the packets sent at once
 *   dup               1 % duplicated packets
 *   delay24           24 ms each way (48 ms RTT, the paper's distance test)
 *   delay24_rcvbuf    the same, with SO_RCVBUF 64 KiB set on both hosts
 *                     once connected: it caps the stream buffer's growth
 *                     at SO_RCVBUF's 128 KiB, as it clamps TCP's window,
 *                     and the buffer still grows to that cap
 *   partition         100 % loss of host 1's egress (for RC, and TCP,
 *                     a partition both ways: no acknowledgement crosses)
 *                     for RS_LOSSY_PART_SEC (5 s) once host 1 has
 *                     received 1 MiB or sent 8 MiB, then restored:
 *                     inside the QP's retry budget (docs/
 *                     lossy-links.md), so the streams must resume and
 *                     complete intact
 *   partition_long    the same until both streams of host 1 ended:
 *                     each must fail with ETIMEDOUT or ECONNRESET (a send
 *                     may see EPIPE after that) within RS_LOSSY_BOUND
 *                     (30 s) of the partition's start; SO_KEEPALIVE every
 *                     2 s (module parameter keepalive_secs, restored),
 *                     TCP with TCP_USER_TIMEOUT RS_LOSSY_TCP_UTO ms (8000)
 *
 * Every case but partition_long must complete intact, over both
 * transports. (loss5 and reorder were allowed a clean cut over
 * rdmastream while rxe's retry count, which every NAK of a go-back-N
 * retry uses up, could end the QP on a link that works; on rxe the QP
 * now retries for ever and the module bounds it, docs/lossy-links.md.)
 *
 * Each host prints "lossy: <case> host <n> received <MiB> in <s>: <MiB/s>"
 * and appends the same to $RS_OUT/lossy.txt; the module's aborts and
 * completion errors go to $RS_OUT/lossy-<case>.trace. Connection setup
 * happens on a clean link; netem goes on once connected and off in the
 * teardown.
 *
 * Knobs (defaults): RS_LOSSY_MB (2 MiB each way), RS_LOSSY_PART_MB (24,
 * the partition cases, 4 times that for TCP), RS_LOSSY_PART_SEC (5),
 * RS_LOSSY_BOUND (30), RS_LOSSY_TCP_UTO (8000),
 * RS_LOSSY_PORT (47100), RS_LOSSY_WAIT (300 s to wait for the other
 * host), RS_LOSSY_NETEM (extra netem words for every case, e.g.
 * "rate 100mbit"), RS_LOSSY_POLICY (RDMASTREAM_POLICY of the rdmastream
 * cases: 0 dynamic, 1 direct only, 2 indirect only; default: the
 * module's), RS_LOSSY_CASES (run only these variants, e.g. "loss5
 * reorder", to reproduce one by hand: the others skip, and a skip fails
 * a run-tests run).
 */
#include "rs_common.h"

#include <netinet/tcp.h>
#include <sys/resource.h>
#include <sys/syscall.h>

#define LOSSY_MAGIC	0x79736f6c7372ULL	/* "rslosy" */

struct lossy_hello {
	uint64_t magic;
	uint32_t id;
	uint32_t pad;
};

enum lossy_part { LP_NONE, LP_SHORT, LP_LONG };

/* rxe's and the neighbour table's counters: how the QP recovered */
static const char *const lossy_counters[] = {
	"sent_pkts", "rcvd_pkts", "completer_retry_err", "rcvd_seq_err",
	"out_of_seq_request", "duplicate_request", "retry_exceeded_err",
	"send_err", "arp:res_failed", "arp:unresolved_discards",
};

#define LOSSY_NCOUNTERS	(sizeof(lossy_counters) / sizeof(lossy_counters[0]))
#define LOSSY_SEND_ERR	7	/* "send_err" above */

FIXTURE(lossy)
{
	int fd;
	bool shaped;		/* netem is on RS_NETDEV */
	long long keepalive;	/* module's keepalive_secs to restore, or 0 */
	long long cnt[LOSSY_NCOUNTERS];	/* at the case's start */
	long long q0[3];	/* netem's bytes, packets, drops then */
};

/*
 * Column col of /proc/net/stat/arp_cache summed over the CPUs: rxe sends
 * through the neighbour table, so a partition that overlaps a re-probe
 * of the peer's address drops the QP's packets (docs/lossy-links.md).
 */
static long long lossy_arp_stat(const char *col)
{
	char line[1024], *tok, *save;
	long long sum = 0;
	int want = -1, i;
	FILE *f = fopen("/proc/net/stat/arp_cache", "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		tok = strtok_r(line, "\n ", &save);
		for (i = 0; tok; i++, tok = strtok_r(NULL, "\n ", &save)) {
			if (want < 0 && !strcmp(tok, col))
				want = i;
			else if (i == want)
				sum += strtoll(tok, NULL, 16);
		}
		if (want < 0)
			break;
	}
	fclose(f);
	return want < 0 ? -1 : sum;
}

static long long lossy_counter(const char *name)
{
	char path[256];

	if (!strncmp(name, "arp:", 4))
		return lossy_arp_stat(name + 4);
	snprintf(path, sizeof(path),
		 "/sys/class/infiniband/%s/ports/1/hw_counters/%s",
		 rs.rdmadev, name);
	return rs_read_ll(path);
}

/* "lossy: <case> host <n> rxe: name +delta ..." for the diagnosis */
static void lossy_counters_report(const char *name, const long long *cnt0)
{
	char line[512];
	size_t i, n = 0;

	for (i = 0; i < LOSSY_NCOUNTERS && n < sizeof(line); i++)
		n += snprintf(line + n, sizeof(line) - n, " %s +%lld",
			      lossy_counters[i],
			      lossy_counter(lossy_counters[i]) - cnt0[i]);
	rs_info("lossy: %s host %d rxe:%s", name, rs.host, line);
}

/*
 * The root qdisc's totals: bytes and packets sent, packets dropped.
 * 0, or -1 if tc printed no such line.
 */
static int lossy_qdisc_stats(long long q[3])
{
	char cmd[256], line[512], *p;
	int ret = -1;
	FILE *f;

	snprintf(cmd, sizeof(cmd), "tc -s qdisc show dev %s root", rs.netdev);
	f = popen(cmd, "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		p = strstr(line, "Sent ");
		if (p && sscanf(p, "Sent %lld bytes %lld pkt (dropped %lld",
				&q[0], &q[1], &q[2]) == 3)
			ret = 0;
	}
	pclose(f);
	return ret;
}

/*
 * What netem did in a case: how many packets went through it, how big
 * they were, and how many it dropped. A GSO super-packet counts as one
 * (see lossy_gso_off()).
 */
static void lossy_qdisc_report(const char *name, const long long *q0)
{
	long long q[3], pkts;

	if (lossy_qdisc_stats(q))
		return;
	pkts = q[1] - q0[1];
	rs_info("lossy: %s host %d netem: %lld packets of %lld bytes on average, %lld dropped (%.2f %%)",
		name, rs.host, pkts, pkts ? (q[0] - q0[0]) / pkts : 0,
		q[2] - q0[2], pkts ? 100.0 * (q[2] - q0[2]) / pkts : 0.0);
}

/*
 * netem sits before segmentation: with GSO, TCP hands it super-packets
 * of up to 64 KiB, and "loss 1%" drops 1 % of those, a fraction of a
 * percent of TCP's frames, while every rxe packet is one frame. On a
 * wire, loss is per frame: so for the whole binary the netdev gets
 * gso_max_segs 1 (TCP then sends one segment per packet), restored at
 * exit. RS_LOSSY_GSO=1 keeps GSO (the method of the figures before
 * 2026-11-23, docs/lossy-links.md).
 */
static char gso_dev[64];
static long long gso_segs = -1;

/* The netdev's gso_max_segs (ip -d link), or -1. */
static long long lossy_gso_segs(const char *dev)
{
	char cmd[256], line[2048], *p;
	long long v = -1;
	FILE *f;

	snprintf(cmd, sizeof(cmd), "ip -d link show dev %s", dev);
	f = popen(cmd, "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		p = strstr(line, "gso_max_segs ");
		if (p)
			sscanf(p, "gso_max_segs %lld", &v);
	}
	pclose(f);
	return v;
}

static void lossy_gso_off(struct __test_metadata *_metadata)
{
	if (gso_segs >= 0 || rs_env_ulong("RS_LOSSY_GSO", 0))
		return;
	snprintf(gso_dev, sizeof(gso_dev), "%s", rs.netdev);
	gso_segs = lossy_gso_segs(gso_dev);
	ASSERT_LT(0, gso_segs) TH_LOG("no gso_max_segs for %s", gso_dev);
	ASSERT_EQ(0, rs_system("ip link set dev %s gso_max_segs 1", gso_dev));
	ASSERT_EQ(1, lossy_gso_segs(gso_dev));
}

static void __attribute__((destructor)) lossy_gso_restore(void)
{
	if (gso_segs > 1 && gso_dev[0])
		rs_system("ip link set dev %s gso_max_segs %lld", gso_dev,
			  gso_segs);
}

FIXTURE_VARIANT(lossy)
{
	const char *name;
	int id;			/* port offset, unique */
	const char *netem;	/* netem words for the whole case */
	enum lossy_part part;
	bool tcp;		/* kernel TCP instead of the family */
	int rcvbuf;		/* SO_RCVBUF to set once connected, or 0 */
};

/* first: a clean link, the baseline, and the first handshake to the peer */
FIXTURE_VARIANT_ADD(lossy, clean) {
	.name = "clean", .id = 14, .netem = NULL, .part = LP_NONE,
	.tcp = false,
};

FIXTURE_VARIANT_ADD(lossy, clean_tcp) {
	.name = "clean_tcp", .id = 15, .netem = NULL, .part = LP_NONE,
	.tcp = true,
};

FIXTURE_VARIANT_ADD(lossy, loss1) {
	.name = "loss1", .id = 0, .netem = "loss 1%", .part = LP_NONE,
	.tcp = false,
};

FIXTURE_VARIANT_ADD(lossy, loss1_tcp) {
	.name = "loss1_tcp", .id = 1, .netem = "loss 1%", .part = LP_NONE,
	.tcp = true,
};

FIXTURE_VARIANT_ADD(lossy, loss5) {
	.name = "loss5", .id = 2, .netem = "loss 5%", .part = LP_NONE,
	.tcp = false,
};

FIXTURE_VARIANT_ADD(lossy, loss5_tcp) {
	.name = "loss5_tcp", .id = 3, .netem = "loss 5%", .part = LP_NONE,
	.tcp = true,
};

FIXTURE_VARIANT_ADD(lossy, reorder) {
	.name = "reorder", .id = 4, .netem = "delay 10ms reorder 25% 50%", .part = LP_NONE,
	.tcp = false,
};

FIXTURE_VARIANT_ADD(lossy, reorder_tcp) {
	.name = "reorder_tcp", .id = 5, .netem = "delay 10ms reorder 25% 50%", .part = LP_NONE,
	.tcp = true,
};

FIXTURE_VARIANT_ADD(lossy, dup) {
	.name = "dup", .id = 6, .netem = "duplicate 1%", .part = LP_NONE,
	.tcp = false,
};

FIXTURE_VARIANT_ADD(lossy, dup_tcp) {
	.name = "dup_tcp", .id = 7, .netem = "duplicate 1%", .part = LP_NONE,
	.tcp = true,
};

FIXTURE_VARIANT_ADD(lossy, delay24) {
	.name = "delay24", .id = 8, .netem = "delay 24ms", .part = LP_NONE,
	.tcp = false,
};

FIXTURE_VARIANT_ADD(lossy, delay24_rcvbuf) {
	.name = "delay24_rcvbuf", .id = 16, .netem = "delay 24ms",
	.part = LP_NONE, .tcp = false, .rcvbuf = 64 * 1024,
};

FIXTURE_VARIANT_ADD(lossy, delay24_tcp) {
	.name = "delay24_tcp", .id = 9, .netem = "delay 24ms", .part = LP_NONE,
	.tcp = true,
};

FIXTURE_VARIANT_ADD(lossy, partition) {
	.name = "partition", .id = 10, .netem = NULL, .part = LP_SHORT,
	.tcp = false,
};

FIXTURE_VARIANT_ADD(lossy, partition_tcp) {
	.name = "partition_tcp", .id = 11, .netem = NULL, .part = LP_SHORT,
	.tcp = true,
};

FIXTURE_VARIANT_ADD(lossy, partition_long) {
	.name = "partition_long", .id = 12, .netem = NULL, .part = LP_LONG,
	.tcp = false,
};

FIXTURE_VARIANT_ADD(lossy, partition_long_tcp) {
	.name = "partition_long_tcp", .id = 13, .netem = NULL, .part = LP_LONG,
	.tcp = true,
};

static unsigned int lossy_wait(void)
{
	return rs_env_ulong("RS_LOSSY_WAIT", 300);
}

/*
 * netem with words on our egress; NULL: none (netem passes everything).
 * 0 on success. The root netem is changed, never replaced or deleted:
 * grafting a root qdisc deactivates the device for a moment, and rxe
 * takes the NET_XMIT_CN of a packet sent then as a fatal local error
 * that moves its QP to the error state. A data QP then dies, and if it
 * is QP1, rdma_cm can make no connection on the device until reboot
 * (docs/lossy-links.md). vm-run --netem installs the root netem before
 * rxe exists; without it, it is grafted here once, and a peer dialling
 * meanwhile may hit that window.
 */
static int lossy_netem(const char *words)
{
	char cmd[256];

	snprintf(cmd, sizeof(cmd),
		 "tc qdisc show dev %s root | grep -q '^qdisc netem 1: '",
		 rs.netdev);
	if (system(cmd) &&
	    rs_system("tc qdisc replace dev %s root handle 1: netem limit 100000",
		      rs.netdev))
		return -1;
	/* limit: room for a 48 ms RTT's worth of packets at full speed */
	return rs_system("tc qdisc change dev %s root handle 1: netem limit 100000 %s %s",
			 rs.netdev, words ? words : "",
			 rs_env_str("RS_LOSSY_NETEM", ""));
}

static int lossy_socket(const FIXTURE_VARIANT(lossy) *v)
{
	if (v->tcp)
		return socket(AF_INET, SOCK_STREAM, IPPROTO_TCP);
	return rs_socket(0);
}

/* Host 2: connect to host 1's port for this case, retrying. */
static int lossy_dial(struct __test_metadata *_metadata,
		      const FIXTURE_VARIANT(lossy) *v, unsigned short port)
{
	struct lossy_hello h = { .magic = LOSSY_MAGIC, .id = v->id };
	double end = rs_now() + lossy_wait();
	struct sockaddr_in sin;
	int fd, err;

	rs_sin(&sin, rs.peer, port);
	for (;;) {
		fd = lossy_socket(v);
		ASSERT_GE(fd, 0) TH_LOG("socket: %s", strerror(errno));
		if (!connect(fd, (struct sockaddr *)&sin, sizeof(sin)))
			break;
		err = errno;
		close(fd);
		ASSERT_LT(rs_now(), end)
			TH_LOG("host 1 not listening after %u s (%s)",
			       lossy_wait(), strerror(err));
		rs_msleep(200);
	}
	ASSERT_EQ(sizeof(h), send(fd, &h, sizeof(h), 0));
	return fd;
}

/* Host 1: accept host 2's connection for this case. */
static int lossy_accept(struct __test_metadata *_metadata,
			const FIXTURE_VARIANT(lossy) *v, unsigned short port)
{
	struct lossy_hello h;
	struct sockaddr_in sin;
	int lfd, fd;

	lfd = lossy_socket(v);
	ASSERT_GE(lfd, 0);
	ASSERT_EQ(0, rs_setint(lfd, SOL_SOCKET, SO_REUSEADDR, 1));
	rs_sin(&sin, rs.addr, port);
	ASSERT_EQ(0, bind(lfd, (struct sockaddr *)&sin, sizeof(sin)))
		TH_LOG("bind port %u: %s", port, strerror(errno));
	ASSERT_EQ(0, listen(lfd, 4));
	ASSERT_EQ(POLLIN, rs_poll(lfd, POLLIN, lossy_wait() * 1000))
		TH_LOG("host 2 did not connect within %u s", lossy_wait());
	fd = accept(lfd, NULL, NULL);
	ASSERT_GE(fd, 0) TH_LOG("accept: %s", strerror(errno));
	close(lfd);
	ASSERT_EQ(0, rs_set_timeo(fd, SO_RCVTIMEO, 30000));
	ASSERT_EQ(sizeof(h), rs_recv_all(fd, &h, sizeof(h), 0))
		TH_LOG("hello: %s", strerror(errno));
	ASSERT_EQ(0, rs_set_timeo(fd, SO_RCVTIMEO, 0));
	ASSERT_EQ(LOSSY_MAGIC, h.magic);
	ASSERT_EQ(v->id, h.id) TH_LOG("host 2 is in another case");
	return fd;
}

/* RS_LOSSY_CASES, if set, lists the variants to run (space-separated). */
static bool lossy_case_wanted(const char *name)
{
	const char *list = getenv("RS_LOSSY_CASES"), *p;
	size_t n = strlen(name);

	if (!list || !*list)
		return true;
	for (p = strstr(list, name); p; p = strstr(p + 1, name))
		if ((p == list || p[-1] == ' ') && (!p[n] || p[n] == ' '))
			return true;
	return false;
}

FIXTURE_SETUP(lossy)
{
	unsigned short port = rs_env_ulong("RS_LOSSY_PORT", 47100) +
			      variant->id;

	self->fd = -1;
	self->keepalive = 0;
	self->q0[0] = -1;
	rs_watchdog(_metadata->timeout + 30);
	if (!lossy_case_wanted(variant->name))
		SKIP(return, "not in RS_LOSSY_CASES");
	/* only the one-machine trial of selftests/README, never in a VM */
	if (rs.tcp && !rs.netdev)
		SKIP(return, "needs two hosts and RS_NETDEV");
	/* through the IPPROTO route (RS_FAMILY=inet) TCP's would run twice */
	if (variant->tcp && rs.ip && !rs.tcp)
		SKIP(return, "TCP's variant: runs in the AF_RDMASTREAM run");
	ASSERT_TRUE(rs.host == 1 || rs.host == 2)
		TH_LOG("RS_HOST must be 1 or 2");
	ASSERT_NE(rs.addr.s_addr, rs.peer.s_addr)
		TH_LOG("RS_PEER is this host: lossy needs two hosts");
	ASSERT_NE(NULL, rs.netdev) TH_LOG("RS_NETDEV is not set");
	/* built in on the debug kernel, a module on Debian's */
	rs_system("modprobe -q sch_netem 2>/dev/null");
	lossy_netem(NULL);
	lossy_gso_off(_metadata);
	/* the module's aborts and completion errors, for the diagnosis */
	if (!variant->tcp && !rs.tcp) {
		rs_trace_write("trace", "");
		rs_trace_write("events/rdmastream/rdmastream_abort/enable", "1");
		rs_trace_write("events/rdmastream/rdmastream_wc_error/enable",
			       "1");
	}
	for (size_t i = 0; i < LOSSY_NCOUNTERS; i++)
		self->cnt[i] = lossy_counter(lossy_counters[i]);
	if (lossy_qdisc_stats(self->q0))
		self->q0[0] = -1;
	if (rs.host == 2)
		self->fd = lossy_dial(_metadata, variant, port);
	else
		self->fd = lossy_accept(_metadata, variant, port);
	/* RS_LOSSY_POLICY: RDMASTREAM_POLICY_* for comparisons */
	if (!variant->tcp && !rs.tcp && getenv("RS_LOSSY_POLICY"))
		ASSERT_EQ(0, rs_setint(self->fd, SOL_RDMASTREAM,
				       RDMASTREAM_POLICY,
				       rs_env_ulong("RS_LOSSY_POLICY", 0)));
	/* set on a connected socket: it caps the growth (rs_rxgrow.c) */
	if (variant->rcvbuf)
		ASSERT_EQ(0, rs_setint(self->fd, SOL_SOCKET, SO_RCVBUF,
				       variant->rcvbuf));
	if (variant->netem) {
		ASSERT_EQ(0, lossy_netem(variant->netem))
			TH_LOG("tc qdisc ... netem %s failed", variant->netem);
		self->shaped = true;
	}
}

FIXTURE_TEARDOWN(lossy)
{
	const char *dir = rs_tracefs();

	if (self->q0[0] >= 0)
		lossy_qdisc_report(variant->name, self->q0);
	if (self->shaped)
		lossy_netem(NULL);
	if (self->fd >= 0 && !variant->tcp && !rs.tcp) {
		struct rdmastream_info info;
		socklen_t len = sizeof(info);

		if (!getsockopt(self->fd, SOL_RDMASTREAM, RDMASTREAM_INFO,
				&info, &len))
			rs_info("lossy: %s host %d module: probes %llu kicks %llu local_invs %llu window_stalls %llu credit_stalls %llu ack_timeout_us %u rtt_us %u",
				variant->name, rs.host,
				(unsigned long long)info.rsi_probes,
				(unsigned long long)info.rsi_sq_kicks,
				(unsigned long long)info.rsi_local_invalidates,
				(unsigned long long)info.rsi_window_stalls,
				(unsigned long long)info.rsi_credit_stalls,
				info.rsi_ack_timeout_us, info.rsi_rtt_us);
	}
	if (self->fd >= 0)
		close(self->fd);
	if (!variant->tcp && !rs.tcp) {
		lossy_counters_report(variant->name, self->cnt);
		/*
		 * No packet of ours was refused below IP: rxe takes that
		 * as a local QP error and kills the QP (a root qdisc grafted
		 * under it did, docs/lossy-links.md item 8)
		 */
		EXPECT_EQ(self->cnt[LOSSY_SEND_ERR],
			  lossy_counter(lossy_counters[LOSSY_SEND_ERR]))
			TH_LOG("rxe send_err rose: a local send error");
	}
	if (self->keepalive > 0)
		rs_param_set("keepalive_secs", self->keepalive);
	/* $RS_OUT/lossy-<case>.trace: what the module saw */
	if (!variant->tcp && !rs.tcp && dir && rs.out) {
		rs_system("cat %s/trace > %s/lossy-%s.trace", dir, rs.out,
			  variant->name);
		/*
		 * The two events stay on (they fire on errors only): each
		 * first enable and last disable patches kernel text (the
		 * sched_switch hook of ftrace's comm recording too), and
		 * a 6.12 guest under TCG once took that int3 as an Oops
		 * in __schedule. Once per boot is the least of it.
		 */
	}
}

/* Record what this host received: on stderr and in $RS_OUT/lossy.txt. */
static void lossy_report(const char *name, const struct rs_xfer *rx)
{
	double mib = (double)rx->done / RS_MIB;
	char path[512];
	FILE *f;

	rs_info("lossy: %s host %d received %.1f MiB in %.2f s: %.2f MiB/s",
		name, rs.host, mib, rx->secs, rx->secs ? mib / rx->secs : 0);
	if (!rs.out)
		return;
	snprintf(path, sizeof(path), "%s/lossy.txt", rs.out);
	f = fopen(path, "a");
	if (!f)
		return;
	fprintf(f, "%s host %d received %.1f MiB in %.2f s: %.2f MiB/s\n",
		name, rs.host, mib, rx->secs, rx->secs ? mib / rx->secs : 0);
	fclose(f);
}

static bool lossy_ended(struct rs_xfer *x)
{
	return !pthread_tryjoin_np(x->thr, NULL);
}

/*
 * Has the partition's moment come? Host 1 starts it once 1 MiB of host
 * 2's stream has arrived, or once it has itself handed LOSSY_PART_SENT to
 * its socket, whichever comes first: one direction can stall for seconds
 * under TCG while the other runs at full rate (host 1's 96 MiB once all
 * arrived before it had received its 1 MiB, and the case then cut no
 * stream of host 2's). Host 2 takes its own 1 MiB as a first guess.
 */
#define LOSSY_PART_SENT	(8 * RS_MIB)

static bool lossy_part_due(const struct rs_xfer *x)
{
	if (x[1].err || x[1].mismatch || x[1].short_eof)
		return true;
	if (__atomic_load_n(&x[1].done, __ATOMIC_RELAXED) >= RS_MIB)
		return true;
	return rs.host == 1 &&
	       __atomic_load_n(&x[0].done, __ATOMIC_RELAXED) >= LOSSY_PART_SENT;
}

/*
 * Partition: once lossy_part_due(), drop everything we send. LP_SHORT
 * lifts it after RS_LOSSY_PART_SEC; LP_LONG when both transfers ended or
 * the bound passed. Returns when the partition started; *joined tells
 * which transfers this already joined.
 */
static double lossy_partition(struct __test_metadata *_metadata,
			      const FIXTURE_VARIANT(lossy) *v,
			      struct rs_xfer *x, bool *joined)
{
	double bound = rs_env_ulong("RS_LOSSY_BOUND", 30);
	double secs = rs_env_ulong("RS_LOSSY_PART_SEC", 5);
	double t0, end, seen;
	uint64_t got;

	/*
	 * The partition must come mid-way; under TCG the transfer threads
	 * can keep this one off the CPU for seconds (nice -10 was not
	 * enough on 7.x's scheduler: TCP's 32 MiB were through before this
	 * thread looked again): run it first whenever it wakes.
	 */
	struct sched_param sp = { .sched_priority = 1 };

	if (pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp))
		setpriority(PRIO_PROCESS, syscall(SYS_gettid), -10);
	while (!lossy_part_due(x))
		rs_msleep(2);
	t0 = rs_now();
	/*
	 * Host 1 alone drops everything it sends: for a reliable transport
	 * that is a partition both ways (no acknowledgement crosses), on one
	 * clock. Netem on both hosts, each from its own 1 MiB, made the
	 * blackout of the host that started last up to seconds longer than
	 * RS_LOSSY_PART_SEC under TCG, past the QP's retry budget (7.x).
	 */
	if (rs.host == 1)
		ASSERT_EQ(0, lossy_netem("loss 100%"));
	rs_info("lossy: partition from %llu bytes received, %llu sent",
		(unsigned long long)x[1].done,
		(unsigned long long)x[0].done);
	/* else the case proves nothing: make RS_LOSSY_PART_MB bigger */
	EXPECT_LT(x[1].done, x[1].total)
		TH_LOG("the stream ended before the partition");
	end = t0 + (v->part == LP_SHORT ? secs : bound + 5);
	got = x[1].done;
	seen = t0;
	while (rs_now() < end) {
		joined[0] = joined[0] || lossy_ended(&x[0]);
		joined[1] = joined[1] || lossy_ended(&x[1]);
		if (v->part == LP_LONG && joined[0] && joined[1])
			break;
		if (__atomic_load_n(&x[1].done, __ATOMIC_RELAXED) != got) {
			got = x[1].done;
			seen = rs_now();
		}
		rs_msleep(20);
	}
	/* the peer's neighbour entry: rxe's packets depend on it */
	rs_system("ip -s neigh show dev %s", rs.netdev);
	if (rs.host == 1)
		lossy_netem(NULL);
	rs_info("lossy: partition lifted after %.1f s", rs_now() - t0);
	/*
	 * Host 2 reaches its 1 MiB before host 1 reaches its own and cuts
	 * the link, seconds before under TCG: for host 2 the partition
	 * began when host 1's data stopped coming.
	 */
	if (rs.host == 2 && seen > t0) {
		rs_info("lossy: host 1's data stopped %.1f s after our 1 MiB",
			seen - t0);
		t0 = seen;
	}
	return t0;
}

/* How a connection cut by a partition must end. */
static bool lossy_cut_errno(int err, bool send_side)
{
	return err == ETIMEDOUT || err == ECONNRESET ||
	       (send_side && err == EPIPE);
}

/*
 * partition_long: a side whose own data was all acknowledged before the
 * partition would sit in recv() for ever, over TCP as over rdmastream;
 * keepalive every 2 s makes it notice. TCP also gets TCP_USER_TIMEOUT,
 * what the QP's retry limit does for the family.
 */
static void lossy_keepalive(struct __test_metadata *_metadata,
			    FIXTURE_DATA(lossy) *self,
			    const FIXTURE_VARIANT(lossy) *v)
{
	ASSERT_EQ(0, rs_setint(self->fd, SOL_SOCKET, SO_KEEPALIVE, 1));
	if (!v->tcp && !rs.tcp) {
		/* module-wide: restored in the teardown */
		self->keepalive = rs_param_get("keepalive_secs");
		ASSERT_LT(0, self->keepalive);
		ASSERT_EQ(0, rs_param_set("keepalive_secs", 2));
		return;
	}
	ASSERT_EQ(0, rs_setint(self->fd, IPPROTO_TCP, TCP_USER_TIMEOUT,
			       rs_env_ulong("RS_LOSSY_TCP_UTO", 8000)));
	ASSERT_EQ(0, rs_setint(self->fd, IPPROTO_TCP, TCP_KEEPIDLE, 2));
	ASSERT_EQ(0, rs_setint(self->fd, IPPROTO_TCP, TCP_KEEPINTVL, 1));
	ASSERT_EQ(0, rs_setint(self->fd, IPPROTO_TCP, TCP_KEEPCNT, 3));
}

/*
 * A connection cut short (partition, or rxe giving up): whatever arrived
 * is intact, and it ended with a clean error within limit seconds. One
 * call reports the error (sk_err is reported once, as with TCP); the
 * other then sees EOF (a receive) or EPIPE (a send), or had finished.
 */
static void lossy_check_cut(struct __test_metadata *_metadata,
			    const struct rs_xfer *x, double secs,
			    double limit)
{
	EXPECT_FALSE(x[1].mismatch) TH_LOG("data mismatch at %llu",
					   (unsigned long long)x[1].bad_off);
	EXPECT_TRUE(lossy_cut_errno(x[0].err, false) ||
		    lossy_cut_errno(x[1].err, false))
		TH_LOG("neither call saw ETIMEDOUT or ECONNRESET");
	EXPECT_TRUE(lossy_cut_errno(x[1].err, false) ||
		    (!x[1].err && x[1].short_eof))
		TH_LOG("receive: %s (short EOF %d)", strerror(x[1].err),
		       x[1].short_eof);
	EXPECT_TRUE(lossy_cut_errno(x[0].err, true) ||
		    (!x[0].err && x[0].done == x[0].total))
		TH_LOG("send: %s", strerror(x[0].err));
	EXPECT_LE(secs, limit) TH_LOG("the cut connection took %.1f s to fail",
				      secs);
}

/*
 * The QP's loss recovery as RDMASTREAM_INFO reports it (docs/
 * lossy-links.md): rxe's QP retries for ever (retry count 7, the
 * module's watchdog bounds it), the connection measured its round trip,
 * and every case after the first connected to a peer whose round trip was
 * known, with an ack timeout that covers it and is no longer rdma_cm's
 * 1.07 s. Called once both hosts have all the data.
 */
static void lossy_check_rto(struct __test_metadata *_metadata, int fd,
			    const FIXTURE_VARIANT(lossy) *v)
{
	struct rdmastream_info info;
	socklen_t len = sizeof(info);
	long long pkts;

	ASSERT_EQ(0, getsockopt(fd, SOL_RDMASTREAM, RDMASTREAM_INFO, &info,
				&len));
	rs_info("lossy: %s host %d: ack timeout %u us, retry %u, round trip %u us (cached when connecting: %u us), path MTU %u",
		v->name, rs.host, info.rsi_ack_timeout_us,
		info.rsi_retry_count, info.rsi_rtt_us,
		info.rsi_base_rtt_us, info.rsi_path_mtu);
	EXPECT_EQ(7, info.rsi_retry_count);
	EXPECT_LT(0, info.rsi_rtt_us) TH_LOG("no round trip measured");
	/* the largest RoCE MTU the netdev allows (vm-run --mtu) */
	EXPECT_EQ(rs_roce_mtu(), info.rsi_path_mtu);
	rs_info("lossy: %s host %d: stream buffer %u, the peer's %u",
		v->name, rs.host, info.rsi_rx_ring, info.rsi_peer_ring);
	/*
	 * 48 ms round trip: the window, not the link, held the peer back,
	 * and the stream buffers grew as TCP's window does (rs_rxgrow.c)
	 * from their 64 KiB start: at least one of the two to twice that.
	 * Not further: at netdev MTU 1500 rxe keeps at most 128 packets
	 * (about 128 KiB) unacknowledged per QP, so once the buffer holds
	 * that much the window seldom holds the peer back any more (runs
	 * stopped anywhere from 128 KiB to 1 MiB)
	 */
	if (v->id == 8)
		EXPECT_LE(2 * 64 * RS_KIB,
			  info.rsi_rx_ring > info.rsi_peer_ring ?
			  info.rsi_rx_ring : info.rsi_peer_ring)
			TH_LOG("neither stream buffer grew from its 64 KiB start");
	/*
	 * SO_RCVBUF set once connected (as a server sets it on an accepted
	 * socket): the kernel doubles it, as for TCP, and the stream buffer
	 * grows up to that and no further; until 2026-11-24 it stayed at its
	 * 64 KiB start
	 */
	if (v->rcvbuf) {
		EXPECT_GE(2U * v->rcvbuf, info.rsi_rx_ring)
			TH_LOG("SO_RCVBUF did not cap the stream buffer");
		EXPECT_GE(2U * v->rcvbuf, info.rsi_peer_ring);
		EXPECT_EQ(2U * v->rcvbuf,
			  info.rsi_rx_ring > info.rsi_peer_ring ?
			  info.rsi_rx_ring : info.rsi_peer_ring)
			TH_LOG("neither stream buffer grew to SO_RCVBUF's size");
	}
	/*
	 * to another host over rxe no indirect write is longer than
	 * write_pkts packets (rs_cm.c), so that a go-back-N gets an ACK
	 * every few packets; checked on average
	 */
	pkts = rs_param_get("write_pkts");
	if (pkts > 0 && !strncmp(rs.rdmadev, "rxe", 3))
		EXPECT_GE(info.rsi_writes * pkts * info.rsi_path_mtu,
			  info.rsi_indirect_bytes_sent)
			TH_LOG("%llu bytes in %llu writes",
			       (unsigned long long)info.rsi_indirect_bytes_sent,
			       (unsigned long long)info.rsi_writes);
	if (v->id == 14)	/* clean: may be the first contact */
		return;
	ASSERT_LT(0, info.rsi_base_rtt_us)
		TH_LOG("the peer's round trip unknown");
	EXPECT_GE(info.rsi_ack_timeout_us, info.rsi_base_rtt_us);
	EXPECT_EQ(rs_ack_want_us(info.rsi_base_rtt_us, info.rsi_base_rttvar_us,
				 rs_param_get("ack_timeout_min"),
				 rs_param_get("ack_timeout_first")),
		  info.rsi_ack_timeout_us);
	EXPECT_GT(1073741U, info.rsi_ack_timeout_us)
		TH_LOG("still rdma_cm's 1.07 s on a LAN");
}

static void lossy_run(struct __test_metadata *_metadata,
		      FIXTURE_DATA(lossy) *self,
		      const FIXTURE_VARIANT(lossy) *v, const char *name)
{
	uint64_t per = rs_env_ulong(v->part ? "RS_LOSSY_PART_MB" :
				    "RS_LOSSY_MB", v->part ? 24 : 2) * RS_MIB;
	double bound = rs_env_ulong("RS_LOSSY_BOUND", 30);
	bool joined[2] = { false, false };
	struct rs_xfer x[2] = { };
	double t0 = 0, t1;
	char mine, theirs;
	ssize_t n;
	int i;

	/*
	 * TCP is faster here: more, so that the partition comes mid-way;
	 * and a long partition must find sends still to do on both hosts,
	 * past what the grown rings take (4 MiB send ring, 1 MiB stream
	 * buffer: host 2 once finished its 8 MiB before it began)
	 */
	if (v->part && (v->tcp || v->part == LP_LONG))
		per *= 4;
	/* 48 ms: enough round trips for the stream buffers to grow */
	if (v->id == 8 || v->id == 9 || v->id == 16)
		per = per > 2 * RS_MIB ? per : 2 * RS_MIB;
	if (v->part == LP_LONG)
		lossy_keepalive(_metadata, self, v);
	for (i = 0; i < 2; i++) {
		/* x[0] sends, x[1] receives the other host's stream */
		unsigned int from = i ? 3 - rs.host : rs.host;

		x[i].fd = self->fd;
		x[i].total = per;
		x[i].chunk = 256 * RS_KIB;
		x[i].key = rs_key(v->id, from, 70);
		x[i].seed = rs_mix64(from * 1000 + v->id);
	}
	ASSERT_EQ(0, rs_xfer_start(&x[0], rs_sender));
	ASSERT_EQ(0, rs_xfer_start(&x[1], rs_receiver));
	if (v->part)
		t0 = lossy_partition(_metadata, v, x, joined);
	for (i = 0; i < 2; i++)
		if (!joined[i])
			rs_xfer_join_watch(&x[i], 1, 60);
	t1 = rs_now();

	if (v->part == LP_LONG) {
		rs_info("lossy: %s host %d: send %s after %llu bytes, receive %s after %llu bytes, both ended %.1f s after the partition began",
			name, rs.host, strerror(x[0].err),
			(unsigned long long)x[0].done, strerror(x[1].err),
			(unsigned long long)x[1].done, t1 - t0);
		lossy_check_cut(_metadata, x, t1 - t0, bound);
		return;
	}
	EXPECT_EQ(0, x[0].err) TH_LOG("send: %s after %llu bytes",
				      strerror(x[0].err),
				      (unsigned long long)x[0].done);
	RS_XFER_OK(&x[1], "receive");
	lossy_report(name, &x[1]);
	/* Tell the other host how its data arrived; hear how ours did. */
	mine = 'Y';
	n = send(self->fd, &mine, 1, MSG_NOSIGNAL);
	if (n == 1)
		n = rs_recv_all(self->fd, &theirs, 1, 0);
	ASSERT_EQ(1, n) TH_LOG("verdict: %s", strerror(errno));
	EXPECT_EQ('Y', theirs) TH_LOG("the other host saw bad data");
	/*
	 * After the verdicts, when both hosts have received everything: a
	 * stream buffer the peer grew near the end of its receive is known
	 * here by then (its RING came before its verdict)
	 */
	if (!v->tcp && !rs.tcp)
		lossy_check_rto(_metadata, self->fd, v);
	ASSERT_EQ(0, shutdown(self->fd, SHUT_WR));
	ASSERT_EQ(0, recv(self->fd, &theirs, 1, 0));
}

TEST_F_TIMEOUT(lossy, stream, 600)
{
	if (_metadata->skip)
		return;
	lossy_run(_metadata, self, variant, variant->name);
}

TEST_HARNESS_MAIN
