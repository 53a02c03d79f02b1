/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Every difference between the kernels rdmastream builds against (Debian's
 * 5.10, 6.1, 6.12 and 7.x; docs/kernels.md). The RS_HAVE_* symbols come
 * from feature tests in kmod/Kbuild (a grep of the kernel's headers, since
 * distributions backport), LINUX_VERSION_CODE only where no header tells.
 * Call sites use the kernel's newest name, or an rs_ wrapper defined here.
 */
#ifndef RS_COMPAT_H
#define RS_COMPAT_H

#include <linux/magic.h>
#include <linux/mm.h>
#include <linux/net.h>
#include <linux/shmem_fs.h>
#include <linux/uio.h>
#include <linux/sched/mm.h>
#include <linux/workqueue.h>
#include <net/sock.h>
#include <net/ipv6.h>
#include <rdma/ib_verbs.h>

/*
 * proto_ops.accept: (sock, newsock, flags, kern) until 6.10, then
 * (sock, newsock, struct proto_accept_arg *). A prototype names its last
 * parameters RS_ACCEPT_ARGS and reads the flags with rs_accept_flags().
 */
#ifdef RS_HAVE_PROTO_ACCEPT_ARG
#define RS_ACCEPT_ARGS		struct proto_accept_arg *arg
#define rs_accept_flags()	(arg->flags)
#else
#define RS_ACCEPT_ARGS		int flags, bool kern
#define rs_accept_flags()	(flags)
#endif

/*
 * proto_ops.sendpage went away in 6.5: sendfile() and splice() reach
 * ->sendmsg with a bio_vec iterator (MSG_SPLICE_PAGES) instead, which
 * rs_sendmsg() copies like any non-user memory (docs/splice.md).
 */
#ifdef RS_HAVE_SENDPAGE
#define RS_OPS_SENDPAGE		.sendpage = rs_fb_sendpage,
#else
#define RS_OPS_SENDPAGE
#endif

/* iov_iter: the data direction names (6.1) */
#ifndef ITER_SOURCE
#define ITER_SOURCE	WRITE
#define ITER_DEST	READ
#endif

/* iov_iter: ->iov became ->__iov behind iter_iov() (6.4) */
#ifndef RS_HAVE_ITER_IOV
static inline const struct iovec *iter_iov(const struct iov_iter *iter)
{
	return iter->iov;
}
#endif

/* iov_iter: single-buffer user iterators (ITER_UBUF, 6.0) */
#ifdef RS_HAVE_ITER_UBUF
#define rs_iter_is_ubuf(it)	iter_is_ubuf(it)
#define rs_iter_ubuf(it)	((it)->ubuf)
#else
#define rs_iter_is_ubuf(it)	false
#define rs_iter_ubuf(it)	NULL
#endif

/* iov_iter: user memory behind the iterator (6.0) */
#ifndef RS_HAVE_USER_BACKED_ITER
#define user_backed_iter(it)	iter_is_iovec(it)
#endif

/* pin_user_pages() without its vmas argument (6.5) */
static inline long rs_pin_user_pages(unsigned long start,
				     unsigned long nr_pages,
				     unsigned int gup_flags,
				     struct page **pages)
{
#ifdef RS_HAVE_PIN_USER_PAGES_NOVMAS
	return pin_user_pages(start, nr_pages, gup_flags, pages);
#else
	return pin_user_pages(start, nr_pages, gup_flags, pages, NULL);
#endif
}

/*
 * shmem_file(): 5.10 exports neither shmem_mapping() nor the shmem_aops
 * it compares with (6.1 inlines it), but every shmem inode (tmpfs, memfd,
 * shared anonymous memory, SysV shm) is on a tmpfs superblock.
 */
#ifdef RS_HAVE_SHMEM_MAPPING
#define rs_shmem_file(file)	shmem_file(file)
#else
static inline bool rs_shmem_file(struct file *file)
{
	return file->f_mapping &&
	       file->f_mapping->host->i_sb->s_magic == TMPFS_MAGIC;
}
#endif

/* sk_error_report() also notifies BPF (5.12); before, the callback */
#ifndef RS_HAVE_SK_ERROR_REPORT
static inline void sk_error_report(struct sock *sk)
{
	sk->sk_error_report(sk);
}
#endif

/* struct sock_diag_handler holds a module reference (6.9, Debian's 6.1) */
#ifdef RS_HAVE_SOCK_DIAG_OWNER
#define RS_DIAG_OWNER		.owner = THIS_MODULE,
#else
#define RS_DIAG_OWNER
#endif

/* mapping a whole sg_table for a device (5.11): the sg list calls before */
#ifndef RS_HAVE_IB_DMA_MAP_SGTABLE
static inline int ib_dma_map_sgtable_attrs(struct ib_device *dev,
					   struct sg_table *sgt,
					   enum dma_data_direction dir,
					   unsigned long attrs)
{
	int nents = ib_dma_map_sg_attrs(dev, sgt->sgl, sgt->orig_nents, dir,
					attrs);

	if (nents <= 0)
		return -EIO;
	sgt->nents = nents;
	return 0;
}

static inline void ib_dma_unmap_sgtable_attrs(struct ib_device *dev,
					      struct sg_table *sgt,
					      enum dma_data_direction dir,
					      unsigned long attrs)
{
	ib_dma_unmap_sg_attrs(dev, sgt->sgl, sgt->orig_nents, dir, attrs);
}
#endif

