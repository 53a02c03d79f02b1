// SPDX-License-Identifier: GPL-2.0
/*
 * The socket face of AF_RDMASTREAM: creation, names, bind, listen, accept,
 * connect, poll and ioctl. Semantics follow TCP's (net/ipv4/af_inet.c).
 */
#include <linux/in.h>
#include <linux/in6.h>
#include <linux/sockios.h>
#include <asm/ioctls.h>
#include <linux/memcontrol.h>
#include <net/ipv6.h>
#include <net/route.h>
#include <net/tcp_states.h>

#include "rs.h"
#include "../uapi/linux/rdmastream.h"

void rs_wake(struct sock *sk, __poll_t mask)
{
	struct socket_wq *wq;

	rcu_read_lock();
	wq = rcu_dereference(sk->sk_wq);
	if (skwq_has_sleeper(wq))
		wake_up_interruptible_poll(&wq->wait, mask);
	if (mask & (EPOLLIN | EPOLLRDHUP | EPOLLERR | EPOLLHUP))
		sk_wake_async(sk, SOCK_WAKE_WAITD, POLL_IN);
	if (mask & EPOLLOUT)
		sk_wake_async(sk, SOCK_WAKE_SPACE, POLL_OUT);
	rcu_read_unlock();
}

/*
 * Writers' wake-up, as TCP's sk_stream_write_space(): only when someone
 * found no room since the last one (a poll that said "not writable", or
 * a sender about to sleep set SOCK_NOSPACE), so that an edge-triggered
 * epoll sees EPOLLOUT once per "full, then room again", not on every
 * credit, SETUP or completion. Called after the state that makes room is
 * published; the value-returning test_and_clear_bit() orders the two.
 */
void rs_write_space(struct sock *sk)
{
	struct socket *sock;
	bool wake;

	rcu_read_lock();
	sock = READ_ONCE(sk->sk_socket);
	wake = sock && test_and_clear_bit(SOCK_NOSPACE, &sock->flags);
	rcu_read_unlock();
	if (wake)
		rs_wake(sk, RS_POLLOUT);
}

/*
 * No room for a writer: ask for rs_write_space()'s wake-up, then the
 * caller checks its condition again (the barrier pairs with the one in
 * test_and_clear_bit(), so either it sees the room or the waker sees the
 * bit).
 */
void rs_nospace(struct sock *sk)
{
	struct socket *sock = sk->sk_socket;

	if (!sock)
		return;
	sk_set_bit(SOCKWQ_ASYNC_NOSPACE, sk);
	set_bit(SOCK_NOSPACE, &sock->flags);
	/* the bit before the caller's look at the room; pairs as above */
	smp_mb__after_atomic();
}

static void rs_state_change(struct sock *sk)
{
	rs_wake(sk, EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLHUP | EPOLLERR |
		EPOLLRDNORM | EPOLLWRNORM);
}

static void rs_destruct(struct sock *sk)
{
	struct rs_sock *rs = rs_sk(sk);

	rs_diag_unlink(rs);
	rs_fb_destruct(rs);
	WARN_ON_ONCE(rs->transport);
	rs_inet_destruct(sk);
	rs_transport_free_rings(rs);
	rs_orphan_done(rs);
	mem_cgroup_put(rs->memcg);
	sock_prot_inuse_add(sock_net(sk), sk->sk_prot, -1);
}

/*
 * Every per-connection field to its initial state. At creation, and when
 * connect() is retried after a failed attempt whose teardown has finished:
 * no transport, no cm id, no handler or timer can touch the socket then.
 */
void rs_conn_reset(struct rs_sock *rs)
{
	WARN_ON_ONCE(rs->transport || !list_empty(&rs->zsends));
	rs_transport_free_rings(rs);
	spin_lock_bh(&rs->lock);
	memset(&rs->conn, 0, sizeof(rs->conn));
	spin_unlock_bh(&rs->lock);
}

/*
 * Everything of ours in a socket that sock_init_data() has initialised:
 * for AF_RDMASTREAM after rs_sock_alloc(), for the IPPROTO route from
 * inet_create() through the proto's init. sock is NULL for a child.
 */
void rs_sock_setup(struct sock *sk, struct socket *sock)
{
	struct rs_sock *rs = rs_sk(sk);

	rs_inet_sock_init(sk);
	sk->sk_destruct = rs_destruct;
	/* live sockets, orphans included: the "sockets" of /proc/net/protocols */
	sock_prot_inuse_add(sock_net(sk), sk->sk_prot, 1);
	sk->sk_state_change = rs_state_change;
	sk->sk_type = SOCK_STREAM;
	spin_lock_init(&rs->lock);
	mutex_init(&rs->tlock);
	/* a child gets its listener's; see rs_transport_rings() */
	if (sock)
		rs->memcg = get_mem_cgroup_from_mm(current->mm);
	init_waitqueue_head(&rs->dwait);
	mutex_init(&rs->mr_lock);
	INIT_LIST_HEAD(&rs->zsends);
	rs_conn_reset(rs);
	rs->policy = READ_ONCE(rs_default_policy);
	if (rs->policy < 0 || rs->policy > RDMASTREAM_POLICY_INDIRECT_ONLY)
		rs->policy = RDMASTREAM_POLICY_DYNAMIC;
	INIT_LIST_HEAD(&rs->accept_q);
	INIT_LIST_HEAD(&rs->accept_node);
	INIT_WORK(&rs->teardown_work, rs_teardown_work);
	timer_setup(&rs->probe_timer, rs_probe_timer, 0);
	INIT_DELAYED_WORK(&rs->orphan_work, rs_orphan_work);
	INIT_WORK(&rs->rx_tune_work, rs_rx_tune_work);
	rs_fb_init(rs);
	rs_diag_link(rs);
}

