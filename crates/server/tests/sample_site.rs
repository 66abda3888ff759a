//! The sample site (`www/index.html`) as a newcomer meets it: every link on its index page
//! answers when the server is started as the page says, and the status links, off by
//! default, are next to the words that turn them on.

use std::path::Path;

mod common;

/// The model every server of this binary is started with.
const MODEL: common::Model = common::Model::FIBER;

/// The `href` values of `html`, in order.
fn links(html: &str) -> Vec<String> {
    html.split("href=\"")
        .skip(1)
        .filter_map(|s| s.split_once('"').map(|(h, _)| h.to_string()))
        .collect()
}

#[test]
fn every_link_on_the_sample_index_answers_with_status_on() {
    let www = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../www");
    let index = std::fs::read_to_string(www.join("index.html")).expect("www/index.html");
    let b = common::Builder::new(MODEL, "sample")
        .file("index.html", index.as_bytes())
        .file(
            "haewelmann.html",
            &std::fs::read(www.join("haewelmann.html")).expect("www/haewelmann.html"),
        );
    // The large files are generated, as `weft serve` does for www/ at first start.
    weft::fileset::ensure(&b.dir().join("root")).expect("fileset");
    let links = links(&index);
    assert!(links.len() >= 8, "{links:?}");
    let status: Vec<&String> = links.iter().filter(|l| l.starts_with("/_weft/")).collect();
    assert_eq!(status.len(), 3, "{links:?}");
    // The item with the status links says how to turn them on.
    let item = index
        .split("<li>")
        .find(|li| li.contains("/_weft/status"))
        .expect("the status links' item");
    assert!(item.contains("weft serve --status"), "{item}");
    assert!(item.contains("[status]"), "{item}");

    let srv = b.args(&["--status"]).start();
    for l in &links {
        let path = if l.starts_with('/') {
            l.clone()
        } else {
            format!("/{l}")
        };
        let r = srv.get(&path);
        assert_eq!(r.status, 200, "{path}: {r:?}");
    }
}
