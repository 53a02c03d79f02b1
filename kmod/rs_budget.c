// SPDX-License-Identifier: GPL-2.0
/*
 * The host's budget of bytes in flight to other hosts on rdma_rxe
 * (docs/lossy-links.md, "The floor"; docs/design.md, "The in-flight
 * budget").
 *
 * A RoCE NIC paces its QPs (DCQCN); rdma_rxe sends whatever is posted, up
 * to 128 packets per QP. Sixteen streams between two hosts then queue
 * hundreds of milliseconds of data in front of the receiver, and the ACKs
 * wait behind it. Before 6.10 rxe's retransmission timer runs from a QP's
 * oldest unacknowledged packet and moves only when an ACK comes, so with
 * an ack timeout of 67 ms every QP went back N for nothing, thousands of
 * times, until rxe's go-back-N race reset a connection; the module had to
 * keep 268 ms there, which cost three quarters of the throughput on a
 * link that loses 1 % of its packets.
 *
 * With inflight_max set, the bytes a connection to another host keeps in
 * flight (indirect WRITEs not yet completed, or one direct transfer) are
 * capped at its share of it: the budget split evenly among the
 * connections that have bytes in flight, never below RS_BUDGET_MIN, so
 * each always moves. One stream alone gets the whole budget. A capped
 * connection resumes when a completion of its own frees room: no
 * connection waits on another. Connections within the host (rxe's
 * loopback) have no link queue and take no share.
 *
 * It is off by default: the floor stays 268 ms before 6.10 anyway (CI
 * reset four streams at 67 ms even with a budget of 256 KiB), and there
 * a budget of 256 KiB halves the round trip beside sixteen streams
 * between two VMs but also costs them 40-50 % of their throughput
 * (docs/performance.md, "The in-flight budget on 6.1").
 */
#include <net/addrconf.h>
#include <net/route.h>

#include "rs.h"

unsigned int rs_inflight_max;
module_param_named(inflight_max, rs_inflight_max, uint, 0644);
MODULE_PARM_DESC(inflight_max,
		 "bytes in flight to other hosts, all rxe connections together; 0 (default): no cap");

/* connections with bytes in flight on budgeted devices */
static atomic_t rs_budget_users = ATOMIC_INIT(0);
/* connections with a transport on budgeted devices, busy or not */
static atomic_t rs_budget_conns_now = ATOMIC_INIT(0);

/* Is addr one of this host's own (rxe then loops the packets back)? */
static bool rs_addr_local(struct net *net, const struct sockaddr *sa)
{
	const struct sockaddr_in6 *a6 = (const struct sockaddr_in6 *)sa;
	const struct sockaddr_in *a4 = (const struct sockaddr_in *)sa;

	if (sa->sa_family == AF_INET)
		return inet_addr_type(net, a4->sin_addr.s_addr) == RTN_LOCAL;
#if IS_ENABLED(CONFIG_IPV6)
	if (sa->sa_family == AF_INET6)
		return ipv6_chk_addr(net, &a6->sin6_addr, NULL, 0);
#endif
	return false;
}

/* Does rs's connection on id take a share? At transport creation. */
bool rs_budget_wanted(struct rs_sock *rs, struct rdma_cm_id *id)
{
	return id->device->ops.driver_id == RDMA_DRIVER_RXE &&
	       !rs_addr_local(sock_net(&rs->sk),
			      (struct sockaddr *)&id->route.addr.dst_addr);
}

/*
 * rs's transport exists (rs_transport_create(), after rs->budgeted) or is
 * gone (rs_transport_destroy()): the count of the host's connections to
 * other hosts over rxe, from which a new connection takes the floor of
 * its ack timeout (rs_ack_choose(), rs_rto_load_floor()). Serialised by
 * the transport's creation and destruction (rs->tlock).
 */
void rs_budget_join(struct rs_sock *rs)
{
	if (rs->budgeted && !rs->budget_joined) {
		rs->budget_joined = true;
		atomic_inc(&rs_budget_conns_now);
	}
}

void rs_budget_leave(struct rs_sock *rs)
{
	if (rs->budget_joined) {
		rs->budget_joined = false;
		atomic_dec(&rs_budget_conns_now);
	}
}

u32 rs_budget_conns(void)
{
	int n = atomic_read(&rs_budget_conns_now);

	return WARN_ON_ONCE(n < 0) ? 0 : n;
}

static int rs_budget_conns_get(char *buf, const struct kernel_param *kp)
{
	return sysfs_emit(buf, "%u\n", rs_budget_conns());
}

static const struct kernel_param_ops rs_budget_conns_ops = {
	.set = rs_param_ignore,	/* given at load: ignored (rs_main.c) */
	.get = rs_budget_conns_get,
};

module_param_cb(remote_conns, &rs_budget_conns_ops, NULL, 0444);
MODULE_PARM_DESC(remote_conns,
		 "connections to other hosts over rxe now, which raise a new one's ack timeout floor (read-only)");

/*
 * Count rs among the users while it has bytes in flight. Under rs->lock,
 * after anything that moves tx_sent, tx_done, budget_direct or transport.
 */
void rs_budget_update_locked(struct rs_sock *rs)
{
	bool busy = rs->budgeted && rs->transport &&
		    (rs->flow.tx_sent != rs->flow.tx_done || rs->budget_direct);

	if (busy == rs->budget_counted)
		return;
	rs->budget_counted = busy;
	if (busy)
		atomic_inc(&rs_budget_users);
	else
		atomic_dec(&rs_budget_users);
}

/* rs's share now, counting rs among the users; 0: no cap. */
u32 rs_budget_cap(const struct rs_sock *rs)
{
	u32 max = READ_ONCE(rs_inflight_max);
	int users;

	if (!rs->budgeted || !max)
		return 0;
	users = atomic_read(&rs_budget_users) + !rs->budget_counted;
	return max_t(u32, max / max(users, 1), RS_BUDGET_MIN);
}

/*
 * A direct transfer starts: it counts as bytes in flight, while a budget
 * is set (else the lock is not worth taking on every zero-copy send).
 * Two may overlap (a sender sleeping on one lets go of the socket lock).
 * Returns whether it counted; rs_budget_direct_end() takes that back.
 */
bool rs_budget_direct_start(struct rs_sock *rs)
{
	/* budgeted is set once, before any send: no lock for it */
	if (!rs->budgeted || !READ_ONCE(rs_inflight_max))
		return false;
	spin_lock_bh(&rs->lock);
	rs->budget_direct++;
	rs_budget_update_locked(rs);
	spin_unlock_bh(&rs->lock);
	return true;
}

void rs_budget_direct_end(struct rs_sock *rs, bool counted)
{
	if (!counted)
		return;
	spin_lock_bh(&rs->lock);
	rs->budget_direct--;
	rs_budget_update_locked(rs);
	spin_unlock_bh(&rs->lock);
}
