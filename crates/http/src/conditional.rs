//! Conditional requests (RFC 9110 §13): the five precondition fields of a request, evaluated
//! against the current representation of the target in the order of §13.2.2. Pure: the caller
//! hands in the request's fields and the representation's validators and gets back what to
//! answer, so every place that serves a representation (a file from disk, a cached response,
//! a built-in page) decides the same way.
//!
//! Choices where the RFC leaves room (docs/http.md, "HTTP behaviour", compares them with nginx):
//! - An entity-tag list that does not parse (§8.8.3 grammar) matches nothing: a broken
//!   `If-Match` fails (412), a broken `If-None-Match` passes. `*` counts only alone.
//! - A date that does not parse, or a date field sent more than once, is ignored (§13.1.3,
//!   §13.1.4); an `If-Range` that is neither a strong entity tag nor a date is false (the whole
//!   representation is sent, §13.1.5).
//! - `If-Modified-Since` is "not modified since": a date at or after the modification time gives
//!   304 (§13.1.3), not only an exact match.
//! - A list field sent on more than [`MAX_LINES`] field lines is treated as unparsable.

use crate::Method;

/// Field lines of one list field (`If-Match`, `If-None-Match`) that are kept; a request with
/// more is answered as if the list did not parse. No client sends more than one.
pub const MAX_LINES: usize = 4;

/// The field lines of one precondition field as received (values without surrounding OWS).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Field<'a, const N: usize> {
    lines: [&'a [u8]; N],
    /// Lines received (may exceed `N`; only the first `N` are kept).
    count: usize,
}

impl<const N: usize> Default for Field<'_, N> {
    fn default() -> Self {
        Field {
            lines: [&[]; N],
            count: 0,
        }
    }
}

impl<'a, const N: usize> Field<'a, N> {
    /// Adds one field line.
    pub fn push(&mut self, value: &'a [u8]) {
        if let Some(slot) = self.lines.get_mut(self.count) {
            *slot = value;
        }
        self.count = self.count.saturating_add(1);
    }

    /// True if the field was received at all.
    pub fn is_present(&self) -> bool {
        self.count > 0
    }

    /// All lines, or `None` if more were received than are kept.
    fn lines(&self) -> Option<&[&'a [u8]]> {
        self.lines.get(..self.count)
    }

    /// The value when the field was received on exactly one line.
    fn single(&self) -> Option<&'a [u8]> {
        (self.count == 1).then_some(self.lines[0])
    }
}

/// The precondition fields of a request (and whether it has a `Range`). Built with
/// [`Conditions::note`] for each field line; nothing is allocated.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Conditions<'a> {
    pub if_match: Field<'a, MAX_LINES>,
    pub if_none_match: Field<'a, MAX_LINES>,
    pub if_modified_since: Field<'a, 1>,
    pub if_unmodified_since: Field<'a, 1>,
    pub if_range: Field<'a, 1>,
    /// The first `Range` value, if any.
    pub range: Option<&'a [u8]>,
}

impl<'a> Conditions<'a> {
    /// The conditions among `fields` (name, value) pairs.
    pub fn from_fields<I>(fields: I) -> Conditions<'a>
    where
        I: IntoIterator<Item = (&'a [u8], &'a [u8])>,
    {
        let mut c = Conditions::default();
        for (name, value) in fields {
            c.note(name, value);
        }
        c
    }

    /// Records one field line if it is one of the precondition fields or `Range`.
    #[inline]
    pub fn note(&mut self, name: &[u8], value: &'a [u8]) {
        // Length and first letter rule out almost every other field before a full comparison.
        let first = name.first().map_or(0, |b| b | 0x20);
        match (name.len(), first) {
            (5, b'r') if name.eq_ignore_ascii_case(b"range") => {
                self.range = self.range.or(Some(value))
            }
            (8, b'i') if name.eq_ignore_ascii_case(b"if-match") => self.if_match.push(value),
            (8, b'i') if name.eq_ignore_ascii_case(b"if-range") => self.if_range.push(value),
            (13, b'i') if name.eq_ignore_ascii_case(b"if-none-match") => {
                self.if_none_match.push(value)
            }
            (17, b'i') if name.eq_ignore_ascii_case(b"if-modified-since") => {
                self.if_modified_since.push(value)
            }
            (19, b'i') if name.eq_ignore_ascii_case(b"if-unmodified-since") => {
                self.if_unmodified_since.push(value)
            }
            _ => {}
        }
    }