/*
 * A socket of AF_RDMASTREAM (like NULL) or a child of the listener like,
 * of its family, proto and protocol. In TCP_CLOSE, from sock_init_data().
 */
struct sock *rs_sock_alloc(struct net *net, const struct sock *like,
			   struct socket *sock, int kern)
{
	struct proto *prot = like ? like->sk_prot : &rs_proto;
	struct sock *sk;

	sk = sk_alloc(net, like ? like->sk_family : rs_family, GFP_KERNEL,
		      prot, kern);
	if (!sk)
		return NULL;
	sock_init_data(sock, sk);
	sk->sk_protocol = like ? like->sk_protocol : 0;
#if IS_ENABLED(CONFIG_IPV6)
	if (sk->sk_family == AF_INET6)
		inet_sk(sk)->pinet6 = &container_of(rs_sk(sk), struct rs6_sock,
						    rs)->inet6;
#endif
	rs_sock_setup(sk, sock);
	return sk;
}

static u16 rs_addr_port(const struct sockaddr *addr)
{
	if (addr->sa_family == AF_INET6)
		return ((struct sockaddr_in6 *)addr)->sin6_port;
	return ((struct sockaddr_in *)addr)->sin_port;
}

static void rs_addr_set_port(struct sockaddr *addr, u16 port)
{
	if (addr->sa_family == AF_INET6)
		((struct sockaddr_in6 *)addr)->sin6_port = port;
	else
		((struct sockaddr_in *)addr)->sin_port = port;
}

/* Validate a user sockaddr the way inet does: length, then family. */
static int rs_check_addr(const struct sockaddr *addr, int alen)
{
	if (alen < (int)sizeof(sa_family_t))
		return -EINVAL;
	switch (addr->sa_family) {
	case AF_INET:
		return alen < (int)sizeof(struct sockaddr_in) ? -EINVAL : 0;
	case AF_INET6:
		return alen < SIN6_LEN_RFC2133 ? -EINVAL : 0;
	default:
		return -EAFNOSUPPORT;
	}
}

/*
 * A socket of the IPPROTO route takes the addresses of its family, as
 * inet_bind()/tcp_v4_connect() and inet6_bind()/tcp_v6_connect() do:
 * the length first, then the family (an AF_INET bind also takes AF_UNSPEC
 * with INADDR_ANY, for old programs). AF_RDMASTREAM takes either.
 */
static int rs_check_family(const struct sock *sk, struct sockaddr *addr,
			   int alen, bool bind)
{
	struct sockaddr_in *sin = (struct sockaddr_in *)addr;

	switch (sk->sk_family) {
	case AF_INET:
		if (alen < (int)sizeof(struct sockaddr_in))
			return -EINVAL;
		if (bind && addr->sa_family == AF_UNSPEC &&
		    sin->sin_addr.s_addr == htonl(INADDR_ANY))
			addr->sa_family = AF_INET;
		return addr->sa_family == AF_INET ? 0 : -EAFNOSUPPORT;
	case AF_INET6:
		if (alen < SIN6_LEN_RFC2133)
			return -EINVAL;
		return addr->sa_family == AF_INET6 ? 0 : -EAFNOSUPPORT;
	default:
		return rs_check_addr(addr, alen);
	}
}

/*
 * An IPv4-mapped IPv6 address (::ffff:a.b.c.d) names an IPv4 endpoint, as
 * on a TCP socket of AF_INET6: rdma_cm gets the sockaddr_in, and the
 * socket reports its names mapped again (rs->v4mapped). Returns whether
 * ss was such an address.
 */
static bool rs_unmap_addr(struct sockaddr_storage *ss)
{
	struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)ss;
	struct sockaddr_in sin = { .sin_family = AF_INET };

	if (ss->ss_family != AF_INET6 || !ipv6_addr_v4mapped(&sin6->sin6_addr))
		return false;
	sin.sin_port = sin6->sin6_port;
	sin.sin_addr.s_addr = sin6->sin6_addr.s6_addr32[3];
	memset(ss, 0, sizeof(*ss));
	memcpy(ss, &sin, sizeof(sin));
	return true;
}

