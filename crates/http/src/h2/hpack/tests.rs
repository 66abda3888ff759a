//! Exact-byte tests: every example of RFC 7541 Appendix C, the Huffman code against the
//! RFC's strings, each decoding error, and encoder output read back by the decoder.

use super::huffman::{self, CODES};
use super::table::{static_name_index, STATIC};
use super::*;
use proptest::collection::vec;
use proptest::prelude::*;

fn hex(s: &str) -> Vec<u8> {
    let digits: Vec<u8> = s.bytes().filter(u8::is_ascii_hexdigit).collect();
    digits
        .chunks(2)
        .map(|p| u8::from_str_radix(std::str::from_utf8(p).unwrap(), 16).unwrap())
        .collect()
}

type Fields = Vec<(Vec<u8>, Vec<u8>)>;

fn decode(d: &mut Decoder, block: &[u8]) -> Result<Fields, DecodeError> {
    let mut fields = Vec::new();
    d.decode(block, &mut |n, v| fields.push((n.to_vec(), v.to_vec())))?;
    Ok(fields)
}

fn owned(fields: &[(&str, &str)]) -> Fields {
    fields
        .iter()
        .map(|(n, v)| (n.as_bytes().to_vec(), v.as_bytes().to_vec()))
        .collect()
}

fn dynamic(d: &Decoder) -> Fields {
    (0..d.table.len())
        .map(|i| {
            let (n, v) = d.table.get(i).unwrap();
            (n.to_vec(), v.to_vec())
        })
        .collect()
}

/// One block of an Appendix C example: its bytes, the fields it decodes to, and the dynamic
/// table (newest first) and its size afterwards.
struct Step<'a> {
    block: &'a str,
    fields: &'a [(&'a str, &'a str)],
    table: &'a [(&'a str, &'a str)],
    size: usize,
}

fn run(max: usize, steps: &[Step]) {
    let mut d = Decoder::new(max);
    for (i, step) in steps.iter().enumerate() {
        let got = decode(&mut d, &hex(step.block)).unwrap_or_else(|e| panic!("block {i}: {e:?}"));
        assert_eq!(got, owned(step.fields), "block {i}");
        assert_eq!(dynamic(&d), owned(step.table), "block {i}");
        assert_eq!(d.table_size(), step.size, "block {i}");
    }
}

// C.1: integer representation.

#[test]
fn c1_integers() {
    let cases: [(&[u8], u32, usize); 3] = [
        (&[0xea], 5, 10),
        (&[0x1f, 0x9a, 0x0a], 5, 1337),
        (&[0x2a], 8, 42),
    ];
    for (bytes, prefix, value) in cases {
        let mut input = bytes;
        assert_eq!(integer(&mut input, prefix), Ok(value));
        assert!(input.is_empty());
    }
    let mut out = Vec::new();
    write_integer(0xe0, 5, 10, &mut out);
    write_integer(0x00, 5, 1337, &mut out);
    assert_eq!(out, [0xea, 0x1f, 0x9a, 0x0a]);
}

#[test]
fn integer_limits() {
    // 2^32 - 1 is the largest value read; one more, or a sixth continuation byte, fails.
    let mut out = Vec::new();
    write_integer(0, 7, u32::MAX as usize, &mut out);
    let mut input = &out[..];
    assert_eq!(integer(&mut input, 7), Ok(u32::MAX as usize));
    out.clear();
    write_integer(0, 7, u32::MAX as usize + 1, &mut out);
    assert_eq!(integer(&mut &out[..], 7), Err(INTEGER_OVERFLOW));
    let padded = [0x7f, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00];
    assert_eq!(integer(&mut &padded[..], 7), Err(INTEGER_OVERFLOW));
    let padded = [0x7f, 0x80, 0x80, 0x80, 0x80, 0x00];
    assert_eq!(integer(&mut &padded[..], 7), Ok(127));
    assert_eq!(integer(&mut &[0x7f, 0x80][..], 7), Err(TRUNCATED));
    assert_eq!(integer(&mut &[][..], 7), Err(TRUNCATED));
}

// C.2: header field representations.

#[test]
fn c2_1_literal_with_indexing() {
    run(
        4096,
        &[Step {
            block: "400a 6375 7374 6f6d 2d6b 6579 0d63 7573 746f 6d2d 6865 6164 6572",
            fields: &[("custom-key", "custom-header")],
            table: &[("custom-key", "custom-header")],
            size: 55,
        }],
    );
}

