//! What a person approves: the call's id (a hash of tool, canonical arguments and turn), the
//! call shown whole, and the random code that answers it.

use ring::digest::{SHA256, digest};
use ring::rand::{SecureRandom, SystemRandom};
use serde_json::Value;

use super::super::builtin::BuiltinContext;

/// The call's id: SHA-256 (hex) over the tool's name, its arguments with every object's keys
/// sorted, and the turn's id. Two calls differ in id when any of these differ.
pub fn call_id(tool: &str, arguments: &Value, turn: &str) -> String {
    let mut text = String::new();
    text.push_str(tool);
    text.push('\0');
    canonical(arguments, &mut text);
    text.push('\0');
    text.push_str(turn);
    digest(&SHA256, text.as_bytes()).as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

/// `value` as JSON with object keys sorted, whatever order the map keeps them in.
fn canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                canonical(&map[key], out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                canonical(item, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

/// A fresh code a person types: 8 characters without look-alikes (0/O, 1/I), from the
/// system's random source, so neither the model nor anyone else can guess it.
pub fn fresh_code() -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHJKLMNPQRSTUVWXYZ23456789";
    let mut bytes = [0u8; 8];
    // The system's random source does not fail on Linux; should it, the code is all 'A's
    // and still bound to its call and its person.
    let _ = SystemRandom::new().fill(&mut bytes);
    bytes.iter().map(|b| char::from(ALPHABET[usize::from(*b) % ALPHABET.len()])).collect()
}

/// A fresh id for one turn, from the system's random source.
pub fn turn_id() -> String {
    let mut bytes = [0u8; 16];
    let _ = SystemRandom::new().fill(&mut bytes);
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The call as it will run, whole, for the person to read. For `exec`: the command exactly
/// as `sh -c` gets it, the directory it runs in, and whether it runs in the sandbox.
pub fn describe(tool: &str, arguments: &Value, context: &BuiltinContext) -> String {
    if tool == "exec" {
        let command = arguments.get("command").and_then(Value::as_str).unwrap_or("");
        let workspace = &context.call.workspace;
        let directory = match arguments.get("working_dir").and_then(Value::as_str).map(str::trim) {
            Some(dir) if !dir.is_empty() && dir.starts_with('/') => dir.to_owned(),
            Some(dir) if !dir.is_empty() => format!("{workspace}/{dir}"),
            _ => workspace.clone(),
        };
        let sandbox = if context.call.restrict_to_workspace {
            "on (restricted to the workspace: container and Landlock where the system has them)"
        } else {
            "off (tools.restrictToWorkspace is false: the command can reach the whole machine)"
        };
        let mut text = format!("exec: sh -c {}\n  in: {directory}\n  sandbox: {sandbox}", shell_quote(command));
        if let Some(timeout) = arguments.get("timeout") {
            text.push_str(&format!("\n  timeout: {timeout} s"));
        }
        return text;
    }
    let arguments = serde_json::to_string_pretty(arguments).unwrap_or_default();
    format!("{tool} {arguments}")
}

/// `text` in single quotes as `sh` reads it (a quote inside written `'\''`).
fn shell_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_call_id_ignores_key_order_and_changes_with_anything_else() {
        let a = call_id("exec", &json!({"command": "ls", "working_dir": "x"}), "t1");
        let b = call_id("exec", &json!({"working_dir": "x", "command": "ls"}), "t1");
        assert_eq!(a, b);
        assert_ne!(a, call_id("exec", &json!({"command": "ls ", "working_dir": "x"}), "t1"));
        assert_ne!(a, call_id("exec", &json!({"command": "ls", "working_dir": "x"}), "t2"));
        assert_ne!(a, call_id("exec", &json!({"command": "ls", "working_dir": "x", "approved": true}), "t1"));
    }

    #[test]
    fn an_exec_call_is_shown_as_sh_gets_it() {
        let mut context = BuiltinContext::default();
        context.call.workspace = "/home/u/ws".into();
        let shown = describe("exec", &json!({"command": "echo 'hi'; rm x", "working_dir": "sub"}), &context);
        assert!(shown.starts_with(r"exec: sh -c 'echo '\''hi'\''; rm x'"), "{shown}");
        assert!(shown.contains("in: /home/u/ws/sub") && shown.contains("sandbox: on"), "{shown}");
    }

    #[test]
    fn codes_are_fresh_and_readable() {
        let (a, b) = (fresh_code(), fresh_code());
        assert_eq!(a.len(), 8);
        assert_ne!(a, b);
        assert!(a.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit()));
    }
}