/* What getname reports for an IPv4 name of a socket named in v4-mapped. */
void rs_map_addr(struct sockaddr_storage *ss)
{
	struct sockaddr_in sin = *(struct sockaddr_in *)ss;
	struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)ss;

	memset(ss, 0, sizeof(*ss));
	sin6->sin6_family = AF_INET6;
	sin6->sin6_port = sin.sin_port;
	ipv6_addr_set_v4mapped(sin.sin_addr.s_addr, &sin6->sin6_addr);
}

/*
 * Check a user address and copy it into a zeroed ss, only the bytes that
 * were given: a 24-byte sockaddr_in6 (SIN6_LEN_RFC2133, no scope id) is
 * accepted as TCP accepts it, but rdma_cm reads all 28 bytes and the
 * names report them back, so the missing scope id must be 0, not stack.
 * A v4-mapped address is turned into its sockaddr_in (*mapped set).
 */
static int rs_copy_addr(const struct sock *sk, struct sockaddr_storage *ss,
			const struct sockaddr *addr, int alen, bool bind,
			bool *mapped)
{
	size_t len;
	int err;

	if (alen < (int)sizeof(sa_family_t))
		return -EINVAL;
	memset(ss, 0, sizeof(*ss));
	memcpy(ss, addr, min_t(int, alen, sizeof(*ss)));
	err = rs_check_family(sk, (struct sockaddr *)ss, alen, bind);
	if (err)
		return err;
	/* nothing past what the family's sockaddr holds */
	len = ss->ss_family == AF_INET ? sizeof(struct sockaddr_in) :
					 sizeof(struct sockaddr_in6);
	memset((u8 *)ss + len, 0, sizeof(*ss) - len);
	*mapped = rs_unmap_addr(ss);
	if (*mapped && sk->sk_ipv6only)
		return bind ? -EINVAL : -ENETUNREACH;
	return 0;
}

/* The socket's cm id, created on first use; SO_REUSEADDR applies to it. */
static int rs_get_id(struct rs_sock *rs)
{
	int err;

	if (!rs->cm_id) {
		err = rs_cm_create_id(rs);
		if (err)
			return err;
	}
	/* fail harmlessly once the id is bound, as the options then must */
	if (rs->sk.sk_reuse)
		rdma_set_reuseaddr(rs->cm_id, 1);
	return 0;
}

/*
 * IPV6_V6ONLY of an AF_INET6 socket, for an IPv6 address only: an IPv4
 * one (unmapped from ::ffff:a.b.c.d) keeps rdma_cm's default for IPv4.
 * Before the bind; fails harmlessly after it.
 */
static void rs_set_afonly(struct rs_sock *rs, const struct sockaddr *addr)
{
	if (rs->sk.sk_family == AF_INET6 && addr->sa_family == AF_INET6)
		rdma_set_afonly(rs->cm_id, rs->sk.sk_ipv6only);
}

/*
 * listen() on an unbound socket listens on [::] (AF_INET6) or 0.0.0.0,
 * as TCP's (and as rdma_listen() would bind): bound first, so that the
 * TCP listener of the fallback gets the same port.
 */
static int rs_autobind(struct rs_sock *rs)
{
	struct sockaddr_in6 any6 = { .sin6_family = AF_INET6 };
	struct sockaddr_in any = { .sin_family = AF_INET };
	struct sockaddr *addr = (struct sockaddr *)&any;

	if (rs->is_bound)
		return 0;
	if (rs->sk.sk_family == AF_INET6)
		addr = (struct sockaddr *)&any6;
	rs_set_afonly(rs, addr);
	return rdma_bind_addr(rs->cm_id, addr);
}

static bool rs_any_addr(const struct sockaddr *addr)
{
	if (addr->sa_family == AF_INET6)
		return ipv6_addr_any(&((struct sockaddr_in6 *)addr)->sin6_addr);
	return ((struct sockaddr_in *)addr)->sin_addr.s_addr == INADDR_ANY;
}

/* The cm id's source address, if it still has an id (else left as is). */
static void rs_id_name(struct rs_sock *rs, struct sockaddr_storage *ss)
{
	/* rs->lock: device removal may take the id meanwhile */
	spin_lock_bh(&rs->lock);
	if (rs->cm_id)
		memcpy(ss, &rs->cm_id->route.addr.src_addr, sizeof(*ss));
	spin_unlock_bh(&rs->lock);
}

/*
 * connect() to a multicast or broadcast address: ENETUNREACH at once, as
 * TCP (tcp_v4_connect() after its route lookup, tcp_v6_connect()). rdma_cm
 * would resolve it and ib_cm send its REQ there, to every host on the
 * link: a listener on any of them could answer.
 */
