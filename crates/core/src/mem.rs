//! Memory copies tuned for the message path: messages of a few bytes are copied inline
//! instead of through a call to `memcpy`, which costs more than the copy itself.

/// Copy `n` bytes from `src` to `dst`.
///
/// # Safety
/// As for `std::ptr::copy_nonoverlapping`.
#[inline(always)]
pub unsafe fn copy(src: *const u8, dst: *mut u8, n: usize) {
    if n <= 16 {
        if n >= 8 {
            // Two possibly overlapping 8-byte moves cover 8..=16 bytes.
            let a = (src as *const u64).read_unaligned();
            let b = (src.add(n - 8) as *const u64).read_unaligned();
            (dst as *mut u64).write_unaligned(a);
            (dst.add(n - 8) as *mut u64).write_unaligned(b);
        } else if n >= 4 {
            let a = (src as *const u32).read_unaligned();
            let b = (src.add(n - 4) as *const u32).read_unaligned();
            (dst as *mut u32).write_unaligned(a);
            (dst.add(n - 4) as *mut u32).write_unaligned(b);
        } else {
            for i in 0..n {
                *dst.add(i) = *src.add(i);
            }
        }
        return;
    }
    std::ptr::copy_nonoverlapping(src, dst, n);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_small_length() {
        let src: Vec<u8> = (0..64u8)
            .map(|i| i.wrapping_mul(37).wrapping_add(1))
            .collect();
        for n in 0..40 {
            let mut dst = vec![0u8; 48];
            unsafe { copy(src.as_ptr(), dst.as_mut_ptr().add(3), n) };
            assert_eq!(&dst[3..3 + n], &src[..n], "n={n}");
            assert!(dst[..3].iter().all(|b| *b == 0));
            assert!(
                dst[3 + n..].iter().all(|b| *b == 0),
                "n={n}: wrote past the end"
            );
        }
    }
}
