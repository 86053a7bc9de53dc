package tools

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
)

// decodeArgs fills v, a pointer to a tool's argument struct, from the
// call's arguments as the protocol library already decoded them (a map),
// without encoding and decoding them again (a write_file may carry 10 MiB). It is the second
// wall after the server's schema validation, and the one that tells the
// handler: member names match exactly (no case folding, unlike
// encoding/json), an unknown member or a wrong type is refused, integers
// must be whole numbers within range, and null leaves a field unset.
func decodeArgs(req mcp.CallToolRequest, v any) error {
	args := req.Params.Arguments
	if raw, ok := args.(json.RawMessage); ok {
		args = nil
		if err := json.Unmarshal(raw, &args); err != nil {
			return fmt.Errorf("invalid arguments: %w", err)
		}
	}
	if args == nil {
		return nil
	}
	m, ok := args.(map[string]any)
	if !ok {
		return fmt.Errorf("invalid arguments: want an object, not %s", jsonKind(args))
	}
	return fill(reflect.ValueOf(v).Elem(), m)
}

// fill sets the fields of struct dst from the object m.
func fill(dst reflect.Value, m map[string]any) error {
	t := dst.Type()
	for name, val := range m {
		i := fieldIndex(t, name)
		if i < 0 {
			return fmt.Errorf("invalid arguments: unknown field %q", name)
		}
		if val == nil {
			continue
		}
		if err := set(dst.Field(i), val, name); err != nil {
			return err
		}
	}
	return nil
}

// fieldIndex is the index of the field whose json name is name, -1 for none.
func fieldIndex(t reflect.Type, name string) int {
	for i := 0; i < t.NumField(); i++ {
		tag, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if tag == name && tag != "" && tag != "-" {
			return i
		}
	}
	return -1
}

func set(f reflect.Value, val any, name string) error {
	switch f.Kind() {
	case reflect.String:
		s, ok := val.(string)
		if !ok {
			return typeErr(name, "string", val)
		}
		f.SetString(s)
	case reflect.Bool:
		b, ok := val.(bool)
		if !ok {
			return typeErr(name, "bool", val)
		}
		f.SetBool(b)
	case reflect.Int, reflect.Int64:
		n, ok := wholeNumber(val)
		if !ok || f.OverflowInt(n) {
			return typeErr(name, f.Kind().String(), val)
		}
		f.SetInt(n)
	case reflect.Slice:
		items, ok := val.([]any)
		if ok && f.Type().Elem().Kind() == reflect.String {
			out := reflect.MakeSlice(f.Type(), len(items), len(items))
			for i, it := range items {
				s, ok := it.(string)
				if !ok {
					return typeErr(fmt.Sprintf("%s[%d]", name, i), "string", it)
				}
				out.Index(i).SetString(s)
			}
			f.Set(out)
			return nil
		}
		if !ok || f.Type().Elem().Kind() != reflect.Struct {
			return typeErr(name, "array", val)
		}
		out := reflect.MakeSlice(f.Type(), len(items), len(items))
		for i, it := range items {
			obj, ok := it.(map[string]any)
			if !ok {
				return typeErr(fmt.Sprintf("%s[%d]", name, i), "object", it)
			}
			if err := fill(out.Index(i), obj); err != nil {
				return err
			}
		}
		f.Set(out)
	default:
		return fmt.Errorf("invalid arguments: %q has a type this server cannot read", name)
	}
	return nil
}

// wholeNumber reads an integer from a decoded JSON number.
func wholeNumber(val any) (int64, bool) {
	switch n := val.(type) {
	case float64:
		if n != math.Trunc(n) || math.Abs(n) > 1<<53 {
			return 0, false
		}
		return int64(n), true
	case json.Number:
		i, err := n.Int64()
		return i, err == nil
	}
	return 0, false
}

func typeErr(name, want string, val any) error {
	return fmt.Errorf("invalid arguments: %q must be %s, not %s", name, want, jsonKind(val))
}

// jsonKind names a decoded JSON value's type as JSON does.
func jsonKind(v any) string {
	switch v.(type) {
	case string:
		return "string"
	case bool:
		return "bool"
	case float64, json.Number:
		return "number"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	case nil:
		return "null"
	}
	return fmt.Sprintf("%T", v)
}
