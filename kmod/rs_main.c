// SPDX-License-Identifier: GPL-2.0
/*
 * rdmastream module: registers the AF_RDMASTREAM socket family.
 */
#include <linux/module.h>
#include <linux/mm.h>
#include <linux/net.h>
#include <linux/sysfs.h>

#define CREATE_TRACE_POINTS
#include "rs.h"
#include "../uapi/linux/rdmastream.h"

int rs_family = AF_RDMASTREAM;
module_param_named(family, rs_family, int, 0444);
MODULE_PARM_DESC(family, "socket family number (default "
		 __stringify(AF_RDMASTREAM) ", must be below AF_MAX)");

/* TCP's bound for TCP_KEEPIDLE and TCP_KEEPINTVL (MAX_TCP_KEEPIDLE) */
#define RS_KEEPALIVE_MAX	32767

/* Set a uint parameter to val if it is within [min, max]. */
static int rs_param_set_range(const char *val, const struct kernel_param *kp,
			      unsigned int min, unsigned int max)
{
	unsigned int v;
	int ret;

	ret = kstrtouint(val, 0, &v);
	if (ret)
		return ret;
	if (v < min || v > max)
		return -EINVAL;
	WRITE_ONCE(*(unsigned int *)kp->arg, v);
	return 0;
}

/*
 * keepalive_secs is read by every keepalive timer, so every write is
 * checked, at load and at run time: 0 would re-arm the probe timer every
 * tick, a huge value overflow its expiry in jiffies.
 */
static int rs_keepalive_set(const char *val, const struct kernel_param *kp)
{
	return rs_param_set_range(val, kp, 1, RS_KEEPALIVE_MAX);
}

static const struct kernel_param_ops rs_keepalive_ops = {
	.set = rs_keepalive_set,
	.get = param_get_uint,
};

unsigned int rs_keepalive_secs = 15;
module_param_cb(keepalive_secs, &rs_keepalive_ops, &rs_keepalive_secs, 0644);
MODULE_PARM_DESC(keepalive_secs,
		 "probe interval of SO_KEEPALIVE connections, 1.."
		 __stringify(RS_KEEPALIVE_MAX) " s (default 15)");

/*
 * Adaptive receive polling (rs_spin.h): the longest a receive spins before
 * it sleeps, and only when its socket's recent data came within it. 0
 * turns it off; SO_BUSY_POLL still spins its fixed time.
 */
#define RS_SPIN_MAX_US	10000

static int rs_spin_max_set(const char *val, const struct kernel_param *kp)
{
	return rs_param_set_range(val, kp, 0, RS_SPIN_MAX_US);
}

static const struct kernel_param_ops rs_spin_max_ops = {
	.set = rs_spin_max_set,
	.get = param_get_uint,
};

unsigned int rs_spin_max_us = 200;
module_param_cb(spin_max_us, &rs_spin_max_ops, &rs_spin_max_us, 0644);
MODULE_PARM_DESC(spin_max_us,
		 "adaptive receive polling: longest spin before sleeping, 0.."
		 __stringify(RS_SPIN_MAX_US) " us, 0 off (default 200)");

/*
 * The QP ack timeout on devices that retry for ever (rxe, rs_rtt.c), as
 * exponents: 4.096 us << exp. ack_timeout_min is the floor under what the
 * measured round trip asks for: 14 (67 ms), which moved 0.6-1.2x TCP's
 * throughput at 1 % loss where 16 (268 ms) moved 0.1-0.35x. Under TCG
 * load 12 (16.8 ms) retransmits spuriously by the thousand and reaches an
 * rxe go-back-N race that resets connections; before 6.10, 14 does too,
 * even with the in-flight budget (inflight_max, rs_budget.c), so the
 * floor there is 16 (docs/lossy-links.md, "The floor").
 * ack_timeout_first is what a peer with no round trip measured yet gets
 * (16: enough for a 100 ms path). New connections only.
 */
static int rs_ack_set(const char *val, const struct kernel_param *kp)
{
	return rs_param_set_range(val, kp, RS_RTO_EXP_MIN, RS_RTO_EXP_MAX);
}

static const struct kernel_param_ops rs_ack_ops = {
	.set = rs_ack_set,
	.get = param_get_uint,
};

