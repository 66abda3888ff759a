//! The chunked transfer coding (RFC 9112 §7.1), byte for byte: sizes, extensions, trailers,
//! and where the body ends.

use weft_http::{ChunkedDecoder, Error, Limits};

/// Decodes a whole chunked body: the data and the bytes consumed, or the error.
fn decode(input: &[u8]) -> Result<(Vec<u8>, usize), Error> {
    let mut d = ChunkedDecoder::new(&Limits::default());
    let mut out = Vec::new();
    let mut at = 0;
    loop {
        let step = d.decode(&input[at..])?;
        out.extend_from_slice(&input[at + step.data.0..at + step.data.1]);
        at += step.consumed;
        if step.done {
            assert!(d.is_done());
            return Ok((out, at));
        }
        if at == input.len() {
            return Err(Error::BadChunk("incomplete (test)"));
        }
    }
}

fn accepts(input: &[u8], data: &[u8]) {
    match decode(input) {
        Ok((out, used)) => {
            assert_eq!(out, data, "{}", input.escape_ascii());
            assert_eq!(used, input.len(), "{}", input.escape_ascii());
        }
        Err(e) => panic!("{}: {e}", input.escape_ascii()),
    }
}

fn refuses(input: &[u8]) {
    match decode(input) {
        Err(Error::BadChunk(r)) => assert_ne!(r, "incomplete (test)", "{}", input.escape_ascii()),
        other => panic!("{}: {other:?}", input.escape_ascii()),
    }
}

#[test]
fn sizes() {
    accepts(b"a\r\n0123456789\r\n0\r\n\r\n", b"0123456789");
    accepts(b"A\r\n0123456789\r\n0\r\n\r\n", b"0123456789");
    accepts(b"5\r\nhello\r\n6\r\n world\r\n000\r\n\r\n", b"hello world");
    // Leading zeros do not count towards the size's width.
    accepts(b"00000000000000000001\r\nx\r\n0\r\n\r\n", b"x");
    accepts(b"0\r\n\r\n", b"");
    refuses(b"\r\n");
    refuses(b"x\r\n");
    refuses(b"-1\r\n");
    refuses(b"0x5\r\nhello\r\n0\r\n\r\n");
    refuses(b"+5\r\nhello\r\n0\r\n\r\n");
    // More than 64 bits.
    refuses(b"10000000000000000\r\n");
    // Size line not ended by CRLF.
    refuses(b"5\nhello\r\n0\r\n\r\n");
    refuses(b"5\r\rhello\r\n0\r\n\r\n");
    // Data not followed by CRLF, or a chunk missing its size line.
    refuses(b"5\r\nhelloX0\r\n\r\n");
    refuses(b"5\r\nABCDE0\r\n");
    refuses(b"3\r\nfoo\r\n\r\n");
}

#[test]
fn whitespace_after_the_size_only_before_an_extension() {
    // chunk = chunk-size [ chunk-ext ] CRLF, chunk-ext = *( BWS ";" ... ): BWS must lead to
    // a ";".
    accepts(b"5 ;a\r\nhello\r\n0\r\n\r\n", b"hello");
    accepts(b"5\t ; a = b\r\nhello\r\n0\r\n\r\n", b"hello");
    refuses(b"a \r\n0123456789\r\n0\r\n\r\n");
    refuses(b"3 \n  \r\nfoo\r\n\r\n");
    refuses(b"2 erfrferferf\r\naa\r\n0 rrrr\r\n\r\n");
}

