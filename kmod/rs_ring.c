// SPDX-License-Identifier: GPL-2.0
/*
 * Stream and send rings: order-0 pages, mapped contiguously for the CPU
 * with vmap() and for the HCA with one fast-registration MR. No high-order
 * allocation is ever needed, whatever the ring size.
 *
 * The pages are zeroed: the stream buffer is read by recvmsg() as far as
 * the peer claims to have written, and nothing of the kernel's may show
 * through. The rings are streaming DMA mappings; rs_ring_sync() tells the
 * DMA API of each hand-off between CPU and HCA (docs/design.md, "DMA").
 */
#include <linux/dma-mapping.h>
#include <linux/random.h>
#include <linux/slab.h>
#include <linux/vmalloc.h>
#include <linux/uio.h>

#include "rs.h"

/* extra: more GFP flags (__GFP_NORETRY for a ring that may fail to grow) */
int rs_ring_alloc(struct rs_ring *r, u32 size, gfp_t extra)
{
	unsigned int i;

	memset(r, 0, sizeof(*r));
	r->npages = size >> PAGE_SHIFT;
	r->size = size;
	r->pages = kcalloc(r->npages, sizeof(*r->pages), GFP_KERNEL | extra);
	if (!r->pages)
		return -ENOMEM;
	for (i = 0; i < r->npages; i++) {
		r->pages[i] = alloc_page(GFP_KERNEL | __GFP_ACCOUNT |
					 __GFP_ZERO | extra);
		if (!r->pages[i])
			goto fail;
	}
	r->vaddr = vmap(r->pages, r->npages, VM_MAP, PAGE_KERNEL);
	if (!r->vaddr)
		goto fail;
	return 0;
fail:
	rs_ring_free(r);
	return -ENOMEM;
}

void rs_ring_free(struct rs_ring *r)
{
	unsigned int i;

	if (r->vaddr)
		vunmap(r->vaddr);
	r->vaddr = NULL;
	if (r->pages) {
		for (i = 0; i < r->npages; i++)
			if (r->pages[i])
				__free_page(r->pages[i]);
		kfree(r->pages);
	}
	r->pages = NULL;
}

/*
 * Capacity to ask ib_alloc_mr() for, to map up to npages pages: one more
 * where the device allows it. rxe (6.1) keeps an MR's page list in arrays
 * of 256 entries and, when a copy ends exactly at the end of the last
 * entry of an array, steps to the next array and reads its pointer before
 * leaving the loop: past the end of its allocation when that was the last
 * one (KASAN: slab-out-of-bounds in rxe_mr_copy). A ring of a multiple of
 * 256 pages hits that with every write that ends at its end; a spare
 * entry makes rxe allocate the array it steps to. ADVERT MRs, sized to
 * the device's limit, leave their last entry unused instead (rs->dmax).
 */
u32 rs_mr_pages(struct ib_device *dev, u32 npages)
{
	return min(npages + 1, dev->attrs.max_fast_reg_page_list_len);
}

/*
 * ib_map_mr_sg() sets an MR's iova to the DMA address of its first byte: a
 * kernel virtual address on rxe, a physical one without an IOMMU. Peers
 * learn the iova from SETUP and ADVERT, so replace everything above the
 * page offset by random bits, as xprtrdma rewrites the upper bits of its
 * MRs' iovas: the HCA translates iova - mr->iova through the page list,
 * and keeping the offset keeps the first page's offset (rxe, for one,
 * took it from the old iova). Set before the IB_WR_REG_MR is posted,
 * which is when the HCA reads it. Bit 62 set and bit 63 clear: it never
 * looks like a physical or a kernel address, and iova + length never
 * wraps.
 */
void rs_mr_hide_iova(struct ib_mr *mr)
{
	u64 rnd = get_random_u64() & GENMASK_ULL(61, PAGE_SHIFT);

	mr->iova = BIT_ULL(62) | rnd | offset_in_page(mr->iova);
}

/*
 * Does the DMA API need to hear of hand-offs (swiotlb bounce buffers,
 * non-coherent caches)? If so, note each page's DMA address for
 * rs_ring_sync(): the mapped entries may merge pages.
 */
static int rs_ring_dma_init(struct rs_ring *r)
{
	struct scatterlist *sg;
	unsigned int i, n, p = 0;
	u32 o;

	if (ib_uses_virt_dma(r->dev))
		return 0;
	for (n = 0; n < r->nseg; n++)
		for_each_sgtable_dma_sg(&r->sgt[n], sg, i)
			if (dma_need_sync(r->dev->dma_device,
					  sg_dma_address(sg)))
				r->need_sync = true;
	if (!r->need_sync)
		return 0;
	r->dma = kvcalloc(r->npages, sizeof(*r->dma), GFP_KERNEL);
	if (!r->dma)
		return -ENOMEM;
	for (n = 0; n < r->nseg; n++)
		for_each_sgtable_dma_sg(&r->sgt[n], sg, i)
			for (o = 0; o < sg_dma_len(sg) && p < r->npages;
			     o += PAGE_SIZE)
				r->dma[p++] = sg_dma_address(sg) + o;
	return p == r->npages ? 0 : -EINVAL;
}

/*
 * Hand len bytes at off (wrapping at the end) to the CPU or to the HCA.
 * The caller holds rs->lock and has seen !rs->dead, so the ring is still
 * mapped. Free when the mapping needs no syncs (x86 without swiotlb).
 */
