//! What of a bootstrap file reaches the prompt: HTML comments (notes for the person editing
//! the file) are dropped, then list items that are only an unfilled label (`- Name:`), then
//! headings left with nothing under them. A file of nothing but headings reaches no prompt,
//! so an unfilled template costs no tokens.

/// `text` as the prompt shows it; empty when nothing but structure is left.
pub(crate) fn prune(text: &str) -> String {
    let without_comments = strip_comments(text);
    let lines: Vec<&str> = without_comments.lines().collect();
    let filled: Vec<&str> =
        lines.iter().enumerate().filter(|(at, line)| !is_unfilled_item(&lines, *at, line)).map(|(_, l)| *l).collect();
    let kept = drop_empty_sections(&filled);
    squeeze_blank_lines(&kept)
}

/// `text` without `<!-- … -->` comments; an unclosed comment runs to the end.
fn strip_comments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("<!--") {
        out.push_str(&rest[..start]);
        rest = match rest[start..].find("-->") {
            Some(end) => &rest[start + end + 3..],
            None => "",
        };
    }
    out.push_str(rest);
    out
}

/// A list item that is a label with nothing after its colon (`- Timezone:`) and no deeper
/// lines under it.
fn is_unfilled_item(lines: &[&str], at: usize, line: &str) -> bool {
    let trimmed = line.trim_start();
    let Some(item) = trimmed.strip_prefix("- ").or_else(|| trimmed.strip_prefix("* ")) else {
        return false;
    };
    if !item.trim_end().ends_with(':') {
        return false;
    }
    let indent = line.len() - trimmed.len();
    let next = lines[at + 1..].iter().find(|l| !l.trim().is_empty());
    next.is_none_or(|next| next.len() - next.trim_start().len() <= indent)
}

/// The heading level of a Markdown ATX heading line, if it is one.
fn heading_level(line: &str) -> Option<usize> {
    let hashes = line.bytes().take_while(|b| *b == b'#').count();
    (1..=6).contains(&hashes).then_some(hashes).filter(|_| line[hashes..].starts_with(' '))
}

/// The lines without the headings whose sections (up to the next heading of the same or a
/// higher level) hold only blank lines and other such headings.
fn drop_empty_sections<'a>(lines: &[&'a str]) -> Vec<&'a str> {
    let mut keep = vec![true; lines.len()];
    // From the end, so a heading sees whether its subsections survived.
    for at in (0..lines.len()).rev() {
        let Some(level) = heading_level(lines[at]) else { continue };
        let has_content = lines[at + 1..]
            .iter()
            .zip(&keep[at + 1..])
            .take_while(|(line, _)| heading_level(line).is_none_or(|other| other > level))
            .any(|(line, kept)| *kept && !line.trim().is_empty());
        keep[at] = has_content;
    }
    lines.iter().zip(keep).filter(|(_, kept)| *kept).map(|(line, _)| *line).collect()
}

/// The lines joined, with runs of blank lines cut to one and no blank lines at either end.
fn squeeze_blank_lines(lines: &[&str]) -> String {
    let mut out = String::new();
    let mut blank_pending = false;
    for line in lines {
        if line.trim().is_empty() {
            blank_pending = !out.is_empty();
            continue;
        }
        if blank_pending {
            out.push('\n');
            blank_pending = false;
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out.truncate(out.trim_end().len());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unfilled_profile_leaves_nothing() {
        let template = "# User\n\n<!-- What oxibot knows about you. -->\n\n## Basics\n\n- Name:\n- Timezone:\n\n\
                        ## Context\n\n- Work:\n";
        assert_eq!(prune(template), "");
    }

    #[test]
    fn filled_items_keep_their_headings_and_unfilled_ones_go() {
        let text = "# User\n\n## Basics\n\n- Name: Sam\n- Timezone:\n\n## Context\n\n- Work:\n";
        assert_eq!(prune(text), "# User\n\n## Basics\n\n- Name: Sam");
    }

    #[test]
    fn a_label_with_items_under_it_is_not_unfilled() {
        let text = "## Projects\n\n- Current:\n  - oxibot\n- Done:\n";
        assert_eq!(prune(text), "## Projects\n\n- Current:\n  - oxibot");
    }

    #[test]
    fn comments_go_wherever_they_are_and_prose_stays() {
        let text = "# Notes <!-- inline -->\n\nKeep <!-- a\nmultiline\ncomment --> this.\n<!-- unclosed";
        assert_eq!(prune(text), "# Notes\n\nKeep  this.");
    }

    #[test]
    fn a_heading_with_only_empty_subsections_goes_but_one_with_text_stays() {
        let text = "# A\n\n## B\n\n### C\n\n## D\n\ntext\n";
        assert_eq!(prune(text), "# A\n\n## D\n\ntext");
    }

    #[test]
    fn hashes_without_a_space_are_not_headings() {
        assert_eq!(prune("#tag\n"), "#tag");
        assert_eq!(heading_level("## Title"), Some(2));
        assert_eq!(heading_level("####### seven"), None);
    }
}
