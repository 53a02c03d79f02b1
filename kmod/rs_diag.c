// SPDX-License-Identifier: GPL-2.0
/*
 * Diagnostics: the list of live sockets, the sock_diag (netlink) handler
 * that dumps it, and the module-wide counters of /proc/net/rdmastream_stat
 * (docs/diag.md).
 *
 * Every rs_sock (listeners, connections, children not yet accepted,
 * orphans; both the AF_RDMASTREAM and the IPPROTO route's sockets) is on
 * its network namespace's list from rs_sock_setup() until its destructor
 * (each holds its netns, so the list outlives it). A dump or a read of
 * the counters walks only its own namespace's sockets. The dump never
 * takes lock_sock(): it holds a reference, drops the list lock, and reads
 * each socket under rs->lock only, as getsockopt(RDMASTREAM_INFO) does.
 */
#include <linux/module.h>
#include <linux/proc_fs.h>
#include <linux/seq_file.h>
#include <linux/sock_diag.h>
#include <net/net_namespace.h>
#include <net/netns/generic.h>
#include <net/netlink.h>
#include <net/tcp_states.h>

#include "rs.h"
#include "../uapi/linux/rdmastream.h"

static unsigned int rs_net_id;

/*
 * Per network namespace: its sockets, counters, and the bytes of sockets
 * now gone.
 */
struct rs_net {
	spinlock_t lock;		/* BHs off: socks, closed */
	struct list_head socks;
	atomic64_t ev[RS_EV_MAX];
	u64 closed[RS_BYTES_MAX];
	atomic_t conns;		/* transports (rs_limit.c) */
};

static struct rs_net *rs_net(const struct net *net)
{
	return net_generic(net, rs_net_id);
}

atomic_t *rs_net_conns(const struct net *net)
{
	return &rs_net(net)->conns;
}

void rs_stat_inc(const struct sock *sk, enum rs_ev ev)
{
	atomic64_inc(&rs_net(sock_net(sk))->ev[ev]);
}

/* The byte totals of one socket; READ_ONCE: no lock for live sockets. */
static void rs_sock_bytes(struct rs_sock *rs, u64 *b)
{
	b[RS_BYTES_DIRECT_OUT] += READ_ONCE(rs->dtx.st.direct_bytes);
	b[RS_BYTES_INDIRECT_OUT] += READ_ONCE(rs->dtx.st.indirect_bytes);
	b[RS_BYTES_DIRECT_IN] += READ_ONCE(rs->drx.st.direct_bytes);
	b[RS_BYTES_INDIRECT_IN] += READ_ONCE(rs->drx.st.indirect_bytes);
}

void rs_diag_link(struct rs_sock *rs)
{
	struct rs_net *rn = rs_net(sock_net(&rs->sk));

	spin_lock_bh(&rn->lock);
	list_add_tail(&rs->diag_node, &rn->socks);
	spin_unlock_bh(&rn->lock);
}

/*
 * From the destructor. The socket's bytes move to its netns's totals in
 * the same critical section, so the counters never go backwards.
 */
void rs_diag_unlink(struct rs_sock *rs)
{
	struct rs_net *rn = rs_net(sock_net(&rs->sk));

	spin_lock_bh(&rn->lock);
	list_del(&rs->diag_node);
	rs_sock_bytes(rs, rn->closed);
	spin_unlock_bh(&rn->lock);
}

/* Counter names, in the order of enum rs_ev then enum rs_bytes. */
static const char * const rs_ev_names[RS_EV_MAX] = {
	[RS_EV_ACTIVE_OPENS]	= "ActiveOpens",
	[RS_EV_PASSIVE_OPENS]	= "PassiveOpens",
	[RS_EV_ATTEMPT_FAILS]	= "AttemptFails",
	[RS_EV_ABORTS]		= "EstabAborts",
	[RS_EV_FB_FORCED]	= "FallbackForced",
	[RS_EV_FB_NO_DEVICE]	= "FallbackNoDevice",
	[RS_EV_FB_REJECTED]	= "FallbackRejected",
	[RS_EV_FB_TIMEOUT]	= "FallbackTimeout",
	[RS_EV_FB_ACCEPTED]	= "FallbackAccepted",
};