    /// True if the request carries none of the five precondition fields (it may have a
    /// `Range`): then [`evaluate`] always proceeds. [`is_precondition_name`] tells the same
    /// field by field, without building the conditions.
    #[inline]
    pub fn is_unconditional(&self) -> bool {
        !(self.if_match.is_present()
            || self.if_none_match.is_present()
            || self.if_modified_since.is_present()
            || self.if_unmodified_since.is_present()
            || self.if_range.is_present())
    }
}

/// True if `name` is one of the five precondition fields (any case): a request with none of
/// them is unconditional ([`Conditions::is_unconditional`]).
#[inline]
pub fn is_precondition_name(name: &[u8]) -> bool {
    let first = name.first().map_or(0, |b| b | 0x20);
    first == b'i'
        && match name.len() {
            8 => name.eq_ignore_ascii_case(b"if-match") || name.eq_ignore_ascii_case(b"if-range"),
            13 => name.eq_ignore_ascii_case(b"if-none-match"),
            17 => name.eq_ignore_ascii_case(b"if-modified-since"),
            19 => name.eq_ignore_ascii_case(b"if-unmodified-since"),
            _ => false,
        }
}

/// An entity tag (RFC 9110 §8.8.3): `opaque` is the quoted string with its quotes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EntityTag<'a> {
    pub weak: bool,
    pub opaque: &'a [u8],
}

impl<'a> EntityTag<'a> {
    /// Parses one whole entity tag, e.g. an `ETag` value; `None` if `v` is anything else.
    pub fn parse(v: &'a [u8]) -> Option<EntityTag<'a>> {
        match parse_tag(v, 0) {
            Some((tag, end)) if end == v.len() => Some(tag),
            _ => None,
        }
    }

    /// Strong comparison (§8.8.3.2): neither is weak and the opaque tags are equal.
    pub fn strong_eq(&self, other: &EntityTag<'_>) -> bool {
        !self.weak && !other.weak && self.opaque == other.opaque
    }

    /// Weak comparison (§8.8.3.2): the opaque tags are equal.
    pub fn weak_eq(&self, other: &EntityTag<'_>) -> bool {
        self.opaque == other.opaque
    }
}

/// `etagc` (§8.8.3): `!`, `#`-`~`, and obs-text.
fn is_etagc(b: u8) -> bool {
    b == 0x21 || (0x23..=0x7e).contains(&b) || b >= 0x80
}

/// An entity tag starting at `at` in `v`: the tag and the index after it.
fn parse_tag(v: &[u8], at: usize) -> Option<(EntityTag<'_>, usize)> {
    let (weak, start) = match v.get(at..at + 2) {
        Some(b"W/") => (true, at + 2),
        _ => (false, at),
    };
    if v.get(start) != Some(&b'"') {
        return None;
    }
    let len = v[start + 1..].iter().position(|&b| !is_etagc(b))?;
    let close = start + 1 + len;
    (v[close] == b'"').then(|| {
        (
            EntityTag {
                weak,
                opaque: &v[start..=close],
            },
            close + 1,
        )
    })
}

/// One member of an `If-Match` / `If-None-Match` value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Member<'a> {
    /// `*`: any current representation.
    Any,
    Tag(EntityTag<'a>),
}

/// The members of an entity-tag list sent on `lines` field lines (which RFC 9110 §5.3 says
/// are one comma-separated list), in order. Empty members are skipped (§5.6.1); the first
/// member that is not `*` or an entity tag ends the iteration with `Err(())`.
#[derive(Debug, Clone)]
pub struct Members<'a, 'l> {
    lines: &'l [&'a [u8]],
    pos: usize,
    failed: bool,
}

/// Iterates the members of the list on `lines`.
pub fn members<'a, 'l>(lines: &'l [&'a [u8]]) -> Members<'a, 'l> {
    Members {
        lines,
        pos: 0,
        failed: false,
    }
}

