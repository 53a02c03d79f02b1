// SPDX-License-Identifier: GPL-2.0
/*
 * Pinning the application's pages for a direct transfer.
 *
 * Only the first segment of a user-space iterator is taken, so a direct
 * transfer always covers one virtually contiguous range. Pages are pinned
 * with FOLL_PIN (pin_user_pages_fast), which is what DMA to user memory
 * must use, and unpinned (dirtied for receives) when the transfer is over.
 * DMA mapping is separate because it happens under rs_sock.lock, where a
 * teardown can undo it (rs_dslots_unmap_locked, rs_zsends_unmap_locked).
 */
#include <linux/mm.h>
#include <linux/slab.h>
#include <linux/uio.h>

#include "rs.h"

/* Start and length of the iterator's first non-empty user segment. */
static bool rs_iter_first(const struct iov_iter *it, unsigned long *addr,
			  size_t *len)
{
	const struct iovec *iov;
	size_t off;

	if (!it->user_backed || !iov_iter_count(it))
		return false;
	if (iter_is_ubuf(it)) {
		*addr = (unsigned long)it->ubuf + it->iov_offset;
		*len = it->count;
		return true;
	}
	if (!iter_is_iovec(it))
		return false;
	off = it->iov_offset;
	for (iov = it->iov; iov < it->iov + it->nr_segs; iov++, off = 0) {
		if (iov->iov_len <= off)
			continue;
		*addr = (unsigned long)iov->iov_base + off;
		*len = min(iov->iov_len - off, it->count);
		return true;
	}
	return false;
}

/*
 * Pin up to max bytes at the iterator's position (which does not move).
 * Returns the bytes pinned or a negative errno; partial pins are undone.
 */
int rs_pin_user(struct rs_pin *p, struct iov_iter *it, u32 max, bool write)
{
	unsigned long addr;
	size_t len;
	int got, ret;

	memset(p, 0, sizeof(*p));
	if (!rs_iter_first(it, &addr, &len))
		return -EOPNOTSUPP;
	len = min_t(size_t, len, max);
	p->npages = DIV_ROUND_UP(offset_in_page(addr) + len, PAGE_SIZE);
	p->pages = kvmalloc_array(p->npages, sizeof(*p->pages), GFP_KERNEL);
	if (!p->pages)
		return -ENOMEM;
	got = pin_user_pages_fast(addr & PAGE_MASK, p->npages,
				  write ? FOLL_WRITE : 0, p->pages);
	if (got != p->npages) {
		if (got > 0)
			unpin_user_pages(p->pages, got);
		ret = got < 0 ? got : -EFAULT;
		goto free;
	}
	ret = sg_alloc_table_from_pages(&p->sgt, p->pages, p->npages,
					offset_in_page(addr), len, GFP_KERNEL);
	if (ret) {
		unpin_user_pages(p->pages, p->npages);
		goto free;
	}
	p->len = len;
	p->dir = write ? DMA_FROM_DEVICE : DMA_TO_DEVICE;
	return len;
free:
	kvfree(p->pages);
	p->pages = NULL;
	return ret;
}

/* DMA-map the pinned pages; callable in atomic context. */
int rs_pin_map(struct rs_pin *p, struct ib_device *dev)
{
	int n = ib_dma_map_sg(dev, p->sgt.sgl, p->sgt.orig_nents, p->dir);

	if (!n)
		return -ENOMEM;
	p->nents = n;
	return 0;
}

void rs_pin_unmap(struct rs_pin *p, struct ib_device *dev)
{
	if (!p->nents)
		return;
	ib_dma_unmap_sg(dev, p->sgt.sgl, p->sgt.orig_nents, p->dir);
	p->nents = 0;
}

/* Unpin (marking received-into pages dirty) and free; must be unmapped. */
void rs_pin_release(struct rs_pin *p)
{
	if (!p->pages)
		return;
	WARN_ON_ONCE(p->nents);
	sg_free_table(&p->sgt);
	if (p->dir == DMA_FROM_DEVICE)
		unpin_user_pages_dirty_lock(p->pages, p->npages, true);
	else
		unpin_user_pages(p->pages, p->npages);
	kvfree(p->pages);
	p->pages = NULL;
}