#[test]
fn c2_2_literal_without_indexing() {
    run(
        4096,
        &[Step {
            block: "040c 2f73 616d 706c 652f 7061 7468",
            fields: &[(":path", "/sample/path")],
            table: &[],
            size: 0,
        }],
    );
}

#[test]
fn c2_3_literal_never_indexed() {
    run(
        4096,
        &[Step {
            block: "1008 7061 7373 776f 7264 0673 6563 7265 74",
            fields: &[("password", "secret")],
            table: &[],
            size: 0,
        }],
    );
}

#[test]
fn c2_4_indexed() {
    run(
        4096,
        &[Step {
            block: "82",
            fields: &[(":method", "GET")],
            table: &[],
            size: 0,
        }],
    );
}

// C.3 and C.4: requests, without and with Huffman coding.

const REQUEST_1: &[(&str, &str)] = &[
    (":method", "GET"),
    (":scheme", "http"),
    (":path", "/"),
    (":authority", "www.example.com"),
];
const REQUEST_2: &[(&str, &str)] = &[
    (":method", "GET"),
    (":scheme", "http"),
    (":path", "/"),
    (":authority", "www.example.com"),
    ("cache-control", "no-cache"),
];
const REQUEST_3: &[(&str, &str)] = &[
    (":method", "GET"),
    (":scheme", "https"),
    (":path", "/index.html"),
    (":authority", "www.example.com"),
    ("custom-key", "custom-value"),
];
const REQUEST_TABLE_1: &[(&str, &str)] = &[(":authority", "www.example.com")];
const REQUEST_TABLE_2: &[(&str, &str)] = &[
    ("cache-control", "no-cache"),
    (":authority", "www.example.com"),
];
const REQUEST_TABLE_3: &[(&str, &str)] = &[
    ("custom-key", "custom-value"),
    ("cache-control", "no-cache"),
    (":authority", "www.example.com"),
];

fn requests(blocks: [&str; 3]) {
    run(
        4096,
        &[
            Step {
                block: blocks[0],
                fields: REQUEST_1,
                table: REQUEST_TABLE_1,
                size: 57,
            },
            Step {
                block: blocks[1],
                fields: REQUEST_2,
                table: REQUEST_TABLE_2,
                size: 110,
            },
            Step {
                block: blocks[2],
                fields: REQUEST_3,
                table: REQUEST_TABLE_3,
                size: 164,
            },
        ],
    );
}

#[test]
fn c3_requests_without_huffman() {
    requests([
        "8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d",
        "8286 84be 5808 6e6f 2d63 6163 6865",
        "8287 85bf 400a 6375 7374 6f6d 2d6b 6579 0c63 7573 746f 6d2d 7661 6c75 65",
    ]);
}

#[test]
fn c4_requests_with_huffman() {
    requests([
        "8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff",
        "8286 84be 5886 a8eb 1064 9cbf",
        "8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf",
    ]);
}

// C.5 and C.6: responses with a 256-byte table, so entries are evicted.

const DATE_1: &str = "Mon, 21 Oct 2013 20:13:21 GMT";
const DATE_2: &str = "Mon, 21 Oct 2013 20:13:22 GMT";
const LOCATION: &str = "https://www.example.com";
const COOKIE: &str = "foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1";

fn responses(blocks: [&str; 3]) {
    run(
        256,
        &[
            Step {
                block: blocks[0],
                fields: &[
                    (":status", "302"),
                    ("cache-control", "private"),
                    ("date", DATE_1),
                    ("location", LOCATION),
                ],
                table: &[
                    ("location", LOCATION),
                    ("date", DATE_1),
                    ("cache-control", "private"),
                    (":status", "302"),
                ],
                size: 222,
            },
            Step {
                block: blocks[1],
                fields: &[
                    (":status", "307"),
                    ("cache-control", "private"),
                    ("date", DATE_1),
                    ("location", LOCATION),
                ],
                table: &[
                    (":status", "307"),
                    ("location", LOCATION),
                    ("date", DATE_1),
                    ("cache-control", "private"),
                ],
                size: 222,
            },
            Step {
                block: blocks[2],
                fields: &[
                    (":status", "200"),
                    ("cache-control", "private"),
                    ("date", DATE_2),
                    ("location", LOCATION),
                    ("content-encoding", "gzip"),
                    ("set-cookie", COOKIE),
                ],
                table: &[
                    ("set-cookie", COOKIE),
                    ("content-encoding", "gzip"),
                    ("date", DATE_2),
                ],
                size: 215,
            },
        ],
    );
}

