package tools

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/mark3labs/mcp-go/mcp"
)

// HookContextKey is the member of a result's structured content that holds
// the context the user's PreToolUse and PostToolUse hooks added to the
// call, one string per hook that added any (docs/hooks.md). Some clients
// hand the model only a result's structured content, so what the hooks
// add is there as well as in a text block; every tool's output schema
// declares it (withHookContext), so that clients validating the
// structured content against the schema accept it.
const HookContextKey = "hook_context"

// hookContextProperty is the member's schema.
const hookContextProperty = `"` + HookContextKey + `": {"type": "array", "items": {"type": "string"}, "description": "Context the user's hooks added to this call, when any did."}`

// withHookContext is an output schema of ours (an object schema whose
// first "properties" is its own) with HookContextKey declared.
func withHookContext(schema string) string {
	const props = `"properties": {`
	i := bytes.Index([]byte(schema), []byte(props))
	if i < 0 {
		panic("output schema without properties: " + schema)
	}
	i += len(props)
	return schema[:i] + hookContextProperty + ", " + schema[i:]
}

// DeclareHookContext is an MCP server's output schema (a tool behind this
// one) with HookContextKey declared, so that a result of it can carry the
// hooks' context too: unchanged when it is not an object schema, already
// declares the member, or cannot be read.
func DeclareHookContext(schema json.RawMessage) json.RawMessage {
	if len(schema) == 0 {
		return schema
	}
	var s map[string]any
	if json.Unmarshal(schema, &s) != nil {
		return schema
	}
	if t, ok := s["type"]; ok && t != "object" {
		return schema
	}
	props, ok := s["properties"].(map[string]any)
	if !ok {
		if _, present := s["properties"]; present {
			return schema
		}
		props = map[string]any{}
	}
	if _, taken := props[HookContextKey]; taken {
		return schema
	}
	var p any
	if err := json.Unmarshal([]byte("{"+hookContextProperty+"}"), &p); err != nil {
		panic(fmt.Sprintf("hook context property: %v", err))
	}
	props[HookContextKey] = p.(map[string]any)[HookContextKey]
	s["properties"] = props
	out, err := json.Marshal(s)
	if err != nil {
		return schema
	}
	return out
}

// AddHookContext puts the hooks' context in the result's structured
// content, when it has one that is an object without that member (a
// result without structured content is read from its text, which holds
// the context already). It reports whether it did.
func AddHookContext(res *mcp.CallToolResult, added []string) bool {
	if res == nil || len(added) == 0 {
		return false
	}
	raw := res.RawStructuredContent
	if len(raw) == 0 {
		if res.StructuredContent == nil {
			return false
		}
		b, err := json.Marshal(res.StructuredContent)
		if err != nil {
			return false
		}
		raw = b
	}
	raw = bytes.TrimSpace(raw)
	if len(raw) < 2 || raw[0] != '{' || raw[len(raw)-1] != '}' {
		return false
	}
	var members map[string]json.RawMessage
	if json.Unmarshal(raw, &members) != nil {
		return false
	}
	if _, taken := members[HookContextKey]; taken {
		return false
	}
	ctx, err := json.Marshal(added)
	if err != nil {
		return false
	}
	merged := make([]byte, 0, len(raw)+len(HookContextKey)+len(ctx)+4)
	merged = append(merged, raw[:len(raw)-1]...)
	if len(members) > 0 {
		merged = append(merged, ',')
	}
	merged = append(merged, `"`+HookContextKey+`":`...)
	merged = append(merged, ctx...)
	merged = append(merged, '}')
	if len(res.RawStructuredContent) > 0 {
		res.RawStructuredContent = merged
	} else {
		res.StructuredContent = json.RawMessage(merged)
	}
	return true
}