static bool rs_dst_unicast(struct sock *sk, const struct sockaddr *addr)
{
	struct flowi4 fl4 = { .flowi4_oif = READ_ONCE(sk->sk_bound_dev_if) };
	struct rtable *rt;
	bool bcast;

	if (addr->sa_family == AF_INET6)
		return !ipv6_addr_is_multicast(&((struct sockaddr_in6 *)addr)->sin6_addr);
	fl4.daddr = ((struct sockaddr_in *)addr)->sin_addr.s_addr;
	if (ipv4_is_multicast(fl4.daddr) || ipv4_is_lbcast(fl4.daddr))
		return false;
	/* a subnet's broadcast address: only the route knows */
	rt = ip_route_output_key(sock_net(sk), &fl4);
	if (IS_ERR(rt))
		return true;	/* resolution reports it */
	bcast = rt->rt_flags & (RTCF_BROADCAST | RTCF_MULTICAST);
	ip_rt_put(rt);
	return !bcast;
}

/*
 * A socket bound to an address of one family that connects to the other,
 * as TCP: from a native IPv6 address to an IPv4 (v4-mapped) one,
 * ENETUNREACH; from an IPv4 (or v4-mapped) one to a native IPv6 one,
 * EAFNOSUPPORT. rdma_cm said EINVAL for both. (A wildcard bind of [::]
 * connects to either: rs_cm_rebind_v4().)
 */
static int rs_dst_family(struct rs_sock *rs, const struct sockaddr *addr)
{
	struct sockaddr_storage ss = { };
	struct sockaddr *src = (struct sockaddr *)&ss;

	if (!rs->is_bound)
		return 0;
	rs_id_name(rs, &ss);
	if (!ss.ss_family || src->sa_family == addr->sa_family ||
	    rs_any_addr(src))
		return 0;
	return src->sa_family == AF_INET6 ? -ENETUNREACH : -EAFNOSUPPORT;
}

/*
 * rdma_cm says EADDRNOTAVAIL both for an address that is not local and for
 * a port taken by a wildcard bind; TCP says EADDRINUSE for the latter. Tell
 * them apart by binding the same address with any port on a scratch id.
 */
static int rs_scratch_handler(struct rdma_cm_id *id, struct rdma_cm_event *ev)
{
	return 0;
}

static int rs_bind_errno(struct net *net, struct sockaddr *addr, int err)
{
	struct sockaddr_storage ss;
	struct rdma_cm_id *id;
	int ret;

	if (err == -ENODEV)
		return -EADDRNOTAVAIL;
	if (err != -EADDRNOTAVAIL || !rs_addr_port(addr))
		return err;
	if (rs_any_addr(addr))
		return -EADDRINUSE;
	id = rdma_create_id(net, rs_scratch_handler, NULL, RDMA_PS_TCP,
			    IB_QPT_RC);
	if (IS_ERR(id))
		return err;
	memcpy(&ss, addr, addr->sa_family == AF_INET6 ?
	       sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in));
	rs_addr_set_port((struct sockaddr *)&ss, 0);
	ret = rdma_bind_addr(id, (struct sockaddr *)&ss);
	rdma_destroy_id(id);
	return ret ? err : -EADDRINUSE;
}

/*
 * One try at binding: the cm id, then the TCP port of the fallback. When
 * TCP has the port, the id is taken from the socket (*id, destroyed by
 * the caller outside lock_sock()) and the socket stays unbound.
 */
static int rs_bind_try(struct rs_sock *rs, struct sockaddr *addr,
		       bool mapped, struct rdma_cm_id **id)
{
	struct sock *sk = &rs->sk;
	int err = -EINVAL;

	lock_sock(sk);
	if (rs->is_bound || sk->sk_state != TCP_CLOSE || rs->transport ||
	    rs->torn || rs_fbc(rs))
		goto out;
	mutex_lock(&rs->tlock);
	err = rs_get_id(rs);
	if (!err) {
		rs_set_afonly(rs, addr);
		err = rdma_bind_addr(rs->cm_id, addr);
	}
	if (!err) {
		err = rs_fb_bind(rs, addr);
		if (err) {
			spin_lock_bh(&rs->lock);
			*id = rs->cm_id;
			rs->cm_id = NULL;
			spin_unlock_bh(&rs->lock);
		}
	}
	mutex_unlock(&rs->tlock);
	if (!err) {
		rs->is_bound = true;
		rs->v4mapped = mapped;
	}
out:
	release_sock(sk);
	return err;
}

/* Ephemeral ports rdma_cm picks that TCP has: tries before EADDRINUSE. */
#define RS_BIND_TRIES	8

static int rs_bind(struct socket *sock, struct rs_sockaddr_arg *uaddr,
		   int alen)
{
	struct sock *sk = sock->sk;
	struct rs_sock *rs = rs_sk(sk);
	struct sockaddr_storage ss;
	struct sockaddr *addr = (struct sockaddr *)&ss;
	struct rdma_cm_id *id;
	int err, tries = 0;
	bool mapped;

	err = rs_copy_addr(sk, &ss, (struct sockaddr *)uaddr, alen, true,
			   &mapped);
	if (err)
		return err;
	do {
		id = NULL;
		err = rs_bind_try(rs, addr, mapped, &id);
		if (!id)
			break;
		/* TCP has the port: EADDRINUSE, or another ephemeral one */
		rs_cm_put_id(rs, id);
	} while (!rs_addr_port(addr) && ++tries < RS_BIND_TRIES);
	if (id)
		return err;
	/* outside lock_sock(): the probe destroys a cm id */
	if (err && err != -EINVAL)
		err = rs_bind_errno(sock_net(sk), addr, err);
	return err;
}