#[test]
fn c5_responses_without_huffman() {
    responses([
        "4803 3330 3258 0770 7269 7661 7465 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133
         2032 303a 3133 3a32 3120 474d 546e 1768 7474 7073 3a2f 2f77 7777 2e65 7861 6d70
         6c65 2e63 6f6d",
        "4803 3330 37c1 c0bf",
        "88c1 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 2032 303a 3133 3a32 3220 474d
         54c0 5a04 677a 6970 7738 666f 6f3d 4153 444a 4b48 514b 425a 584f 5157 454f 5049
         5541 5851 5745 4f49 553b 206d 6178 2d61 6765 3d33 3630 303b 2076 6572 7369 6f6e
         3d31",
    ]);
}

#[test]
fn c6_responses_with_huffman() {
    responses([
        "4882 6402 5885 aec3 771a 4b61 96d0 7abe 9410 54d4 44a8 2005 9504 0b81 66e0 82a6
         2d1b ff6e 919d 29ad 1718 63c7 8f0b 97c8 e9ae 82ae 43d3",
        "4883 640e ffc1 c0bf",
        "88c1 6196 d07a be94 1054 d444 a820 0595 040b 8166 e084 a62d 1bff c05a 839b d9ab
         77ad 94e7 821d d7f2 e6c7 b335 dfdf cd5b 3960 d5af 2708 7f36 72c1 ab27 0fb5 291f
         9587 3160 65c0 03ed 4ee5 b106 3d50 07",
    ]);
}

// The Huffman code.

#[test]
fn codes_are_canonical() {
    // Codes of equal length are consecutive in symbol order, and each length starts where
    // the shorter ones left off: the lengths alone rebuild the table, and they fill the code
    // space exactly (Kraft sum 1).
    let mut order: Vec<usize> = (0..CODES.len()).collect();
    order.sort_by_key(|&s| (CODES[s].1, s));
    let mut code = 0u64;
    let mut len = CODES[order[0]].1;
    for (i, &s) in order.iter().enumerate() {
        if i > 0 {
            code = (code + 1) << (CODES[s].1 - len);
            len = CODES[s].1;
        }
        assert_eq!(u64::from(CODES[s].0), code, "symbol {s}");
    }
    let kraft: u64 = CODES.iter().map(|&(_, l)| 1u64 << (30 - l)).sum();
    assert_eq!(kraft, 1 << 30);
}

#[test]
fn huffman_matches_the_rfc() {
    let cases = [
        ("www.example.com", "f1e3 c2e5 f23a 6ba0 ab90 f4ff"),
        ("no-cache", "a8eb 1064 9cbf"),
        ("custom-key", "25a8 49e9 5ba9 7d7f"),
        ("custom-value", "25a8 49e9 5bb8 e8b4 bf"),
        ("302", "6402"),
        ("307", "640e ff"),
        ("private", "aec3 771a 4b"),
        (
            DATE_1,
            "d07a be94 1054 d444 a820 0595 040b 8166 e082 a62d 1bff",
        ),
        (
            DATE_2,
            "d07a be94 1054 d444 a820 0595 040b 8166 e084 a62d 1bff",
        ),
        (LOCATION, "9d29 ad17 1863 c78f 0b97 c8e9 ae82 ae43 d3"),
        ("gzip", "9bd9 ab"),
        (
            COOKIE,
            "94e7 821d d7f2 e6c7 b335 dfdf cd5b 3960 d5af 2708 7f36 72c1 ab27 0fb5 291f
             9587 3160 65c0 03ed 4ee5 b106 3d50 07",
        ),
    ];
    for (text, coded) in cases {
        let coded = hex(coded);
        let mut out = Vec::new();
        huffman::encode(text.as_bytes(), &mut out);
        assert_eq!(out, coded, "{text}");
        assert_eq!(huffman::encoded_len(text.as_bytes()), coded.len());
        out.clear();
        huffman::decode(&coded, &mut out).unwrap();
        assert_eq!(out, text.as_bytes());
    }
}

