// SPDX-License-Identifier: GPL-2.0
/*
 * Transparent TCP fallback (docs/fallback.md), in the manner of net/smc:
 * a socket that cannot use RDMA runs over a TCP socket of its network
 * namespace, made in the caller's context as the caller's own
 * (rs_fb_create()), to the same address and port. Once it has fallen back (rs->fbc published), the socket's
 * operations are forwarded to the TCP socket, and the TCP socket's
 * callbacks wake our socket's waiters (poll and epoll wait on ours). A
 * listener also listens on TCP, on the same address and port, and
 * accept() returns either kind.
 *
 * Who decides: connect() itself when the mode is FORCE or rdma_cm fails
 * at once; otherwise the CM handler (or the fallback_ms timer) only marks
 * the attempt as abandoned (rs->fb_pending) and schedules the teardown,
 * whose work destroys the cm id and then starts the TCP connect, without
 * blocking (rs_fb_after_teardown()). Nothing here waits on a user.
 *
 * Locking: rs->fb is installed and released under lock_sock() and tlock
 * and lives until rs_release(); rs->fbc is published (smp_store_release)
 * once TCP's handshake has started, cleared again only by rs_fb_retry()
 * under lock_sock() when no forwarded connect() runs, and read
 * locklessly, once per call (rs_fbc()): a call that loaded it uses a
 * socket that lives until rs_release(), when no system call can run;
 * sock_diag reads its sock, held until our destruct (rs_fb_sk()). The
 * TCP socket's callbacks find us through sk_user_data under its
 * sk_callback_lock, and are restored before the TCP socket is released.
 */
#include <linux/module.h>
#include <linux/net.h>
#include <linux/tcp.h>
#include <linux/security.h>
#include <net/inet_connection_sock.h>
#include <net/sock.h>
#include <net/tcp_states.h>
#include <rdma/ib_cm.h>

#include "rs.h"
#include "../uapi/linux/rdmastream.h"

static int rs_fallback_set(const char *val, const struct kernel_param *kp)
{
	int mode, ret;

	ret = kstrtoint(val, 0, &mode);
	if (ret)
		return ret;
	if (mode < RDMASTREAM_FALLBACK_NEVER ||
	    mode > RDMASTREAM_FALLBACK_FORCE)
		return -EINVAL;
	WRITE_ONCE(*(int *)kp->arg, mode);
	return 0;
}

static const struct kernel_param_ops rs_fallback_ops = {
	.set = rs_fallback_set,
	.get = param_get_int,
};

int rs_fallback_default = RDMASTREAM_FALLBACK_AUTO;
module_param_cb(fallback, &rs_fallback_ops, &rs_fallback_default, 0644);
MODULE_PARM_DESC(fallback,
		 "TCP fallback of new sockets: 0 never, 1 when RDMA cannot be used (default), 2 always TCP");

unsigned int rs_fallback_ms = 1000;
module_param_named(fallback_ms, rs_fallback_ms, uint, 0644);
MODULE_PARM_DESC(fallback_ms,
		 "give up a silent CM handshake and fall back after this many ms (default 1000; 0: rdma_cm's own timeout)");

static void rs_fb_timeout(struct work_struct *work);

void rs_fb_init(struct rs_sock *rs)
{
	rs->fb_mode = READ_ONCE(rs_fallback_default);
	INIT_DELAYED_WORK(&rs->fb_work, rs_fb_timeout);
}

/* The socket a callback of a TCP socket belongs to; NULL once unhooked. */
static struct rs_sock *rs_fb_owner(struct sock *tsk)
{
	return __rcu_dereference_sk_user_data_with_flags(tsk,
							 SK_USER_DATA_NOCOPY);
}

/*
 * The callbacks: the TCP socket's own, then a wake-up of our waiters. A
 * TCP child not yet accepted inherits the listener's data_ready with no
 * owner (NOCOPY): nobody waits on it yet.
 */
static void rs_fb_data_ready(struct sock *tsk)
{
	struct rs_sock *rs;

	rcu_read_lock();
	read_lock_bh(&tsk->sk_callback_lock);
	rs = rs_fb_owner(tsk);
	if (rs) {
		rs->fb_data_ready(tsk);
		rs_wake(&rs->sk, EPOLLIN | EPOLLRDNORM);
	}
	read_unlock_bh(&tsk->sk_callback_lock);
	rcu_read_unlock();
}

/*
 * Only when TCP's own would wake a writer (it clears SOCK_NOSPACE, which
 * its poll or sendmsg set): no EPOLLOUT edge that TCP would not give.
 * That writer found no room on our socket, so O_ASYNC owes it a POLL_OUT
 * signal too: TCP set its own wait queue's async bit, ours is set here.
 */
static void rs_fb_write_space(struct sock *tsk)
{
	struct socket *sock = tsk->sk_socket;
	struct rs_sock *rs;
	bool nospace;

	rcu_read_lock();
	read_lock_bh(&tsk->sk_callback_lock);
	rs = rs_fb_owner(tsk);
	if (rs) {
		nospace = sock && test_bit(SOCK_NOSPACE, &sock->flags);
		rs->fb_write_space(tsk);
		if (nospace && !test_bit(SOCK_NOSPACE, &sock->flags)) {
			sk_set_bit(SOCKWQ_ASYNC_NOSPACE, &rs->sk);
			rs_wake(&rs->sk, EPOLLOUT | EPOLLWRNORM);
		}
	}
	read_unlock_bh(&tsk->sk_callback_lock);
	rcu_read_unlock();
}

/*
 * Our sk_state mirrors the TCP socket's: diag, /proc counters, poll. A
 * TCP handshake that fails is a failed attempt (AttemptFails).
 */
static void rs_fb_state_change(struct sock *tsk)
{
	struct rs_sock *rs;
	int state;

	rcu_read_lock();
	read_lock_bh(&tsk->sk_callback_lock);
	rs = rs_fb_owner(tsk);
	if (rs) {
		rs->fb_state_change(tsk);
		state = inet_sk_state_load(tsk);
		if (state == TCP_ESTABLISHED)
			WRITE_ONCE(rs->established, true);
		else if (state == TCP_CLOSE && !READ_ONCE(rs->established))
			rs_stat_inc(&rs->sk, RS_EV_ATTEMPT_FAILS);
		/* before it is published, rs_fb_start() mirrors it */
		if (rs_fbc(rs) == tsk->sk_socket)
			rs_set_state(&rs->sk, state);
		rs_wake(&rs->sk, EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLHUP |
			EPOLLERR | EPOLLRDNORM | EPOLLWRNORM);
	}
	read_unlock_bh(&tsk->sk_callback_lock);
	rcu_read_unlock();
}