/*
 * One try at listening. When the socket had no address, rdma_cm picks an
 * ephemeral port that TCP (the fallback's listener) may have: the id is
 * then taken from the socket (*id, destroyed by the caller outside
 * lock_sock()) and the socket stays unbound, for another try.
 */
static int rs_listen_try(struct socket *sock, int backlog,
			 struct rdma_cm_id **id)
{
	struct sock *sk = sock->sk;
	struct rs_sock *rs = rs_sk(sk);
	int err = -EINVAL;
	bool autobind;

	lock_sock(sk);
	if (sock->state != SS_UNCONNECTED || sock->type != SOCK_STREAM)
		goto out;
	if (sk->sk_state == TCP_LISTEN) {
		WRITE_ONCE(sk->sk_max_ack_backlog, backlog);
		err = 0;
		if (rs->fb)
			kernel_listen(rs->fb, backlog);
		goto out;
	}
	/*
	 * rs->listener with TCP_CLOSE: a shutdown(SHUT_RD) of this listener
	 * is between dropping its id and freeing its unaccepted children,
	 * with the socket unlocked. Listening again there would queue
	 * children that it then abandons (it clears rs->listener, so close()
	 * never frees them): found by fuzz_sys, fuzz_sys.listen_vs_shutdown.
	 */
	if (sk->sk_state != TCP_CLOSE || rs->transport || rs->torn ||
	    rs->listener || rs_fbc(rs))
		goto out;
	rs_ring_sizes_set(rs);
	WRITE_ONCE(sk->sk_max_ack_backlog, backlog);
	/* tlock: device removal may take the id from us */
	mutex_lock(&rs->tlock);
	autobind = !rs->is_bound;
	err = rs_get_id(rs);
	if (!err)
		err = rs_autobind(rs);
	if (!err)
		err = rs_fb_reserve(rs);
	if (err == -EADDRINUSE && autobind) {
		spin_lock_bh(&rs->lock);
		*id = rs->cm_id;
		rs->cm_id = NULL;
		spin_unlock_bh(&rs->lock);
		goto unlock;
	}
	/*
	 * TCP first: it can fail (another SO_REUSEADDR socket listening on
	 * the port), and stopping it again is simple; rdma_listen() cannot
	 * be undone on its cm id.
	 */
	if (!err)
		err = rs_fb_listen(rs, backlog);
	/* forced TCP: no RDMA listener, RDMA clients fall back too */
	if (!err && READ_ONCE(rs->fb_mode) != RDMASTREAM_FALLBACK_FORCE) {
		err = rdma_listen(rs->cm_id, backlog);
		if (err)
			rs_fb_stop_listen(rs);
	}
	if (!err) {
		rs->listener = true;
		rs->is_bound = true;
		rs_set_state(sk, TCP_LISTEN);
	}
unlock:
	mutex_unlock(&rs->tlock);
out:
	release_sock(sk);
	return err;
}

static int rs_listen(struct socket *sock, int backlog)
{
	struct rdma_cm_id *id;
	int err, tries = 0;

	do {
		id = NULL;
		err = rs_listen_try(sock, backlog, &id);
		if (!id)
			break;
		/* TCP has the port rdma_cm picked: another one */
		rs_cm_put_id(rs_sk(sock->sk), id);
	} while (++tries < RS_BIND_TRIES);
	return err;
}

static struct rs_sock *rs_accept_dequeue(struct rs_sock *lrs)
{
	struct rs_sock *rs = NULL;

	spin_lock_bh(&lrs->lock);
	if (!list_empty(&lrs->accept_q)) {
		rs = list_first_entry(&lrs->accept_q, struct rs_sock,
				      accept_node);
		list_del_init(&rs->accept_node);
		sk_acceptq_removed(&lrs->sk);
	}
	spin_unlock_bh(&lrs->lock);
	return rs;
}

static bool rs_accept_ready(struct rs_sock *lrs)
{
	return !list_empty(&lrs->accept_q) || READ_ONCE(lrs->sk.sk_err) ||
	       READ_ONCE(lrs->sk.sk_state) != TCP_LISTEN;
}

