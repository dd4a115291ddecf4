//! Numbers as header values, written without formatting machinery and, where it can be,
//! without an allocation: the rate-limit headers of every response carry three or four.

use std::cell::RefCell;

use bytes::{Bytes, BytesMut};
use http::header::HeaderValue;

/// The numbers below 1 000 written out one after the other ("0123...998999"): the value of a
/// header that says one of them is a slice of this text, shared, with no allocation.
const SMALL: [u8; 2890] = small_numbers();

const fn small_numbers() -> [u8; 2890] {
    let mut text = [0u8; 2890];
    let (mut n, mut at) = (0u16, 0);
    while n < 1000 {
        if n >= 100 {
            text[at] = b'0' + (n / 100) as u8;
            at += 1;
        }
        if n >= 10 {
            text[at] = b'0' + (n / 10 % 10) as u8;
            at += 1;
        }
        text[at] = b'0' + (n % 10) as u8;
        at += 1;
        n += 1;
    }
    text
}

/// Which header a larger number is for: each remembers the last one it rendered on this
/// thread (a policy's count never changes; the reset, a Unix second, changes once a second).
#[derive(Clone, Copy)]
pub(crate) enum Slot {
    Limit = 0,
    Reset = 1,
    Other,
}

/// "00", "01", … "99", one after the other.
const PAIRS: [u8; 200] = digit_pairs();

const fn digit_pairs() -> [u8; 200] {
    let mut pairs = [0u8; 200];
    let mut n = 0;
    while n < 100 {
        pairs[2 * n] = b'0' + (n / 10) as u8;
        pairs[2 * n + 1] = b'0' + (n % 10) as u8;
        n += 1;
    }
    pairs
}

/// How many bytes of digits [`written`] asks the allocator for at a time.
const CHUNK: usize = 4096;

thread_local! {
    static LAST: RefCell<[Option<(u64, HeaderValue)>; 2]> = const { RefCell::new([None, None]) };
    /// Digits of the numbers this thread wrote, each value a shared slice of it.
    static DIGITS: RefCell<BytesMut> = RefCell::new(BytesMut::new());
}

/// The header value of `n` (1 000 or more): its digits written into this thread's current
/// chunk, and the value a shared slice of it. The allocator is asked once per chunk (a few
/// hundred numbers), not once per number; a chunk is freed when the last value in it is.
fn written(n: u64) -> HeaderValue {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    let mut rest = n;
    // Two digits a division, from the table of "00" to "99".
    while rest >= 100 {
        let pair = 2 * (rest % 100) as usize;
        rest /= 100;
        at -= 2;
        digits[at..at + 2].copy_from_slice(&PAIRS[pair..pair + 2]);
    }
    if rest >= 10 {
        at -= 2;
        digits[at..at + 2].copy_from_slice(&PAIRS[2 * rest as usize..2 * rest as usize + 2]);
    } else {
        at -= 1;
        digits[at] = b'0' + rest as u8;
    }
    let digits = &digits[at..];
    DIGITS.with(|chunk| {
        let mut chunk = chunk.borrow_mut();
        if chunk.capacity() - chunk.len() < digits.len() {
            *chunk = BytesMut::with_capacity(CHUNK);
        }
        chunk.extend_from_slice(digits);
        HeaderValue::from_maybe_shared(chunk.split().freeze())
            .unwrap_or_else(|_| HeaderValue::from(n))
    })
}

/// The header value of `n`, written without formatting machinery and, where it can be, without
/// an allocation: a number below 1 000 is a slice of [`SMALL`]; a larger one the same as the
/// last of its `slot` on this thread is that value again (its bytes shared, not copied); any
/// other is [`written`] into a chunk shared with the numbers before it.
pub(crate) fn number(n: u64, slot: Slot) -> HeaderValue {
    if let Ok(small) = u16::try_from(n) {
        let (start, len) = match small {
            0..=9 => (small as usize, 1),
            10..=99 => (10 + 2 * (small as usize - 10), 2),
            100..=999 => (190 + 3 * (small as usize - 100), 3),
            _ => (0, 0),
        };
        if len > 0
            && let Ok(value) =
                HeaderValue::from_maybe_shared(Bytes::from_static(&SMALL[start..start + len]))
        {
            return value;
        }
    }
    if matches!(slot, Slot::Other) {
        return written(n);
    }
    LAST.with(|last| {
        let mut last = last.borrow_mut();
        match &mut last[slot as usize] {
            Some((m, value)) if *m == n => value.clone(),
            cached => {
                let value = written(n);
                *cached = Some((n, value.clone()));
                value
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_read_as_their_digits_whatever_the_path() {
        for n in (0..1_100).chain([9_999, 10_000, 1_760_000_000, u64::MAX]) {
            for slot in [Slot::Limit, Slot::Reset, Slot::Other] {
                // Twice: the second may come from the thread's last value.
                for _ in 0..2 {
                    assert_eq!(number(n, slot), HeaderValue::from(n), "{n}");
                }
            }
        }
        // A slot remembers only its own number.
        assert_eq!(number(5_000, Slot::Limit), "5000");
        assert_eq!(number(7_000, Slot::Reset), "7000");
        assert_eq!(number(5_000, Slot::Limit), "5000");
        assert_eq!(number(6_000, Slot::Limit), "6000");
    }

    #[test]
    fn written_numbers_keep_their_digits_after_their_chunk_is_replaced() {
        // About forty chunks' worth, all held at once, then read.
        let values: Vec<(u64, HeaderValue)> = (0..8_000u64)
            .map(|i| u64::MAX - i * 7_919_000_001)
            .chain([1_000, 1_001, 99_999_999])
            .map(|n| (n, written(n)))
            .collect();
        for (n, value) in &values {
            assert_eq!(*value, HeaderValue::from(*n), "{n}");
        }
    }
}