/*
 * Move TCP's error to our socket: ours is set before TCP's is cleared,
 * so that a poll() that saw TCP's (EPOLLERR) and the SO_ERROR after it
 * always find it in one of the two, even when this CPU stops between
 * the two steps (fb:sockapi's unreach.nohost_nb read SO_ERROR 0 after
 * POLLERR under TCG while the error was in neither). A newer error
 * replaces an unreported older one, as TCP's sk_err does.
 */
static void rs_fb_move_error(struct rs_sock *rs, struct sock *tsk)
{
	int err = READ_ONCE(tsk->sk_err);

	if (!err)
		return;
	WRITE_ONCE(rs->sk.sk_err, err);
	cmpxchg(&tsk->sk_err, err, 0);
}

/*
 * SO_ERROR is read from our socket (the core's sock_getsockopt()): the
 * TCP socket's error moves to ours, so that it is reported once, by
 * whichever comes first (SO_ERROR, or a call: rs_fb_error()).
 */
static void rs_fb_error_report(struct sock *tsk)
{
	struct rs_sock *rs;

	rcu_read_lock();
	read_lock_bh(&tsk->sk_callback_lock);
	rs = rs_fb_owner(tsk);
	if (rs) {
		rs->fb_error_report(tsk);
		rs_fb_move_error(rs, tsk);
		rs_wake(&rs->sk, EPOLLERR);
	}
	read_unlock_bh(&tsk->sk_callback_lock);
	rcu_read_unlock();
}

/*
 * Take over the callbacks of tsk (all of them for a connection, only
 * data_ready for a listener). data_ready, if given, is the TCP socket's
 * own (an accepted child inherits the listener's hook instead). A socket
 * that has an owner already (hooked by us, or a BPF psock) is refused:
 * hooking twice would save our own callbacks as TCP's, which then call
 * themselves until the stack overflows.
 */
static int rs_fb_hook(struct rs_sock *rs, struct sock *tsk, bool listener,
		      void (*data_ready)(struct sock *sk))
{
	write_lock_bh(&tsk->sk_callback_lock);
	if (rcu_access_pointer(tsk->sk_user_data)) {
		write_unlock_bh(&tsk->sk_callback_lock);
		return -EBUSY;
	}
	rs->fb_data_ready = data_ready ? : tsk->sk_data_ready;
	rs->fb_write_space = tsk->sk_write_space;
	rs->fb_state_change = tsk->sk_state_change;
	rs->fb_error_report = tsk->sk_error_report;
	__rcu_assign_sk_user_data_with_flags(tsk, rs, SK_USER_DATA_NOCOPY);
	tsk->sk_data_ready = rs_fb_data_ready;
	if (!listener) {
		tsk->sk_write_space = rs_fb_write_space;
		tsk->sk_state_change = rs_fb_state_change;
		tsk->sk_error_report = rs_fb_error_report;
	}
	write_unlock_bh(&tsk->sk_callback_lock);
	return 0;
}

static void rs_fb_unhook(struct rs_sock *rs, struct sock *tsk)
{
	struct rs_sock *owner;

	rcu_read_lock();
	write_lock_bh(&tsk->sk_callback_lock);
	owner = rs_fb_owner(tsk);
	if (owner == rs) {
		tsk->sk_data_ready = rs->fb_data_ready;
		tsk->sk_write_space = rs->fb_write_space;
		tsk->sk_state_change = rs->fb_state_change;
		tsk->sk_error_report = rs->fb_error_report;
		rcu_assign_sk_user_data(tsk, NULL);
	}
	write_unlock_bh(&tsk->sk_callback_lock);
	rcu_read_unlock();
}

/* A TCP child of a hooked listener gets TCP's own data_ready back. */
static void rs_fb_child_restore(struct rs_sock *lrs, struct socket *c)
{
	write_lock_bh(&c->sk->sk_callback_lock);
	c->sk->sk_data_ready = lrs->fb_data_ready;
	write_unlock_bh(&c->sk->sk_callback_lock);
}

/*
 * A closing TCP listener's children not yet accepted carry our
 * data_ready (cloned from the listener) and could outlive the module
 * (FIN_WAIT): accept them, give them TCP's own and reset them, as
 * closing a listener resets its queue. After rs_fb_unhook() of the
 * listener, so that no new child gets our callback.
 */
static void rs_fb_drain(struct rs_sock *rs, struct socket *ls)
{
	struct socket *c;
	u32 n;

	if (inet_sk_state_load(ls->sk) != TCP_LISTEN)
		return;
	/*
	 * Only the children queued now: later ones are cloned from the
	 * unhooked listener, with TCP's own callback, and a client that
	 * keeps connecting must not keep us here (under lock_sock()).
	 */
	n = READ_ONCE(ls->sk->sk_ack_backlog);
	while (n-- && !kernel_accept(ls, &c, O_NONBLOCK)) {
		rs_fb_child_restore(rs, c);
		lock_sock(c->sk);
		sock_set_flag(c->sk, SOCK_LINGER);
		c->sk->sk_lingertime = 0;
		release_sock(c->sk);
		sock_release(c);
	}
}

/*
 * poll() of a connection over TCP: TCP's, with our socket's error (moved
 * here). An error that ends the connection comes with its hang-up, as on
 * RDMA: a reset, or any error in the handshake (a refused or unreachable
 * connect; TCP's handshake errors are all fatal). TCP's poll, which reads
 * sk_err before tcp_done() has set the shutdown and the state, could
 * show the error alone.
 *
 * TCP sets sk_err before it calls sk_error_report(), which moves it to
 * us: a poll in between moves it itself, so that the SO_ERROR a POLLERR
 * sends the caller to (sock_getsockopt() on our socket) finds it.
 *
 * Until the connection is up (and once closed), EPOLLERR is ours alone,
 * from sk_err: TCP's also says so for a non-empty error queue, and TCP
 * queues the ICMP error of a handshake there whatever IP_RECVERR says,
 * and wakes us, before it sets sk_err and ends the connection (6.1's
 * tcp_v4_err()): a poll in between said POLLERR, and the SO_ERROR after
 * it 0, which a non-blocking connect() takes for success (fb:sockapi's
 * unreach.nohost_nb, about once in 450 tries under TCG). The entry stays
 * queued, and would say POLLERR to a later connect() of the socket too.
 * Established, the error queue is the user's (IP_RECVERR, timestamps).
 */
__poll_t rs_fb_poll(struct file *file, struct rs_sock *rs, struct socket *fb)
{
	int state = 1 << inet_sk_state_load(fb->sk), err;
	__poll_t mask;

	mask = fb->ops->poll(file, fb, NULL);
	if (state & (TCPF_SYN_SENT | TCPF_SYN_RECV | TCPF_CLOSE))
		mask &= ~EPOLLERR;
	if (!READ_ONCE(rs->sk.sk_err))
		rs_fb_move_error(rs, fb->sk);
	err = READ_ONCE(rs->sk.sk_err);
	if (err)
		mask |= EPOLLERR;
	/* what TCP says once tcp_done() has run */
	if (err == ECONNRESET ||
	    (err && (state & (TCPF_SYN_SENT | TCPF_SYN_RECV))))
		mask |= EPOLLHUP | EPOLLIN | EPOLLRDNORM | EPOLLRDHUP |
			EPOLLOUT | EPOLLWRNORM;
	return mask;
}