#[test]
fn huffman_round_trips_every_byte() {
    let all: Vec<u8> = (0..=255).collect();
    for input in [&all[..], &[], b"a", &[0xff; 40]] {
        let mut coded = Vec::new();
        huffman::encode(input, &mut coded);
        assert_eq!(coded.len(), huffman::encoded_len(input));
        let mut out = Vec::new();
        huffman::decode(&coded, &mut out).unwrap();
        assert_eq!(out, input);
    }
}

#[test]
fn huffman_padding_rules() {
    let mut out = Vec::new();
    // '0' is 00000: three ones of padding pass, three zeros do not.
    assert_eq!(huffman::decode(&[0x07], &mut out), Ok(()));
    assert_eq!(out, b"0");
    assert_eq!(huffman::decode(&[0x00], &mut out), Err(HUFFMAN_PADDING));
    assert_eq!(huffman::decode(&[0x06], &mut out), Err(HUFFMAN_PADDING));
    // 'a' (00011) then 11 ones: padding longer than 7 bits.
    assert_eq!(
        huffman::decode(&[0x1f, 0xff], &mut out),
        Err(HUFFMAN_PADDING)
    );
    // A whole byte of ones is 8 bits of padding.
    assert_eq!(huffman::decode(&[0xff], &mut out), Err(HUFFMAN_PADDING));
    // Ending inside a code that is not all ones: '&' is 11111000.
    assert_eq!(huffman::decode(&[0xf8, 0xf8], &mut out), Ok(()));
    assert_eq!(
        huffman::decode(&[0xf8, 0xf0], &mut out),
        Err(HUFFMAN_PADDING)
    );
    // EOS (30 ones) inside a string.
    assert_eq!(huffman::decode(&[0xff; 4], &mut out), Err(HUFFMAN_EOS));
    assert_eq!(
        huffman::decode(&[0x07, 0xff, 0xff, 0xff, 0xff], &mut out),
        Err(HUFFMAN_EOS)
    );
    out.clear();
    assert_eq!(huffman::decode(&[], &mut out), Ok(()));
    assert!(out.is_empty());
}

// Decoding errors.

#[test]
fn index_errors() {
    let mut d = Decoder::new(4096);
    assert_eq!(decode(&mut d, &[0x80]), Err(INDEX_ZERO));
    let mut d = Decoder::new(4096);
    assert_eq!(decode(&mut d, &[0xbe]), Err(INDEX_OUT_OF_RANGE));
    let mut d = Decoder::new(4096);
    assert_eq!(
        decode(&mut d, &[0xbd]).unwrap(),
        owned(&[("www-authenticate", "")])
    );
    // A literal's name index: 0 means a literal name, so only the range is checked.
    assert_eq!(decode(&mut d, &[0x7f, 0x00, 0x00]), Err(INDEX_OUT_OF_RANGE));
    // One entry: index 62 is it, 63 is beyond.
    decode(&mut d, &hex("400a 6375 7374 6f6d 2d6b 6579 0161")).unwrap();
    assert_eq!(
        decode(&mut d, &[0xbe]).unwrap(),
        owned(&[("custom-key", "a")])
    );
    assert_eq!(decode(&mut d, &[0xbf]), Err(INDEX_OUT_OF_RANGE));
    let huge = [0xff, 0xff, 0xff, 0xff, 0xff, 0x07];
    assert_eq!(
        decode(&mut Decoder::new(4096), &huge),
        Err(INDEX_OUT_OF_RANGE)
    );
}

#[test]
fn table_size_zero_rejects_dynamic_indices() {
    let mut d = Decoder::new(0);
    // A literal with incremental indexing decodes, but nothing can be added.
    let fields = decode(&mut d, &hex("400a 6375 7374 6f6d 2d6b 6579 0161")).unwrap();
    assert_eq!(fields, owned(&[("custom-key", "a")]));
    assert_eq!(d.table_size(), 0);
    for block in [
        &[0xbe][..],
        &[0x7e, 0x00],
        &[0x4f, 0x2f, 0x00],
        &[0x3f, 0x00],
    ] {
        let mut d = Decoder::new(0);
        assert!(decode(&mut d, block).is_err(), "{block:x?}");
    }
    // The C.3 requests index the dynamic table from their second block on.
    let mut d = Decoder::new(0);
    decode(
        &mut d,
        &hex("8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d"),
    )
    .unwrap();
    assert_eq!(
        decode(&mut d, &hex("8286 84be 5808 6e6f 2d63 6163 6865")),
        Err(INDEX_OUT_OF_RANGE)
    );
}