/*
 * set_active_memcg() reads a per-CPU slot in interrupt context that 5.10
 * does not export (a module using it fails to load). rdmastream charges its
 * rings from process context only, where the slot is the task's.
 */
#if defined(CONFIG_MEMCG) && !defined(RS_HAVE_INT_ACTIVE_MEMCG)
static inline struct mem_cgroup *rs_set_active_memcg(struct mem_cgroup *memcg)
{
	struct mem_cgroup *old = current->active_memcg;

	current->active_memcg = memcg;
	return old;
}
#else
#define rs_set_active_memcg(memcg)	set_active_memcg(memcg)
#endif

/*
 * proto_ops.bind and .connect take a struct sockaddr_unsized (7.x): the
 * prototypes name it struct rs_sockaddr_arg and cast for rs_copy_addr().
 */
#ifdef RS_HAVE_SOCKADDR_UNSIZED
#define rs_sockaddr_arg		sockaddr_unsized
#else
#define rs_sockaddr_arg		sockaddr
#endif

/*
 * A kernel socket made to hold its netns as a user's does (the fallback's
 * TCP socket, like MPTCP's subflows): the reference is tracked from 5.17,
 * and sock_inuse_add() is in the header from 5.16 (5.10: its body).
 */
#ifdef RS_HAVE_NS_TRACKER
#define rs_sk_get_net(sk, net)	get_net_track(net, &(sk)->ns_tracker, \
					      GFP_KERNEL)
#else
#define rs_sk_get_net(sk, net)	get_net(net)
#endif
#ifdef RS_HAVE_SOCK_INUSE_ADD
#define rs_sock_inuse_add(net, val)	sock_inuse_add(net, val)
#else
static inline void rs_sock_inuse_add(struct net *net, int val)
{
#ifdef CONFIG_PROC_FS
	this_cpu_add(*net->core.sock_inuse, val);
#endif
}
#endif

/* the owner's uid without the callback lock (sk_uid(), 6.16) */
#ifdef RS_HAVE_SK_UID
#define rs_sk_uid(sk)		sk_uid(sk)
#else
#define rs_sk_uid(sk)		sock_i_uid(sk)
#endif

/* timers: the new names (timer_delete_sync 6.2, timer_container_of 6.16) */
#ifndef RS_HAVE_TIMER_DELETE_SYNC
#define timer_delete_sync(t)	del_timer_sync(t)
#endif
#ifndef RS_HAVE_TIMER_CONTAINER_OF
#define timer_container_of(var, t, field)	from_timer(var, t, field)
#endif

/*
 * The IPv6 part of an IPPROTO route socket: 7.x no longer exports
 * inet6_cleanup_sock(), only inet6_sock_destruct(), which also does what
 * inet_sock_destruct() does (queues, IP options, the cached route).
 * Returns true when that inet part is freed too.
 */
static inline bool rs_inet6_cleanup_sock(struct sock *sk)
{
#ifdef RS_HAVE_INET6_CLEANUP_SOCK
	inet6_cleanup_sock(sk);
	return false;
#else
	inet6_sock_destruct(sk);
	return true;
#endif
}

/*
 * alloc_workqueue() wants WQ_PERCPU or WQ_UNBOUND said (7.x warns when
 * neither is); before, per-CPU was the default.
 */
#ifndef RS_HAVE_WQ_PERCPU
#define WQ_PERCPU		0
#endif

/*
 * rdma_rxe before 6.0 may drop a destroyed QP's reference on its PD from
 * a work item after ib_destroy_qp() returned; its PDs linger before
 * ib_dealloc_pd() (kmod/rs_pd.c). A driver's behaviour, which no header
 * shows: Kbuild decides by the kernel's version (RS_RXE_LATE_QP_PUT).
 */
#ifdef RS_RXE_LATE_QP_PUT
#define RS_PD_LINGER		(10 * HZ)
#endif

/*
 * rdma_rxe before 6.10 lets a QP's retransmission timer run from its
 * oldest unacknowledged packet, pushed on only by an ACK: with many QPs
 * streaming to another host, the queue in front of the receiver delays
 * the ACKs past a short ack timeout, every QP goes back N for nothing, and
 * that reaches rxe's req_retry() race (docs/lossy-links.md, "The floor").
 * There the floor of the ack timeout stays 268 ms: a budget of bytes in
 * flight (rs_budget.c, inflight_max) shortens that queue, but 67 ms with
 * it still reset wire.multi in CI. From 6.10 the completer pushes the
 * timer on at every post.
 */
#ifdef RS_RXE_STALE_TIMER
#define RS_ACK_MIN_DEFAULT	16
#else
#define RS_ACK_MIN_DEFAULT	14
#endif

/*
 * rdma_rxe before 6.10 starts no second go-back-N on a NAK until an ACK
 * has come, and a long write asks for one only every 65 packets: writes
 * of 8 packets to other hosts tripled 6.1's throughput at 1 % loss. On
 * 7.3 they did not pay (docs/lossy-links.md, "Short writes").
 */
#ifdef RS_RXE_STALE_TIMER
#define RS_WRITE_PKTS_DEFAULT	8
#else
#define RS_WRITE_PKTS_DEFAULT	0
#endif

#endif /* RS_COMPAT_H */