static int rs_accept(struct socket *sock, struct socket *newsock,
		     RS_ACCEPT_ARGS)
{
	struct sock *sk = sock->sk;
	struct rs_sock *lrs = rs_sk(sk), *rs;
	DEFINE_WAIT_FUNC(wait, woken_wake_function);
	long timeo;
	int err = 0;

	lock_sock(sk);
	timeo = sock_rcvtimeo(sk, rs_accept_flags() & O_NONBLOCK);
	while (!(rs = rs_accept_dequeue(lrs))) {
		/* a TCP client (fallback) when no RDMA one is queued */
		err = rs_fb_accept(lrs, newsock);
		if (err != -EAGAIN)
			break;
		err = 0;
		if (sk->sk_err) {
			err = sock_error(sk);
			break;
		}
		if (sk->sk_state != TCP_LISTEN) {
			err = -EINVAL;
			break;
		}
		err = rs_may_wait(timeo);
		if (err)
			break;
		add_wait_queue(sk_sleep(sk), &wait);
		sk_wait_event(sk, &timeo, rs_accept_ready(lrs) ||
			      rs_fb_accept_ready(lrs), &wait);
		remove_wait_queue(sk_sleep(sk), &wait);
	}
	if (rs) {
		lock_sock_nested(&rs->sk, SINGLE_DEPTH_NESTING);
		sock_graft(&rs->sk, newsock);
		newsock->state = SS_CONNECTED;
		release_sock(&rs->sk);
	}
	release_sock(sk);
	return err;
}

/*
 * Before an active open, over RDMA or TCP: a socket whose earlier attempt
 * failed may try again once that attempt's teardown has finished, as TCP
 * allows.
 */
static int rs_connect_settle(struct rs_sock *rs)
{
	struct sock *sk = &rs->sk;

	if (rs->listener)
		return -EISCONN;
	if (rs->torn) {
		/*
		 * An earlier attempt failed: let its teardown finish, and
		 * the threads still leaving its direct transfers (they own
		 * ADVERT slots and pinned pages until they do).
		 */
		release_sock(sk);
		flush_work(&rs->teardown_work);
		wait_event_killable_timeout(rs->dwait, !READ_ONCE(rs->dactive),
					    RS_DRAIN_TIMEOUT);
		lock_sock(sk);
		if (rs->dactive || rs->transport || rs->cm_id ||
		    sk->sk_state != TCP_CLOSE)
			return -EALREADY;
		rs_conn_reset(rs);
		WRITE_ONCE(sk->sk_shutdown, 0);
	}
	return 0;
}

/*
 * Start an active open over RDMA. The cm id an IPv4 destination made the
 * socket give up (rs_cm_rebind_v4()) is left in *stale, for the caller to
 * destroy outside lock_sock().
 */
static int rs_connect_start(struct rs_sock *rs, struct sockaddr *addr,
			    struct rdma_cm_id **stale)
{
	struct sock *sk = &rs->sk;
	int err;

	rs_fb_precreate(rs, addr);
	/* tlock: device removal may take the id from us */
	mutex_lock(&rs->tlock);
	if (!rs->cm_id) {
		err = rs_cm_create_id(rs);
		if (err)
			goto out;
	}
	if (rs->is_bound) {
		err = rs_cm_rebind_v4(rs, addr, stale);
		if (err)
			goto out;
	}
	rs_ring_sizes_set(rs);
	sk->sk_err = 0;
	rs_set_state(sk, TCP_SYN_SENT);
	rs_fb_set_dst(rs, addr);
	err = rdma_resolve_addr(rs->cm_id, NULL, addr, RS_RESOLVE_MS);
	if (!err) {
		rs_stat_inc(sk, RS_EV_ACTIVE_OPENS);
		rs_fb_arm(rs);
	}
	if (err) {
		rs_set_state(sk, TCP_CLOSE);
		if (err == -ENODEV)
			err = -ENETUNREACH;
	}
out:
	mutex_unlock(&rs->tlock);
	return err;
}

/*
 * This host by a loopback or unspecified address: with fallback allowed
 * it goes to TCP at once, as a local service is reached over TCP: rxe
 * cannot serve it, and the CM's wait would cost every such connect().
 * With fallback forbidden RDMA tries: a device that serves loopback
 * (an HCA, siw on lo) connects; rxe's route is refused
 * (rs_route_sendable(): EHOSTUNREACH).
 */
static bool rs_dst_local_only(const struct sockaddr *addr)
{
	const struct in6_addr *a6;
	__be32 a4;

	if (addr->sa_family == AF_INET6) {
		a6 = &((const struct sockaddr_in6 *)addr)->sin6_addr;
		return ipv6_addr_loopback(a6) || ipv6_addr_any(a6);
	}
	a4 = ((const struct sockaddr_in *)addr)->sin_addr.s_addr;
	return ipv4_is_loopback(a4) || a4 == htonl(INADDR_ANY);
}

/*
 * Choose the path of an active open: TCP (1, forced, or no RDMA device
 * for the destination) or RDMA (0, started), or a negative errno.
 */
static int rs_connect_begin(struct rs_sock *rs, struct sockaddr *addr,
			    struct rdma_cm_id **stale)
{
	int err;

	err = rs_connect_settle(rs);
	if (err)
		return err;
	if (rs_dst_local_only(addr) &&
	    READ_ONCE(rs->fb_mode) == RDMASTREAM_FALLBACK_AUTO)
		return rs_fb_connect_start(rs, addr, -ENODEV);
	err = rs_fb_connect_start(rs, addr, 0);
	if (err)
		return err;
	err = rs_connect_start(rs, addr, stale);
	if (err)
		err = rs_fb_connect_start(rs, addr, err) ? : err;
	return err;
}