/* The error moved from the TCP socket, reported (and cleared) once. */
static int rs_fb_error(struct rs_sock *rs)
{
	return READ_ONCE(rs->sk.sk_err) ? sock_error(&rs->sk) : 0;
}

static void rs_fb_sync_locked(struct rs_sock *rs, struct sock *tsk);

static void rs_fb_keepalive_on(struct sock *tsk, int on)
{
	lock_sock(tsk);
	if (tsk->sk_prot->keepalive)
		tsk->sk_prot->keepalive(tsk, on);
	if (on)
		sock_set_flag(tsk, SOCK_KEEPOPEN);
	else
		sock_reset_flag(tsk, SOCK_KEEPOPEN);
	release_sock(tsk);
}

/* SO_KEEPALIVE on a fallen-back socket (rs_keepalive()). */
void rs_fb_keepalive(struct socket *fb, int on)
{
	rs_fb_keepalive_on(fb->sk, on);
}

/*
 * The SOL_SOCKET options the core sets on our socket and TCP must obey:
 * copied before each forwarded call (and at creation). Under the TCP
 * socket's lock: its flags and userlocks are written non-atomically, and
 * softirq (SOCK_DONE) and keepalive (SOCK_KEEPOPEN) write them too.
 */
static void rs_fb_sync(struct rs_sock *rs, struct sock *tsk)
{
	lock_sock(tsk);
	rs_fb_sync_locked(rs, tsk);
	release_sock(tsk);
}

/*
 * What a socket bound before connect() or listen() may have been told
 * since its TCP socket was made: applied again when it starts.
 */
static void rs_fb_apply(struct rs_sock *rs, struct sock *tsk)
{
	struct sock *sk = &rs->sk;

	lock_sock(tsk);
	WRITE_ONCE(tsk->sk_mark, READ_ONCE(sk->sk_mark));
	WRITE_ONCE(tsk->sk_priority, READ_ONCE(sk->sk_priority));
	release_sock(tsk);
	if (READ_ONCE(rs->nodelay))
		tcp_sock_set_nodelay(tsk);
	if (sock_flag(sk, SOCK_KEEPOPEN) != sock_flag(tsk, SOCK_KEEPOPEN))
		rs_fb_keepalive_on(tsk, sock_flag(sk, SOCK_KEEPOPEN));
}

static void rs_fb_sync_locked(struct rs_sock *rs, struct sock *tsk)
{
	struct sock *sk = &rs->sk;

	WRITE_ONCE(tsk->sk_rcvtimeo, READ_ONCE(sk->sk_rcvtimeo));
	WRITE_ONCE(tsk->sk_sndtimeo, READ_ONCE(sk->sk_sndtimeo));
	WRITE_ONCE(tsk->sk_rcvlowat, READ_ONCE(sk->sk_rcvlowat));
	tsk->sk_lingertime = READ_ONCE(sk->sk_lingertime);
	if (sock_flag(sk, SOCK_LINGER))
		sock_set_flag(tsk, SOCK_LINGER);
	else
		sock_reset_flag(tsk, SOCK_LINGER);
	if (sk->sk_userlocks & SOCK_SNDBUF_LOCK) {
		tsk->sk_userlocks |= SOCK_SNDBUF_LOCK;
		WRITE_ONCE(tsk->sk_sndbuf, READ_ONCE(sk->sk_sndbuf));
	}
	if (sk->sk_userlocks & SOCK_RCVBUF_LOCK) {
		tsk->sk_userlocks |= SOCK_RCVBUF_LOCK;
		WRITE_ONCE(tsk->sk_rcvbuf, READ_ONCE(sk->sk_rcvbuf));
	}
}

/*
 * The TCP socket, in our netns, made as the program's own TCP socket
 * would be: in the caller's context (bind(), connect()), never in a
 * worker, and as a user socket (kern 0). It thus carries the caller's
 * uid (/proc/net/tcp, SO_PEERCRED-style owner checks), cgroup (cgroup-BPF
 * sock_create, connect and egress programs, systemd IPAddressDeny=),
 * memory cgroup and LSM label, passes security_socket_create(), and
 * holds its netns as any user socket does (a closed TCP socket may
 * outlive ours in FIN_WAIT or TIME_WAIT). No kernel-only path (a ULP
 * that trusts kernel sockets) can be reached through it.
 */
static int rs_fb_create(struct rs_sock *rs, int family, struct socket **res)
{
	struct sock *sk = &rs->sk;
	struct socket *s;
	struct sock *tsk;
	int err;

	if (WARN_ON_ONCE(current->flags & PF_KTHREAD))
		return -EINVAL;
	err = __sock_create(sock_net(sk), family, SOCK_STREAM, IPPROTO_TCP,
			    &s, 0);
	if (err)
		return err;
	tsk = s->sk;
	lock_sock(tsk);
	tsk->sk_reuse = sk->sk_reuse;
	tsk->sk_bound_dev_if = sk->sk_bound_dev_if;
	tsk->sk_mark = sk->sk_mark;
	tsk->sk_priority = sk->sk_priority;
	tsk->sk_ipv6only = sk->sk_ipv6only;
	release_sock(tsk);
	rs_fb_sync(rs, tsk);
	if (READ_ONCE(rs->nodelay))
		tcp_sock_set_nodelay(tsk);
	if (sock_flag(sk, SOCK_KEEPOPEN))
		rs_fb_keepalive_on(tsk, 1);
	*res = s;
	return 0;
}

static int rs_fb_addr_len(const struct sockaddr *addr)
{
	return addr->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) :
					     sizeof(struct sockaddr_in);
}

/* The TCP socket's name for addr: v4-mapped on an AF_INET6 one. */
static void rs_fb_addr_for(struct socket *s, struct sockaddr_storage *ss)
{
	if (s->sk->sk_family == AF_INET6 && ss->ss_family == AF_INET)
		rs_map_addr(ss);
}

/* Drop the TCP socket, unless it is the connection; under tlock. */
static struct socket *rs_fb_take(struct rs_sock *rs)
{
	struct socket *s = rs->fb;

	rs->fb = NULL;
	return s;
}

/*
 * From now on our ops forward to s (hooked, its handshake started). Its
 * sock is held until our destruct: sock_diag, holding only our socket,
 * may read it after close() has released s (rs_fb_sk()). rs->fb is
 * never replaced before close, so a socket published again (connect()
 * after a failed handshake) is the same one, held once.
 */
