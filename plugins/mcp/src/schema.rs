//! Normalising an MCP tool's input schema for OpenAI-style function calling: local `$ref`s
//! inlined (and `$defs`/`definitions` dropped), nullable unions simplified, an object schema
//! at the top.

use serde_json::{Map, Value, json};

/// How deep `$ref`s are followed; a recursive schema is cut off here with an open schema.
const MAX_REF_DEPTH: usize = 8;

/// The schema the model sees for an MCP tool whose input schema is `input`.
pub fn normalise(input: &Value) -> Value {
    let defs = definitions(input);
    let mut schema = resolve(input, &defs, 0);
    if let Value::Object(map) = &mut schema {
        map.remove("$defs");
        map.remove("definitions");
        map.remove("$schema");
        map.entry("type").or_insert_with(|| json!("object"));
        if map.get("type") == Some(&json!("object")) {
            map.entry("properties").or_insert_with(|| json!({}));
        }
        return schema;
    }
    json!({"type": "object", "properties": {}})
}

/// The `$defs` and `definitions` of the root schema, merged.
fn definitions(root: &Value) -> Map<String, Value> {
    let mut defs = Map::new();
    for key in ["definitions", "$defs"] {
        if let Some(Value::Object(found)) = root.get(key) {
            defs.extend(found.clone());
        }
    }
    defs
}

/// `value` with local references replaced by what they point to and nullable unions
/// simplified, recursively.
fn resolve(value: &Value, defs: &Map<String, Value>, depth: usize) -> Value {
    match value {
        Value::Object(map) => {
            if let Some(Value::String(reference)) = map.get("$ref") {
                return inline_ref(map, reference, defs, depth);
            }
            let mut out = Map::new();
            for (key, item) in map {
                if key == "$defs" || key == "definitions" {
                    continue;
                }
                out.insert(key.clone(), resolve(item, defs, depth));
            }
            simplify_nullable(&mut out);
            Value::Object(out)
        }
        Value::Array(items) => Value::Array(items.iter().map(|item| resolve(item, defs, depth)).collect()),
        other => other.clone(),
    }
}

/// The target of `#/$defs/<name>` or `#/definitions/<name>`, merged with the keys next to the
/// `$ref` (a description, say); an unknown or too deep reference becomes an open schema.
fn inline_ref(map: &Map<String, Value>, reference: &str, defs: &Map<String, Value>, depth: usize) -> Value {
    let name = reference.strip_prefix("#/$defs/").or_else(|| reference.strip_prefix("#/definitions/"));
    let target = name.and_then(|name| defs.get(name)).filter(|_| depth < MAX_REF_DEPTH);
    let mut resolved = match target.map(|target| resolve(target, defs, depth + 1)) {
        Some(Value::Object(resolved)) => resolved,
        _ => Map::new(),
    };
    for (key, item) in map {
        if key != "$ref" {
            resolved.insert(key.clone(), resolve(item, defs, depth));
        }
    }
    simplify_nullable(&mut resolved);
    Value::Object(resolved)
}

/// `{"type": ["T", "null"]}` → `{"type": "T"}`, and `anyOf`/`oneOf` of one schema plus
/// `{"type": "null"}` → that schema (keys beside the union kept); the value stays optional
/// through `required`, which is how function-calling models express "may be absent".
fn simplify_nullable(map: &mut Map<String, Value>) {
    if let Some(Value::Array(types)) = map.get("type") {
        let non_null: Vec<Value> = types.iter().filter(|t| *t != "null").cloned().collect();
        if non_null.len() == 1 && non_null.len() < types.len() {
            map.insert("type".to_owned(), non_null[0].clone());
        }
    }
    for key in ["anyOf", "oneOf"] {
        let Some(Value::Array(options)) = map.get(key) else { continue };
        let non_null: Vec<&Value> = options.iter().filter(|option| !is_null_schema(option)).collect();
        if non_null.len() != 1 || non_null.len() == options.len() {
            continue;
        }
        let Value::Object(only) = non_null[0].clone() else { continue };
        map.remove(key);
        for (name, item) in only {
            map.entry(name).or_insert(item);
        }
    }
}

fn is_null_schema(schema: &Value) -> bool {
    schema.get("type") == Some(&json!("null"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nullable_type_lists_become_one_type() {
        let schema = normalise(&json!({"type": "object", "properties": {"a": {"type": ["string", "null"]}}}));
        assert_eq!(schema["properties"]["a"], json!({"type": "string"}));
    }

    #[test]
    fn an_any_of_with_null_becomes_the_other_schema() {
        let input = json!({"type": "object", "properties": {
            "n": {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": null, "title": "N"}
        }});
        let schema = normalise(&input);
        assert_eq!(schema["properties"]["n"], json!({"type": "integer", "default": null, "title": "N"}));
    }

    #[test]
    fn local_refs_are_inlined_and_defs_dropped() {
        let input = json!({
            "type": "object",
            "$defs": {"Point": {"type": "object", "properties": {"x": {"type": "number"}}}},
            "properties": {"p": {"$ref": "#/$defs/Point", "description": "where"}},
        });
        let schema = normalise(&input);
        assert!(schema.get("$defs").is_none());
        assert_eq!(
            schema["properties"]["p"],
            json!({"type": "object", "properties": {"x": {"type": "number"}}, "description": "where"})
        );
    }

    #[test]
    fn a_recursive_ref_is_cut_off_instead_of_looping() {
        let input = json!({
            "type": "object",
            "definitions": {"Node": {"type": "object", "properties": {"next": {"$ref": "#/definitions/Node"}}}},
            "properties": {"root": {"$ref": "#/definitions/Node"}},
        });
        let schema = normalise(&input);
        assert_eq!(schema["properties"]["root"]["type"], "object");
    }

    #[test]
    fn an_empty_schema_becomes_an_object_without_properties() {
        assert_eq!(normalise(&json!({})), json!({"type": "object", "properties": {}}));
        assert_eq!(normalise(&Value::Null), json!({"type": "object", "properties": {}}));
    }
}
