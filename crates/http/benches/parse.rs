//! Request-head parsing, weft's `Parser` against httparse 1.10 as the baseline (ARCHITECTURE.md:
//! the parser choice is decided by this benchmark).
//!
//! Inputs:
//! * `cgi_paper`: the request of the CGI paper (Edwards) §1.2.3, byte for byte (CRLF
//!   line endings), head only; the paper measured 43 ms to "parse the headers and decode" it.
//! * `browser_40`: a realistic browser navigation with 40 header fields.
//! * `short`: the smallest valid HTTP/1.1 request.
//!
//! weft's parser is reused across iterations and reset between them, as a connection does.
//! httparse only tokenises (no framing, Host or Content-Length rules), so it is a lower bound
//! for the work rather than a like-for-like comparison.
//!
//! Run: `cargo bench -p weft-http --bench parse -- --warm-up-time 1 --measurement-time 3`

use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use weft_http::{Limits, Parser};

/// Edwards, "Performance of HTTP and CGI" §1.2.3, "The headers of the incoming request".
const CGI_PAPER: &[u8] = b"POST /cgi-bin/Echo2 HTTP/1.0\r\n\
Accept: application/x-corba\r\n\
Accept: */*; q=0.300\r\n\
Accept: application/octet-stream; q=0.100\r\n\
Accept: text/plain\r\n\
Accept: text/html\r\n\
From: nje@socrates.ansa.co.uk\r\n\
User-Agent: Echo client/0 libwww/2.17\r\n\
Content-length: 542\r\n\
Content-type: application/x-www-form-urlencoded\r\n\
\r\n";

/// A Chromium-style top-level navigation with 40 fields (about 2.2 KB): the "about 40 lines of
/// headers" the paper expects from a real browser, in today's shape.
const BROWSER_40: &[u8] = b"GET /articles/2024/06/fibers-and-threads.html?ref=home&utm_source=feed HTTP/1.1\r\n\
Host: www.example.com\r\n\
Connection: keep-alive\r\n\
Cache-Control: max-age=0\r\n\
sec-ch-ua: \"Chromium\";v=\"124\", \"Google Chrome\";v=\"124\", \"Not-A.Brand\";v=\"99\"\r\n\
sec-ch-ua-mobile: ?0\r\n\
sec-ch-ua-platform: \"Linux\"\r\n\
sec-ch-ua-arch: \"x86\"\r\n\
sec-ch-ua-bitness: \"64\"\r\n\
sec-ch-ua-full-version-list: \"Chromium\";v=\"124.0.6367.91\", \"Google Chrome\";v=\"124.0.6367.91\", \"Not-A.Brand\";v=\"99.0.0.0\"\r\n\
sec-ch-ua-model: \"\"\r\n\
sec-ch-ua-platform-version: \"6.8.0\"\r\n\
Upgrade-Insecure-Requests: 1\r\n\
User-Agent: Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36\r\n\
Accept: text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,image/apng,*/*;q=0.8,application/signed-exchange;v=b3;q=0.7\r\n\
Sec-Fetch-Site: same-origin\r\n\
Sec-Fetch-Mode: navigate\r\n\
Sec-Fetch-User: ?1\r\n\
Sec-Fetch-Dest: document\r\n\
Referer: https://www.example.com/articles/2024/06/\r\n\
Accept-Encoding: gzip, deflate, br, zstd\r\n\
Accept-Language: en-GB,en-US;q=0.9,en;q=0.8,fr;q=0.7,de;q=0.6\r\n\
Cookie: session=9f8e7d6c5b4a39281706f5e4d3c2b1a0; theme=dark; consent=analytics%3Dno%26ads%3Dno; _ga=GA1.2.1234567890.1700000000; _gid=GA1.2.987654321.1717000000; csrftoken=QWERTYUIOPasdfghjklZXCVBNM1234567890\r\n\
If-None-Match: W/\"5f3c-18f0a1b2c3d\"\r\n\
If-Modified-Since: Mon, 03 Jun 2024 10:15:30 GMT\r\n\
DNT: 1\r\n\
Sec-GPC: 1\r\n\
Priority: u=0, i\r\n\
Pragma: no-cache\r\n\
Purpose: prefetch\r\n\
Sec-Purpose: prefetch;prerender\r\n\
Origin: https://www.example.com\r\n\
Viewport-Width: 1920\r\n\
Device-Memory: 8\r\n\
Downlink: 10\r\n\
ECT: 4g\r\n\
RTT: 50\r\n\
X-Requested-With: XMLHttpRequest\r\n\
X-Forwarded-For: 203.0.113.7, 198.51.100.23\r\n\
X-Forwarded-Proto: https\r\n\
X-Request-ID: 6f1c2a9e-8b4d-4c3e-9a7f-0d2e5b6c7a81\r\n\
\r\n";

const SHORT: &[u8] = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n";

const INPUTS: [(&str, &[u8]); 3] = [
    ("cgi_paper", CGI_PAPER),
    ("browser_40", BROWSER_40),
    ("short", SHORT),
];

fn weft(c: &mut Criterion) {
    let mut group = c.benchmark_group("weft");
    for (name, input) in INPUTS {
        let mut parser = Parser::new(Limits::default());
        assert_eq!(parser.parse(input), Ok(Some(input.len())), "{name}");
        group.throughput(Throughput::Bytes(input.len() as u64));
        group.bench_with_input(BenchmarkId::from_parameter(name), input, |b, input| {
            b.iter(|| {
                parser.reset();
                let n = parser.parse(black_box(input));
                black_box(parser.head().headers().len());
                n
            })
        });
    }
    group.finish();
}

fn httparse(c: &mut Criterion) {
    let mut group = c.benchmark_group("httparse");
    for (name, input) in INPUTS {
        group.throughput(Throughput::Bytes(input.len() as u64));
        group.bench_with_input(BenchmarkId::from_parameter(name), input, |b, input| {
            let mut headers = [httparse::EMPTY_HEADER; 64];
            b.iter(|| {
                let mut req = httparse::Request::new(&mut headers);
                let status = req.parse(black_box(input));
                let n = req.headers.len();
                black_box(n);
                matches!(status, Ok(httparse::Status::Complete(_)))
            })
        });
    }
    group.finish();
}

criterion_group!(benches, weft, httparse);
criterion_main!(benches);