static void rs_fb_publish(struct rs_sock *rs, struct socket *s)
{
	if (!rs->fb_sk) {
		sock_hold(s->sk);
		rs->fb_sk = s->sk;
	}
	WARN_ON_ONCE(rs->fb_sk != s->sk);
	/* pairs with rs_fbc() */
	smp_store_release(&rs->fbc, s);
}

/* The TCP sock of a fallen-back socket, for readers without our lock. */
static struct sock *rs_fb_sk(struct rs_sock *rs)
{
	return rs_fbc(rs) ? rs->fb_sk : NULL;
}

void rs_fb_destruct(struct rs_sock *rs)
{
	if (rs->fb_sk)
		sock_put(rs->fb_sk);
}

static bool rs_fb_bound(struct socket *s)
{
	return READ_ONCE(inet_sk(s->sk)->inet_num);
}

/* Can TCP socket s connect to addr (an AF_INET6 one: v4-mapped too)? */
static bool rs_fb_reaches(struct socket *s, const struct sockaddr *addr)
{
	return s->sk->sk_family == addr->sa_family ||
	       (s->sk->sk_family == AF_INET6 && !s->sk->sk_ipv6only);
}

/*
 * A TCP socket that can reach addr for connect(): made if there is none,
 * or only an unused one of the other family (an AF_INET6 socket's takes
 * both, v4-mapped). Under lock_sock(), which keeps rs->fb's other writers
 * (bind(), listen(), connect()) out; tlock only to install it.
 */
static int rs_fb_ensure(struct rs_sock *rs, const struct sockaddr *addr)
{
	int family = rs->sk.sk_family == AF_INET6 ? AF_INET6 : addr->sa_family;
	struct socket *s, *old;
	int err;

	if (rs->fb && rs_fb_reaches(rs->fb, addr))
		return 0;
	if (rs->fb && (rs->fb_sk || rs_fb_bound(rs->fb)))
		return -EAFNOSUPPORT;	/* in use: it stays */
	err = rs_fb_create(rs, family, &s);
	if (err)
		return err;
	mutex_lock(&rs->tlock);
	old = rs->fb;
	rs->fb = s;
	mutex_unlock(&rs->tlock);
	if (old)
		sock_release(old);
	return 0;
}

/*
 * bind() reserves the TCP port as well (the port rdma_cm chose, when the
 * user asked for 0), so that the listener can listen on both. Under
 * lock_sock() and tlock, after a successful rdma_bind_addr().
 */
int rs_fb_bind(struct rs_sock *rs, struct sockaddr *addr)
{
	struct sockaddr_storage ss = { };
	struct socket *s;
	int err;

	if (READ_ONCE(rs->fb_mode) == RDMASTREAM_FALLBACK_NEVER || rs->fb)
		return 0;
	memcpy(&ss, &rs->cm_id->route.addr.src_addr,
	       rs_fb_addr_len((struct sockaddr *)&rs->cm_id->route.addr.src_addr));
	err = rs_fb_create(rs, addr->sa_family == AF_INET6 ||
			   rs->sk.sk_family == AF_INET6 ? AF_INET6 : AF_INET,
			   &rs->fb);
	if (err)
		return err;
	rs_fb_addr_for(rs->fb, &ss);
	err = kernel_bind(rs->fb, (struct rs_sockaddr_arg *)&ss,
			  rs_fb_addr_len((struct sockaddr *)&ss));
	if (err) {
		s = rs_fb_take(rs);
		sock_release(s);
	}
	return err;
}

/*
 * listen(), before rdma_listen(): the TCP port of a socket bound without
 * it (autobound, or fallback allowed only since), none with fallback
 * forbidden. Under lock_sock() and tlock.
 */
int rs_fb_reserve(struct rs_sock *rs)
{
	/*
	 * With fallback forbidden a TCP socket made at bind() stays, bound
	 * but not listening: accept() and poll() read rs->fb without our
	 * lock, so it lives until close (rs_fb_release()).
	 */
	if (READ_ONCE(rs->fb_mode) == RDMASTREAM_FALLBACK_NEVER)
		return 0;
	/* one made for a connect() that failed at once: never used */
	if (rs->fb && !rs->fb_sk && !rs_fb_bound(rs->fb))
		sock_release(rs_fb_take(rs));
	if (rs->fb)
		return 0;
	return rs_fb_bind(rs, (struct sockaddr *)
			  &rs->cm_id->route.addr.src_addr);
}

/*
 * listen(), before rdma_listen(): the TCP listener next to the RDMA one
 * (stopped again by rs_fb_stop_listen() when rdma_listen() fails). An
 * RDMA client in between is rejected and falls back to it. Under
 * lock_sock() and tlock.
 */
int rs_fb_listen(struct rs_sock *rs, int backlog)
{
	int err;

	if (!rs->fb || READ_ONCE(rs->fb_mode) == RDMASTREAM_FALLBACK_NEVER ||
	    !rs_fb_bound(rs->fb))
		return 0;
	/* TCP's children inherit these from its listener */
	rs_fb_apply(rs, rs->fb->sk);
	err = kernel_listen(rs->fb, backlog);
	if (err)
		return err;
	err = rs_fb_hook(rs, rs->fb->sk, true, NULL);
	if (err)
		kernel_sock_shutdown(rs->fb, SHUT_RD);
	return err;
}

bool rs_fb_accept_ready(struct rs_sock *rs)
{
	struct socket *s = READ_ONCE(rs->fb);

	return s && inet_sk_state_load(s->sk) == TCP_LISTEN &&
	       !reqsk_queue_empty(&inet_csk(s->sk)->icsk_accept_queue);
}

__poll_t rs_fb_listen_poll(struct rs_sock *rs)
{
	return rs_fb_accept_ready(rs) ? EPOLLIN | EPOLLRDNORM : 0;
}

/*
 * accept() of a TCP client: a socket of ours around the TCP child.
 * -EAGAIN when none is queued. Under the listener's lock_sock().
 */
int rs_fb_accept(struct rs_sock *lrs, struct socket *newsock)
{
	struct sock *lsk = &lrs->sk;
	struct socket *tcp;
	struct rs_sock *rs;
	struct sock *sk;
	int err;

	if (!lrs->fb || !rs_fb_accept_ready(lrs))
		return -EAGAIN;
	err = kernel_accept(lrs->fb, &tcp, O_NONBLOCK);
	if (err)
		return err;
	sk = rs_sock_alloc(sock_net(lsk), lsk, NULL, 0);
	if (!sk) {
		/* it must not outlive us with our callback */
		rs_fb_child_restore(lrs, tcp);
		sock_release(tcp);
		return -ENOMEM;
	}
	rs_sk_inherit(sk, lsk);
	sk->sk_userlocks = lsk->sk_userlocks;
	rs = rs_sk(sk);
	rs->v4mapped = lrs->v4mapped;
	rs->nodelay = lrs->nodelay;
	rs->fb = tcp;
	rs->fb_reason = RDMASTREAM_FB_ACCEPTED;
	rs_fb_hook(rs, tcp->sk, false, lrs->fb_data_ready);
	rs->established = true;
	rs_set_state(sk, inet_sk_state_load(tcp->sk));
	tcp->state = SS_CONNECTED;
	rs_fb_publish(rs, tcp);
	rs_stat_inc(lsk, RS_EV_FB_ACCEPTED);
	lock_sock_nested(sk, SINGLE_DEPTH_NESTING);
	sock_graft(sk, newsock);
	newsock->state = SS_CONNECTED;
	release_sock(sk);
	return 0;
}

