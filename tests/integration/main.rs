//! The one integration-test binary. Every test drives real processes: the built `oxibot`
//! binary, the real plugin executables, real sockets.
//!
//! Modules:
//! - `host_failures`: each misbehaviour of the stress plugin, through the real plugin host;
//! - `host_calls`: multiplexing, cancellation, name clashes, SIGKILL of a real tool plugin;
//! - `acp`: `oxibot acp` driven by the official ACP Python client: a streamed reply, tool calls
//!   with status and files, cancel, a loaded session, a permission request, JSON-RPC errors;
//! - `a2a`: A2A both ways with the official `a2a-sdk`: its client against the A2A channel of a
//!   real gateway (card, messages, a stream, tasks, cancel, keys), the `a2a` tool against its server;
//! - `agent`: `oxibot agent` against the scripted LLM: turns, tools, faults, kills;
//! - `automation`: the assistant acting on its own through `oxibot gateway`: the `message` tool,
//!   background and waited-for helpers (`spawn`), `/stop` of helpers, the heartbeat;
//! - `agent_terminal`: interactive `oxibot agent` through a pipe and a pseudo-terminal;
//! - `approvals`: approvals the model cannot forge, through `oxibot gateway`: the sender's
//!   `/approve`, refused forgeries, denial, timeout, an approved `exec`, a refused cron call;
//! - `memory`: consolidation, /new, Dream, git versioning and kills, through `oxibot agent`;
//! - `recall`: the memory index and search: auto-recall across sessions, the `memory` tool,
//!   editor edits, `oxibot memory search|reindex`, the overflow guard, daily logs and flushes;
//! - `channels`: the loopback channel through the real host: inbound events, `send`, restarts;
//! - `gateway`: `oxibot gateway` with the loopback channel: replies, pairing, kills, health, SIGTERM;
//! - `gateway_channels`: every real channel through `oxibot gateway` against a fake of its service,
//!   and the API channel driven by the official `openai` Python client (both endpoints);
//! - `channel_slack`: the Slack channel against a fake Slack: Socket Mode acks, redeliveries, reconnects, replies;
//! - `channel_dingtalk`: the DingTalk channel against a fake DingTalk: Stream Mode acks after
//!   acceptance, redeliveries, disconnects, reconnects, replies to users and groups, the token;
//! - `channel_feishu`: the Feishu channel against a fake Feishu: long connection frames answered
//!   after acceptance, pieces, pushes repeated, mentions, topics, cards streamed and split;
//! - `channel_matrix`: the Matrix channel against a fake homeserver: the sync position saved after
//!   acceptance, replays, duplicates, failed polls, the group policy, invites, threads, parts;
//! - `channel_mattermost`: the Mattermost channel against a fake server: the authentication
//!   challenge, mentions and threads, duplicates, a resumed WebSocket, split and streamed replies;
//! - `channel_signal`: the Signal channel against a fake signal-cli daemon: SSE events, the direct
//!   and group policies, mentions, duplicates, a reopened stream, JSON-RPC `send`, parts;
//! - `channel_wecom`: the WeCom channel against a fake AI bot long connection: subscription,
//!   callbacks answered once, stream replies, pushes for the rest, welcome, resubscribing;
//! - `channel_qq`: the QQ channel against a fake bot platform: identify, resume with what was
//!   missed, heartbeats after acceptance, passive replies with fresh `msg_seq`s, attachments;
//! - `channel_email`: the email channel against a fake IMAP and SMTP server: consent, checks,
//!   `\Seen` after acceptance, IDLE and polling, drops and crashes, threaded replies;
//! - `channel_discord`: the Discord channel against a fake Gateway and REST API: inbound
//!   filters, heartbeats, resuming, split replies, rate limits;
//! - `channel_websocket`: the WebSocket channel with a real WebSocket client: token, frames, fan-out;
//! - `channel_api`: the OpenAI-compatible API channel over HTTP: completions, the Responses API,
//!   streams, token counts, order, keys;
//! - `channel_telegram`: the Telegram channel against a fake Bot API: offsets, HTML, streaming;
//! - `cluster`: cluster mode against a real `nats-server` (issue 31): one owner per session,
//!   takeover after the TTL, a stale owner's writes refused, one scheduler, the config checked;
//!   gateways as processes sharing a data dir: one runs a session, another takes it when it
//!   dies or hangs, cron fires once across them, a three-server NATS that loses a server;
//! - `cluster_consumers`: a session's stream consumer removed once no kernel reads it, nothing lost;
//! - `cluster_turns`: durable turns across a cluster failover: a tool call that may have acted
//!   is not run again by the next owner, a finished one's result is reused, one reply;
//! - `cli_service`: `oxibot service` (a unit systemd verifies), completions, man page, version;
//! - `cli_tools`: `oxibot tools list` and `oxibot tools call` as a user runs them;
//! - `one_executable`: `oxibot` copied alone has every bundled tool and channel; links by name;
//! - `tool_claims`: a plugin cannot take a bundled or built-in tool's name without `replaces`,
//!   and a tool with an oversized description is refused alone;
//! - `config_checks`: config typos warned about with the closest key; `status` checks ports,
//!   `enabled` types and the time zone;
//! - `container`: the container around `exec`: TCP Fast Open, MPTCP and UDP with the network
//!   off, the key ring, SysV shared memory, `chmod`/`utime`/`setxattr` outside, `/proc`, unix
//!   sockets outside, background children, the assistant's state under `rm -rf`, status layers;
//! - `cron`: `oxibot cron` add/list/disable/remove, a corrupt jobs file kept aside, a job run by
//!   hand against the scripted LLM, a nanobot jobs file used as it is;
//! - `delivery`: replies through `oxibot gateway` when their channel fails: one outbound id for
//!   every attempt, retries through a long outage and a plugin restart, a `message` to the
//!   turn's own chat that cannot be delivered (issue 26), the model told of a reply given up;
//! - `durable_turns`: `oxibot gateway` SIGKILLed mid-turn (issue 26): a message accepted while a
//!   turn ran answered after the restart, a started non-read-only call reported and not re-run,
//!   an interrupted `read_file` re-run, a reply written before the kill sent without a new turn;
//! - `fs_large_files`: `read_file` of a 20 GiB sparse file reads only the page it returns;
//! - `fs_containment`: the fs plugin's workspace restriction under attack: swapped symlinks, escaping paths;
//! - `loop_guard`: the loop guard stops repeats and cycles of tool calls, not progress (issue 29);
//! - `local_model`: a local model server found and offered without a key, used on `onboard --local`;
//! - `mcp`: MCP servers from `tools.mcpServers` through the bridge plugin, against a real FastMCP
//!   server over stdio and streamable HTTP: listing, calls, crashes, timeouts;
//! - `mcp_serve`: `oxibot mcp serve` driven by the official MCP Python client over stdio and
//!   streamable HTTP: `chat`, `memory_search`, sessions as resources, bad keys, malformed requests;
//! - `providers`: the LLM provider clients against the scripted LLM: both wire formats, retries;
//! - `nanobot_compat`: an existing nanobot config and workspace work unchanged;
//! - `nanobot_import`: `oxibot import nanobot` on a data dir the real nanobot-ai 0.3.5 made
//!   (twice), the conversation going on after it, `agent --config` on nanobot's config, and
//!   an older nanobot's layout;
//! - `orphans`: no plugin process (or command it started) outlives a SIGKILLed kernel;
//! - `prompt`: the request the model gets: a byte-identical stable prefix across sessions and
//!   turns, the guidance a lean prompt keeps, its byte budget;
//! - `python_plugin`: the Python example plugin, written from the protocol docs alone;
//! - `sandbox`: the OS sandbox around `exec` and every plugin, attacked with run-time paths,
//!   deletions, escaping children and a plugin reading the config file;
//! - `secrets`: provider errors scrubbed of keys; plugins start without the kernel's secrets;
//! - `spending`: what spent the tokens: a cron job's and the heartbeat's attributed to them;
//! - `sdk_plugin`: the Rust SDK's promises (panics, cancellation) through a real SDK plugin;
//! - `web`: `web_fetch` through `oxibot agent`: a whitelisted local page as Markdown, the SSRF refusal;
//! - `lazy_plugins`: a plugin whose tools are remembered starts on its first call, not with the kernel;
//! - `webui`: the web UI in a real headless Chromium through WebDriver: streamed chat, stop, `<script>`
//!   as text, tool hints, sessions and transcripts, USER.md edits and restores, cron jobs, a plugin
//!   restart, the token off loopback, cross-site changes refused;
//! - `local_surfaces`: a default gateway's web UI, api and websocket channels against a web page
//!   of another site and a local process without the secret; the login link and key printed once;
//! - `real_email`: the email channel through `oxibot gateway` against Debian's Dovecot and Postfix:
//!   an auto-reply gets no answer, a reply outlives a 30 s outage of the SMTP relay;
//! - `real_matrix`: the Matrix channel through `oxibot gateway` against a real Synapse: a retried
//!   reply shows once, a reply outlives a 30 s outage, history from before the invite gets none;
//! - `layering`: the kernel's modules import only lower rungs of the ladder in ARCHITECTURE.md;
//! - `text_tool_calls`: tool calls a local model wrote in its text (Qwen/Hermes markers, Llama's
//!   python tag, a reply that is one fenced JSON call) run as calls and never reach the user;
//! - `telemetry`: OpenTelemetry export through `oxibot agent` to a real OTLP receiver (Arize
//!   Phoenix): one trace per turn with the GenAI attributes, contents only when opted in;
//! - `tidy`: repository hygiene (every file documents its purpose).
#![allow(clippy::unwrap_used, missing_docs)]

