//! The HTML pages: one stylesheet, figures inlined as SVG with links to
//! their files, and text escaped for element content and attribute values.
//!
//! Written with `format!`: the pages are a table and a list of figures, too
//! small for a template engine to pay for its dependency.

use crate::{ReportError, read_file};
use std::fmt::Write as _;
use std::path::Path;

/// A figure of a page: the file stem of its SVG and PNG, and its caption.
#[derive(Clone, Debug, PartialEq)]
pub struct Figure {
    pub stem: String,
    pub caption: String,
}

/// `s` safe inside an element or a quoted attribute value.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A fraction as a percentage with one decimal, `-` if absent.
pub(crate) fn percent(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{:.1} %", v * 100.0))
}

const STYLE: &str = "body{font-family:sans-serif;max-width:1060px;margin:2em auto;color:#222}\
table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:4px 10px;text-align:right}\
th{background:#f3f3f3}td:first-child,th:first-child{text-align:left}figure{margin:2em 0}\
figcaption{color:#555;font-size:.92em;margin-top:.3em}svg{max-width:100%;height:auto}";

/// A whole page: `title` as its title and heading, `body` (HTML) below.
pub fn html_page(title: &str, body: &str) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{t}</title><style>{STYLE}</style>\
         </head><body><h1>{t}</h1>\n{body}</body></html>\n",
        t = escape(title)
    )
}

/// The SVG of a figure in `dir`, for inlining (without its XML declaration).
fn inline_svg(dir: &Path, stem: &str) -> Result<String, ReportError> {
    let text = read_file(&dir.join(format!("{stem}.svg")))?;
    Ok(match text.find("<svg") {
        Some(i) => text[i..].to_string(),
        None => text,
    })
}

/// Each figure inlined, with its caption and links to its PNG and SVG.
pub fn figures_html(dir: &Path, figures: &[Figure]) -> Result<String, ReportError> {
    let mut out = String::new();
    for f in figures {
        let _ = writeln!(
            out,
            "<figure>{}<figcaption>{} (<a href=\"{s}.png\">PNG</a>, <a href=\"{s}.svg\">SVG</a>)</figcaption></figure>",
            inline_svg(dir, &f.stem)?,
            escape(&f.caption),
            s = escape(&f.stem)
        );
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escape_covers_markup_and_both_quotes() {
        assert_eq!(escape("a<b>&c"), "a&lt;b&gt;&amp;c");
        // Regression: quotes were left alone, so a value could end an attribute.
        assert_eq!(escape(r#"x" onload="y"#), "x&quot; onload=&quot;y");
        assert_eq!(escape("it's"), "it&#39;s");
        assert_eq!(escape("1 → 2 %"), "1 → 2 %");
    }

    #[test]
    fn a_page_escapes_its_title() {
        let page = html_page("<cluster> \"A\"", "<p>body</p>");
        assert!(page.contains("<title>&lt;cluster&gt; &quot;A&quot;</title>"));
        assert!(page.contains("<p>body</p>") && page.ends_with("</html>\n"));
    }

    #[test]
    fn figures_are_inlined_without_the_xml_declaration() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("f.svg"), "<?xml version=\"1.0\"?>\n<svg>x</svg>").unwrap();
        let figure = Figure { stem: "f".into(), caption: "a & b".into() };
        let html = figures_html(dir.path(), &[figure]).unwrap();
        assert!(html.starts_with("<figure><svg>x</svg><figcaption>a &amp; b (<a href=\"f.png\">"), "{html}");
        let missing = Figure { stem: "g".into(), caption: String::new() };
        assert!(matches!(figures_html(dir.path(), &[missing]), Err(ReportError::Io { .. })));
    }
}
