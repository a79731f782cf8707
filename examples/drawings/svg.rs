//! A small SVG writer: lines, arrows, circles, boxes and text, in pixels, numbers written to
//! 0.1 px so that the same drawing is the same text every time.

use std::fmt::Write;

/// A point on the page [px], y down.
pub(crate) type Px = (f64, f64);

/// Where a text's anchor point sits in it.
#[derive(Clone, Copy)]
pub(crate) enum Anchor {
    Start,
    Middle,
    End,
}

impl Anchor {
    fn name(self) -> &'static str {
        match self {
            Anchor::Start => "start",
            Anchor::Middle => "middle",
            Anchor::End => "end",
        }
    }
}

/// Shapes drawn so far, each with a class of the page's style sheet.
pub(crate) struct Svg {
    width: f64,
    height: f64,
    body: String,
}

impl Svg {
    pub(crate) fn new(width: f64, height: f64) -> Svg {
        Svg { width, height, body: String::new() }
    }

    pub(crate) fn line(&mut self, a: Px, b: Px, class: &str) {
        self.segment(a, b, class, "");
    }

    /// A line from `a` with an arrowhead at `b`.
    pub(crate) fn arrow(&mut self, a: Px, b: Px, class: &str) {
        self.segment(a, b, class, r#" marker-end="url(#head)""#);
    }

    /// A line from `a` to `b`, with `extra` attributes (each after a space).
    fn segment(&mut self, a: Px, b: Px, class: &str, extra: &str) {
        let _ = writeln!(
            self.body,
            r#"<line x1="{:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}" class="{class}"{extra}/>"#,
            a.0, a.1, b.0, b.1
        );
    }

    pub(crate) fn circle(&mut self, centre: Px, radius: f64, class: &str) {
        let _ = writeln!(
            self.body,
            r#"<circle cx="{:.1}" cy="{:.1}" r="{radius:.1}" class="{class}"/>"#,
            centre.0, centre.1
        );
    }

    /// A box with its top left corner at `corner`.
    pub(crate) fn rect(&mut self, corner: Px, size: Px, class: &str) {
        let _ = writeln!(
            self.body,
            r#"<rect x="{:.1}" y="{:.1}" width="{:.1}" height="{:.1}" rx="4" class="{class}"/>"#,
            corner.0, corner.1, size.0, size.1
        );
    }

    /// One line of text whose baseline goes through `at`.
    pub(crate) fn text(&mut self, at: Px, anchor: Anchor, class: &str, text: &str) {
        let text = text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;");
        let _ = writeln!(
            self.body,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="{}" class="{class}">{text}</text>"#,
            at.0,
            at.1,
            anchor.name()
        );
    }

    /// Lines of text, the first one's baseline through `at`, `spacing` px apart.
    pub(crate) fn lines(&mut self, at: Px, anchor: Anchor, class: &str, spacing: f64, lines: &[&str]) {
        for (i, line) in lines.iter().enumerate() {
            self.text((at.0, at.1 + spacing * i as f64), anchor, class, line);
        }
    }

    /// The SVG text: a white page, `style` (CSS for the classes used), the shapes, and `title`
    /// for screen readers.
    pub(crate) fn finish(self, title: &str, style: &str) -> String {
        format!(
            concat!(
                r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w:.0}" height="{h:.0}" viewBox="0 0 {w:.0} {h:.0}">"#,
                "\n<title>{title}</title>\n<style>\ntext {{ font-family: sans-serif; font-size: 13px; fill: #222; }}\n{style}</style>\n",
                r##"<defs><marker id="head" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#444"/></marker></defs>"##,
                "\n",
                r#"<rect width="100%" height="100%" fill="white"/>"#,
                "\n{body}</svg>\n"
            ),
            w = self.width,
            h = self.height,
            title = title,
            style = style,
            body = self.body
        )
    }
}
