//! Rendering (pure): a view's rows as a kubectl-style table, a wide table, JSON or YAML.
//!
//! Commands build a view (plain data that also serialises to the documented JSON/YAML
//! structure) and `main` prints what [`render`] returns. Colour is decided by the caller
//! (only when stdout is a terminal) and passed in, so rendering stays a pure function.

use std::fmt;
use std::str::FromStr;

use comfy_table::presets::NOTHING;
use comfy_table::{
    Cell as TableCell, CellAlignment, Color, ContentArrangement, Table as ComfyTable,
};
use serde::Serialize;

/// Failure to serialise a view.
#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    /// JSON serialisation failed.
    #[error("failed to render the output as JSON")]
    Json {
        /// Why.
        #[source]
        source: serde_json::Error,
    },
    /// YAML serialisation failed.
    #[error("failed to render the output as YAML")]
    Yaml {
        /// Why.
        #[source]
        source: serde_yaml::Error,
    },
}

/// The `-o/--output` formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum OutputFormat {
    /// A table of the most useful columns.
    #[default]
    Table,
    /// The table with more columns (or one row per package).
    Wide,
    /// The view's documented JSON structure.
    Json,
    /// The same structure as YAML.
    Yaml,
}

impl OutputFormat {
    /// The name as written on the command line.
    pub const fn as_str(self) -> &'static str {
        match self {
            OutputFormat::Table => "table",
            OutputFormat::Wide => "wide",
            OutputFormat::Json => "json",
            OutputFormat::Yaml => "yaml",
        }
    }
}

impl fmt::Display for OutputFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An `-o` value that is not one of the formats.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown output format {0:?}: expected one of table, wide, json, yaml")]
pub struct UnknownFormat(pub String);

impl FromStr for OutputFormat {
    type Err = UnknownFormat;

    fn from_str(value: &str) -> Result<Self, Self::Err> {
        match value {
            "table" => Ok(OutputFormat::Table),
            "wide" => Ok(OutputFormat::Wide),
            "json" => Ok(OutputFormat::Json),
            "yaml" => Ok(OutputFormat::Yaml),
            other => Err(UnknownFormat(other.to_owned())),
        }
    }
}

/// How a cell reads at a glance; mapped to a colour only when colour is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Tone {
    /// No emphasis.
    #[default]
    Plain,
    /// Done and healthy.
    Good,
    /// Work under way.
    Busy,
    /// Needs attention but is not failing (blocked, paused, disabled, waiting).
    Warn,
    /// Failing.
    Bad,
}

impl Tone {
    /// The tone of a node, Skyhook or package status or state value.
    pub fn of_status(value: &str) -> Tone {
        match value.to_ascii_lowercase().as_str() {
            "complete" => Tone::Good,
            "in_progress" => Tone::Busy,
            "erroring" => Tone::Bad,
            "blocked" | "paused" | "disabled" | "waiting" | "unknown" => Tone::Warn,
            _ => Tone::Plain,
        }
    }

    const fn colour(self) -> Option<Color> {
        match self {
            Tone::Plain => None,
            Tone::Good => Some(Color::Green),
            Tone::Busy => Some(Color::Cyan),
            Tone::Warn => Some(Color::Yellow),
            Tone::Bad => Some(Color::Red),
        }
    }
}

/// One table cell.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cell {
    /// The text.
    pub text: String,
    /// Its emphasis.
    pub tone: Tone,
}

impl Cell {
    /// A plain cell.
    pub fn plain(text: impl Into<String>) -> Self {
        Cell {
            text: text.into(),
            tone: Tone::Plain,
        }
    }

    /// A status cell, toned by its value.
    pub fn status(text: impl Into<String>) -> Self {
        let text = text.into();
        let tone = Tone::of_status(&text);
        Cell { text, tone }
    }
}

impl From<String> for Cell {
    fn from(text: String) -> Self {
        Cell::plain(text)
    }
}

impl From<&str> for Cell {
    fn from(text: &str) -> Self {
        Cell::plain(text)
    }
}

/// A table with upper-case headers, as kubectl prints them.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Table {
    /// Column headers.
    pub headers: Vec<&'static str>,
    /// Rows, each as long as `headers`.
    pub rows: Vec<Vec<Cell>>,
}

impl Table {
    /// An empty table with these headers.
    pub fn new(headers: &[&'static str]) -> Self {
        Table {
            headers: headers.to_vec(),
            rows: Vec::new(),
        }
    }

    /// Appends a row.
    pub fn push(&mut self, row: Vec<Cell>) {
        self.rows.push(row);
    }
}

/// One piece of human output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Block {
    /// A line of text.
    Line(String),
    /// A table.
    Table(Table),
    /// A heading line, emphasised when colour is on.
    Heading(String),
}

