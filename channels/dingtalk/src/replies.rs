//! Delivering the kernel's replies as the robot's Markdown messages (`sampleMarkdown`): to a
//! user with `oToMessages/batchSend`, to a group with `groupMessages/send`, long texts sent in
//! parts, then acknowledged to the kernel.

use oxibot_plugin::Outbound;
use oxibot_plugin::chat::{self, Markup, Measure, PartsSent, SplitRules, leave_files_out, split};
use serde_json::{Value, json};

use crate::api::{OpenApi, Recipient};
use crate::incoming::GROUP_PREFIX;

/// DingTalk's Markdown messages: parts of at most 4000 characters, well inside what the
/// robot send API takes.
pub const DINGTALK: SplitRules = SplitRules { limit: 4000, measure: Measure::Chars, markup: Markup::Markdown };
/// The longest title (the preview in notifications and the chat list), in characters.
const TITLE_CHARS: usize = 30;
/// The title of a part with no words to take one from.
const DEFAULT_TITLE: &str = "oxibot";
/// The longest sender name put above a reply in a group.
const SENDER_NAME_CHARS: usize = 80;

impl Recipient {
    /// Who a reply to chat `chat_id` goes to: the group of `group:<conversation>` (or
    /// `group:<conversation>:<member>`), else the user of that id.
    pub fn of(chat_id: &str) -> Recipient {
        match chat_id.strip_prefix(GROUP_PREFIX) {
            Some(rest) => {
                Recipient::Group(rest.split_once(':').map_or(rest, |(conversation, _)| conversation).to_owned())
            }
            None => Recipient::User(chat_id.to_owned()),
        }
    }
}

/// Sends replies for the robot.
pub struct Replies {
    /// The open API.
    pub api: OpenApi,
    /// Outbound id → parts already sent, for replies not delivered whole yet (kept on disk).
    pub sent: PartsSent,
}

impl chat::Replies for Replies {
    type Error = String;

    /// Sends every part of `outbound` not sent yet.
    async fn deliver(&mut self, outbound: &Outbound) -> Result<(), String> {
        let recipient = Recipient::of(&outbound.chat_id);
        let text = addressed(&outbound.content, &recipient, &outbound.metadata);
        let parts = split(&text, DINGTALK);
        leave_files_out(outbound, !parts.is_empty(), "dingtalk")?;
        let already = self.sent.already(outbound.id);
        for (index, part) in parts.iter().enumerate().skip(already) {
            let param = json!({"title": title(part), "text": part});
            self.api.send(&recipient, "sampleMarkdown", &param).await.map_err(|error| error.to_string())?;
            self.sent.posted(outbound.id, index + 1, parts.len());
        }
        Ok(())
    }
}

/// The reply's text; in a group, under a heading naming the member it answers (as nanobot
/// does: robot Markdown messages cannot mention anyone for real).
fn addressed(content: &str, recipient: &Recipient, metadata: &Value) -> String {
    let name = metadata["sender_name"].as_str().map(sender_name).unwrap_or_default();
    match recipient {
        Recipient::Group(_) if !name.is_empty() && !content.trim().is_empty() => format!("# @{name}\n\n{content}"),
        _ => content.to_owned(),
    }
}

/// A display name as one short line with Markdown's special characters escaped.
fn sender_name(name: &str) -> String {
    let line = name.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut escaped = String::new();
    for c in line.chars().take(SENDER_NAME_CHARS) {
        if "\\`*_{}[]()<>#+-.!|~".contains(c) {
            escaped.push('\\');
        }
        escaped.push(c);
    }
    escaped
}

/// A part's title: its first line with words, Markdown marks left out, shortened.
fn title(part: &str) -> String {
    let line = part
        .lines()
        .filter(|line| !line.trim_start().starts_with("```"))
        .map(|line| line.trim_start_matches(['#', '>', '-', '*', ' ']).replace(['*', '`', '\\'], "").trim().to_owned())
        .find(|line| !line.is_empty());
    let Some(line) = line else { return DEFAULT_TITLE.to_owned() };
    if line.chars().count() <= TITLE_CHARS {
        return line;
    }
    let mut short: String = line.chars().take(TITLE_CHARS - 1).collect();
    short.push('…');
    short
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reply_goes_to_the_user_or_to_the_group_its_chat_id_names() {
        assert_eq!(Recipient::of("staff7"), Recipient::User("staff7".into()));
        assert_eq!(Recipient::of("group:cidG1=="), Recipient::Group("cidG1==".into()));
        assert_eq!(Recipient::of("group:cidG1==:staff7"), Recipient::Group("cidG1==".into()));
    }

    #[test]
    fn a_group_reply_is_headed_with_the_escaped_name_of_the_member_it_answers() {
        let group = Recipient::Group("cid".into());
        let metadata = json!({"sender_name": "Ada *the*\nfirst"});
        assert_eq!(addressed("hi", &group, &metadata), "# @Ada \\*the\\* first\n\nhi");
        assert_eq!(addressed("hi", &Recipient::User("u".into()), &metadata), "hi");
        assert_eq!(addressed("hi", &group, &json!({})), "hi");
    }

    #[test]
    fn a_title_is_the_first_line_with_words_without_markdown_and_short() {
        assert_eq!(title("## **Result**\n\nbody"), "Result");
        assert_eq!(title("```rust\nfn main() {}\n```"), "fn main() {}");
        assert_eq!(title("   \n"), DEFAULT_TITLE);
        let long = title(&"word ".repeat(20));
        assert_eq!(long.chars().count(), TITLE_CHARS);
        assert!(long.ends_with('…'));
    }

    #[test]
    fn the_split_limit_counts_characters_of_markdown() {
        let text = "字".repeat(4500);
        let parts = split(&text, DINGTALK);
        assert_eq!(parts.len(), 2);
        assert!(parts.iter().all(|part| part.chars().count() <= 4000));
    }
}
