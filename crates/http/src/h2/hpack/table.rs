//! The static table (RFC 7541 Appendix A) and the decoder's dynamic table (§2.3.2, §4).

use std::collections::VecDeque;

/// The static table; HPACK index `i` (1 to 61) is `STATIC[i - 1]`.
pub(super) const STATIC: [(&[u8], &[u8]); 61] = [
    (b":authority", b""),
    (b":method", b"GET"),
    (b":method", b"POST"),
    (b":path", b"/"),
    (b":path", b"/index.html"),
    (b":scheme", b"http"),
    (b":scheme", b"https"),
    (b":status", b"200"),
    (b":status", b"204"),
    (b":status", b"206"),
    (b":status", b"304"),
    (b":status", b"400"),
    (b":status", b"404"),
    (b":status", b"500"),
    (b"accept-charset", b""),
    (b"accept-encoding", b"gzip, deflate"),
    (b"accept-language", b""),
    (b"accept-ranges", b""),
    (b"accept", b""),
    (b"access-control-allow-origin", b""),
    (b"age", b""),
    (b"allow", b""),
    (b"authorization", b""),
    (b"cache-control", b""),
    (b"content-disposition", b""),
    (b"content-encoding", b""),
    (b"content-language", b""),
    (b"content-length", b""),
    (b"content-location", b""),
    (b"content-range", b""),
    (b"content-type", b""),
    (b"cookie", b""),
    (b"date", b""),
    (b"etag", b""),
    (b"expect", b""),
    (b"expires", b""),
    (b"from", b""),
    (b"host", b""),
    (b"if-match", b""),
    (b"if-modified-since", b""),
    (b"if-none-match", b""),
    (b"if-range", b""),
    (b"if-unmodified-since", b""),
    (b"last-modified", b""),
    (b"link", b""),
    (b"location", b""),
    (b"max-forwards", b""),
    (b"proxy-authenticate", b""),
    (b"proxy-authorization", b""),
    (b"range", b""),
    (b"referer", b""),
    (b"refresh", b""),
    (b"retry-after", b""),
    (b"server", b""),
    (b"set-cookie", b""),
    (b"strict-transport-security", b""),
    (b"transfer-encoding", b""),
    (b"user-agent", b""),
    (b"vary", b""),
    (b"via", b""),
    (b"www-authenticate", b""),
];

/// The first static index whose name is `name`, for the encoder's literals.
pub(super) fn static_name_index(name: &[u8]) -> Option<usize> {
    Some(match name {
        b":authority" => 1,
        b":method" => 2,
        b":path" => 4,
        b":scheme" => 6,
        b":status" => 8,
        b"accept-charset" => 15,
        b"accept-encoding" => 16,
        b"accept-language" => 17,
        b"accept-ranges" => 18,
        b"accept" => 19,
        b"access-control-allow-origin" => 20,
        b"age" => 21,
        b"allow" => 22,
        b"authorization" => 23,
        b"cache-control" => 24,
        b"content-disposition" => 25,
        b"content-encoding" => 26,
        b"content-language" => 27,
        b"content-length" => 28,
        b"content-location" => 29,
        b"content-range" => 30,
        b"content-type" => 31,
        b"cookie" => 32,
        b"date" => 33,
        b"etag" => 34,
        b"expect" => 35,
        b"expires" => 36,
        b"from" => 37,
        b"host" => 38,
        b"if-match" => 39,
        b"if-modified-since" => 40,
        b"if-none-match" => 41,
        b"if-range" => 42,
        b"if-unmodified-since" => 43,
        b"last-modified" => 44,
        b"link" => 45,
        b"location" => 46,
        b"max-forwards" => 47,
        b"proxy-authenticate" => 48,
        b"proxy-authorization" => 49,
        b"range" => 50,
        b"referer" => 51,
        b"refresh" => 52,
        b"retry-after" => 53,
        b"server" => 54,
        b"set-cookie" => 55,
        b"strict-transport-security" => 56,
        b"transfer-encoding" => 57,
        b"user-agent" => 58,
        b"vary" => 59,
        b"via" => 60,
        b"www-authenticate" => 61,
        _ => return None,
    })
}

/// What an entry costs beyond its name and value in the table's size (§4.1).
pub(super) const ENTRY_OVERHEAD: usize = 32;

/// One dynamic entry: its name then its value, back to back in [`DynamicTable::bytes`].
#[derive(Debug, Clone, Copy)]
struct Entry {
    at: usize,
    name_len: usize,
    value_len: usize,
}

/// The dynamic table, newest entry first. Names and values share one byte buffer that
/// entries are appended to and evicted from the front of; the evicted prefix is dropped
/// when the buffer would outgrow twice the table's size, so it stays within that bound and
/// each byte is moved an amortised constant number of times.
#[derive(Debug, Default)]
pub(super) struct DynamicTable {
    bytes: Vec<u8>,
    entries: VecDeque<Entry>,
    /// The §4.1 size of the entries held.
    size: usize,
    /// The size the last dynamic table size update set (or the initial maximum).
    max: usize,
}

impl DynamicTable {
    pub(super) fn new(max: usize) -> DynamicTable {
        DynamicTable {
            max,
            ..DynamicTable::default()
        }
    }

    pub(super) fn size(&self) -> usize {
        self.size
    }

    pub(super) fn max(&self) -> usize {
        self.max
    }

    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.entries.len()
    }

    /// The bytes the buffer holds, evicted ones not yet dropped included.
    #[cfg(test)]
    pub(super) fn held_bytes(&self) -> usize {
        self.bytes.len()
    }

    /// The entry at `i`, 0 being the newest (HPACK index 62).
    pub(super) fn get(&self, i: usize) -> Option<(&[u8], &[u8])> {
        let e = self.entries.get(i)?;
        let name_end = e.at + e.name_len;
        Some((
            &self.bytes[e.at..name_end],
            &self.bytes[name_end..name_end + e.value_len],
        ))
    }

    /// A dynamic table size update: the new size, the oldest entries evicted to fit it.
    pub(super) fn set_max(&mut self, max: usize) {
        self.max = max;
        self.evict_to(max);
    }

    /// Adds an entry, evicting the oldest ones to make room. One larger than the whole table
    /// empties it and is not added (§4.4).
    pub(super) fn insert(&mut self, name: &[u8], value: &[u8]) {
        let len = name.len() + value.len();
        let Some(room) = self.max.checked_sub(len + ENTRY_OVERHEAD) else {
            self.evict_to(0);
            return;
        };
        self.evict_to(room);
        if self.bytes.len() + len > 2 * self.max {
            // What is still held starts at the oldest entry (the newest one ends the buffer).
            let dead = self.entries.back().map_or(self.bytes.len(), |e| e.at);
            self.bytes.drain(..dead);
            for e in &mut self.entries {
                e.at -= dead;
            }
        }
        let at = self.bytes.len();
        self.bytes.extend_from_slice(name);
        self.bytes.extend_from_slice(value);
        self.entries.push_front(Entry {
            at,
            name_len: name.len(),
            value_len: value.len(),
        });
        self.size += len + ENTRY_OVERHEAD;
    }

    fn evict_to(&mut self, size: usize) {
        while self.size > size {
            let Some(e) = self.entries.pop_back() else {
                break;
            };
            self.size -= e.name_len + e.value_len + ENTRY_OVERHEAD;
        }
        if self.entries.is_empty() {
            self.bytes.clear();
        }
    }
}
