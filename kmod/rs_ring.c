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

int rs_ring_alloc(struct rs_ring *r, u32 size)
{
	unsigned int i;

	memset(r, 0, sizeof(*r));
	r->npages = size >> PAGE_SHIFT;
	r->size = size;
	r->pages = kcalloc(r->npages, sizeof(*r->pages), GFP_KERNEL);
	if (!r->pages)
		return -ENOMEM;
	for (i = 0; i < r->npages; i++) {
		r->pages[i] = alloc_page(GFP_KERNEL | __GFP_ACCOUNT |
					   __GFP_ZERO);
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
	unsigned int i, p = 0;
	u32 o;

	if (ib_uses_virt_dma(r->dev))
		return 0;
	for_each_sgtable_dma_sg(&r->sgt, sg, i)
		if (dma_need_sync(r->dev->dma_device, sg_dma_address(sg)))
			r->need_sync = true;
	if (!r->need_sync)
		return 0;
	r->dma = kvcalloc(r->npages, sizeof(*r->dma), GFP_KERNEL);
	if (!r->dma)
		return -ENOMEM;
	for_each_sgtable_dma_sg(&r->sgt, sg, i)
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

/* DMA-map the pages and map them into a fresh MR, ready for IB_WR_REG_MR. */
int rs_ring_map(struct rs_ring *r, struct ib_device *dev, struct ib_pd *pd,
		enum dma_data_direction dir)
{
	int ret, n;

	ret = sg_alloc_table_from_pages(&r->sgt, r->pages, r->npages, 0,
					r->size, GFP_KERNEL);
	if (ret)
		return ret;
	ret = ib_dma_map_sgtable_attrs(dev, &r->sgt, dir, 0);
	if (ret)
		goto free_sgt;
	r->dma_mapped = true;
	r->dev = dev;
	r->dir = dir;
	ret = rs_ring_dma_init(r);
	if (ret)
		goto unmap;
	r->mr = ib_alloc_mr(pd, IB_MR_TYPE_MEM_REG,
			    rs_mr_pages(dev, r->npages));
	if (IS_ERR(r->mr)) {
		ret = PTR_ERR(r->mr);
		r->mr = NULL;
		goto unmap;
	}
	n = ib_map_mr_sg(r->mr, r->sgt.sgl, r->sgt.nents, NULL, PAGE_SIZE);
	if (n != r->sgt.nents) {
		ret = n < 0 ? n : -EINVAL;
		goto dereg;
	}
	rs_mr_hide_iova(r->mr);
	return 0;
dereg:
	ib_dereg_mr(r->mr);
	r->mr = NULL;
unmap:
	rs_ring_unmap(r, dev, dir);
	return ret;
free_sgt:
	sg_free_table(&r->sgt);
	return ret;
}

/* The QP is drained or gone: nothing syncs any more. */
void rs_ring_unmap(struct rs_ring *r, struct ib_device *dev,
		   enum dma_data_direction dir)
{
	if (r->mr)
		ib_dereg_mr(r->mr);
	r->mr = NULL;
	if (r->dma_mapped) {
		ib_dma_unmap_sgtable_attrs(dev, &r->sgt, dir, 0);
		sg_free_table(&r->sgt);
	}
	r->dma_mapped = false;
	r->need_sync = false;
	kvfree(r->dma);
	r->dma = NULL;
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
