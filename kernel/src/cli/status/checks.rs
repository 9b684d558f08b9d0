//! `oxibot status`'s config checks: keys no version knows (likely typos), and what the
//! gateway would refuse or work around (bad `gateway`/`channels` values, ports out of range
//! or taken by another program, a time zone that does not exist).

use std::net::TcpListener;

use oxibot_kernel::gateway::settings::GatewaySettings;
use serde_json::Value;

use super::super::kernel::Setup;

/// One line per problem found, each ready to print after `warning:`.
pub fn config_problems(setup: &Setup, gateway_running: bool) -> Vec<String> {
    let file = setup.config_path.file_name().map_or_else(String::new, |name| name.to_string_lossy().into_owned());
    let mut problems: Vec<String> =
        setup.settings.config.unknown_keys.iter().map(|key| format!("{file}: {key}")).collect();
    match GatewaySettings::from_config(&setup.settings.config) {
        Ok(settings) if !gateway_running => {
            if let Some(problem) = port_taken("gateway.port", &settings.host, settings.port) {
                problems.push(problem);
            }
        }
        Ok(_) => {}
        Err(error) => problems.push(format!("{file}: {error} — `oxibot gateway` refuses to start until it is fixed")),
    }
    problems.extend(channel_port_problems(setup, gateway_running));
    problems.extend(timezone_problem(setup.settings.config.agents.defaults.timezone.as_deref()));
    problems
}

/// `port` on `host` cannot be listened on (another program has it).
fn port_taken(key: &str, host: &str, port: u16) -> Option<String> {
    let error = TcpListener::bind((host, port)).err()?;
    Some(format!("{key}: {host}:{port} cannot be listened on ({error}); another program may use it"))
}

/// `channels.<name>.port` of enabled channels: a number from 1 to 65535, and free while
/// the gateway is not running.
fn channel_port_problems(setup: &Setup, gateway_running: bool) -> Vec<String> {
    let Some(Value::Object(channels)) = setup.settings.config.extra.get("channels") else { return Vec::new() };
    let mut problems = Vec::new();
    for (name, section) in channels {
        if section.get("enabled") != Some(&Value::Bool(true)) {
            continue;
        }
        let Some(port) = section.get("port") else { continue };
        let key = format!("channels.{name}.port");
        match port.as_u64().and_then(|port| u16::try_from(port).ok()).filter(|port| *port > 0) {
            None => problems.push(format!("{key}: expected a port from 1 to 65535, got {port}")),
            Some(port) if !gateway_running => {
                let host = section.get("host").and_then(Value::as_str).unwrap_or("127.0.0.1");
                problems.extend(port_taken(&key, host, port));
            }
            Some(_) => {}
        }
    }
    problems
}

/// `agents.defaults.timezone` that is not an IANA time zone (schedules then run in UTC).
fn timezone_problem(timezone: Option<&str>) -> Option<String> {
    let timezone = timezone?;
    timezone.parse::<chrono_tz::Tz>().is_err().then(|| {
        format!(
            "agents.defaults.timezone: \"{timezone}\" is not a time zone, so schedules run in UTC; \
             use a name such as Europe/Paris or America/New_York"
        )
    })
}