/* Leave connect(): the id a rebind gave up goes outside lock_sock(). */
static void rs_connect_unlock(struct rs_sock *rs, struct rdma_cm_id *stale)
{
	release_sock(&rs->sk);
	if (stale)
		rs_cm_put_id(rs, stale);
}

static int rs_connect(struct socket *sock, struct rs_sockaddr_arg *uaddr,
		      int alen, int flags)
{
	struct sock *sk = sock->sk;
	struct rs_sock *rs = rs_sk(sk);
	struct sockaddr_storage ss;
	struct sockaddr *addr = (struct sockaddr *)&ss;
	struct rdma_cm_id *stale = NULL;
	struct socket *fb;
	bool mapped;
	long timeo;
	int err;

	err = rs_copy_addr(sk, &ss, (struct sockaddr *)uaddr, alen, false,
			   &mapped);
	if (err)
		return err;
	lock_sock(sk);
	fb = rs_fb_retry(rs);
	if (fb) {
		/* over TCP (another connect() may have fallen back meanwhile) */
		release_sock(sk);
		return rs_fb_connect(rs, fb, addr, flags, false);
	}
	switch (sock->state) {
	case SS_CONNECTED:
		err = -EISCONN;
		goto out;
	case SS_CONNECTING:
		err = -EALREADY;
		break;
	default:
		err = -EISCONN;
		if (sk->sk_state != TCP_CLOSE)
			goto out;
		err = -ENETUNREACH;
		if (!rs_dst_unicast(sk, addr))
			goto out;
		err = rs_dst_family(rs, addr);
		if (err)
			goto out;
		err = rs_connect_begin(rs, addr, &stale);
		if (err == 1) {
			/* over TCP from the start: TCP's connect() */
			rs->v4mapped |= mapped;
			fb = rs_fb_connect_get(rs);
			rs_connect_unlock(rs, stale);
			return rs_fb_connect(rs, fb, addr, flags, true);
		}
		if (err)
			goto out;
		rs->v4mapped |= mapped;
		sock->state = SS_CONNECTING;
		err = -EINPROGRESS;
		break;
	}
	timeo = sock_sndtimeo(sk, flags & O_NONBLOCK);
	if (sk->sk_state == TCP_SYN_SENT) {
		if (!timeo)
			goto out;
		if (rs_wait_connect(rs, &timeo)) {
			if (signal_pending(current))
				err = sock_intr_errno(timeo);
			goto out;
		}
	}
	fb = rs_fb_connect_get(rs);
	if (fb) {
		/* fell back while we waited: TCP's connect() finishes it */
		rs_connect_unlock(rs, stale);
		return rs_fb_connect(rs, fb, NULL, flags, true);
	}
	if (!rs_state_open(sk->sk_state)) {
		err = sock_error(sk) ? : -ECONNABORTED;
		sock->state = SS_UNCONNECTED;
		goto out;
	}
	sock->state = SS_CONNECTED;
	err = 0;
out:
	rs_connect_unlock(rs, stale);
	return err;
}

static int rs_getname(struct socket *sock, struct sockaddr *addr, int peer)
{
	struct sock *sk = sock->sk;
	struct rs_sock *rs = rs_sk(sk);
	struct sockaddr_storage ss = { };
	struct socket *fb = rs_fbc(rs);
	int len;

	if (fb) {
		len = fb->ops->getname(fb, (struct sockaddr *)&ss, peer);
		if (len < 0)
			return len;
		goto out;
	}
	lock_sock(sk);
	if (peer) {
		if (!rs->established || sk->sk_state == TCP_CLOSE) {
			release_sock(sk);
			return -ENOTCONN;
		}
		ss = rs->peer_sa;
	} else if (rs->established) {
		ss = rs->local_sa;
	} else {
		rs_id_name(rs, &ss);
	}
	if (!ss.ss_family)
		ss.ss_family = sk->sk_family == AF_INET6 ? AF_INET6 : AF_INET;
	/* an AF_INET6 socket names IPv4 endpoints v4-mapped, as TCP's */
	release_sock(sk);
out:
	if ((rs->v4mapped || sk->sk_family == AF_INET6) &&
	    ss.ss_family == AF_INET)
		rs_map_addr(&ss);
	if (ss.ss_family == AF_INET6) {
		memcpy(addr, &ss, sizeof(struct sockaddr_in6));
		return sizeof(struct sockaddr_in6);
	}
	memcpy(addr, &ss, sizeof(struct sockaddr_in));
	return sizeof(struct sockaddr_in);
}

/* Room to write; if none, rs_write_space() wakes us when there is. */
static bool rs_poll_writeable(struct rs_sock *rs)
{
	if (rs->flow.tx_size && rs_tx_poll_writeable(rs))
		return true;
	rs_nospace(&rs->sk);
	/* room that came before the bit was set has no wake-up to give */
	return rs->flow.tx_size && rs_tx_poll_writeable(rs);
}