unsigned int rs_ack_min = RS_ACK_MIN_DEFAULT;
module_param_cb(ack_timeout_min, &rs_ack_ops, &rs_ack_min, 0644);
MODULE_PARM_DESC(ack_timeout_min,
		 "QP ack timeout floor on rxe, 4.096 us << this, "
		 __stringify(RS_RTO_EXP_MIN) ".." __stringify(RS_RTO_EXP_MAX)
		 " (default 14; 16 on kernels before 6.10)");

unsigned int rs_ack_first = 16;
module_param_cb(ack_timeout_first, &rs_ack_ops, &rs_ack_first, 0644);
MODULE_PARM_DESC(ack_timeout_first,
		 "QP ack timeout on rxe, new peer: 4.096 us << this (default 16)");

int rs_default_policy = RDMASTREAM_POLICY_DYNAMIC;
module_param_named(policy, rs_default_policy, int, 0644);
MODULE_PARM_DESC(policy, "transfer policy of new sockets: 0 dynamic (default), 1 direct-only, 2 indirect-only");

unsigned int rs_default_threshold = 32768;
module_param_named(direct_threshold, rs_default_threshold, uint, 0644);
MODULE_PARM_DESC(direct_threshold,
		 "smallest receive buffer advertised for direct transfer (default 32768)");

unsigned int rs_max_send_sge = RS_MAX_SGE;
module_param_named(max_send_sge, rs_max_send_sge, uint, 0644);
MODULE_PARM_DESC(max_send_sge,
		 "gather entries per direct RDMA WRITE, at most the device's (2.."
		 __stringify(RS_MAX_SGE) ", default " __stringify(RS_MAX_SGE)
		 "); lower values emulate small devices in tests");

int rs_inject_post;
module_param_named(inject_post, rs_inject_post, int, 0644);
MODULE_PARM_DESC(inject_post,
		 "testing: fail the next work request chain of kind K (1 ADVERT, 2 zero-copy, 3 inline direct, 4 send ring growth, 5 stream buffer growth) at position P: K*100+P (default 0: off)");

/*
 * Ring memory of all connections, like tcp_mem: bytes of stream and send
 * rings reserved by connections (from the moment a connection is admitted
 * until its socket is freed). A connection that would go beyond mem_max
 * is refused: connect() fails with ENOBUFS, a listener rejects the REQ.
 * Only a ring that replaces a bigger one under pressure passes it for a
 * while (rs_ring_new()).
 */
unsigned long rs_mem_max;
module_param_named(mem_max, rs_mem_max, ulong, 0644);
MODULE_PARM_DESC(mem_max,
		 "ring memory of all connections in bytes (default, or 0 at load: 1/8 of RAM)");

atomic_long_t rs_mem_used = ATOMIC_LONG_INIT(0);

/*
 * The counters below are read-only (0444), but a reload with the current
 * parameters (as selftests/module.c does) passes them too: ignore them.
 * A read-only parameter without a set op would oops parse_args() at load.
 */
int rs_param_ignore(const char *val, const struct kernel_param *kp)
{
	return 0;
}

static int rs_mem_used_get(char *buf, const struct kernel_param *kp)
{
	return sysfs_emit(buf, "%ld\n", atomic_long_read(&rs_mem_used));
}

static const struct kernel_param_ops rs_mem_used_ops = {
	.set = rs_param_ignore,
	.get = rs_mem_used_get,
};
module_param_cb(mem_used, &rs_mem_used_ops, NULL, 0444);
MODULE_PARM_DESC(mem_used, "ring memory in use now, bytes (read-only)");

/*
 * Closed connections still delivering their data, like tcp_max_orphans:
 * beyond max_orphans a socket closed with unsent data is reset instead.
 */
unsigned int rs_max_orphans = 4096;
module_param_named(max_orphans, rs_max_orphans, uint, 0644);
MODULE_PARM_DESC(max_orphans,
		 "closed sockets that may linger to deliver data (default 4096)");

atomic_t rs_orphans = ATOMIC_INIT(0);

static int rs_orphans_get(char *buf, const struct kernel_param *kp)
{
	return sysfs_emit(buf, "%d\n", atomic_read(&rs_orphans));
}

static const struct kernel_param_ops rs_orphans_ops = {
	.set = rs_param_ignore,
	.get = rs_orphans_get,
};
module_param_cb(orphans, &rs_orphans_ops, NULL, 0444);
MODULE_PARM_DESC(orphans, "closed sockets lingering now (read-only)");

