//! Markdown tables for the terminal: rows collected until the table ends, then drawn with
//! box lines and columns aligned as the delimiter row asks; a table wider than the terminal
//! has its widest columns narrowed and their cells wrapped at word boundaries.

use super::wrap::{visible_width, wrap};
use super::{BOLD, DIM, RESET, inline};

/// How a column's cells sit in it, from the delimiter row (`:--`, `:-:`, `--:`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Align {
    Left,
    Center,
    Right,
}

/// A table being collected: its header, alignments and body rows, as Markdown cells.
#[derive(Debug, Clone)]
pub struct Table {
    /// Spaces before the table's lines in the source, kept before its box.
    pub indent: String,
    header: Vec<String>,
    align: Vec<Align>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table from its header line and delimiter row, when they make one (a delimiter row
    /// with as many cells as the header).
    pub fn start(header: &str, delimiter: &str) -> Option<Table> {
        let header_cells = cells(header);
        let align = delimiter_row(delimiter)?;
        if header_cells.len() != align.len() {
            return None;
        }
        let indent = header[..header.len() - header.trim_start().len()].to_owned();
        Some(Table { indent, header: header_cells, align, rows: Vec::new() })
    }

    /// Adds a body row; missing cells are empty, extra ones dropped.
    pub fn push_row(&mut self, line: &str) {
        let mut row = cells(line);
        row.resize(self.header.len(), String::new());
        self.rows.push(row);
    }

    /// The table drawn in at most `width` columns, one string per line.
    pub fn render(&self, width: usize) -> Vec<String> {
        let header: Vec<String> = self.header.iter().map(|cell| inline(cell, BOLD)).collect();
        let header: Vec<String> = header.iter().map(|cell| format!("{BOLD}{cell}{RESET}")).collect();
        let rows: Vec<Vec<String>> =
            self.rows.iter().map(|row| row.iter().map(|cell| inline(cell, "")).collect()).collect();
        let room = width.saturating_sub(visible_width(&self.indent));
        let widths = column_widths(&header, &rows, room);
        let rule = |left: &str, middle: &str, right: &str| {
            let parts: Vec<String> = widths.iter().map(|w| "─".repeat(w + 2)).collect();
            format!("{}{DIM}{left}{}{right}{RESET}", self.indent, parts.join(middle))
        };
        let mut lines = vec![rule("┌", "┬", "┐")];
        lines.extend(self.row_lines(&header, &widths));
        lines.push(rule("├", "┼", "┤"));
        for row in &rows {
            lines.extend(self.row_lines(row, &widths));
        }
        lines.push(rule("└", "┴", "┘"));
        lines
    }

    /// One row, as many lines as its tallest wrapped cell.
    fn row_lines(&self, row: &[String], widths: &[usize]) -> Vec<String> {
        let wrapped: Vec<Vec<String>> = row
            .iter()
            .zip(widths)
            .map(|(cell, &width)| wrap(cell, width, "").split('\n').map(str::to_owned).collect())
            .collect();
        let height = wrapped.iter().map(Vec::len).max().unwrap_or(1);
        (0..height)
            .map(|index| {
                let mut line = format!("{}{DIM}│{RESET}", self.indent);
                for ((cell, &width), align) in wrapped.iter().zip(widths).zip(&self.align) {
                    let text = cell.get(index).map_or("", String::as_str);
                    line.push_str(&format!(" {} {DIM}│{RESET}", pad(text, width, *align)));
                }
                line
            })
            .collect()
    }
}

/// The cells of a table line: split at `|` outside code spans and not escaped, the outer
/// pipes dropped, each cell trimmed.
pub fn cells(line: &str) -> Vec<String> {
    let line = line.trim();
    let line = line.strip_prefix('|').unwrap_or(line);
    let line = if line.ends_with('|') && !line.ends_with("\\|") { &line[..line.len() - 1] } else { line };
    let mut out = Vec::new();
    let mut cell = String::new();
    let mut in_code = false;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some('|') => cell.push('|'),
                Some(other) => {
                    cell.push('\\');
                    cell.push(other);
                }
                None => cell.push('\\'),
            },
            '`' => {
                in_code = !in_code;
                cell.push(c);
            }
            '|' if !in_code => out.push(std::mem::take(&mut cell).trim().to_owned()),
            _ => cell.push(c),
        }
    }
    out.push(cell.trim().to_owned());
    out
}