static const char * const rs_bytes_names[RS_BYTES_MAX] = {
	[RS_BYTES_DIRECT_OUT]	= "DirectBytesSent",
	[RS_BYTES_INDIRECT_OUT]	= "IndirectBytesSent",
	[RS_BYTES_DIRECT_IN]	= "DirectBytesReceived",
	[RS_BYTES_INDIRECT_IN]	= "IndirectBytesReceived",
};

/* Live sockets and bytes of a netns: closed totals plus the live ones. */
static void rs_stat_sum(struct net *net, u64 *bytes, u64 *estab, u64 *socks)
{
	struct rs_net *rn = rs_net(net);
	struct rs_sock *rs;
	int i;

	spin_lock_bh(&rn->lock);
	for (i = 0; i < RS_BYTES_MAX; i++)
		bytes[i] = rn->closed[i];
	list_for_each_entry(rs, &rn->socks, diag_node) {
		(*socks)++;
		if (rs_state_open(inet_sk_state_load(&rs->sk)))
			(*estab)++;
		rs_sock_bytes(rs, bytes);
	}
	spin_unlock_bh(&rn->lock);
}

/* The format of /proc/net/netstat: a line of names, a line of values. */
static int rs_stat_show(struct seq_file *seq, void *v)
{
	struct net *net = seq_file_single_net(seq);
	u64 bytes[RS_BYTES_MAX], estab = 0, socks = 0;
	int i;

	rs_stat_sum(net, bytes, &estab, &socks);
	seq_puts(seq, "RdmaStream:");
	for (i = 0; i < RS_EV_MAX; i++)
		seq_printf(seq, " %s", rs_ev_names[i]);
	for (i = 0; i < RS_BYTES_MAX; i++)
		seq_printf(seq, " %s", rs_bytes_names[i]);
	seq_puts(seq, " CurrEstab Sockets\nRdmaStream:");
	for (i = 0; i < RS_EV_MAX; i++)
		seq_printf(seq, " %lld",
			   (s64)atomic64_read(&rs_net(net)->ev[i]));
	for (i = 0; i < RS_BYTES_MAX; i++)
		seq_printf(seq, " %llu", bytes[i]);
	seq_printf(seq, " %llu %llu\n", estab, socks);
	return 0;
}

static int __net_init rs_net_init(struct net *net)
{
	struct rs_net *rn = rs_net(net);

	spin_lock_init(&rn->lock);
	INIT_LIST_HEAD(&rn->socks);
	if (!proc_create_net_single("rdmastream_stat", 0444, net->proc_net,
				    rs_stat_show, NULL))
		return -ENOMEM;
	return 0;
}

static void __net_exit rs_net_exit(struct net *net)
{
	remove_proc_entry("rdmastream_stat", net->proc_net);
	WARN_ON_ONCE(!list_empty(&rs_net(net)->socks));
}

static struct pernet_operations rs_net_ops = {
	.init	= rs_net_init,
	.exit	= rs_net_exit,
	.id	= &rs_net_id,
	.size	= sizeof(struct rs_net),
};

/* What getsockname() and getpeername() return; under rs->lock. */
static void rs_diag_names(struct rs_sock *rs, struct sockaddr_storage *local,
			  struct sockaddr_storage *peer)
{
	struct sock *sk = &rs->sk;

	if (rs_fb_names(rs, local, peer))	/* over TCP: its names */
		goto map;
	if (rs->established) {
		*local = rs->local_sa;
		if (sk->sk_state != TCP_CLOSE)
			*peer = rs->peer_sa;
	} else if (rs->cm_id) {
		memcpy(local, &rs->cm_id->route.addr.src_addr, sizeof(*local));
	}
map:
	if (!local->ss_family)
		local->ss_family = sk->sk_family == AF_INET6 ? AF_INET6 :
							      AF_INET;
	if ((rs->v4mapped || sk->sk_family == AF_INET6) &&
	    local->ss_family == AF_INET)
		rs_map_addr(local);
	if ((rs->v4mapped || sk->sk_family == AF_INET6) &&
	    peer->ss_family == AF_INET)
		rs_map_addr(peer);
}

