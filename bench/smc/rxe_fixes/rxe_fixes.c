// SPDX-License-Identifier: GPL-2.0
/*
 * rxe_fixes - two upstream Soft-RoCE (rdma_rxe) fixes that Debian's 6.1
 * kernel lacks and without which SMC-R cannot run over rxe at all, applied
 * from the outside with kprobes.  A benchmark aid (bench/smc/setup with
 * RS_SMC_RXE_FIX=1), not part of rdmastream; see docs/smc-r.md.
 *
 * 1. ib_query_qp() must fill in cur_qp_state.  rxe_qp_to_attr() of 6.1
 *    copies qp->attr, whose cur_qp_state only changes when a modify passes
 *    IB_QP_CUR_STATE, so a query answers IB_QPS_RESET for a QP in RTS.
 *    SMC-R sends over a link only if the state it queried after the modify
 *    is RTS (smc_link_sendable() in net/smc/smc_core.h), so its first LLC
 *    message (CONFIRM LINK) fails with -ENOLINK before reaching the device.
 *    Upstream: 775e6d3c8fda ("RDMA/rxe: Set queue pair cur_qp_state when
 *    being queried", v6.13, also in 6.6.y).  Here: a kretprobe on
 *    rxe_query_qp() copies attr->qp_state into attr->cur_qp_state.
 *
 * 2. SMC-R arms its receive CQ with ib_req_notify_cq(cq,
 *    IB_CQ_SOLICITED_MASK), i.e. both IB_CQ_SOLICITED and IB_CQ_NEXT_COMP
 *    (net/smc/smc_ib.c, smc_wr.c).  rxe_cq_post() of 6.1 tests
 *    cq->notify == IB_CQ_NEXT_COMP or == IB_CQ_SOLICITED, neither of which
 *    matches 3, so SMC never hears of a received message.  Upstream:
 *    350b6dd4b2f8 ("RDMA/rxe: Simplify cq->notify code", v6.5) tests the
 *    bits instead.  Here: a kprobe on rxe_req_notify_cq() turns a request
 *    with both bits into IB_CQ_NEXT_COMP, which is what the bit test makes
 *    of it (and what mlx5 does with it).
 *
 * Load it after rdma_rxe; unloading restores the stock behaviour.
 */
#include <linux/kprobes.h>
#include <linux/module.h>
#include <linux/ptrace.h>
#include <rdma/ib_verbs.h>

#ifndef CONFIG_X86_64
#error "rxe_fixes rewrites an argument register: x86_64 only"
#endif

struct rxe_fixes_query {
	struct ib_qp_attr *attr;
};

/* rxe_query_qp(struct ib_qp *ibqp, struct ib_qp_attr *attr, ...) */
static int rxe_fixes_query_entry(struct kretprobe_instance *ri,
				 struct pt_regs *regs)
{
	struct rxe_fixes_query *call = (void *)ri->data;

	call->attr = (struct ib_qp_attr *)regs_get_kernel_argument(regs, 1);
	return 0;
}

static int rxe_fixes_query_ret(struct kretprobe_instance *ri,
			       struct pt_regs *regs)
{
	struct rxe_fixes_query *call = (void *)ri->data;

	if (call->attr && !regs_return_value(regs))
		call->attr->cur_qp_state = call->attr->qp_state;
	return 0;
}

static struct kretprobe rxe_fixes_query_probe = {
	.kp.symbol_name	= "rxe_query_qp",
	.entry_handler	= rxe_fixes_query_entry,
	.handler	= rxe_fixes_query_ret,
	.data_size	= sizeof(struct rxe_fixes_query),
	.maxactive	= 64,
};

/* rxe_req_notify_cq(struct ib_cq *ibcq, enum ib_cq_notify_flags flags) */
static int rxe_fixes_notify_pre(struct kprobe *p, struct pt_regs *regs)
{
	unsigned long flags = regs_get_kernel_argument(regs, 1);

	if ((flags & IB_CQ_SOLICITED_MASK) == IB_CQ_SOLICITED_MASK)
		regs->si = (flags & ~IB_CQ_SOLICITED_MASK) | IB_CQ_NEXT_COMP;
	return 0;
}

static struct kprobe rxe_fixes_notify_probe = {
	.symbol_name	= "rxe_req_notify_cq",
	.pre_handler	= rxe_fixes_notify_pre,
};

static int __init rxe_fixes_init(void)
{
	int rc;

	rc = register_kretprobe(&rxe_fixes_query_probe);
	if (rc) {
		pr_err("rxe_fixes: kretprobe on rxe_query_qp: %d (is rdma_rxe loaded?)\n",
		       rc);
		return rc;
	}
	rc = register_kprobe(&rxe_fixes_notify_probe);
	if (rc) {
		pr_err("rxe_fixes: kprobe on rxe_req_notify_cq: %d\n", rc);
		unregister_kretprobe(&rxe_fixes_query_probe);
		return rc;
	}
	pr_info("rxe_fixes: rxe_query_qp reports cur_qp_state, rxe_req_notify_cq takes IB_CQ_SOLICITED_MASK as NEXT_COMP\n");
	return 0;
}

static void __exit rxe_fixes_exit(void)
{
	unregister_kprobe(&rxe_fixes_notify_probe);
	unregister_kretprobe(&rxe_fixes_query_probe);
}

module_init(rxe_fixes_init);
module_exit(rxe_fixes_exit);
MODULE_DESCRIPTION("rdma_rxe: upstream fixes SMC-R needs, via kprobes (bench aid)");
MODULE_LICENSE("GPL");
