//! The Huffman code of RFC 7541 Appendix B. Encoding walks the code table; decoding walks a
//! state machine over half-bytes built from the same table at compile time (the technique of
//! nghttp2's `mkhufftbl.py`), so a decoded string costs two table lookups per input byte and no
//! bit-by-bit tree walk.

use super::DecodeError;

/// `(code, length in bits)` of every symbol, the code in the low bits; index 256 is EOS.
/// The code is canonical (the `codes_are_canonical` test rebuilds it from the lengths).
#[rustfmt::skip]
pub(super) const CODES: [(u32, u8); 257] = [
    // 0x00..=0x0f
    (0x1ff8, 13), (0x7fffd8, 23), (0xfffffe2, 28), (0xfffffe3, 28),
    (0xfffffe4, 28), (0xfffffe5, 28), (0xfffffe6, 28), (0xfffffe7, 28),
    (0xfffffe8, 28), (0xffffea, 24), (0x3ffffffc, 30), (0xfffffe9, 28),
    (0xfffffea, 28), (0x3ffffffd, 30), (0xfffffeb, 28), (0xfffffec, 28),
    // 0x10..=0x1f
    (0xfffffed, 28), (0xfffffee, 28), (0xfffffef, 28), (0xffffff0, 28),
    (0xffffff1, 28), (0xffffff2, 28), (0x3ffffffe, 30), (0xffffff3, 28),
    (0xffffff4, 28), (0xffffff5, 28), (0xffffff6, 28), (0xffffff7, 28),
    (0xffffff8, 28), (0xffffff9, 28), (0xffffffa, 28), (0xffffffb, 28),
    // 0x20..=0x2f
    (0x14, 6), (0x3f8, 10), (0x3f9, 10), (0xffa, 12),
    (0x1ff9, 13), (0x15, 6), (0xf8, 8), (0x7fa, 11),
    (0x3fa, 10), (0x3fb, 10), (0xf9, 8), (0x7fb, 11),
    (0xfa, 8), (0x16, 6), (0x17, 6), (0x18, 6),
    // 0x30..=0x3f
    (0x0, 5), (0x1, 5), (0x2, 5), (0x19, 6),
    (0x1a, 6), (0x1b, 6), (0x1c, 6), (0x1d, 6),
    (0x1e, 6), (0x1f, 6), (0x5c, 7), (0xfb, 8),
    (0x7ffc, 15), (0x20, 6), (0xffb, 12), (0x3fc, 10),
    // 0x40..=0x4f
    (0x1ffa, 13), (0x21, 6), (0x5d, 7), (0x5e, 7),
    (0x5f, 7), (0x60, 7), (0x61, 7), (0x62, 7),
    (0x63, 7), (0x64, 7), (0x65, 7), (0x66, 7),
    (0x67, 7), (0x68, 7), (0x69, 7), (0x6a, 7),
    // 0x50..=0x5f
    (0x6b, 7), (0x6c, 7), (0x6d, 7), (0x6e, 7),
    (0x6f, 7), (0x70, 7), (0x71, 7), (0x72, 7),
    (0xfc, 8), (0x73, 7), (0xfd, 8), (0x1ffb, 13),
    (0x7fff0, 19), (0x1ffc, 13), (0x3ffc, 14), (0x22, 6),
    // 0x60..=0x6f
    (0x7ffd, 15), (0x3, 5), (0x23, 6), (0x4, 5),
    (0x24, 6), (0x5, 5), (0x25, 6), (0x26, 6),
    (0x27, 6), (0x6, 5), (0x74, 7), (0x75, 7),
    (0x28, 6), (0x29, 6), (0x2a, 6), (0x7, 5),
    // 0x70..=0x7f
    (0x2b, 6), (0x76, 7), (0x2c, 6), (0x8, 5),
    (0x9, 5), (0x2d, 6), (0x77, 7), (0x78, 7),
    (0x79, 7), (0x7a, 7), (0x7b, 7), (0x7ffe, 15),
    (0x7fc, 11), (0x3ffd, 14), (0x1ffd, 13), (0xffffffc, 28),
    // 0x80..=0x8f
    (0xfffe6, 20), (0x3fffd2, 22), (0xfffe7, 20), (0xfffe8, 20),
    (0x3fffd3, 22), (0x3fffd4, 22), (0x3fffd5, 22), (0x7fffd9, 23),
    (0x3fffd6, 22), (0x7fffda, 23), (0x7fffdb, 23), (0x7fffdc, 23),
    (0x7fffdd, 23), (0x7fffde, 23), (0xffffeb, 24), (0x7fffdf, 23),
    // 0x90..=0x9f
    (0xffffec, 24), (0xffffed, 24), (0x3fffd7, 22), (0x7fffe0, 23),
    (0xffffee, 24), (0x7fffe1, 23), (0x7fffe2, 23), (0x7fffe3, 23),
    (0x7fffe4, 23), (0x1fffdc, 21), (0x3fffd8, 22), (0x7fffe5, 23),
    (0x3fffd9, 22), (0x7fffe6, 23), (0x7fffe7, 23), (0xffffef, 24),
    // 0xa0..=0xaf
    (0x3fffda, 22), (0x1fffdd, 21), (0xfffe9, 20), (0x3fffdb, 22),
    (0x3fffdc, 22), (0x7fffe8, 23), (0x7fffe9, 23), (0x1fffde, 21),
    (0x7fffea, 23), (0x3fffdd, 22), (0x3fffde, 22), (0xfffff0, 24),
    (0x1fffdf, 21), (0x3fffdf, 22), (0x7fffeb, 23), (0x7fffec, 23),
    // 0xb0..=0xbf
    (0x1fffe0, 21), (0x1fffe1, 21), (0x3fffe0, 22), (0x1fffe2, 21),
    (0x7fffed, 23), (0x3fffe1, 22), (0x7fffee, 23), (0x7fffef, 23),
    (0xfffea, 20), (0x3fffe2, 22), (0x3fffe3, 22), (0x3fffe4, 22),
    (0x7ffff0, 23), (0x3fffe5, 22), (0x3fffe6, 22), (0x7ffff1, 23),
    // 0xc0..=0xcf
    (0x3ffffe0, 26), (0x3ffffe1, 26), (0xfffeb, 20), (0x7fff1, 19),
    (0x3fffe7, 22), (0x7ffff2, 23), (0x3fffe8, 22), (0x1ffffec, 25),
    (0x3ffffe2, 26), (0x3ffffe3, 26), (0x3ffffe4, 26), (0x7ffffde, 27),
    (0x7ffffdf, 27), (0x3ffffe5, 26), (0xfffff1, 24), (0x1ffffed, 25),
    // 0xd0..=0xdf
    (0x7fff2, 19), (0x1fffe3, 21), (0x3ffffe6, 26), (0x7ffffe0, 27),
    (0x7ffffe1, 27), (0x3ffffe7, 26), (0x7ffffe2, 27), (0xfffff2, 24),
    (0x1fffe4, 21), (0x1fffe5, 21), (0x3ffffe8, 26), (0x3ffffe9, 26),
    (0xffffffd, 28), (0x7ffffe3, 27), (0x7ffffe4, 27), (0x7ffffe5, 27),
    // 0xe0..=0xef
    (0xfffec, 20), (0xfffff3, 24), (0xfffed, 20), (0x1fffe6, 21),
    (0x3fffe9, 22), (0x1fffe7, 21), (0x1fffe8, 21), (0x7ffff3, 23),
    (0x3fffea, 22), (0x3fffeb, 22), (0x1ffffee, 25), (0x1ffffef, 25),
    (0xfffff4, 24), (0xfffff5, 24), (0x3ffffea, 26), (0x7ffff4, 23),
    // 0xf0..=0xff
    (0x3ffffeb, 26), (0x7ffffe6, 27), (0x3ffffec, 26), (0x3ffffed, 26),
    (0x7ffffe7, 27), (0x7ffffe8, 27), (0x7ffffe9, 27), (0x7ffffea, 27),
    (0x7ffffeb, 27), (0xffffffe, 28), (0x7ffffec, 27), (0x7ffffed, 27),
    (0x7ffffee, 27), (0x7ffffef, 27), (0x7fffff0, 27), (0x3ffffee, 26),
    // EOS
    (0x3fffffff, 30),
];

