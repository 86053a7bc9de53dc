package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// schemas are the input schemas of the registered tools, ours and the
// gateway's, compiled once each: the call pipeline checks every call's
// arguments against them (call.go), whichever transport path the call
// took. Failures read as the protocol library words them: one
// "<path>: <what>" per violated constraint.
type schemas struct {
	mu sync.Mutex // guards m
	m  map[string]*compiled
}

// compiled is one tool's schema; s is nil when it has none, or one that
// does not compile (nothing is checked then).
type compiled struct {
	src  []byte
	once sync.Once
	s    *jsonschema.Schema
}

// add records t's input schema (compiled on its first call).
func (c *schemas) add(t mcp.Tool) {
	src, ok := schemaSource(t)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]*compiled{}
	}
	if !ok {
		delete(c.m, t.Name)
		return
	}
	if e := c.m[t.Name]; e == nil || !bytes.Equal(e.src, src) {
		c.m[t.Name] = &compiled{src: src}
	}
}

// check checks args (a JSON object, or nil for none) against the schema
// of tool name.
func (c *schemas) check(name string, args json.RawMessage) error {
	c.mu.Lock()
	e := c.m[name]
	c.mu.Unlock()
	if e == nil {
		return nil
	}
	e.once.Do(func() { e.s = compileSchema(name, e.src) })
	if e.s == nil {
		return nil
	}
	var v any = map[string]any{}
	if len(bytes.TrimSpace(args)) > 0 {
		var err error
		if v, err = jsonschema.UnmarshalJSON(bytes.NewReader(args)); err != nil {
			return fmt.Errorf("invalid arguments: %w", err)
		}
	}
	if err := e.s.Validate(v); err != nil {
		return validationError(err)
	}
	return nil
}

// schemaSource is t's input schema as JSON; false when it has none.
func schemaSource(t mcp.Tool) ([]byte, bool) {
	if len(t.RawInputSchema) > 0 {
		return t.RawInputSchema, true
	}
	s := t.InputSchema
	if s.Type == "" && len(s.Properties) == 0 && len(s.Required) == 0 && s.AdditionalProperties == nil {
		return nil, false
	}
	b, err := json.Marshal(s)
	return b, err == nil
}

func compileSchema(name string, src []byte) *jsonschema.Schema {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(src))
	if err != nil {
		return nil
	}
	loc := fmt.Sprintf("mem:///mcp-go/tools/%s/input-schema.json", name)
	c := jsonschema.NewCompiler()
	if c.AddResource(loc, doc) != nil {
		return nil
	}
	s, err := c.Compile(loc)
	if err != nil {
		return nil
	}
	return s
}

// validationError is one line for the model: each violated constraint as
// "<JSON pointer>: <what>", joined by "; ".
func validationError(err error) error {
	var verr *jsonschema.ValidationError
	if !errors.As(err, &verr) {
		return fmt.Errorf("input schema validation failed: %w", err)
	}
	parts := leaves(verr, nil)
	if len(parts) == 0 {
		return fmt.Errorf("input schema validation failed: %s", verr.Error())
	}
	return fmt.Errorf("input schema validation failed: %s", strings.Join(parts, "; "))
}

func leaves(v *jsonschema.ValidationError, out []string) []string {
	if len(v.Causes) == 0 {
		loc := ""
		for _, seg := range v.InstanceLocation {
			loc += "/" + strings.ReplaceAll(strings.ReplaceAll(seg, "~", "~0"), "/", "~1")
		}
		if loc == "" {
			loc = "<root>"
		}
		return append(out, fmt.Sprintf("%s: %+v", loc, v.ErrorKind))
	}
	for _, c := range v.Causes {
		out = leaves(c, out)
	}
	return out
}
