package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/mark3labs/mcp-go/mcp"
)

// What a downstream names and writes is untrusted (docs/gateway.md, "Names
// and text"): a tool is published only under a name the MCP specification
// allows, and its title, description and the text in its schemas reach
// the client without terminal escapes or invisible characters.

// MaxNameLen is the specification's limit on a tool's name (2025-11-25,
// "Tool names": 1 to 128 characters). It bounds the published name,
// SERVER__TOOL, since that is the name the client sees.
const MaxNameLen = 128

// CheckToolName says why a downstream tool named tool cannot be published
// by server as server__tool, nil when it can: the name must be 1 to 128 of
// [A-Za-z0-9_.-], and so short that the published name is at most
// MaxNameLen.
func CheckToolName(server, tool string) error {
	if tool == "" {
		return errors.New("the name is empty")
	}
	for i := 0; i < len(tool); i++ {
		if !nameByte(tool[i]) {
			return fmt.Errorf("byte %d (%q) is not one of [A-Za-z0-9_.-]", i, tool[i])
		}
	}
	if n := len(server) + len(Sep) + len(tool); n > MaxNameLen {
		return fmt.Errorf("the published name %s%s... would be %d characters (at most %d)", server, Sep, n, MaxNameLen)
	}
	return nil
}

func nameByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-'
}

// CleanText is s without terminal escape sequences (CSI, OSC, DCS, SOS,
// PM, APC, and every other ESC sequence), control characters (C0, DEL,
// C1), and invisible format characters (bidirectional overrides, zero
// widths, the tag characters that can spell text nobody sees); invalid
// UTF-8 becomes U+FFFD. With multiline, newlines and tabs are kept (a
// carriage return is dropped); without, each becomes a space.
func CleanText(s string, multiline bool) string {
	if plain(s, multiline) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size <= 1 {
			b.WriteRune(utf8.RuneError)
			i++
			continue
		}
		switch {
		case r == 0x1b:
			i = skipEscape(s, i)
			continue
		case r == 0x9b, r == 0x9d, r == 0x90, r == 0x98, r == 0x9e, r == 0x9f:
			// The 8-bit forms of CSI, OSC, DCS, SOS, PM and APC: their
			// parameters go with them.
			i = skipC1(s, i+size, r)
			continue
		case r == '\n' || r == '\t':
			if multiline {
				b.WriteRune(r)
			} else {
				b.WriteByte(' ')
			}
		case unicode.Is(unicode.Cc, r), unicode.Is(unicode.Cf, r),
			r == 0x2028, r == 0x2029: // line and paragraph separators
		default:
			b.WriteRune(r)
		}
		i += size
	}
	return b.String()
}

// plain says whether s is printable ASCII only (with multiline, \n and
// \t too): nothing to clean, the common case.
func plain(s string, multiline bool) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c < 0x7f || multiline && (c == '\n' || c == '\t') {
			continue
		}
		return false
	}
	return true
}

// skipEscape returns the index after the escape sequence at s[i] (ESC).
func skipEscape(s string, i int) int {
	i++ // ESC
	if i >= len(s) {
		return i
	}
	switch c := s[i]; c {
	case '[': // CSI: parameters and intermediates, then a final byte
		i++
		return skipCSI(s, i+1)
	case ']', 'P', 'X', '^', '_': // OSC, DCS, SOS, PM, APC: up to ST or BEL
		return skipString(s, i+1)
	default:
		// Two-character sequences, and ESC followed by intermediates
		// (0x20-0x2f) then a final byte.
		for i < len(s) && s[i] >= 0x20 && s[i] <= 0x2f {
			i++
		}
		if i < len(s) && s[i] >= 0x30 && s[i] <= 0x7e {
			i++
		}
		return i
	}
}

// skipC1 returns the index after the parameters of the C1 control r whose
// body starts at s[i].
func skipC1(s string, i int, r rune) int {
	if r == 0x9b {
		return skipCSI(s, i)
	}
	return skipString(s, i)
}

