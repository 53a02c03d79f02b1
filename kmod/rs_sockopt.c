// SPDX-License-Identifier: GPL-2.0
/*
 * Socket options. SOL_SOCKET options (buffer sizes, timeouts, linger,
 * keepalive, SO_ERROR) are handled by the core socket code; here are
 * SOL_RDMASTREAM and the SOL_TCP options that programs written for TCP
 * set routinely.
 */
#include <linux/in6.h>
#include <linux/tcp.h>

#include "rs.h"
#include "../uapi/linux/rdmastream.h"

static int rs_set_rdmastream(struct rs_sock *rs, int optname, int val)
{
	switch (optname) {
	case RDMASTREAM_POLICY:
		if (val < RDMASTREAM_POLICY_DYNAMIC ||
		    val > RDMASTREAM_POLICY_INDIRECT_ONLY)
			return -EINVAL;
		WRITE_ONCE(rs->policy, val);
		return 0;
	case RDMASTREAM_DIRECT_THRESHOLD:
		if (val < 0)
			return -EINVAL;
		WRITE_ONCE(rs->dthresh, val);
		return 0;
	case RDMASTREAM_FALLBACK:
		return rs_fb_setsockopt(rs, val);
	case RDMASTREAM_INFO:
		return -EOPNOTSUPP;	/* read-only */
	default:
		return -ENOPROTOOPT;
	}
}

/* IPV6_V6ONLY of an AF_INET6 socket: settable until it is bound. */
static bool rs_v6only_opt(const struct sock *sk, int level, int optname)
{
	return level == SOL_IPV6 && optname == IPV6_V6ONLY &&
	       sk->sk_family == AF_INET6;
}

static int rs_set_v6only(struct rs_sock *rs, int val)
{
	struct sock *sk = &rs->sk;
	int err = 0;

	lock_sock(sk);
	if (rs->is_bound || sk->sk_state != TCP_CLOSE)
		err = -EINVAL;
	else
		sk->sk_ipv6only = !!val;
	release_sock(sk);
	return err;
}

int rs_setsockopt(struct socket *sock, int level, int optname,
		  sockptr_t optval, unsigned int optlen)
{
	struct rs_sock *rs = rs_sk(sock->sk);
	int val;

	if (rs_v6only_opt(sock->sk, level, optname)) {
		if (optlen < sizeof(int))
			return -EINVAL;
		if (copy_from_sockptr(&val, optval, sizeof(val)))
			return -EFAULT;
		return rs_set_v6only(rs, val);
	}
	if (level == SOL_RDMASTREAM && optname == RDMASTREAM_INFO)
		return -EOPNOTSUPP;
	if (level == SOL_RDMASTREAM && optname != RDMASTREAM_POLICY &&
	    optname != RDMASTREAM_DIRECT_THRESHOLD &&
	    optname != RDMASTREAM_FALLBACK)
		return -ENOPROTOOPT;
	if (level != SOL_RDMASTREAM &&
	    (level != SOL_TCP || optname != TCP_NODELAY))
		return -ENOPROTOOPT;
	if (optlen < sizeof(int))
		return -EINVAL;
	if (copy_from_sockptr(&val, optval, sizeof(val)))
		return -EFAULT;
	if (level == SOL_RDMASTREAM)
		return rs_set_rdmastream(rs, optname, val);
	/* writes are never delayed: record the choice and report it back */
	WRITE_ONCE(rs->nodelay, !!val);
	return 0;
}

static void rs_info_direct(struct rs_sock *rs, struct rdmastream_info *info)
{
	const struct rs_dtx_stats *t = &rs->dtx.st;
	const struct rs_drx_stats *r = &rs->drx.st;

	info->rsi_policy = rs_policy(rs);
	info->rsi_direct_threshold = rs_threshold(rs);
	info->rsi_tx_phase = rs->dtx.phase;
	info->rsi_rx_phase = rs->drx.phase;
	info->rsi_direct_bytes_sent = t->direct_bytes;
	info->rsi_indirect_bytes_sent = t->indirect_bytes;
	info->rsi_direct_bytes_received = r->direct_bytes;
	info->rsi_indirect_bytes_received = r->indirect_bytes;
	info->rsi_adverts_sent = r->adverts;
	info->rsi_adverts_filled = r->used;
	info->rsi_adverts_dead = r->dead;
	info->rsi_adverts_cancelled = r->cancelled;
	info->rsi_adverts_received = t->adverts;
	info->rsi_adverts_used = t->used;
	info->rsi_adverts_stale = t->stale;
	info->rsi_tx_phase_switches = t->switches;
	info->rsi_rx_phase_switches = r->switches;
	info->rsi_zcopy_sends = rs->stats.zcopy_sends;
	info->rsi_local_invalidates = rs->stats.local_invs;
	info->rsi_remote_invalidates = rs->stats.remote_invs;
	info->rsi_errors = rs->stats.errors;
	info->rsi_direct_degrades = t->degrades;
}