/*
 * An abort sets the error, the shutdown bits and the state together under
 * rs->lock; take them together too, so that a poll racing the abort never
 * reports the error without the hang-up that comes with it.
 */
static __poll_t rs_poll_conn(struct rs_sock *rs)
{
	struct sock *sk = &rs->sk;
	__poll_t mask = 0;
	u8 shutdown;
	int state;
	int err;

	spin_lock_bh(&rs->lock);
	shutdown = sk->sk_shutdown;
	state = sk->sk_state;
	err = sk->sk_err;
	spin_unlock_bh(&rs->lock);
	if (err)
		mask |= EPOLLERR;

	if (state == TCP_SYN_SENT || state == TCP_SYN_RECV)
		return mask;
	if (shutdown == SHUTDOWN_MASK || state == TCP_CLOSE)
		mask |= EPOLLHUP;
	if (shutdown & RCV_SHUTDOWN)
		mask |= EPOLLIN | EPOLLRDNORM | EPOLLRDHUP;
	if (rs->flow.rx_size && rs_rx_avail(rs))
		mask |= EPOLLIN | EPOLLRDNORM;
	if (shutdown & SEND_SHUTDOWN || state == TCP_CLOSE)
		mask |= EPOLLOUT | EPOLLWRNORM;
	else if (rs_poll_writeable(rs))
		mask |= EPOLLOUT | EPOLLWRNORM;
	return mask;
}

static __poll_t rs_poll(struct file *file, struct socket *sock,
			poll_table *wait)
{
	struct sock *sk = sock->sk;
	struct rs_sock *rs = rs_sk(sk);
	struct socket *fb;
	__poll_t mask;
	int state;

	sock_poll_wait(file, sock, wait);
	fb = rs_fbc(rs);
	if (fb)			/* its callbacks wake our wait queue */
		return rs_fb_poll(file, rs, fb);
	state = inet_sk_state_load(sk);
	if (state != TCP_LISTEN && (rs->flow.rx_size || state != TCP_CLOSE))
		return rs_poll_conn(rs);
	if (state == TCP_LISTEN)
		mask = (list_empty(&rs->accept_q) ? 0 : EPOLLIN | EPOLLRDNORM) |
		       rs_fb_listen_poll(rs);
	else
		mask = EPOLLOUT | EPOLLHUP;	/* as TCP: never connected */
	if (READ_ONCE(sk->sk_err))
		mask |= EPOLLERR;
	return mask;
}

static int rs_ioctl(struct socket *sock, unsigned int cmd, unsigned long arg)
{
	struct sock *sk = sock->sk;
	struct rs_sock *rs = rs_sk(sk);
	struct socket *fb = rs_fbc(rs);
	int answ;

	if (fb)
		return rs_fbopt_ioctl_ok(cmd) ?
		       fb->ops->ioctl(fb, cmd, arg) : -ENOIOCTLCMD;
	switch (cmd) {
	case SIOCINQ:
		if (sk->sk_state == TCP_LISTEN)
			return -EINVAL;
		answ = rs->flow.rx_size ? rs_rx_avail(rs) : 0;
		break;
	case SIOCOUTQ:
	case SIOCOUTQNSD:
		if (sk->sk_state == TCP_LISTEN)
			return -EINVAL;
		spin_lock_bh(&rs->lock);
		/* unacknowledged: not yet placed in the peer's buffer */
		answ = rs->flow.tx_head - (cmd == SIOCOUTQ ?
					   rs->flow.tx_done :
					   rs->flow.tx_sent);
		spin_unlock_bh(&rs->lock);
		break;
	default:
		return -ENOIOCTLCMD;
	}
	return put_user(answ, (int __user *)arg);
}

/*
 * One set of operations, three families: AF_RDMASTREAM (.family is
 * informational there: the family= parameter only changes the table) and
 * the IPPROTO route's AF_INET and AF_INET6 (rs_inet.c).
 */
#define RS_PROTO_OPS(fam) {			\
	.family		= fam,			\
	.owner		= THIS_MODULE,		\
	.release	= rs_release,		\
	.bind		= rs_bind,		\
	.connect	= rs_connect,		\
	.socketpair	= sock_no_socketpair,	\
	.accept		= rs_accept,		\
	.getname	= rs_getname,		\
	.poll		= rs_poll,		\
	.ioctl		= rs_ioctl,		\
	.listen		= rs_listen,		\
	.shutdown	= rs_fb_shutdown,	\
	.setsockopt	= rs_fb_set,		\
	.getsockopt	= rs_fb_get,		\
	.sendmsg	= rs_fb_sendmsg,	\
	.recvmsg	= rs_fb_recvmsg,	\
	.mmap		= sock_no_mmap,		\
	RS_OPS_SENDPAGE				\
}

const struct proto_ops rs_proto_ops = RS_PROTO_OPS(AF_RDMASTREAM);
const struct proto_ops rs_inet_ops = RS_PROTO_OPS(PF_INET);
const struct proto_ops rs_inet6_ops = RS_PROTO_OPS(PF_INET6);