impl<'a> Iterator for Members<'a, '_> {
    type Item = Result<Member<'a>, ()>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        loop {
            let (&line, rest) = self.lines.split_first()?;
            // Skip OWS and empty members.
            while let Some(b' ' | b'\t' | b',') = line.get(self.pos) {
                self.pos += 1;
            }
            if self.pos >= line.len() {
                self.lines = rest;
                self.pos = 0;
                continue;
            }
            let (member, end) = if line[self.pos] == b'*' {
                (Some(Member::Any), self.pos + 1)
            } else {
                match parse_tag(line, self.pos) {
                    Some((tag, end)) => (Some(Member::Tag(tag)), end),
                    None => (None, self.pos),
                }
            };
            // A member ends at OWS then a comma, or at the end of the line.
            let mut after = end;
            while let Some(b' ' | b'\t') = line.get(after) {
                after += 1;
            }
            match member {
                Some(m) if after == line.len() || line[after] == b',' => {
                    self.pos = after;
                    return Some(Ok(m));
                }
                _ => {
                    self.failed = true;
                    return Some(Err(()));
                }
            }
        }
    }
}

/// How list members are compared with the current entity tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Comparison {
    Strong,
    Weak,
}

/// Whether the list on `field` matches the current representation (`None`: there is none):
/// `*` alone matches any current representation; otherwise a member must equal its entity tag
/// under `cmp`. A list that does not parse matches nothing.
fn list_matches(
    field: &Field<'_, MAX_LINES>,
    current: Option<&Current<'_>>,
    cmp: Comparison,
) -> bool {
    let Some(lines) = field.lines() else {
        return false;
    };
    let mut any = false;
    let mut members_seen = 0usize;
    let mut matched = false;
    for m in members(lines) {
        members_seen += 1;
        match m {
            Err(()) => return false,
            Ok(Member::Any) => any = true,
            Ok(Member::Tag(t)) => {
                if let Some(ours) = current.and_then(|c| c.etag.as_ref()) {
                    matched |= match cmp {
                        Comparison::Strong => t.strong_eq(ours),
                        Comparison::Weak => t.weak_eq(ours),
                    };
                }
            }
        }
    }
    if any {
        // "*" is the whole value or the list is malformed (§13.1.1 grammar).
        return members_seen == 1 && current.is_some();
    }
    matched
}

/// Seconds since the epoch of an HTTP-date (§5.6.7: IMF-fixdate, RFC 850 or asctime), or
/// `None` if `v` is not one.
pub fn parse_date(v: &[u8]) -> Option<u64> {
    let t = crate::date::parse(v)?;
    Some(
        t.duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
    )
}

/// The current representation of the target resource, as far as preconditions need it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Current<'a> {
    /// Its entity tag (what `ETag` would carry), if it has one.
    pub etag: Option<EntityTag<'a>>,
    /// Its `Last-Modified`, whole seconds since the epoch, if it has one.
    pub last_modified: Option<u64>,
}

/// What to answer, after the preconditions (RFC 9110 §13.2.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Perform the method; a `Range` of a GET applies (§13.2.2 step 6).
    Proceed,
    /// 304 Not Modified (GET or HEAD, steps 3 and 4).
    NotModified,
    /// 412 Precondition Failed (steps 1, 2 and 3).
    PreconditionFailed,
    /// Perform the method but ignore `Range`: 200 with the whole representation (step 5).
    IgnoreRange,
}

/// Evaluates the preconditions of a `method` request against `current` (`None`: the target
/// has no current representation) in the order of RFC 9110 §13.2.2.
///
/// The caller evaluates only where the response without preconditions would be 2xx or 412
/// (§13.2.1): not for a 404, 405 or redirect. OPTIONS, CONNECT and TRACE ignore
/// preconditions (§13.2.1) and always proceed.
pub fn evaluate(method: Method, c: &Conditions<'_>, current: Option<&Current<'_>>) -> Outcome {
    if c.is_unconditional() || matches!(method, Method::Options | Method::Connect | Method::Trace) {
        return Outcome::Proceed;
    }
    let get_or_head = matches!(method, Method::Get | Method::Head);
    // Step 1: If-Match, strong comparison (§13.1.1).
    if c.if_match.is_present() {
        if !list_matches(&c.if_match, current, Comparison::Strong) {
            return Outcome::PreconditionFailed;
        }
    } else if let Some(ius) = c.if_unmodified_since.single().and_then(parse_date) {
        // Step 2: If-Unmodified-Since, only without If-Match; ignored when the date is not
        // valid, sent twice, or there is no modification date (§13.1.4).
        if current
            .and_then(|r| r.last_modified)
            .is_some_and(|lm| lm > ius)
        {
            return Outcome::PreconditionFailed;
        }
    }
    // Step 3: If-None-Match, weak comparison (§13.1.2).
    if c.if_none_match.is_present() {
        if list_matches(&c.if_none_match, current, Comparison::Weak) {
            return if get_or_head {
                Outcome::NotModified
            } else {
                Outcome::PreconditionFailed
            };
        }
    } else if get_or_head {
        // Step 4: If-Modified-Since, GET and HEAD only, not with If-None-Match (§13.1.3).
        let ims = c.if_modified_since.single().and_then(parse_date);
        let lm = current.and_then(|r| r.last_modified);
        if let (Some(ims), Some(lm)) = (ims, lm) {
            if lm <= ims {
                return Outcome::NotModified;
            }
        }
    }
    // Step 5: If-Range, only for a GET with Range (§13.1.5).
    if method == Method::Get
        && c.range.is_some()
        && c.if_range.is_present()
        && !if_range_holds(c, current)
    {
        return Outcome::IgnoreRange;
    }
    Outcome::Proceed
}