#[test]
fn extensions_follow_the_grammar() {
    accepts(
        b"5;ilovew3;somuchlove=aretheseparametersfor;another=withvalue\r\nhello\r\n6;blahblah;blah\r\n world\r\n0\r\n\r\n",
        b"hello world",
    );
    accepts(
        b"5;ilovew3=\"I \\\"love\\\"; \\\\extensions\\\\\";somuchlove=\"aretheseparametersfor\";blah;foo=bar\r\nhello\r\n0\r\n\r\n",
        b"hello",
    );
    accepts(b"1;a=\"\"\r\nx\r\n0;last\r\n\r\n", b"x");
    accepts(b"1;a=\"\xe9\t\"\r\nx\r\n0\r\n\r\n", b"x");
    for bad in [
        &b"2;\r\naa\r\n0\r\n\r\n"[..],
        b"2;;a\r\naa\r\n0\r\n\r\n",
        b"2;=a\r\naa\r\n0\r\n\r\n",
        b"2;a=\r\naa\r\n0\r\n\r\n",
        b"2;a b\r\naa\r\n0\r\n\r\n",
        b"2;a=b c\r\naa\r\n0\r\n\r\n",
        b"2;a=\"b\r\naa\r\n0\r\n\r\n",
        b"2;a=\"b\"c\r\naa\r\n0\r\n\r\n",
        b"2;a=b \r\naa\r\n0\r\n\r\n",
        b"2;a@b\r\naa\r\n0\r\n\r\n",
        b"2;a=\"\x01\"\r\naa\r\n0\r\n\r\n",
        b"2;a=\"\\\x00\"\r\naa\r\n0\r\n\r\n",
        b"5;ilovew3=\"abc\";somuchlove=\"def; ghi\r\nhello\r\n0\r\n\r\n",
    ] {
        refuses(bad);
    }
}

#[test]
fn trailers() {
    accepts(
        b"5\r\nhello\r\n0\r\nVary: *\r\nContent-Type: text/plain\r\n\r\n",
        b"hello",
    );
    accepts(b"0\r\nX-Empty:\r\n\r\n", b"");
    for bad in [
        &b"0\r\n Folded: x\r\n\r\n"[..],
        b"0\r\nNoColon\r\n\r\n",
        b"0\r\nBad Name: x\r\n\r\n",
        b"0\r\n: x\r\n\r\n",
        b"0\r\nX: a\x01b\r\n\r\n",
        b"0\r\nX: a\rb\r\n\r\n",
        b"0\r\nX: a\n\r\n",
        b"0\r\n\rX",
    ] {
        refuses(bad);
    }
}

#[test]
fn the_body_ends_where_the_coding_does() {
    let input = b"3\r\nabc\r\n0\r\n\r\nGET / HTTP/1.1\r\n";
    let mut d = ChunkedDecoder::new(&Limits::default());
    let mut at = 0;
    loop {
        let step = d.decode(&input[at..]).unwrap();
        at += step.consumed;
        if step.done {
            break;
        }
    }
    assert_eq!(&input[at..], b"GET / HTTP/1.1\r\n");
    // Once done, the decoder takes nothing more.
    let step = d.decode(&input[at..]).unwrap();
    assert_eq!(step.consumed, 0);
    assert!(step.done);
}

#[test]
fn limits() {
    let small = Limits {
        max_chunk_line: 16,
        max_trailer_bytes: 16,
        ..Limits::default()
    };
    let run = |input: &[u8]| {
        let mut d = ChunkedDecoder::new(&small);
        let mut at = 0;
        loop {
            let step = d.decode(&input[at..])?;
            at += step.consumed;
            if step.done || step.consumed == 0 {
                return Ok(at);
            }
        }
    };
    assert!(run(b"1;abcdefghijk\r\nx\r\n0\r\n\r\n").is_ok());
    assert_eq!(
        run(b"1;abcdefghijklmnop\r\nx\r\n0\r\n\r\n"),
        Err(Error::BadChunk("chunk size line too long"))
    );
    assert!(run(b"0\r\nA: 0123456\r\n\r\n").is_ok());
    assert_eq!(
        run(b"0\r\nA: 0123456789abcdef\r\n\r\n"),
        Err(Error::BadChunk("trailer section too large"))
    );
}