/// The symbol that must never appear in a string (§5.2).
const EOS: usize = 256;

/// The number of bytes `input` takes Huffman-coded.
pub(super) fn encoded_len(input: &[u8]) -> usize {
    let bits: usize = input
        .iter()
        .map(|&b| usize::from(CODES[usize::from(b)].1))
        .sum();
    bits.div_ceil(8)
}

/// Appends `input` Huffman-coded, padded to a byte with the high bits of EOS (all ones).
pub(super) fn encode(input: &[u8], out: &mut Vec<u8>) {
    out.reserve(encoded_len(input));
    // Bits not yet written sit in the low `pending` bits of `acc`; codes are at most 30 bits,
    // so fewer than 8 pending plus one code always fit.
    let mut acc: u64 = 0;
    let mut pending: u32 = 0;
    for &b in input {
        let (code, len) = CODES[usize::from(b)];
        acc = (acc << len) | u64::from(code);
        pending += u32::from(len);
        while pending >= 8 {
            pending -= 8;
            out.push((acc >> pending) as u8);
        }
    }
    if pending > 0 {
        out.push(((acc << (8 - pending)) as u8) | (0xff >> pending));
    }
}

/// One transition of the decoding state machine: what reading a half-byte in some state does.
#[derive(Clone, Copy)]
struct Step {
    /// The state after the half-byte: an inner node of the code tree (0 is the root).
    next: u8,
    /// The symbol completed by the half-byte, when `flags` has [`EMIT`].
    symbol: u8,
    flags: u8,
}

