//! What the layer tests of weft-fiber (`tests/layers.rs`) and of the server crate
//! (`crates/server/tests/layers.rs`, which includes this file) share: a module's source with
//! the test code taken out, so that only what the module itself uses is checked.

/// The source without comments and without `#[cfg(test)]` items.
pub fn code_only(src: &str) -> String {
    let mut out = String::new();
    let mut lines = src.lines().peekable();
    while let Some(line) = lines.next() {
        let code = match line.find("//") {
            Some(i) => &line[..i],
            None => line,
        };
        let t = code.trim();
        let is_test_cfg = t.starts_with("#[cfg(") && t.contains("test") && !t.contains("not(test");
        if !is_test_cfg {
            out.push_str(code);
            out.push('\n');
            continue;
        }
        // Skip the item the attribute applies to: up to its `;`, or its braces' end.
        let mut depth = 0i32;
        let mut opened = false;
        for l in lines.by_ref() {
            let l = l.find("//").map_or(l, |i| &l[..i]);
            for c in l.chars() {
                match c {
                    '{' => {
                        depth += 1;
                        opened = true;
                    }
                    '}' => depth -= 1,
                    _ => {}
                }
            }
            let t = l.trim();
            if t.starts_with("#[") && !opened {
                continue; // another attribute of the same item
            }
            if (opened && depth <= 0) || (!opened && t.ends_with(';')) {
                break;
            }
        }
    }
    out
}