mod a2a;
mod acp;
mod agent;
mod agent_terminal;
mod approvals;
mod automation;
mod channel_api;
mod channel_dingtalk;
mod channel_discord;
mod channel_email;
mod channel_feishu;
mod channel_matrix;
mod channel_mattermost;
mod channel_qq;
mod channel_signal;
mod channel_slack;
mod channel_telegram;
mod channel_websocket;
mod channel_wecom;
mod channels;
mod cli_service;
mod cli_tools;
mod cluster;
mod cluster_consumers;
mod cluster_turns;
mod config_checks;
mod container;
mod cron;
mod delivery;
mod durable_turns;
mod file_circles;
mod fs_containment;
mod fs_large_files;
mod gateway;
mod gateway_channels;
mod host_calls;
mod host_failures;
mod layering;
mod lazy_plugins;
mod local_model;
mod local_surfaces;
mod loop_guard;
mod mcp;
mod mcp_serve;
mod memory;
mod nanobot_compat;
mod nanobot_import;
mod one_executable;
mod orphans;
mod prompt;
mod providers;
mod python_plugin;
mod real_email;
mod real_matrix;
mod recall;
mod sandbox;
mod sdk_plugin;
mod secrets;
mod spending;
mod telemetry;
mod text_tool_calls;
mod tidy;
mod tool_claims;
mod web;
mod webui;