static int rs_put_addr(struct sk_buff *skb, int type,
		       const struct sockaddr_storage *ss)
{
	if (ss->ss_family == AF_INET6)
		return nla_put(skb, type, sizeof(struct sockaddr_in6), ss);
	if (ss->ss_family == AF_INET)
		return nla_put(skb, type, sizeof(struct sockaddr_in), ss);
	return 0;
}

/* Queues as ss shows TCP's: unread and unsent, or the accept queue. */
static void rs_diag_queues(struct rs_sock *rs, struct rdmastream_diag_msg *r)
{
	struct sock *sk = &rs->sk;

	if (r->rdiag_state == TCP_LISTEN) {
		r->rdiag_rqueue = READ_ONCE(sk->sk_ack_backlog);
		r->rdiag_wqueue = READ_ONCE(sk->sk_max_ack_backlog);
		return;
	}
	if (rs_fb_queues(rs, &r->rdiag_rqueue, &r->rdiag_wqueue))
		return;
	if (rs->flow.rx_size)
		r->rdiag_rqueue = rs_rx_avail(rs);
	r->rdiag_wqueue = rs->flow.tx_head - rs->flow.tx_done;
}

static int rs_diag_fill(struct rs_sock *rs, struct sk_buff *skb,
			struct netlink_callback *cb,
			const struct rdmastream_diag_req *req)
{
	struct sockaddr_storage local = { }, peer = { };
	struct user_namespace *ns = sk_user_ns(NETLINK_CB(cb->skb).sk);
	struct rdmastream_diag_msg *r;
	struct rdmastream_info info;
	struct sock *sk = &rs->sk;
	struct nlmsghdr *nlh;
	struct nlattr *attr;

	nlh = nlmsg_put(skb, NETLINK_CB(cb->skb).portid, cb->nlh->nlmsg_seq,
			SOCK_DIAG_BY_FAMILY, sizeof(*r), NLM_F_MULTI);
	if (!nlh)
		return -EMSGSIZE;
	r = nlmsg_data(nlh);
	memset(r, 0, sizeof(*r));
	r->rdiag_family = sk->sk_family;
	r->rdiag_protocol = sk->sk_protocol;
	r->rdiag_inode = sock_i_ino(sk);
	r->rdiag_uid = from_kuid_munged(ns, rs_sk_uid(sk));
	sock_diag_save_cookie(sk, r->rdiag_cookie);

	spin_lock_bh(&rs->lock);
	r->rdiag_state = sk->sk_state;
	r->rdiag_shutdown = sk->sk_shutdown;
	rs_diag_queues(rs, r);
	rs_diag_names(rs, &local, &peer);
	spin_unlock_bh(&rs->lock);

	if (rs_put_addr(skb, RDMASTREAM_DIAG_LOCAL, &local) ||
	    rs_put_addr(skb, RDMASTREAM_DIAG_PEER, &peer))
		goto cancel;
	if (req->rdiag_show & RDMASTREAM_DIAG_SHOW_INFO) {
		attr = nla_reserve(skb, RDMASTREAM_DIAG_INFO, sizeof(info));
		if (!attr)
			goto cancel;
		rs_info_fill(rs, &info);
		memcpy(nla_data(attr), &info, sizeof(info));
	}
	nlmsg_end(skb, nlh);
	return 0;
cancel:
	nlmsg_cancel(skb, nlh);
	return -EMSGSIZE;
}

static bool rs_diag_wanted(struct rs_sock *rs,
			   const struct rdmastream_diag_req *req)
{
	int state = inet_sk_state_load(&rs->sk);

	if (!(req->rdiag_states & (1U << state)))
		return false;
	return !req->rdiag_ino || req->rdiag_ino == sock_i_ino(&rs->sk);
}

#define RS_DIAG_BATCH	16