void rs_info_fill(struct rs_sock *rs, struct rdmastream_info *info)
{
	struct rs_flow *f = &rs->flow;

	memset(info, 0, sizeof(*info));
	info->rsi_state = inet_sk_state_load(&rs->sk);
	spin_lock_bh(&rs->lock);
	info->rsi_flags = (rs->peer_ready ? RDMASTREAM_INFO_F_PEER_READY : 0) |
			  (f->fin_sent ? RDMASTREAM_INFO_F_FIN_SENT : 0) |
			  (rs->fin_rcvd ? RDMASTREAM_INFO_F_FIN_RCVD : 0) |
			  (rs->sk.sk_err == ECONNRESET ?
			   RDMASTREAM_INFO_F_RESET : 0);
	info->rsi_rx_ring = f->rx_size;
	info->rsi_tx_ring = f->tx_size;
	info->rsi_peer_ring = f->peer_size;
	info->rsi_credits = f->credits;
	info->rsi_max_inline = rs->max_inline;
	/* stream totals: both paths (direct bytes are read on arrival) */
	info->rsi_bytes_sent = rs->dtx.seq;
	info->rsi_bytes_acked = f->peer_cons + rs->dtx.st.direct_bytes;
	info->rsi_bytes_received = rs->drx.in;
	info->rsi_bytes_read = f->rx_cons + rs->drx.st.direct_bytes;
	info->rsi_writes = rs->stats.writes;
	info->rsi_inline_writes = rs->stats.inline_writes;
	info->rsi_ctrl_sent = rs->stats.ctrl_sent;
	info->rsi_ctrl_received = rs->stats.ctrl_received;
	info->rsi_window_stalls = rs->stats.window_stalls;
	info->rsi_credit_stalls = rs->stats.credit_stalls;
	info->rsi_completions = rs->stats.completions;
	info->rsi_probes = rs->stats.probes;
	info->rsi_sq_kicks = rs->stats.kicks;
	info->rsi_spin_hits = READ_ONCE(rs->stats.spin_hits);
	info->rsi_spin_misses = READ_ONCE(rs->stats.spin_misses);
	info->rsi_spin_est_us = READ_ONCE(rs->spin.est_ns) / NSEC_PER_USEC;
	if (rs->ack_exp) {
		info->rsi_ack_timeout_us = rs_rto_exp_us(rs->ack_exp);
		info->rsi_retry_count = rs->qp_retry;
	}
	info->rsi_rtt_us = rs->rtt.valid ? rs->rtt.srtt_us : 0;
	info->rsi_base_rtt_us = rs->base_rtt_us;
	info->rsi_base_rttvar_us = rs->base_rttvar_us;
	info->rsi_path_mtu = rs->path_mtu;
	info->rsi_tx_cap = rs->flow.tx_cap;
	info->rsi_write_cap = rs->flow.write_cap;
	info->rsi_cap_stalls = rs->stats.cap_stalls;
	info->rsi_inv_fences = rs->stats.inv_fences;
	info->rsi_adverts_skipped = RS_LOAD_ONCE(&rs->dlearn.skipped);
	info->rsi_direct_refused = rs->stats.direct_refused;
	rs_info_direct(rs, info);
	spin_unlock_bh(&rs->lock);
	rs_fb_info(rs, info);
}

int rs_getsockopt(struct socket *sock, int level, int optname,
		  char __user *optval, int __user *optlen)
{
	struct rs_sock *rs = rs_sk(sock->sk);
	struct rdmastream_info info;
	int len, val;

	if (get_user(len, optlen))
		return -EFAULT;
	if (len < 0)
		return -EINVAL;
	if (level == SOL_RDMASTREAM && optname == RDMASTREAM_INFO) {
		rs_info_fill(rs, &info);
		len = min_t(int, len, sizeof(info));
		if (put_user(len, optlen) || copy_to_user(optval, &info, len))
			return -EFAULT;
		return 0;
	}
	if (level == SOL_RDMASTREAM && optname == RDMASTREAM_POLICY)
		val = rs_policy(rs);
	else if (level == SOL_RDMASTREAM &&
		 optname == RDMASTREAM_DIRECT_THRESHOLD)
		val = rs_threshold(rs);
	else if (level == SOL_RDMASTREAM && optname == RDMASTREAM_FALLBACK)
		val = READ_ONCE(rs->fb_mode);
	else if (level == SOL_TCP && optname == TCP_NODELAY)
		val = READ_ONCE(rs->nodelay);
	else if (rs_v6only_opt(sock->sk, level, optname))
		val = sock->sk->sk_ipv6only;
	else
		return -ENOPROTOOPT;
	len = min_t(int, len, sizeof(val));
	if (put_user(len, optlen) || copy_to_user(optval, &val, len))
		return -EFAULT;
	return 0;
}