/// A command's result: human blocks for `table`/`wide`, and itself serialised for JSON/YAML.
pub trait View: Serialize {
    /// The human rendering; `wide` adds columns or detail.
    fn blocks(&self, wide: bool) -> Vec<Block>;
}

/// Renders `view` in `format`. `colour` adds ANSI colours to table output only.
pub fn render<V: View>(
    view: &V,
    format: OutputFormat,
    colour: bool,
) -> Result<String, OutputError> {
    match format {
        OutputFormat::Json => serde_json::to_string_pretty(view)
            .map(|json| json + "\n")
            .map_err(|source| OutputError::Json { source }),
        OutputFormat::Yaml => {
            serde_yaml::to_string(view).map_err(|source| OutputError::Yaml { source })
        }
        OutputFormat::Table | OutputFormat::Wide => Ok(render_blocks(
            &view.blocks(format == OutputFormat::Wide),
            colour,
        )),
    }
}

/// Renders human blocks, one after the other.
pub fn render_blocks(blocks: &[Block], colour: bool) -> String {
    let mut out = String::new();
    for block in blocks {
        match block {
            Block::Line(line) => {
                out.push_str(line);
                out.push('\n');
            }
            Block::Heading(line) if colour => {
                out.push_str("\u{1b}[1m");
                out.push_str(line);
                out.push_str("\u{1b}[0m\n");
            }
            Block::Heading(line) => {
                out.push_str(line);
                out.push('\n');
            }
            Block::Table(table) => out.push_str(&render_table(table, colour)),
        }
    }
    out
}

/// A kubectl-style table: no borders, columns three spaces apart, no trailing spaces. An
/// empty table renders as nothing; the view says "no ..." itself when that matters.
pub fn render_table(table: &Table, colour: bool) -> String {
    if table.rows.is_empty() {
        return String::new();
    }
    let mut comfy = ComfyTable::new();
    comfy
        .load_preset(NOTHING)
        .set_content_arrangement(ContentArrangement::Disabled);
    if colour {
        comfy.enforce_styling();
    } else {
        comfy.force_no_tty();
    }
    comfy.set_header(table.headers.iter().map(TableCell::new));
    for row in &table.rows {
        comfy.add_row(row.iter().map(|cell| {
            let rendered = TableCell::new(&cell.text).set_alignment(CellAlignment::Left);
            match (colour, cell.tone.colour()) {
                (true, Some(c)) => rendered.fg(c),
                _ => rendered,
            }
        }));
    }
    let last = table.headers.len().saturating_sub(1);
    for (index, column) in comfy.column_iter_mut().enumerate() {
        column.set_padding((0, if index == last { 0 } else { 3 }));
    }
    let mut out = String::new();
    for line in comfy.lines() {
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_format_parses_the_four_names_and_nothing_else() {
        for (input, expected) in [
            ("table", Ok(OutputFormat::Table)),
            ("wide", Ok(OutputFormat::Wide)),
            ("json", Ok(OutputFormat::Json)),
            ("yaml", Ok(OutputFormat::Yaml)),
            ("bogus", Err(UnknownFormat("bogus".into()))),
            ("JSON", Err(UnknownFormat("JSON".into()))),
        ] {
            assert_eq!(input.parse::<OutputFormat>(), expected, "{input}");
        }
    }

    #[test]
    fn tables_have_kubectl_spacing_and_no_trailing_spaces() {
        let mut table = Table::new(&["NODE", "STATUS"]);
        table.push(vec![Cell::plain("node-1"), Cell::status("complete")]);
        table.push(vec![Cell::plain("n2"), Cell::status("erroring")]);
        assert_eq!(
            render_table(&table, false),
            "NODE     STATUS\nnode-1   complete\nn2       erroring\n"
        );
    }

    #[test]
    fn colour_only_when_asked() {
        let mut table = Table::new(&["STATUS"]);
        table.push(vec![Cell::status("erroring")]);
        assert!(!render_table(&table, false).contains('\u{1b}'));
        assert!(render_table(&table, true).contains('\u{1b}'));
    }

    #[test]
    fn empty_tables_render_as_nothing() {
        assert_eq!(render_table(&Table::new(&["A"]), false), "");
    }

    #[test]
    fn tones_follow_status_values() {
        for (value, tone) in [
            ("complete", Tone::Good),
            ("ERRORING", Tone::Bad),
            ("in_progress", Tone::Busy),
            ("paused", Tone::Warn),
            ("node-1", Tone::Plain),
        ] {
            assert_eq!(Tone::of_status(value), tone, "{value}");
        }
    }
}
