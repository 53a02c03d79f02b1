// SPDX-License-Identifier: GPL-2.0
/*
 * Caps on the connections that hold HCA objects (docs/limits.md).
 *
 * A connection end with a transport holds a PD, an RC QP, a share of the
 * device's pooled CQs and its MRs (one per ring segment, up to eight for
 * ADVERTs), from tables the device shares with every other verbs user of the host
 * (NVMe-oF, NFS/RDMA, SMC-R). Like tcp_max_orphans the caps apply to
 * everybody, root included: max_conns_per_user counts the transports of
 * each socket owner (sk_uid; an accepted connection's is its listener's
 * owner, who pays for both ends of a loopback connection to itself),
 * max_conns_per_netns those of each network namespace. A transport that
 * would pass either is refused: connect() fails with ENOBUFS, a listener
 * rejects the REQ (reason RS_REJ_NOBUFS, ECONNREFUSED at the peer).
 *
 * rs_limit_charge() runs in rs_transport_create() before any verbs
 * object exists and records what it charged in rs->limit_user;
 * rs_limit_uncharge() in rs_transport_destroy() gives exactly that back,
 * whatever thread runs it and whoever owns the socket by then (accept()
 * gives a child the acceptor's uid). Both under rs->tlock; the counts
 * under rs_limit_lock, process context only.
 */
#include <linux/hashtable.h>
#include <linux/slab.h>

#include "rs.h"

unsigned int rs_max_conns_per_user = 4096;
module_param_named(max_conns_per_user, rs_max_conns_per_user, uint, 0644);
MODULE_PARM_DESC(max_conns_per_user,
		 "connection ends with HCA objects per socket owner, root included (default 4096, 0: no cap)");

unsigned int rs_max_conns_per_netns = 16384;
module_param_named(max_conns_per_netns, rs_max_conns_per_netns, uint, 0644);
MODULE_PARM_DESC(max_conns_per_netns,
		 "connection ends with HCA objects per network namespace (default 16384, 0: no cap)");

/* The transports of one owner; freed when it has none left. */
struct rs_limit_user {
	struct hlist_node node;
	kuid_t uid;
	unsigned int conns;
};

#define RS_LIMIT_HASH_BITS	6

static DEFINE_HASHTABLE(rs_limit_users, RS_LIMIT_HASH_BITS);
static DEFINE_SPINLOCK(rs_limit_lock);	/* rs_limit_users, the counts */
static unsigned int rs_limit_conns;	/* transports charged, all owners */
static atomic_long_t rs_limit_refused = ATOMIC_LONG_INIT(0);

static struct rs_limit_user *rs_limit_find(kuid_t uid)
{
	struct rs_limit_user *u;

	hash_for_each_possible(rs_limit_users, u, node, __kuid_val(uid))
		if (uid_eq(u->uid, uid))
			return u;
	return NULL;
}

/* Room for one more transport of u (NULL: it has none) in netns? */
static bool rs_limit_room(const struct rs_limit_user *u, atomic_t *netns)
{
	unsigned int user_max = READ_ONCE(rs_max_conns_per_user);
	unsigned int netns_max = READ_ONCE(rs_max_conns_per_netns);

	if (user_max && u && u->conns >= user_max)
		return false;
	return !netns_max || (unsigned int)atomic_read(netns) < netns_max;
}

/*
 * Charge rs's transport to its owner and netns; -ENOBUFS beyond a cap,
 * -ENOMEM. Before any verbs object is made; under tlock.
 */
int rs_limit_charge(struct rs_sock *rs)
{
	atomic_t *netns = rs_net_conns(sock_net(&rs->sk));
	/* sk_uid itself: sock_i_uid() says root for a child (before 6.16) */
	kuid_t uid = READ_ONCE(rs->sk.sk_uid);
	struct rs_limit_user *u, *fresh;
	int ret = 0;

	if (WARN_ON_ONCE(rs->limit_user))
		return 0;
	/* a first transport of uid: its entry, made outside the lock */
	fresh = kzalloc(sizeof(*fresh), GFP_KERNEL);
	spin_lock(&rs_limit_lock);
	u = rs_limit_find(uid);
	if (!rs_limit_room(u, netns)) {
		ret = -ENOBUFS;
	} else if (!u && !fresh) {
		ret = -ENOMEM;
	} else {
		if (!u) {
			u = fresh;
			fresh = NULL;
			u->uid = uid;
			hash_add(rs_limit_users, &u->node, __kuid_val(uid));
		}
		u->conns++;
		atomic_inc(netns);
		rs_limit_conns++;
		rs->limit_user = u;
	}
	spin_unlock(&rs_limit_lock);
	kfree(fresh);
	if (ret == -ENOBUFS)
		atomic_long_inc(&rs_limit_refused);
	return ret;
}

/* Give back what rs_limit_charge() charged, if anything. Under tlock. */
void rs_limit_uncharge(struct rs_sock *rs)
{
	struct rs_limit_user *u = rs->limit_user, *gone = NULL;

	if (!u)
		return;
	rs->limit_user = NULL;
	spin_lock(&rs_limit_lock);
	atomic_dec(rs_net_conns(sock_net(&rs->sk)));
	rs_limit_conns--;
	if (!--u->conns) {
		hash_del(&u->node);
		gone = u;
	}
	spin_unlock(&rs_limit_lock);
	kfree(gone);
}

static int rs_hca_conns_get(char *buf, const struct kernel_param *kp)
{
	return sysfs_emit(buf, "%u\n", READ_ONCE(rs_limit_conns));
}

static const struct kernel_param_ops rs_hca_conns_ops = {
	.set = rs_param_ignore,	/* given at load: ignored (rs_main.c) */
	.get = rs_hca_conns_get,
};

module_param_cb(hca_conns, &rs_hca_conns_ops, NULL, 0444);
MODULE_PARM_DESC(hca_conns,
		 "connection ends holding a PD, a QP, a CQ share and MRs now (read-only)");

static int rs_conns_refused_get(char *buf, const struct kernel_param *kp)
{
	return sysfs_emit(buf, "%ld\n", atomic_long_read(&rs_limit_refused));
}

static const struct kernel_param_ops rs_conns_refused_ops = {
	.set = rs_param_ignore,
	.get = rs_conns_refused_get,
};

module_param_cb(conns_refused, &rs_conns_refused_ops, NULL, 0444);
MODULE_PARM_DESC(conns_refused,
		 "connection ends refused by max_conns_per_user or max_conns_per_netns since load (read-only)");