#[test]
fn size_updates() {
    // Up to the limit at the start of a block, any number of times; evicting as they go.
    let mut d = Decoder::new(4096);
    decode(&mut d, &hex("400a 6375 7374 6f6d 2d6b 6579 0161")).unwrap();
    assert_eq!(d.table_size(), 43);
    assert_eq!(decode(&mut d, &[0x3f, 0xe1, 0x1f, 0xbe]).unwrap().len(), 1);
    assert_eq!(decode(&mut d, &[0x20, 0x3f, 0xe1, 0x1f]).unwrap(), vec![]);
    assert_eq!(d.table_size(), 0);
    assert_eq!(decode(&mut d, &[0xbe]), Err(INDEX_OUT_OF_RANGE));
    // Above the limit.
    let mut d = Decoder::new(4096);
    assert_eq!(
        decode(&mut d, &[0x3f, 0xe2, 0x1f]),
        Err(SIZE_UPDATE_TOO_LARGE)
    );
    let mut d = Decoder::new(0);
    assert_eq!(decode(&mut d, &[0x21]), Err(SIZE_UPDATE_TOO_LARGE));
    // After a field.
    let mut d = Decoder::new(4096);
    assert_eq!(decode(&mut d, &[0x82, 0x20]), Err(SIZE_UPDATE_AFTER_FIELD));
    let mut d = Decoder::new(4096);
    assert_eq!(
        decode(&mut d, &[0x20, 0x82, 0x20]),
        Err(SIZE_UPDATE_AFTER_FIELD)
    );
    // A truncated one.
    assert_eq!(decode(&mut Decoder::new(4096), &[0x3f]), Err(TRUNCATED));
}

#[test]
fn lowered_setting_requires_a_size_update() {
    let block = hex("400a 6375 7374 6f6d 2d6b 6579 0161");
    let mut d = Decoder::new(4096);
    decode(&mut d, &block).unwrap();
    d.set_max_table_size(100);
    assert_eq!(decode(&mut d, &[0x82]), Err(SIZE_UPDATE_MISSING));

    let mut d = Decoder::new(4096);
    d.set_max_table_size(100);
    assert_eq!(decode(&mut d, &[]), Err(SIZE_UPDATE_MISSING));

    let mut d = Decoder::new(4096);
    d.set_max_table_size(100);
    assert_eq!(decode(&mut d, &[0x3f, 0x46]), Err(SIZE_UPDATE_TOO_LARGE));

    // Lowered twice: the smallest first, then the final size; once is enough after that.
    let mut d = Decoder::new(4096);
    decode(&mut d, &block).unwrap();
    d.set_max_table_size(0);
    d.set_max_table_size(100);
    assert_eq!(
        decode(&mut d, &[0x3f, 0x45, 0x82]),
        Err(SIZE_UPDATE_TOO_LARGE)
    );
    let mut d = Decoder::new(4096);
    decode(&mut d, &block).unwrap();
    d.set_max_table_size(0);
    d.set_max_table_size(100);
    assert_eq!(decode(&mut d, &[0x20, 0x3f, 0x45, 0x82]).unwrap().len(), 1);
    assert_eq!(d.table_size(), 0);
    decode(&mut d, &block).unwrap();
    assert_eq!(d.table_size(), 43);
    assert_eq!(decode(&mut d, &[0x82]).unwrap().len(), 1);

    // A raised setting asks for nothing, and allows larger updates.
    let mut d = Decoder::new(100);
    d.set_max_table_size(200);
    assert_eq!(decode(&mut d, &[0x82]).unwrap().len(), 1);
    assert_eq!(decode(&mut d, &[0x3f, 0xa9, 0x01]).unwrap(), vec![]);
}