struct workqueue_struct *rs_wq;
/*
 * rx_tune_work takes lock_sock(), which a system call may hold for long
 * (a copy stalled on userfaultfd): its own queue, so that such waits
 * never hold up the teardown and fallback work on rs_wq.
 */
struct workqueue_struct *rs_tune_wq;

struct proto rs_proto = {
	.name		= "RDMASTREAM",
	.owner		= THIS_MODULE,
	.obj_size	= sizeof(struct rs_sock),
	.keepalive	= rs_keepalive,
};

static int rs_create(struct net *net, struct socket *sock, int protocol,
		     int kern)
{
	if (sock->type != SOCK_STREAM)
		return -ESOCKTNOSUPPORT;
	if (protocol)
		return -EPROTONOSUPPORT;
	sock->ops = &rs_proto_ops;
	sock->state = SS_UNCONNECTED;
	if (!rs_sock_alloc(net, NULL, sock, kern))
		return -ENOBUFS;
	return 0;
}

static struct net_proto_family rs_family_ops = {
	.create	= rs_create,
	.owner	= THIS_MODULE,
};

static int __init rs_init(void)
{
	int ret;

	if (!rs_mem_max)
		rs_mem_max = (totalram_pages() / 8) << PAGE_SHIFT;
	if (rs_default_policy < RDMASTREAM_POLICY_DYNAMIC ||
	    rs_default_policy > RDMASTREAM_POLICY_INDIRECT_ONLY) {
		pr_err("rdmastream: policy %d is not 0, 1 or 2\n",
		       rs_default_policy);
		return -EINVAL;
	}
	ret = rs_inet_check();
	if (ret)
		return ret;
	if (rs_family <= 0 || rs_family >= NPROTO) {
		pr_err("rdmastream: family %d out of range 1..%d\n",
		       rs_family, NPROTO - 1);
		return -EINVAL;
	}
	rs_family_ops.family = rs_family;
	rs_wq = alloc_workqueue("rdmastream", WQ_PERCPU, 0);
	if (!rs_wq)
		return -ENOMEM;
	rs_tune_wq = alloc_workqueue("rdmastream_tune", WQ_UNBOUND, 0);
	if (!rs_tune_wq) {
		ret = -ENOMEM;
		goto free_wq;
	}
	ret = proto_register(&rs_proto, 1);
	if (ret)
		goto free_tune_wq;
	/* before any socket: the counters are per network namespace */
	ret = rs_stat_register();
	if (ret)
		goto unreg_proto;
	ret = sock_register(&rs_family_ops);
	if (ret == -EEXIST) {
		/*
		 * EBUSY: finit_module()'s EEXIST means "already loaded" to
		 * modprobe, which would then report success (7.x converts it
		 * so itself).
		 */
		pr_err("rdmastream: socket family %d is already taken; load with family=<free number below %d>\n",
		       rs_family, NPROTO);
		ret = -EBUSY;
	}
	if (ret)
		goto unreg_stat;
	ret = rs_diag_register();
	if (ret)
		goto unreg_family;
	ret = rs_pd_init();
	if (ret)
		goto unreg_diag;
	ret = rs_inet_register();
	if (ret)
		goto pd_exit;
	pr_info("rdmastream: socket family %d registered\n", rs_family);
	return 0;
pd_exit:
	rs_pd_exit();
unreg_diag:
	rs_diag_unregister();
unreg_family:
	sock_unregister(rs_family);
unreg_stat:
	rs_stat_unregister();
unreg_proto:
	proto_unregister(&rs_proto);
free_tune_wq:
	destroy_workqueue(rs_tune_wq);
free_wq:
	destroy_workqueue(rs_wq);
	return ret;
}

static void __exit rs_exit(void)
{
	rs_inet_unregister();
	rs_pd_exit();
	rs_diag_unregister();
	sock_unregister(rs_family);
	rs_stat_unregister();
	proto_unregister(&rs_proto);
	destroy_workqueue(rs_tune_wq);
	destroy_workqueue(rs_wq);
}

module_init(rs_init);
module_exit(rs_exit);

MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("AF_RDMASTREAM: reliable byte streams over RDMA");
MODULE_ALIAS_NETPROTO(AF_RDMASTREAM);
MODULE_VERSION(RS_VERSION);