void rs_ring_sync(struct rs_ring *r, u32 off, u32 len, bool for_cpu)
{
	u32 in, n;

	if (!r->need_sync)
		return;
	while (len) {
		in = offset_in_page(off);
		n = min_t(u32, len, PAGE_SIZE - in);
		if (for_cpu)
			ib_dma_sync_single_for_cpu(r->dev,
						   r->dma[off >> PAGE_SHIFT] + in,
						   n, r->dir);
		else
			ib_dma_sync_single_for_device(r->dev,
						      r->dma[off >> PAGE_SHIFT] +
						      in, n, r->dir);
		len -= n;
		off = (off + n) & (r->size - 1);
	}
}

/* DMA-map segment n and map it into a fresh MR. */
static int rs_ring_map_seg(struct rs_ring *r, struct ib_pd *pd,
			   unsigned int n)
{
	u32 pages = 1U << (r->seg_shift - PAGE_SHIFT);
	struct sg_table *sgt = &r->sgt[n];
	struct ib_mr *mr;
	int ret;

	ret = sg_alloc_table_from_pages(sgt, r->pages + n * pages, pages, 0,
					1U << r->seg_shift, GFP_KERNEL);
	if (ret)
		return ret;
	ret = ib_dma_map_sgtable_attrs(r->dev, sgt, r->dir, 0);
	if (ret) {
		sg_free_table(sgt);
		return ret;
	}
	r->nmapped++;
	mr = ib_alloc_mr(pd, IB_MR_TYPE_MEM_REG, rs_mr_pages(r->dev, pages));
	if (IS_ERR(mr))
		return PTR_ERR(mr);
	r->mr[n] = mr;
	ret = ib_map_mr_sg(mr, sgt->sgl, sgt->nents, NULL, PAGE_SIZE);
	if (ret != sgt->nents)
		return ret < 0 ? ret : -EINVAL;
	rs_mr_hide_iova(mr);
	return 0;
}

/*
 * DMA-map the pages and map them into fresh MRs, ready for IB_WR_REG_MR:
 * one per seg bytes (a power of two, rs_dev_seg_max()), so a ring may be
 * larger than one MR can map. A peer writes into one MR, so a stream
 * buffer is a single segment; the send ring, which only our HCA reads,
 * may have several (rs_post_chunk() splits its WRITEs' gather lists at
 * their edges). On failure the caller unmaps what was mapped.
 */
int rs_ring_map(struct rs_ring *r, struct ib_device *dev, struct ib_pd *pd,
		enum dma_data_direction dir, u32 seg)
{
	unsigned int n;
	int ret;

	seg = min(seg, r->size);
	if (WARN_ON_ONCE(!is_power_of_2(seg) || seg < PAGE_SIZE ||
			 r->size / seg > RS_RING_SEGS))
		return -EINVAL;
	r->dev = dev;
	r->dir = dir;
	r->seg_shift = ilog2(seg);
	r->nseg = r->size / seg;
	for (n = 0; n < r->nseg; n++) {
		ret = rs_ring_map_seg(r, pd, n);
		if (ret)
			return ret;
	}
	return rs_ring_dma_init(r);
}

/* The QP is drained or gone (or never saw the MRs): nothing syncs now. */
void rs_ring_unmap(struct rs_ring *r, struct ib_device *dev,
		   enum dma_data_direction dir)
{
	unsigned int n;

	for (n = 0; n < RS_RING_SEGS; n++) {
		if (r->mr[n])
			ib_dereg_mr(r->mr[n]);
		r->mr[n] = NULL;
	}
	for (n = 0; n < r->nmapped; n++) {
		ib_dma_unmap_sgtable_attrs(dev, &r->sgt[n], dir, 0);
		sg_free_table(&r->sgt[n]);
	}
	r->nmapped = 0;
	r->need_sync = false;
	kvfree(r->dma);
	r->dma = NULL;
}

/*
 * Copy the stream bytes [from, to) of src to where they belong in dst (each
 * at its cursor modulo the ring's size): dst is a grown copy of src.
 */
void rs_ring_move(struct rs_ring *dst, const struct rs_ring *src, u64 from,
		  u64 to)
{
	u32 so, d, n;

	while (from < to) {
		so = (u32)from & (src->size - 1);
		d = (u32)from & (dst->size - 1);
		n = min3((u64)(src->size - so), (u64)(dst->size - d), to - from);
		memcpy(dst->vaddr + d, src->vaddr + so, n);
		from += n;
	}
}

/* Copy len bytes from the user into the ring at off, wrapping at the end. */
int rs_ring_copy_in(struct rs_ring *r, u32 off, struct iov_iter *from,
		    u32 len)
{
	u32 first = min(len, r->size - off);

	if (WARN_ON_ONCE(len > r->size))
		return -EFAULT;
	if (copy_from_iter(r->vaddr + off, first, from) != first)
		return -EFAULT;
	if (len > first &&
	    copy_from_iter(r->vaddr, len - first, from) != len - first)
		return -EFAULT;
	return 0;
}

/*
 * Copy len bytes at off out to the caller, wrapping at the end: all or
 * nothing. A short copy leaves the bytes in the ring, so it takes back
 * what reached the destination: a splice() pipe (6.1's generic read path,
 * ITER_PIPE, short when a pipe page cannot be had) would otherwise keep
 * them beside the bytes the recvmsg() returned, and see them again.
 */
int rs_ring_copy_out(struct rs_ring *r, u32 off, struct iov_iter *to,
		     u32 len)
{
	u32 first = min(len, r->size - off);
	size_t n;

	if (WARN_ON_ONCE(len > r->size))
		return -EFAULT;

	n = copy_to_iter(r->vaddr + off, first, to);
	if (n == first && len > first)
		n += copy_to_iter(r->vaddr, len - first, to);
	if (n == len)
		return 0;
	iov_iter_revert(to, n);
	return -EFAULT;
}