#[test]
fn string_errors() {
    // A literal value longer than what is left of the block.
    let mut d = Decoder::new(4096);
    assert_eq!(decode(&mut d, &hex("0403 2f61")), Err(STRING_TOO_LONG));
    assert_eq!(
        decode(&mut Decoder::new(4096), &hex("0400 7f")),
        Err(TRUNCATED)
    );
    assert_eq!(decode(&mut Decoder::new(4096), &hex("04")), Err(TRUNCATED));
    assert_eq!(decode(&mut Decoder::new(4096), &hex("00")), Err(TRUNCATED));
    assert_eq!(
        decode(&mut Decoder::new(4096), &hex("0001 61")),
        Err(TRUNCATED)
    );
    assert_eq!(
        decode(&mut Decoder::new(4096), &hex("007f ffff ffff 7f")),
        Err(INTEGER_OVERFLOW)
    );
    // Huffman errors inside a block.
    assert_eq!(
        decode(&mut Decoder::new(4096), &hex("0481 00")),
        Err(HUFFMAN_PADDING)
    );
    assert_eq!(
        decode(&mut Decoder::new(4096), &hex("0484 ffff ffff")),
        Err(HUFFMAN_EOS)
    );
    assert_eq!(
        decode(&mut Decoder::new(4096), &hex("0080 8207")),
        Err(STRING_TOO_LONG)
    );
    // An empty name is HPACK's to pass on and HTTP/2's to refuse.
    assert_eq!(
        decode(&mut Decoder::new(4096), &hex("0080 8107")).unwrap(),
        owned(&[("", "0")])
    );
    // An empty Huffman string is an empty string.
    assert_eq!(
        decode(&mut Decoder::new(4096), &hex("0480")).unwrap(),
        owned(&[(":path", "")])
    );
}

#[test]
fn entry_larger_than_the_table_empties_it() {
    let mut d = Decoder::new(60);
    decode(&mut d, &hex("400a 6375 7374 6f6d 2d6b 6579 0161")).unwrap();
    assert_eq!(d.table_size(), 43);
    // 10 + 19 + 32 = 61 > 60: the field is emitted, the table emptied.
    let block = [&hex("400a 6375 7374 6f6d 2d6b 6579 13")[..], &[b'x'; 19]].concat();
    assert_eq!(decode(&mut d, &block).unwrap().len(), 1);
    assert_eq!(d.table_size(), 0);
    assert!(dynamic(&d).is_empty());
}

#[test]
fn new_entry_may_name_the_entry_it_evicts() {
    let mut d = Decoder::new(64);
    decode(&mut d, &hex("400a 6375 7374 6f6d 2d6b 6579 0161")).unwrap();
    // Name index 62 (the only entry), a 15-byte value: 57 bytes, so "custom-key: a" goes.
    let block = [&[0x7e, 0x0f][..], b"abcdefghijklmno"].concat();
    assert_eq!(
        decode(&mut d, &block).unwrap(),
        owned(&[("custom-key", "abcdefghijklmno")])
    );
    assert_eq!(dynamic(&d), owned(&[("custom-key", "abcdefghijklmno")]));
    assert_eq!(d.table_size(), 57);
}

#[test]
fn dynamic_table_stays_within_its_bounds() {
    let mut d = Decoder::new(200);
    for i in 0..1000usize {
        let value = vec![b'v'; i % 150];
        let mut block = Vec::new();
        if i % 7 == 0 {
            write_integer(0x20, 5, (i * 13) % 201, &mut block);
        }
        write_integer(0x40, 6, 0, &mut block);
        write_string(format!("n{}", i % 11).as_bytes(), &mut block);
        write_string(&value, &mut block);
        // Index the newest entry when there is one (the field was too big otherwise).
        block.push(0xbe);
        let fields = decode(&mut d, &block);
        if d.table.len() == 0 {
            assert_eq!(fields, Err(INDEX_OUT_OF_RANGE));
            d = Decoder::new(200);
            continue;
        }
        let fields = fields.unwrap();
        assert_eq!(fields[0], fields[1]);
        assert!(d.table_size() <= d.table.max());
        assert!(d.table.held_bytes() <= 2 * d.table.max());
    }
}

#[test]
fn large_huffman_scratch_is_given_back() {
    let mut block = Vec::new();
    Encoder::new().field(b"x-big", &[b'a'; 20_000], &mut block);
    let mut d = Decoder::new(4096);
    let fields = decode(&mut d, &block).unwrap();
    assert_eq!(fields[0].1.len(), 20_000);
    assert!(d.scratch.capacity() <= SCRATCH_KEEP);
}

// The encoder.