static void rs_fb_mirror(struct rs_sock *rs, struct socket *fb);

static const enum rs_ev rs_fb_ev[] = {
	[RDMASTREAM_FB_FORCED] = RS_EV_FB_FORCED,
	[RDMASTREAM_FB_NO_DEVICE] = RS_EV_FB_NO_DEVICE,
	[RDMASTREAM_FB_REJECTED] = RS_EV_FB_REJECTED,
	[RDMASTREAM_FB_TIMEOUT] = RS_EV_FB_TIMEOUT,
	[RDMASTREAM_FB_ACCEPTED] = RS_EV_FB_ACCEPTED,
};

/*
 * The TCP socket is to become the connection: told what our socket was
 * told, where to go, and hooked; not yet published. It was made in the
 * caller's context (rs_fb_create(): at bind(), or at connect() when the
 * attempt may fall back). Under tlock.
 */
static int rs_fb_prepare(struct rs_sock *rs, const struct sockaddr *addr,
			 u8 reason)
{
	if (rs->fb_closed)
		return -EBADF;
	if (!rs->fb)
		return -ENOTCONN;
	rs_fb_apply(rs, rs->fb->sk);
	memset(&rs->fb_dst, 0, sizeof(rs->fb_dst));
	memcpy(&rs->fb_dst, addr, rs_fb_addr_len(addr));
	rs_fb_addr_for(rs->fb, &rs->fb_dst);
	rs->fb_reason = reason;
	return rs_fb_hook(rs, rs->fb->sk, false, NULL);
}

/* Waiters only: whatever they wait for, poll() tells them what is new. */
static void rs_fb_rewake(struct rs_sock *rs)
{
	struct socket_wq *wq;

	rcu_read_lock();
	wq = rcu_dereference(rs->sk.sk_wq);
	if (skwq_has_sleeper(wq))
		wake_up_interruptible_all(&wq->wait);
	rcu_read_unlock();
}

/*
 * Start TCP's handshake, then publish (ops forward from then on): what
 * is published is a socket in SYN_SENT or past it, or one whose error
 * is set, never an unconnected one (whose poll would say POLLOUT and
 * POLLHUP, and send EPIPE). A handshake refused at once (no route, a
 * cgroup-BPF connect program) leaves the socket unhooked and ours as it
 * was: the caller reports the error. Under tlock.
 */
static int rs_fb_start(struct rs_sock *rs)
{
	struct socket *fb = rs->fb;
	int err;

	rs_fb_sync(rs, fb->sk);
	err = kernel_connect(fb, (struct rs_sockaddr_arg *)&rs->fb_dst,
			     rs_fb_addr_len((struct sockaddr *)&rs->fb_dst),
			     O_NONBLOCK);
	if (err && err != -EINPROGRESS) {
		rs_fb_unhook(rs, fb->sk);
		return err;
	}
	rs_fb_publish(rs, fb);
	rs_stat_inc(&rs->sk, rs_fb_ev[rs->fb_reason]);
	rs_fb_mirror(rs, fb);
	/*
	 * TCP's callbacks wake our waiters from now on; those they woke
	 * before (a handshake over loopback is done within kernel_connect())
	 * found nothing published yet and wait again: wake them once more.
	 */
	rs_fb_rewake(rs);
	return 0;
}

/*
 * The TCP socket a connect() forwards to, counted until rs_fb_connect()
 * is done with it (rs_fb_retry() waits for none); NULL when the socket
 * is not over TCP. Under lock_sock().
 */
struct socket *rs_fb_connect_get(struct rs_sock *rs)
{
	struct socket *fb = rs_fbc(rs);

	if (fb)
		atomic_inc(&rs->fb_connects);
	return fb;
}

/*
 * A socket whose handshake over TCP failed before it was ever up (TCP
 * has reported the error and lets it connect again; no forwarded
 * connect() still runs) decides its path afresh at the next connect(),
 * as if it had never fallen back: RDMA may be there now (a server that
 * was starting). The TCP socket stays, unhooked, for a later fallback:
 * calls that loaded it before find a closed TCP socket. Under
 * lock_sock(). Returns the TCP socket to forward to (counted), or NULL
 * when the socket is not (or no longer) over TCP.
 */
struct socket *rs_fb_retry(struct rs_sock *rs)
{
	struct socket *fb = rs_fbc(rs);
	bool retry;

	if (!fb || READ_ONCE(rs->fb_mode) == RDMASTREAM_FALLBACK_FORCE)
		return rs_fb_connect_get(rs);
	mutex_lock(&rs->tlock);
	retry = !rs->established && !READ_ONCE(rs->sk.sk_err) &&
		!atomic_read(&rs->fb_connects) &&
		fb->state == SS_UNCONNECTED &&
		inet_sk_state_load(fb->sk) == TCP_CLOSE;
	if (retry) {
		rs_fb_unhook(rs, fb->sk);
		/* pairs with rs_fbc(): ops stop forwarding */
		smp_store_release(&rs->fbc, NULL);
		rs->fb_reason = RDMASTREAM_FB_NONE;
	}
	mutex_unlock(&rs->tlock);
	return retry ? NULL : rs_fb_connect_get(rs);
}

/*
 * connect() that may fall back later, from a worker (fallback_ms, a
 * reject): the TCP socket is made now, in the caller's context. A
 * caller who may not make one (an LSM or cgroup-BPF sock_create program
 * says no) keeps RDMA alone. Under lock_sock(), before tlock (which the
 * CM handler takes: it must not wait on the caller's memory cgroup or
 * LSM).
 */
void rs_fb_precreate(struct rs_sock *rs, const struct sockaddr *addr)
{
	if (READ_ONCE(rs->fb_mode) != RDMASTREAM_FALLBACK_AUTO)
		return;
	rs_fb_ensure(rs, addr);
}

/*
 * Our state from TCP's where no callback says it (SYN_SENT); the write
 * lock keeps rs_fb_state_change() from slipping a newer one in between.
 */
static void rs_fb_mirror(struct rs_sock *rs, struct socket *fb)
{
	write_lock_bh(&fb->sk->sk_callback_lock);
	if (rs_fbc(rs) == fb) {
		rs_set_state(&rs->sk, inet_sk_state_load(fb->sk));
		if (rs->sk.sk_socket)
			rs->sk.sk_socket->state = fb->state;
	}
	write_unlock_bh(&fb->sk->sk_callback_lock);
}