// skipCSI returns the index after a CSI's parameters, intermediates and
// final byte starting at s[i]; at a byte that cannot be in one it stops
// before that byte, which is then read as text (or dropped as a control).
func skipCSI(s string, i int) int {
	for i < len(s) {
		c := s[i]
		if c < 0x20 || c >= 0x7f {
			return i
		}
		i++
		if c >= 0x40 {
			return i
		}
	}
	return i
}

// skipString returns the index after a control string's terminator (BEL,
// ESC \, or U+009C) starting at s[i]; an unterminated one runs to the end.
func skipString(s string, i int) int {
	for i < len(s) {
		switch {
		case s[i] == 0x07:
			return i + 1
		case s[i] == 0x1b:
			if i+1 < len(s) && s[i+1] == '\\' {
				return i + 2
			}
			return i + 1
		case strings.HasPrefix(s[i:], "\u009c"):
			return i + len("\u009c")
		}
		i++
	}
	return i
}

// ErrSchemaText is returned by CleanSchema for a schema whose non-
// descriptive text (a property name, an enum value, a default) holds
// escapes or control characters: those are part of the tool's contract,
// which cleaning would change, so the tool is refused instead.
var ErrSchemaText = errors.New("the schema holds control characters outside descriptions and titles")

// CleanSchema is the JSON schema raw with CleanText applied to every
// "description", "title" and "$comment" string at any depth, encoded again
// (keys sorted, numbers as written). Any other string or member name that
// holds control characters other than \n and \t, escapes, or format
// characters gives ErrSchemaText.
func CleanSchema(raw json.RawMessage) (json.RawMessage, error) {
	if len(raw) == 0 {
		return raw, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("the schema is not JSON: %w", err)
	}
	if dec.More() {
		return nil, errors.New("the schema is not one JSON value")
	}
	v, err := cleanValue(v, 0)
	if err != nil {
		return nil, err
	}
	out, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode the schema: %w", err)
	}
	return out, nil
}

// maxSchemaDepth bounds the recursion over a schema.
const maxSchemaDepth = 64

func cleanValue(v any, depth int) (any, error) {
	if depth > maxSchemaDepth {
		return nil, fmt.Errorf("the schema nests deeper than %d", maxSchemaDepth)
	}
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if CleanText(k, true) != k {
				return nil, fmt.Errorf("%w: member name %q", ErrSchemaText, k)
			}
			if s, ok := e.(string); ok && (k == "description" || k == "title" || k == "$comment") {
				x[k] = CleanText(s, k != "title")
				continue
			}
			c, err := cleanValue(e, depth+1)
			if err != nil {
				return nil, err
			}
			x[k] = c
		}
	case []any:
		for i, e := range x {
			c, err := cleanValue(e, depth+1)
			if err != nil {
				return nil, err
			}
			x[i] = c
		}
	case string:
		if CleanText(x, true) != x {
			return nil, fmt.Errorf("%w: %q", ErrSchemaText, x)
		}
	}
	return v, nil
}

// cleanTool cleans what a downstream tool shows the client: its title,
// description, annotations' title and its schemas (CleanSchema). It is an
// error when a schema cannot be cleaned.
func cleanTool(t *mcp.Tool) error {
	t.Title = CleanText(t.Title, false)
	t.Description = CleanText(t.Description, true)
	t.Annotations.Title = CleanText(t.Annotations.Title, false)
	in, err := CleanSchema(t.RawInputSchema)
	if err != nil {
		return fmt.Errorf("input schema: %w", err)
	}
	out, err := CleanSchema(t.RawOutputSchema)
	if err != nil {
		return fmt.Errorf("output schema: %w", err)
	}
	t.RawInputSchema, t.RawOutputSchema = in, out
	return nil
}

// maxRefused bounds the names one server's warnings remember.
const maxRefused = 256

// refuse warns, once per name and server instance, that a tool is not
// published and why; the name is quoted (%q), escapes and all.
func (s *Server) refuse(name string, why error) {
	s.mu.Lock()
	seen := s.refused[name]
	if !seen && len(s.refused) < maxRefused {
		if s.refused == nil {
			s.refused = map[string]bool{}
		}
		s.refused[name] = true
	}
	s.mu.Unlock()
	if !seen {
		s.log.Warn("MCP server tool not published", "tool", fmt.Sprintf("%q", name), "reason", why.Error())
	}
}