/// The alignments of a delimiter row such as `| :-- | :-: | --: |`, or `None` when the
/// line is not one.
pub fn delimiter_row(line: &str) -> Option<Vec<Align>> {
    // Without a pipe, `---` is a rule (or a heading's underline), not a table.
    if !line.contains('|') {
        return None;
    }
    cells(line)
        .iter()
        .map(|cell| {
            let inner = cell.trim_start_matches(':').trim_end_matches(':');
            if inner.is_empty() || !inner.chars().all(|c| c == '-') {
                return None;
            }
            Some(match (cell.starts_with(':'), cell.ends_with(':')) {
                (true, true) => Align::Center,
                (false, true) => Align::Right,
                _ => Align::Left,
            })
        })
        .collect()
}

/// Each column as wide as its widest cell; when the table would pass `room` columns, the
/// widest columns give up room first (down to a few columns each).
fn column_widths(header: &[String], rows: &[Vec<String>], room: usize) -> Vec<usize> {
    const NARROWEST: usize = 3;
    let mut widths: Vec<usize> = header.iter().map(|cell| visible_width(cell).max(1)).collect();
    for row in rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(visible_width(cell));
        }
    }
    // `│ a │ b │`: three columns of border and padding per cell, and one more.
    let available = room.saturating_sub(3 * widths.len() + 1);
    while widths.iter().sum::<usize>() > available {
        let Some(widest) = widths.iter_mut().filter(|width| **width > NARROWEST).max_by_key(|width| **width) else {
            break;
        };
        *widest -= 1;
    }
    widths
}

/// `text` padded with spaces to `width` columns as `align` asks.
fn pad(text: &str, width: usize, align: Align) -> String {
    let gap = width.saturating_sub(visible_width(text));
    let (before, after) = match align {
        Align::Left => (0, gap),
        Align::Right => (gap, 0),
        Align::Center => (gap / 2, gap - gap / 2),
    };
    format!("{}{text}{}", " ".repeat(before), " ".repeat(after))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_are_split_at_pipes_outside_code_and_escapes() {
        assert_eq!(cells("| a | `x|y` | b\\|c |"), ["a", "`x|y`", "b|c"]);
        assert_eq!(cells("a | b"), ["a", "b"]);
    }

    #[test]
    fn the_delimiter_row_gives_each_column_its_alignment() {
        assert_eq!(
            delimiter_row("|:--|:-:|--:|---|"),
            Some(vec![Align::Left, Align::Center, Align::Right, Align::Left])
        );
        assert_eq!(delimiter_row("| a | b |"), None);
        assert_eq!(delimiter_row("just text"), None);
    }

    #[test]
    fn a_header_and_delimiter_with_different_cell_counts_are_no_table() {
        assert!(Table::start("| a | b |", "|---|").is_none());
        assert!(Table::start("| a | b |", "|---|---|").is_some());
    }

    #[test]
    fn the_widest_column_is_narrowed_first_when_the_table_does_not_fit() {
        let header = vec!["a".to_owned(), "b".to_owned()];
        let rows = vec![vec!["xx".to_owned(), "y".repeat(40)]];
        assert_eq!(column_widths(&header, &rows, 100), [2, 40]);
        assert_eq!(column_widths(&header, &rows, 30), [2, 21]);
    }

    #[test]
    fn cells_are_padded_as_aligned() {
        assert_eq!(pad("ab", 6, Align::Left), "ab    ");
        assert_eq!(pad("ab", 6, Align::Right), "    ab");
        assert_eq!(pad("ab", 5, Align::Center), " ab  ");
    }
}