/*
 * connect() of a fallen-back socket: TCP's, with its errnos and waits
 * (EINPROGRESS, EALREADY, EISCONN, ECONNREFUSED...). addr is the new
 * destination for a TCP socket that may connect again; a connecting or
 * connected one ignores it, as TCP does. Without lock_sock().
 */
static int rs_fb_connect_tcp(struct rs_sock *rs, struct socket *fb,
			     struct sockaddr *addr, int flags, bool started);

int rs_fb_connect(struct rs_sock *rs, struct socket *fb,
		  struct sockaddr *addr, int flags, bool started)
{
	int err;

	/*
	 * The handshake this non-blocking call started: EINPROGRESS, as
	 * TCP's first connect() says, even over a loopback that is done
	 */
	if (started && (flags & O_NONBLOCK))
		err = -EINPROGRESS;
	else
		err = rs_fb_connect_tcp(rs, fb, addr, flags, started);
	rs_fb_mirror(rs, fb);
	atomic_dec(&rs->fb_connects);
	return err;
}

static int rs_fb_connect_tcp(struct rs_sock *rs, struct socket *fb,
			     struct sockaddr *addr, int flags, bool started)
{
	struct sockaddr_storage ss = { };
	int err;

	memcpy(&ss, addr ? addr : (struct sockaddr *)&rs->fb_dst,
	       rs_fb_addr_len(addr ? addr : (struct sockaddr *)&rs->fb_dst));
	rs_fb_addr_for(fb, &ss);
	rs_fb_sync(rs, fb->sk);
	err = fb->ops->connect(fb, (struct rs_sockaddr_arg *)&ss,
			       rs_fb_addr_len((struct sockaddr *)&ss), flags);
	/* the error moved to us (rs_fb_error_report()): TCP says ABORTED */
	if (err == -ECONNABORTED && READ_ONCE(rs->sk.sk_err))
		err = rs_fb_error(rs);
	/* the handshake this call started: TCP's first connect() says so */
	if (started && err == -EALREADY)
		err = -EINPROGRESS;
	return err;
}

/*
 * connect() in process context: forced TCP, or rdma_cm refused at once
 * for want of a device (err from rdma_resolve_addr()). Returns 1 when
 * the socket is now over TCP (the caller forwards the connect), 0 to go
 * on with RDMA (or report err), or a negative errno. Under lock_sock().
 */
int rs_fb_connect_start(struct rs_sock *rs, struct sockaddr *addr, int err)
{
	int mode = READ_ONCE(rs->fb_mode);
	u8 reason;

	if (mode == RDMASTREAM_FALLBACK_FORCE)
		reason = RDMASTREAM_FB_FORCED;
	else if (mode == RDMASTREAM_FALLBACK_AUTO &&
		 (err == -ENETUNREACH || err == -EADDRNOTAVAIL ||
		  err == -ENODEV))
		reason = RDMASTREAM_FB_NO_DEVICE;
	else
		return 0;
	err = rs_fb_ensure(rs, addr);
	if (err)
		return err;
	mutex_lock(&rs->tlock);
	err = rs_fb_prepare(rs, addr, reason);
	if (!err)
		err = rs_fb_start(rs);
	mutex_unlock(&rs->tlock);
	if (err)
		return err;
	/* an attempt rs_connect_start() did not count */
	rs_stat_inc(&rs->sk, RS_EV_ACTIVE_OPENS);
	return 1;
}

/* The fallback_ms bound on a CM handshake: armed by connect(). */
void rs_fb_arm(struct rs_sock *rs)
{
	unsigned int ms = READ_ONCE(rs_fallback_ms);

	if (!ms || READ_ONCE(rs->fb_mode) != RDMASTREAM_FALLBACK_AUTO)
		return;
	sock_hold(&rs->sk);
	if (!mod_delayed_work(rs_wq, &rs->fb_work, msecs_to_jiffies(ms)))
		return;
	sock_put(&rs->sk);	/* it was pending: it holds one already */
}

/*
 * Abandon the CM attempt for TCP: the teardown destroys the id and then
 * starts the TCP connect (rs_fb_after_teardown()). The state stays
 * SYN_SENT, so connect() and poll() keep waiting. Under tlock.
 */
static void rs_fb_abandon(struct rs_sock *rs, u8 reason)
{
	rs->fb_pending = true;
	rs->fb_reason = reason;
	spin_lock_bh(&rs->lock);
	rs_schedule_teardown(rs);
	spin_unlock_bh(&rs->lock);
}

static void rs_fb_timeout(struct work_struct *work)
{
	struct rs_sock *rs = container_of(to_delayed_work(work),
					  struct rs_sock, fb_work);
	struct sock *sk = &rs->sk;
	bool silent;

	mutex_lock(&rs->tlock);
	spin_lock_bh(&rs->lock);
	silent = !rs->torn && rs->cm_id && !rs->established && rs->fb &&
		 !rs->parent && sk->sk_state == TCP_SYN_SENT;
	spin_unlock_bh(&rs->lock);
	/*
	 * The REP's handler readies our QP, sends the RTU and establishes
	 * under tlock (rs_cm.c): a REP handled is an established socket,
	 * and one not handled yet is refused by our id's destruction.
	 */
	if (silent && READ_ONCE(rs->fb_mode) == RDMASTREAM_FALLBACK_AUTO)
		rs_fb_abandon(rs, RDMASTREAM_FB_TIMEOUT);
	mutex_unlock(&rs->tlock);
	sock_put(sk);
}

/* A REJ from an rdmastream listener carries our reject data. */
static bool rs_fb_rej_ours(const struct rdma_cm_event *ev)
{
	const struct rs_cm_rej *rej = ev->param.conn.private_data;

	return ev->status == IB_CM_REJ_CONSUMER_DEFINED && rej &&
	       ev->param.conn.private_data_len >= sizeof(*rej) &&
	       rej->version == RS_PROTO_VERSION;
}

/* Why a failed CM event means "no RDMA there" rather than an error. */
static u8 rs_fb_reason_of(const struct rdma_cm_event *ev)
{
	switch (ev->event) {
	case RDMA_CM_EVENT_ADDR_ERROR:
	case RDMA_CM_EVENT_ROUTE_ERROR:
		/* no device for the route; a silent neighbour is an error */
		if (ev->status == -ENODEV || ev->status == -EADDRNOTAVAIL ||
		    ev->status == -ENETUNREACH || ev->status == -EPROTONOSUPPORT)
			return RDMASTREAM_FB_NO_DEVICE;
		return RDMASTREAM_FB_NONE;
	case RDMA_CM_EVENT_REJECTED:
		/* a listener of ours refusing is a refusal (ECONNREFUSED) */
		return rs_fb_rej_ours(ev) ? RDMASTREAM_FB_NONE :
					    RDMASTREAM_FB_REJECTED;
	case RDMA_CM_EVENT_UNREACHABLE:
		return RDMASTREAM_FB_TIMEOUT;
	default:
		return RDMASTREAM_FB_NONE;
	}
}