/// §13.1.5: a strong entity tag that matches strongly, or a date equal to Last-Modified.
fn if_range_holds(c: &Conditions<'_>, current: Option<&Current<'_>>) -> bool {
    let (Some(v), Some(cur)) = (c.if_range.single(), current) else {
        return false;
    };
    if v.first() == Some(&b'"') || v.starts_with(b"W/") {
        // A weak tag never matches strongly.
        return match (EntityTag::parse(v), cur.etag.as_ref()) {
            (Some(t), Some(ours)) => t.strong_eq(ours),
            _ => false,
        };
    }
    match (parse_date(v), cur.last_modified) {
        (Some(d), Some(lm)) => d == lm,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn precondition_names_are_exactly_the_fields_that_make_a_request_conditional() {
        let names: [&[u8]; 16] = [
            b"If-Match",
            b"if-range",
            b"IF-NONE-MATCH",
            b"If-Modified-Since",
            b"if-unmodified-since",
            b"Range",
            b"If-Matc",
            b"If-Matches",
            b"Xf-Match",
            b"If_Modified_Since",
            b"If-None-Matcx",
            b"Host",
            b"",
            b"i",
            b"If-Unmodified-Sincx",
            b"Content-Type",
        ];
        for name in names {
            let conds = Conditions::from_fields([(name, &b"\"x\""[..])]);
            assert_eq!(
                is_precondition_name(name),
                !conds.is_unconditional(),
                "{}",
                String::from_utf8_lossy(name)
            );
        }
    }
    use Outcome::*;

    const ETAG: &[u8] = b"\"abc-1\"";
    /// Sun, 06 Nov 1994 08:49:37 GMT
    const LM: u64 = 784_111_777;
    const LM_TEXT: &[u8] = b"Sun, 06 Nov 1994 08:49:37 GMT";
    const BEFORE: &[u8] = b"Sun, 06 Nov 1994 08:49:36 GMT";
    const AFTER: &[u8] = b"Sun, 06 Nov 1994 08:49:38 GMT";

    fn current() -> Current<'static> {
        Current {
            etag: EntityTag::parse(ETAG),
            last_modified: Some(LM),
        }
    }

    fn conds<'a>(fields: &[(&'a str, &'a [u8])]) -> Conditions<'a> {
        Conditions::from_fields(fields.iter().map(|(n, v)| (n.as_bytes(), *v)))
    }

    fn eval(method: Method, fields: &[(&str, &[u8])]) -> Outcome {
        evaluate(method, &conds(fields), Some(&current()))
    }

    fn eval_missing(method: Method, fields: &[(&str, &[u8])]) -> Outcome {
        evaluate(method, &conds(fields), None)
    }

    #[test]
    fn entity_tags_parse_strictly() {
        assert_eq!(
            EntityTag::parse(b"\"a\""),
            Some(EntityTag {
                weak: false,
                opaque: b"\"a\""
            })
        );
        assert_eq!(
            EntityTag::parse(b"W/\"\""),
            Some(EntityTag {
                weak: true,
                opaque: b"\"\""
            })
        );
        assert!(EntityTag::parse(b"\"a,b\"").is_some(), "a comma is etagc");
        for bad in [
            &b""[..],
            b"a",
            b"\"a",
            b"\"a\"x",
            b"w/\"a\"",
            b"W/a",
            b"\"a b\"",
            b"\"a\"\"",
            b"W/",
            b"\"",
        ] {
            assert_eq!(EntityTag::parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn comparisons_follow_the_rfc_table() {
        // RFC 9110 §8.8.3.2's example table.
        let w1 = EntityTag::parse(b"W/\"1\"").unwrap();
        let w2 = EntityTag::parse(b"W/\"2\"").unwrap();
        let s1 = EntityTag::parse(b"\"1\"").unwrap();
        assert!(!w1.strong_eq(&w1) && w1.weak_eq(&w1));
        assert!(!w1.strong_eq(&w2) && !w1.weak_eq(&w2));
        assert!(!w1.strong_eq(&s1) && w1.weak_eq(&s1));
        assert!(s1.strong_eq(&s1) && s1.weak_eq(&s1));
    }

    #[test]
    fn list_members_across_lines() {
        let lines: [&[u8]; 2] = [b" \"a\" , ,W/\"b\",", b"*"];
        let got: Vec<_> = members(&lines).collect();
        assert_eq!(
            got,
            vec![
                Ok(Member::Tag(EntityTag {
                    weak: false,
                    opaque: b"\"a\""
                })),
                Ok(Member::Tag(EntityTag {
                    weak: true,
                    opaque: b"\"b\""
                })),
                Ok(Member::Any),
            ]
        );
        let bad: [&[u8]; 1] = [b"\"a\", b, \"c\""];
        let got: Vec<_> = members(&bad).collect();
        assert_eq!(got.len(), 2);
        assert_eq!(got[1], Err(()));
        let glued: [&[u8]; 1] = [b"\"a\"\"b\""];
        assert_eq!(members(&glued).next(), Some(Err(())));
        let empty: [&[u8]; 2] = [b"", b" , "];
        assert_eq!(members(&empty).next(), None);
    }

    #[test]
    fn no_conditions_proceed() {
        assert_eq!(eval(Method::Get, &[]), Proceed);
        assert_eq!(eval(Method::Get, &[("Range", b"bytes=0-1")]), Proceed);
        assert_eq!(eval_missing(Method::Put, &[("Host", b"x")]), Proceed);
    }

    #[test]
    fn if_match_uses_strong_comparison() {
        for m in [Method::Get, Method::Head, Method::Put, Method::Delete] {
            assert_eq!(eval(m, &[("If-Match", ETAG)]), Proceed, "{m:?}");
            assert_eq!(eval(m, &[("If-Match", b"\"x\", \"abc-1\"")]), Proceed);
            assert_eq!(eval(m, &[("If-Match", b"*")]), Proceed);
            assert_eq!(eval(m, &[("If-Match", b"\"nope\"")]), PreconditionFailed);
            assert_eq!(eval(m, &[("If-Match", b"W/\"abc-1\"")]), PreconditionFailed);
            // No current representation: even `*` fails (§13.1.1).
            assert_eq!(eval_missing(m, &[("If-Match", b"*")]), PreconditionFailed);
            assert_eq!(eval_missing(m, &[("If-Match", ETAG)]), PreconditionFailed);
        }
        // A representation without an entity tag matches only `*`.
        let untagged = Current {
            etag: None,
            last_modified: None,
        };
        let c = conds(&[("If-Match", ETAG)]);
        assert_eq!(
            evaluate(Method::Get, &c, Some(&untagged)),
            PreconditionFailed
        );
        let c = conds(&[("If-Match", b"*")]);
        assert_eq!(evaluate(Method::Get, &c, Some(&untagged)), Proceed);
    }

    #[test]
    fn if_match_lists_that_do_not_parse_match_nothing() {
        for v in [
            &b"abc-1"[..],
            b"\"abc-1\" x",
            b"\"abc-1\", nope",
            b"*, \"abc-1\"",
            b"* *",
            b"\"abc-1",
        ] {
            assert_eq!(eval(Method::Get, &[("If-Match", v)]), PreconditionFailed);
        }
        // An empty list has no member that matches.
        assert_eq!(eval(Method::Get, &[("If-Match", b"")]), PreconditionFailed);
    }

    #[test]
    fn if_match_on_several_lines_is_one_list() {
        let f = [("If-Match", &b"\"x\""[..]), ("If-Match", ETAG)];
        assert_eq!(eval(Method::Get, &f), Proceed);
        let f = [("If-Match", &b"*"[..]), ("If-Match", b"*")];
        assert_eq!(eval(Method::Get, &f), PreconditionFailed);
        let many = [("If-Match", ETAG); MAX_LINES + 1];
        assert_eq!(eval(Method::Get, &many), PreconditionFailed);
        assert_eq!(eval(Method::Get, &many[..MAX_LINES]), Proceed);
    }

    #[test]
    fn if_unmodified_since() {
        for m in [Method::Get, Method::Head, Method::Post, Method::Delete] {
            assert_eq!(eval(m, &[("If-Unmodified-Since", LM_TEXT)]), Proceed);
            assert_eq!(eval(m, &[("If-Unmodified-Since", AFTER)]), Proceed);
            assert_eq!(
                eval(m, &[("If-Unmodified-Since", BEFORE)]),
                PreconditionFailed
            );
            // Not a date, or sent twice: ignored (§13.1.4).
            assert_eq!(eval(m, &[("If-Unmodified-Since", b"yesterday")]), Proceed);
            let twice = [
                ("If-Unmodified-Since", BEFORE),
                ("If-Unmodified-Since", BEFORE),
            ];
            assert_eq!(eval(m, &twice), Proceed);
            // No modification date: ignored.
            assert_eq!(eval_missing(m, &[("If-Unmodified-Since", BEFORE)]), Proceed);
        }
        // The other date forms of §5.6.7.
        assert_eq!(
            eval(
                Method::Get,
                &[("If-Unmodified-Since", b"Sunday, 06-Nov-94 08:49:36 GMT")]
            ),
            PreconditionFailed
        );
        assert_eq!(
            eval(
                Method::Get,
                &[("If-Unmodified-Since", b"Sun Nov  6 08:49:36 1994")]
            ),
            PreconditionFailed
        );
    }

    #[test]
    fn if_match_takes_precedence_over_if_unmodified_since() {
        // Step 2 applies only without If-Match.
        let f = [("If-Match", ETAG), ("If-Unmodified-Since", BEFORE)];
        assert_eq!(eval(Method::Get, &f), Proceed);
        let f = [("If-Match", &b"\"x\""[..]), ("If-Unmodified-Since", AFTER)];
        assert_eq!(eval(Method::Get, &f), PreconditionFailed);
    }

    #[test]
    fn if_none_match_uses_weak_comparison() {
        for v in [ETAG, b"W/\"abc-1\"", b"\"x\", \"abc-1\"", b"*"] {
            assert_eq!(eval(Method::Get, &[("If-None-Match", v)]), NotModified);
            assert_eq!(eval(Method::Head, &[("If-None-Match", v)]), NotModified);
            // Other methods: 412 (§13.1.2).
            for m in [Method::Post, Method::Put, Method::Delete, Method::Patch] {
                assert_eq!(eval(m, &[("If-None-Match", v)]), PreconditionFailed);
            }
        }
        for v in [&b"\"x\""[..], b"W/\"x\"", b"abc-1", b"\"abc-1\" junk", b""] {
            assert_eq!(eval(Method::Get, &[("If-None-Match", v)]), Proceed, "{v:?}");
            assert_eq!(eval(Method::Put, &[("If-None-Match", v)]), Proceed);
        }
        // `*` with no current representation: true, so a create-only PUT proceeds.
        assert_eq!(
            eval_missing(Method::Put, &[("If-None-Match", b"*")]),
            Proceed
        );
        assert_eq!(
            eval_missing(Method::Get, &[("If-None-Match", ETAG)]),
            Proceed
        );
    }

    #[test]
    fn if_modified_since() {
        assert_eq!(
            eval(Method::Get, &[("If-Modified-Since", LM_TEXT)]),
            NotModified
        );
        assert_eq!(
            eval(Method::Head, &[("If-Modified-Since", AFTER)]),
            NotModified
        );
        assert_eq!(eval(Method::Get, &[("If-Modified-Since", BEFORE)]), Proceed);
        assert_eq!(
            eval(Method::Get, &[("If-Modified-Since", b"junk")]),
            Proceed
        );
        let twice = [
            ("If-Modified-Since", LM_TEXT),
            ("If-Modified-Since", LM_TEXT),
        ];
        assert_eq!(eval(Method::Get, &twice), Proceed);
        // Only GET and HEAD (§13.1.3).
        for m in [Method::Post, Method::Put, Method::Delete] {
            assert_eq!(eval(m, &[("If-Modified-Since", LM_TEXT)]), Proceed);
        }
        assert_eq!(
            eval_missing(Method::Get, &[("If-Modified-Since", LM_TEXT)]),
            Proceed
        );
    }

    #[test]
    fn if_none_match_takes_precedence_over_if_modified_since() {
        let f = [
            ("If-None-Match", &b"\"x\""[..]),
            ("If-Modified-Since", LM_TEXT),
        ];
        assert_eq!(eval(Method::Get, &f), Proceed);
        let f = [("If-None-Match", ETAG), ("If-Modified-Since", BEFORE)];
        assert_eq!(eval(Method::Get, &f), NotModified);
    }

    #[test]
    fn failed_writes_preconditions_beat_not_modified() {
        // Steps 1 and 2 come before 3 and 4: 412 wins over 304.
        let f = [("If-Match", &b"\"x\""[..]), ("If-None-Match", ETAG)];
        assert_eq!(eval(Method::Get, &f), PreconditionFailed);
        let f = [
            ("If-Unmodified-Since", BEFORE),
            ("If-Modified-Since", LM_TEXT),
        ];
        assert_eq!(eval(Method::Get, &f), PreconditionFailed);
        // Passing step 1 still goes on to step 3.
        let f = [("If-Match", ETAG), ("If-None-Match", ETAG)];
        assert_eq!(eval(Method::Get, &f), NotModified);
        let f = [("If-Match", ETAG), ("If-Modified-Since", LM_TEXT)];
        assert_eq!(eval(Method::Get, &f), NotModified);
    }

    #[test]
    fn if_range() {
        let range: (&str, &[u8]) = ("Range", b"bytes=0-1");
        assert_eq!(eval(Method::Get, &[range, ("If-Range", ETAG)]), Proceed);
        assert_eq!(eval(Method::Get, &[range, ("If-Range", LM_TEXT)]), Proceed);
        for v in [
            &b"\"x\""[..],
            b"W/\"abc-1\"",
            BEFORE,
            AFTER,
            b"junk",
            b"",
            b"\"abc-1\", \"x\"",
        ] {
            assert_eq!(
                eval(Method::Get, &[range, ("If-Range", v)]),
                IgnoreRange,
                "{v:?}"
            );
        }
        let twice = [range, ("If-Range", ETAG), ("If-Range", ETAG)];
        assert_eq!(eval(Method::Get, &twice), IgnoreRange);
        // Without Range, or for another method, If-Range is ignored (§13.1.5).
        assert_eq!(eval(Method::Get, &[("If-Range", b"\"x\"")]), Proceed);
        assert_eq!(
            eval(Method::Head, &[range, ("If-Range", b"\"x\"")]),
            Proceed
        );
        // The earlier steps still come first.
        let f = [range, ("If-Range", b"\"x\""), ("If-None-Match", ETAG)];
        assert_eq!(eval(Method::Get, &f), NotModified);
        let f = [range, ("If-Range", ETAG), ("If-Match", b"\"x\"")];
        assert_eq!(eval(Method::Get, &f), PreconditionFailed);
    }

    #[test]
    fn options_connect_and_trace_ignore_preconditions() {
        for m in [Method::Options, Method::Connect, Method::Trace] {
            assert_eq!(eval(m, &[("If-Match", b"\"x\"")]), Proceed);
            assert_eq!(eval(m, &[("If-None-Match", b"*")]), Proceed);
        }
    }

    #[test]
    fn field_names_are_case_insensitive_and_others_ignored() {
        let c = conds(&[
            ("IF-MATCH", b"*"),
            ("if-none-match", b"*"),
            ("If-Modified-Since", b"x"),
            ("iF-uNmOdIfIeD-sInCe", b"x"),
            ("if-range", b"x"),
            ("RANGE", b"x"),
            ("If-Matchx", b"x"),
            ("X-If-Match", b"x"),
        ]);
        assert_eq!(c.if_match.count, 1);
        assert_eq!(c.if_none_match.count, 1);
        assert!(c.if_modified_since.is_present() && c.if_unmodified_since.is_present());
        assert!(c.if_range.is_present() && c.range == Some(&b"x"[..]));
        assert!(conds(&[("Host", b"x"), ("Range", b"x")]).is_unconditional());
    }
}
