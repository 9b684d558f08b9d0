//! What the caller of a turn sees while it runs: reply pieces, tool calls starting and
//! finishing, and approvals to ask a person for.

/// What the caller sees while a turn runs.
#[derive(Debug, Clone, PartialEq)]
pub enum TurnEvent {
    /// A piece of the reply.
    Delta(String),
    /// The provider retried after partial output: discard the deltas shown so far.
    Restart,
    /// A tool call is starting.
    ToolStarted {
        /// The tool.
        name: String,
        /// Its arguments as the model wrote them.
        arguments: String,
    },
    /// A call waits for a person's approval: ask them (the answer goes to
    /// `Approvals::answer` or `Approvals::answer_in_terminal`, never through the model).
    ApprovalRequested(super::approval::ApprovalRequest),
    /// A tool call finished.
    ToolFinished {
        /// The tool.
        name: String,
        /// Whether it failed.
        is_error: bool,
    },
}