/*
 * From the CM handler, under tlock, for an event that fails the active
 * open: true when the socket falls back instead of failing.
 */
bool rs_fb_cm_fail(struct rs_sock *rs, struct rdma_cm_event *ev, int err)
{
	u8 reason;

	if (rs->parent || rs->sk.sk_state != TCP_SYN_SENT || !rs->fb ||
	    READ_ONCE(rs->fb_mode) != RDMASTREAM_FALLBACK_AUTO)
		return false;
	reason = ev ? rs_fb_reason_of(ev) : RDMASTREAM_FB_NO_DEVICE;
	if (!reason)
		return false;
	rs_fb_abandon(rs, reason);
	return true;
}

/*
 * End of the teardown work of an abandoned attempt: the cm id is gone;
 * start the TCP connect without waiting (the user's connect() or poll()
 * waits). Work context; never lock_sock().
 */
void rs_fb_after_teardown(struct rs_sock *rs)
{
	struct sock *sk = &rs->sk;
	struct sockaddr_storage dst;
	int err;

	if (!READ_ONCE(rs->fb_pending))
		return;
	mutex_lock(&rs->tlock);
	rs->fb_pending = false;
	memcpy(&dst, &rs->fb_dst, sizeof(dst));
	err = rs_fb_prepare(rs, (struct sockaddr *)&dst, rs->fb_reason);
	if (!err)
		err = rs_fb_start(rs);
	if (!err || err == -EBADF) {	/* over TCP, or closed meanwhile */
		mutex_unlock(&rs->tlock);
		return;
	}
	WRITE_ONCE(sk->sk_err, -err);
	rs_set_state(sk, TCP_CLOSE);
	mutex_unlock(&rs->tlock);
	sk->sk_state_change(sk);
	sk_error_report(sk);
}

/* connect() remembers where a fallback goes (the unmapped address). */
void rs_fb_set_dst(struct rs_sock *rs, const struct sockaddr *addr)
{
	memset(&rs->fb_dst, 0, sizeof(rs->fb_dst));
	memcpy(&rs->fb_dst, addr, rs_fb_addr_len(addr));
}

/*
 * A blocking call on a socket whose handshake may still fall back: wait
 * until it is decided (connected, failed, or over TCP). False when the
 * wait was cut short (signal, timeout): the caller goes on as before.
 */
bool rs_fb_wait(struct rs_sock *rs, long *timeo)
{
	struct sock *sk = &rs->sk;
	long left;

	if (inet_sk_state_load(sk) != TCP_SYN_SENT || rs_fbc(rs) || !*timeo ||
	    READ_ONCE(rs->fb_mode) != RDMASTREAM_FALLBACK_AUTO)
		return true;
	left = wait_event_interruptible_timeout(*sk_sleep(sk),
			inet_sk_state_load(sk) != TCP_SYN_SENT || rs_fbc(rs),
			*timeo);
	if (left <= 0)
		return false;
	*timeo = left;
	return true;
}

/*
 * A listener stops listening (shutdown(SHUT_RD)): so does its TCP one,
 * its queue reset; listen() may start it again. Under lock_sock().
 */
void rs_fb_stop_listen(struct rs_sock *rs)
{
	struct socket *s = rs->fb;

	if (!s || inet_sk_state_load(s->sk) != TCP_LISTEN)
		return;
	rs_fb_unhook(rs, s->sk);
	rs_fb_drain(rs, s);
	kernel_sock_shutdown(s, SHUT_RD);
}

/* close(): the TCP socket goes (with SO_LINGER as set on ours). */
void rs_fb_release(struct rs_sock *rs)
{
	struct socket *s;

	if (cancel_delayed_work_sync(&rs->fb_work))
		sock_put(&rs->sk);
	mutex_lock(&rs->tlock);
	rs->fb_closed = true;
	rs->fb_pending = false;
	s = rs_fb_take(rs);
	mutex_unlock(&rs->tlock);
	if (!s)
		return;
	rs_fb_unhook(rs, s->sk);
	rs_fb_drain(rs, s);
	rs_fb_sync(rs, s->sk);
	sock_release(s);
}

void rs_fb_info(struct rs_sock *rs, struct rdmastream_info *info)
{
	struct sock *tsk = rs_fb_sk(rs);
	struct tcp_sock *tp;

	if (!tsk)
		return;
	tp = tcp_sk(tsk);
	info->rsi_fallback = rs->fb_reason;
	info->rsi_flags |= RDMASTREAM_INFO_F_FALLBACK;
	info->rsi_state = inet_sk_state_load(tsk);
	info->rsi_flags &= RDMASTREAM_INFO_F_FALLBACK;
	if (rs_state_open(info->rsi_state))
		info->rsi_flags |= RDMASTREAM_INFO_F_PEER_READY;
	if (READ_ONCE(tsk->sk_shutdown) & SEND_SHUTDOWN)
		info->rsi_flags |= RDMASTREAM_INFO_F_FIN_SENT;
	if (sock_flag(tsk, SOCK_DONE))
		info->rsi_flags |= RDMASTREAM_INFO_F_FIN_RCVD;
	if (READ_ONCE(rs->sk.sk_err) == ECONNRESET)
		info->rsi_flags |= RDMASTREAM_INFO_F_RESET;
	/* TCP's, not those of an RDMA attempt before the fallback */
	info->rsi_ack_timeout_us = 0;
	info->rsi_retry_count = 0;
	info->rsi_base_rtt_us = 0;
	info->rsi_base_rttvar_us = 0;
	info->rsi_path_mtu = 0;
	info->rsi_rtt_us = READ_ONCE(tp->srtt_us) >> 3;
	info->rsi_bytes_sent = READ_ONCE(tp->bytes_sent);
	/* bytes_acked counts the SYN's sequence number too */
	info->rsi_bytes_acked = min(READ_ONCE(tp->bytes_acked),
				    READ_ONCE(tp->bytes_sent));
	info->rsi_bytes_received = READ_ONCE(tp->bytes_received);
	info->rsi_bytes_read = READ_ONCE(tp->bytes_received) -
			       (READ_ONCE(tp->rcv_nxt) -
				READ_ONCE(tp->copied_seq));
}

/* RDMASTREAM_FALLBACK: before connect() or listen(), as TCP's options. */
int rs_fb_setsockopt(struct rs_sock *rs, int val)
{
	struct sock *sk = &rs->sk;
	int err = 0;

	if (val < RDMASTREAM_FALLBACK_NEVER || val > RDMASTREAM_FALLBACK_FORCE)
		return -EINVAL;
	lock_sock(sk);
	if (rs->listener)
		err = -EINVAL;
	else if (sk->sk_state != TCP_CLOSE || rs_fbc(rs) || rs->torn)
		err = -EISCONN;
	else
		WRITE_ONCE(rs->fb_mode, val);
	release_sock(sk);
	return err;
}