/// The half-byte completes a symbol (never more than one: the shortest code is 5 bits).
const EMIT: u8 = 1;
/// The half-byte completes EOS.
const FAIL: u8 = 2;
/// A string may end in `next`: the bits read since the last symbol are at most 7 ones.
const ACCEPT: u8 = 4;

/// The code tree's inner nodes (the root is 0): each child is an inner node's index, or
/// `LEAF + symbol`. 257 leaves make 256 inner nodes, so a state fits in a byte.
const LEAF: u16 = 256;

const fn code_tree() -> [[u16; 2]; 256] {
    let mut nodes = [[0u16; 2]; 256];
    let mut used = 1;
    let mut symbol = 0;
    while symbol < CODES.len() {
        let (code, len) = CODES[symbol];
        let mut node = 0;
        let mut bit = len as u32;
        while bit > 1 {
            bit -= 1;
            let side = ((code >> bit) & 1) as usize;
            if nodes[node][side] == 0 {
                nodes[node][side] = used;
                used += 1;
            }
            // A code that is a prefix of another would index past the table here, which
            // fails the build.
            node = nodes[node][side] as usize;
        }
        nodes[node][(code & 1) as usize] = LEAF + symbol as u16;
        symbol += 1;
    }
    assert!(used == 256, "the Huffman code is not complete");
    nodes
}

const fn steps() -> [[Step; 16]; 256] {
    let nodes = code_tree();
    // The all-ones path from the root, up to 7 bits deep, is where padding may stop.
    let mut accept = [false; 256];
    let mut node = 0;
    let mut depth = 0;
    while depth <= 7 {
        accept[node] = true;
        node = nodes[node][1] as usize;
        depth += 1;
    }
    let empty = Step {
        next: 0,
        symbol: 0,
        flags: 0,
    };
    let mut table = [[empty; 16]; 256];
    let mut state = 0;
    while state < 256 {
        let mut half = 0;
        while half < 16 {
            let mut node = state;
            let mut step = empty;
            let mut bit = 4;
            while bit > 0 {
                bit -= 1;
                let child = nodes[node][(half >> bit) & 1] as usize;
                if child < LEAF as usize {
                    node = child;
                    continue;
                }
                if child - LEAF as usize == EOS {
                    step.flags |= FAIL;
                } else {
                    step.flags |= EMIT;
                    step.symbol = (child - LEAF as usize) as u8;
                }
                node = 0;
            }
            step.next = node as u8;
            if accept[node] {
                step.flags |= ACCEPT;
            }
            table[state][half] = step;
            half += 1;
        }
        state += 1;
    }
    table
}

/// 256 states × 16 half-bytes × 3 bytes: 12 KiB, shared by every connection.
static STEPS: [[Step; 16]; 256] = steps();

/// Appends the decoding of the Huffman-coded `input`. Fails on EOS in the string and on
/// padding that is longer than 7 bits or not the high bits of EOS (RFC 7541 §5.2).
pub(super) fn decode(input: &[u8], out: &mut Vec<u8>) -> Result<(), DecodeError> {
    // The shortest code is 5 bits, so this is all the room the string can need.
    out.reserve(input.len() * 8 / 5);
    let mut state = 0usize;
    let mut accept = true;
    for &byte in input {
        for half in [byte >> 4, byte & 0x0f] {
            let step = STEPS[state][usize::from(half)];
            if step.flags & FAIL != 0 {
                return Err(super::HUFFMAN_EOS);
            }
            if step.flags & EMIT != 0 {
                out.push(step.symbol);
            }
            state = usize::from(step.next);
            accept = step.flags & ACCEPT != 0;
        }
    }
    if accept {
        Ok(())
    } else {
        Err(super::HUFFMAN_PADDING)
    }
}