#[test]
fn status_bytes() {
    let mut out = Vec::new();
    let mut e = Encoder::new();
    for status in [200, 204, 206, 304, 400, 404, 500] {
        e.status(status, &mut out);
    }
    assert_eq!(out, [0x88, 0x89, 0x8a, 0x8b, 0x8c, 0x8d, 0x8e]);
    out.clear();
    e.status(302, &mut out);
    assert_eq!(out, b"\x08\x03302");
    for status in 100..=999 {
        out.clear();
        e.status(status, &mut out);
        let fields = decode(&mut Decoder::new(0), &out).unwrap();
        assert_eq!(fields, owned(&[(":status", &status.to_string())]));
    }
}

#[test]
fn field_bytes() {
    let mut out = Vec::new();
    let mut e = Encoder::new();
    // `date` is static index 33: 15 in the prefix, 18 after it; "302" is shorter coded.
    e.field(b"date", b"302", &mut out);
    assert_eq!(out, [0x0f, 0x12, 0x82, 0x64, 0x02]);
    out.clear();
    e.field_never_indexed(b"date", b"302", &mut out);
    assert_eq!(out, [0x1f, 0x12, 0x82, 0x64, 0x02]);
    out.clear();
    e.field(b":status", b"302", &mut out);
    assert_eq!(out, [0x08, 0x82, 0x64, 0x02]);
    // A name outside the static table is a literal; bytes with long codes stay raw.
    out.clear();
    e.field(b"x-a", &[0xff, 0xfe], &mut out);
    assert_eq!(out, [0x00, 0x03, b'x', b'-', b'a', 0x02, 0xff, 0xfe]);
    out.clear();
    e.field_never_indexed(b"x-a", b"", &mut out);
    assert_eq!(out, [0x10, 0x03, b'x', b'-', b'a', 0x00]);
    // The RFC's C.6 strings, as this encoder writes them.
    out.clear();
    e.field(b"location", LOCATION.as_bytes(), &mut out);
    assert_eq!(
        out,
        hex("0f1f 919d 29ad 1718 63c7 8f0b 97c8 e9ae 82ae 43d3")
    );
}

#[test]
fn static_name_index_agrees_with_the_table() {
    for (i, (name, _)) in STATIC.iter().enumerate() {
        let first = STATIC.iter().position(|(n, _)| n == name).unwrap() + 1;
        assert_eq!(static_name_index(name), Some(first), "{i}");
    }
    assert_eq!(static_name_index(b"x-custom"), None);
    assert_eq!(static_name_index(b"Date"), None);
}

fn name() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        (0..STATIC.len()).prop_map(|i| STATIC[i].0.to_vec()),
        "[a-z0-9!#$%&'*+.^_`|~-]{1,24}".prop_map(String::into_bytes),
        vec(any::<u8>(), 0..24),
    ]
}

proptest! {
    #[test]
    fn encoder_output_decodes_to_its_input(
        fields in vec((name(), vec(any::<u8>(), 0..200), any::<bool>()), 0..12),
        status in 100u16..1000,
        table in prop_oneof![Just(0usize), Just(256), Just(4096)],
    ) {
        let mut e = Encoder::new();
        let mut block = Vec::new();
        e.status(status, &mut block);
        for (n, v, sensitive) in &fields {
            if *sensitive {
                e.field_never_indexed(n, v, &mut block);
            } else {
                e.field(n, v, &mut block);
            }
        }
        let mut d = Decoder::new(table);
        let got = decode(&mut d, &block).unwrap();
        prop_assert_eq!(&got[0], &(b":status".to_vec(), status.to_string().into_bytes()));
        let want: Fields = fields.into_iter().map(|(n, v, _)| (n, v)).collect();
        prop_assert_eq!(&got[1..], &want[..]);
        prop_assert_eq!(d.table_size(), 0);
    }

    #[test]
    fn huffman_round_trip(input in vec(any::<u8>(), 0..300)) {
        let mut coded = Vec::new();
        huffman::encode(&input, &mut coded);
        prop_assert_eq!(coded.len(), huffman::encoded_len(&input));
        let mut out = Vec::new();
        huffman::decode(&coded, &mut out).unwrap();
        prop_assert_eq!(out, input);
    }

    #[test]
    fn arbitrary_blocks_never_panic(
        blocks in vec(vec(any::<u8>(), 0..64), 1..4),
        table in 0usize..300,
    ) {
        let mut d = Decoder::new(table);
        for block in &blocks {
            let mut emitted = 0usize;
            let r = d.decode(block, &mut |n, v| emitted += n.len() + v.len());
            prop_assert!(d.table_size() <= table);
            if r.is_err() {
                break;
            }
        }
    }
}