/*
 * Take references on up to RS_DIAG_BATCH sockets of net, from the pos-th
 * one on. A socket whose last reference is gone is being destroyed: it is
 * counted but skipped. Returns how many were taken; *pos moves on.
 */
static int rs_diag_collect(struct net *net, long *pos, struct rs_sock **batch,
			   long *bpos, bool *more)
{
	struct rs_net *rn = rs_net(net);
	struct rs_sock *rs;
	long num = 0;
	int n = 0;

	*more = false;
	spin_lock_bh(&rn->lock);
	list_for_each_entry(rs, &rn->socks, diag_node) {
		if (num++ < *pos)
			continue;
		if (n == RS_DIAG_BATCH) {
			*more = true;
			break;
		}
		if (refcount_inc_not_zero(&rs->sk.sk_refcnt)) {
			bpos[n] = *pos;
			batch[n++] = rs;
		}
		(*pos)++;
	}
	spin_unlock_bh(&rn->lock);
	return n;
}

/* cb->args[0]: sockets of the netns already walked */
static int rs_diag_dump(struct sk_buff *skb, struct netlink_callback *cb)
{
	const struct rdmastream_diag_req *req = nlmsg_data(cb->nlh);
	struct rs_sock *batch[RS_DIAG_BATCH];
	long bpos[RS_DIAG_BATCH];
	struct net *net = sock_net(skb->sk);
	long pos = cb->args[0];
	int n, i, err = 0;
	bool more;

	do {
		n = rs_diag_collect(net, &pos, batch, bpos, &more);
		for (i = 0; i < n; i++) {
			if (!err && rs_diag_wanted(batch[i], req)) {
				err = rs_diag_fill(batch[i], skb, cb, req);
				/* retry this one in the next skb */
				if (err)
					pos = bpos[i];
			}
			sock_put(&batch[i]->sk);
		}
	} while (more && !err);
	cb->args[0] = pos;
	return skb->len;
}

static int rs_diag_check(const struct nlmsghdr *h)
{
	const struct rdmastream_diag_req *req;

	if (nlmsg_len(h) < (int)sizeof(*req))
		return -EINVAL;
	req = nlmsg_data(h);
	if (req->sdiag_protocol || req->rdiag_pad ||
	    req->rdiag_show & ~RDMASTREAM_DIAG_SHOW_INFO)
		return -EINVAL;
	return 0;
}

static int rs_diag_handler_dump(struct sk_buff *skb, struct nlmsghdr *h)
{
	struct netlink_dump_control c = { .dump = rs_diag_dump };
	struct net *net = sock_net(skb->sk);
	int err;

	if (h->nlmsg_type != SOCK_DIAG_BY_FAMILY ||
	    !(h->nlmsg_flags & NLM_F_DUMP))
		return -EOPNOTSUPP;
	err = rs_diag_check(h);
	if (err)
		return err;
	return netlink_dump_start(net->diag_nlsk, skb, h, &c);
}

static struct sock_diag_handler rs_diag_handler = {
	RS_DIAG_OWNER
	.dump	= rs_diag_handler_dump,
};

/* The counters: before any socket exists, after the last is gone. */
int rs_stat_register(void)
{
	int ret = rs_rtt_register();

	if (ret)
		return ret;
	ret = register_pernet_subsys(&rs_net_ops);
	if (ret)
		rs_rtt_unregister();
	return ret;
}

void rs_stat_unregister(void)
{
	unregister_pernet_subsys(&rs_net_ops);
	rs_rtt_unregister();
}

/* Once the family is ours: the same number's handler slot is free then. */
int rs_diag_register(void)
{
	rs_diag_handler.family = rs_family;
	return sock_diag_register(&rs_diag_handler);
}

void rs_diag_unregister(void)
{
	sock_diag_unregister(&rs_diag_handler);
}

/* a dump request for the family loads the module, as for AF_SMC */
MODULE_ALIAS_NET_PF_PROTO_TYPE(PF_NETLINK, NETLINK_SOCK_DIAG, AF_RDMASTREAM);