/*
 * A send forwarded with MSG_NOSIGNAL: TCP's EPIPE after a reset or a
 * refused handshake (its error moved to us by rs_fb_error_report() before
 * the blocked sender could see it) is that error, with no SIGPIPE, as
 * TCP gives it; a real EPIPE raises SIGPIPE unless the user said not to.
 */
static int rs_fb_send_err(struct rs_sock *rs, int ret, int flags)
{
	int err;

	if (ret != -EPIPE)
		return ret;
	err = rs_fb_error(rs);
	if (err)
		return err;
	if (!(flags & MSG_NOSIGNAL))
		send_sig(SIGPIPE, current, 0);
	return -EPIPE;
}

/*
 * The forwarding of data-path calls. A call that finds the handshake
 * undecided and may block waits for the decision first (rs_fb_wait()).
 */
int rs_fb_sendmsg(struct socket *sock, struct msghdr *msg, size_t len)
{
	struct rs_sock *rs = rs_sk(sock->sk);
	long timeo = sock_sndtimeo(sock->sk, msg->msg_flags & MSG_DONTWAIT);
	struct socket *fb;
	int ret, flags;

	rs_fb_wait(rs, &timeo);
	fb = rs_fbc(rs);
	flags = msg->msg_flags;
	/* MSG_FASTOPEN would connect TCP's socket behind our connect() */
	msg->msg_flags = (msg->msg_flags | MSG_NOSIGNAL) & ~MSG_FASTOPEN;
	if (!fb) {
		ret = rs_sendmsg(sock, msg, len);
		fb = rs_fbc(rs);
		/*
		 * EPIPE from a handshake that went to TCP meanwhile (its
		 * socket published after we looked): TCP's send instead
		 */
		if (ret != -EPIPE || !fb) {
			msg->msg_flags = flags;
			if (ret == -EPIPE && !(flags & MSG_NOSIGNAL))
				send_sig(SIGPIPE, current, 0);
			return ret;
		}
	}
	ret = rs_fb_error(rs);
	if (ret) {
		msg->msg_flags = flags;
		return ret;
	}
	rs_fb_sync(rs, fb->sk);
	ret = fb->ops->sendmsg(fb, msg, len);
	msg->msg_flags = flags;
	return rs_fb_send_err(rs, ret, flags);
}

int rs_fb_recvmsg(struct socket *sock, struct msghdr *msg, size_t len,
			 int flags)
{
	struct rs_sock *rs = rs_sk(sock->sk);
	long timeo = sock_rcvtimeo(sock->sk, flags & MSG_DONTWAIT);
	struct socket *fb;
	int ret;

	rs_fb_wait(rs, &timeo);
	fb = rs_fbc(rs);
	if (!fb)
		return rs_recvmsg(sock, msg, len, flags);
	/* queued data first, then the error, as tcp_recvmsg() */
	if (skb_queue_empty_lockless(&fb->sk->sk_receive_queue)) {
		ret = rs_fb_error(rs);
		if (ret)
			return ret;
	}
	rs_fb_sync(rs, fb->sk);
	ret = fb->ops->recvmsg(fb, msg, len, flags);
	/* a reset that arrived while it waited ended it as EOF */
	if (!ret && len)
		ret = rs_fb_error(rs);
	return ret;
}

#ifdef RS_HAVE_SENDPAGE
ssize_t rs_fb_sendpage(struct socket *sock, struct page *page,
			      int offset, size_t size, int flags)
{
	struct rs_sock *rs = rs_sk(sock->sk);
	long timeo = sock_sndtimeo(sock->sk, flags & MSG_DONTWAIT);
	struct socket *fb;

	rs_fb_wait(rs, &timeo);
	fb = rs_fbc(rs);
	if (!fb)
		return rs_sendpage(sock, page, offset, size, flags);
	if (READ_ONCE(rs->sk.sk_err))
		return rs_fb_error(rs);
	rs_fb_sync(rs, fb->sk);
	return rs_fb_send_err(rs, fb->ops->sendpage(fb, page, offset, size,
						    flags | MSG_NOSIGNAL),
			      flags);
}
#endif

int rs_fb_shutdown(struct socket *sock, int how)
{
	struct socket *fb = rs_fbc(rs_sk(sock->sk));

	if (!fb)
		return rs_shutdown(sock, how);
	return fb->ops->shutdown(fb, how);
}

/*
 * sock_diag of a socket over TCP: the TCP connection's names (as
 * getsockname()/getpeername() give them, unmapped) and queues. False
 * when the socket is not over TCP. Lockless, under our rs->lock.
 */
bool rs_fb_names(struct rs_sock *rs, struct sockaddr_storage *local,
		 struct sockaddr_storage *peer)
{
	struct sock *tsk = rs_fb_sk(rs);
	struct sockaddr_in6 *l6 = (struct sockaddr_in6 *)local;
	struct sockaddr_in6 *p6 = (struct sockaddr_in6 *)peer;
	struct sockaddr_in *l = (struct sockaddr_in *)local;
	struct sockaddr_in *p = (struct sockaddr_in *)peer;
	struct inet_sock *inet;
	bool connected;

	if (!tsk)
		return false;
	inet = inet_sk(tsk);
	connected = inet->inet_dport &&
		    inet_sk_state_load(tsk) != TCP_CLOSE;
	if (tsk->sk_family == AF_INET6) {
		l6->sin6_family = AF_INET6;
		l6->sin6_port = inet->inet_sport;
		l6->sin6_addr = tsk->sk_v6_rcv_saddr;
		if (!connected)
			return true;
		p6->sin6_family = AF_INET6;
		p6->sin6_port = inet->inet_dport;
		p6->sin6_addr = tsk->sk_v6_daddr;
		return true;
	}
	l->sin_family = AF_INET;
	l->sin_port = inet->inet_sport;
	l->sin_addr.s_addr = inet->inet_rcv_saddr;
	if (!connected)
		return true;
	p->sin_family = AF_INET;
	p->sin_port = inet->inet_dport;
	p->sin_addr.s_addr = inet->inet_daddr;
	return true;
}

bool rs_fb_queues(struct rs_sock *rs, u32 *rqueue, u32 *wqueue)
{
	struct sock *tsk = rs_fb_sk(rs);
	const struct tcp_sock *tp;

	if (!tsk)
		return false;
	tp = tcp_sk(tsk);
	*rqueue = max_t(int, READ_ONCE(tp->rcv_nxt) -
			READ_ONCE(tp->copied_seq), 0);
	*wqueue = READ_ONCE(tp->write_seq) - READ_ONCE(tp->snd_una);
	return true;
}
